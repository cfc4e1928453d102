//! Loading `tokenizer.json` with our own truncation and padding, never the file's.
//!
//! A tokenizer file often carries the settings of whoever exported it (all-MiniLM-L6-v2's
//! truncates at 128 and pads every input to 128), which would silently cut inputs short
//! and waste work; the model's real limit and batch padding are decided here instead.

use std::path::Path;

use cortex_core::error::ProviderError;
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use super::files::config_error;

/// Loads `path`, truncating inputs to `max_tokens` (special tokens included) when set,
/// and never padding: batches are padded by the caller to their own longest input.
pub(crate) fn load_tokenizer(
    path: &Path,
    max_tokens: Option<usize>,
) -> Result<Tokenizer, ProviderError> {
    let mut tokenizer = Tokenizer::from_file(path)
        .map_err(|e| config_error(format!("cannot load {}: {e}", path.display())))?;
    tokenizer.with_padding(None);
    let truncation = max_tokens.map(|max_length| TruncationParams {
        max_length,
        ..TruncationParams::default()
    });
    tokenizer
        .with_truncation(truncation)
        .map_err(|e| config_error(format!("{}: cannot set truncation: {e}", path.display())))?;
    Ok(tokenizer)
}

/// Tokenizes `texts` in order.
pub(crate) fn encode(
    tokenizer: &Tokenizer,
    texts: &[&str],
    add_special_tokens: bool,
) -> Result<Vec<Encoding>, ProviderError> {
    tokenizer
        .encode_batch(texts.to_vec(), add_special_tokens)
        .map_err(|e| ProviderError::InvalidResponse {
            provider: "local",
            message: format!("tokenization failed: {e}"),
        })
}
