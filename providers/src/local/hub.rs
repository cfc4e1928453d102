//! One-time download of a model from the Hugging Face hub (cargo feature `hf-hub`).
//!
//! The files are copied out of the hub's cache into Cortex's own model directory, so
//! later starts find them there and never need the network (or this feature) again.
//! `HF_HOME`, `HF_ENDPOINT` and `HF_TOKEN` are honoured as by the hub's own tools.

use std::collections::HashSet;
use std::path::Path;

use cortex_core::error::ProviderError;
use hf_hub::api::sync::ApiBuilder;

use super::files::{CONFIG, TOKENIZER, WEIGHTS};

/// Every file the loaders read; the first two are needed by both kinds of model.
const FILES: [&str; 6] = [
    TOKENIZER,
    WEIGHTS,
    CONFIG,
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "modules.json",
];

/// Downloads `repo` (`org/name`) into `dest`, which must not exist yet.
pub(crate) fn download(repo: &str, dest: &Path) -> Result<(), ProviderError> {
    let hub = |e: hf_hub::api::sync::ApiError| ProviderError::Transport {
        provider: "local",
        message: format!("downloading {repo} from the Hugging Face hub failed: {e}"),
    };
    let io = |what: &str, e: std::io::Error| {
        ProviderError::Config(format!("cannot {what} while saving {repo}: {e}"))
    };
    let api = ApiBuilder::from_env()
        .with_progress(false)
        .build()
        .map_err(hub)?;
    let model = api.model(repo.to_owned());
    // The listing tells a file the model lacks (fine for the optional ones) from a
    // failed download (never fine: a missing sentence_bert_config.json would change
    // the sequence limit and so the vectors).
    let info = model.info().map_err(hub)?;
    let listed: HashSet<&str> = info.siblings.iter().map(|s| s.rfilename.as_str()).collect();
    for required in [TOKENIZER, WEIGHTS] {
        if !listed.contains(required) {
            return Err(ProviderError::Config(format!(
                "the hub model {repo} has no {required}; the local embedder needs \
                 {TOKENIZER} and {WEIGHTS} (a sentence-transformers BERT or model2vec model)"
            )));
        }
    }

    let parent = dest.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| io("create the model directory", e))?;
    // Filled beside the destination and renamed at the end, so an interrupted download
    // never leaves a directory that looks complete.
    let staging = parent.join(format!(
        ".{}.download-{}",
        dest.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let result = (|| {
        for file in FILES.iter().filter(|f| listed.contains(**f)) {
            let cached = model.get(file).map_err(hub)?;
            let target = staging.join(file);
            if let Some(dir) = target.parent() {
                std::fs::create_dir_all(dir).map_err(|e| io("create a directory", e))?;
            }
            std::fs::copy(&cached, &target).map_err(|e| io("copy a file", e))?;
        }
        std::fs::rename(&staging, dest).map_err(|e| io("move the model into place", e))
    })();
    if result.is_err() {
        // Best effort: a leftover staging directory is harmless and has a unique name.
        let _ = std::fs::remove_dir_all(&staging);
    }
    result
}
