//! What a model directory holds: its kind, its dimension and the name it goes by,
//! read from small files only (never the weights), so configuration stays cheap.
//!
//! Kind detection, when `CORTEX_LOCAL_MODEL_KIND` is unset:
//! 1. `config.json` with `"model_type": "model2vec"` is model2vec;
//! 2. `config.json` with `hidden_size`, `num_attention_heads` and `num_hidden_layers`
//!    (a transformer's shape) is BERT;
//! 3. `model.safetensors` with a two-dimensional `embeddings` tensor (model2vec's
//!    layout, which has no transformer config) is model2vec;
//! 4. anything else is refused, naming the variable that settles it.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use cortex_core::error::ProviderError;
use serde_json::{Map, Value};

use super::settings::LocalModelKind;

pub(crate) const CONFIG: &str = "config.json";
pub(crate) const TOKENIZER: &str = "tokenizer.json";
pub(crate) const WEIGHTS: &str = "model.safetensors";

/// Tensor names model2vec has used for its matrix, newest first.
pub(crate) const STATIC_EMBEDDING_TENSORS: [&str; 3] = ["embeddings", "0", "embedding.weight"];

/// A refused header this large is a corrupt file, not a model.
const MAX_SAFETENSORS_HEADER: u64 = 100 * 1024 * 1024;

/// The facts configuration needs before any weight is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModelInfo {
    pub kind: LocalModelKind,
    pub dimension: usize,
    /// The name the vectors are recorded under when `CORTEX_EMBED_MODEL` is unset.
    pub name: String,
}

pub(crate) fn config_error(message: impl Into<String>) -> ProviderError {
    ProviderError::Config(message.into())
}

/// Inspects `dir`; `kind` forces the kind instead of detecting it.
pub(crate) fn inspect(
    dir: &Path,
    kind: Option<LocalModelKind>,
) -> Result<ModelInfo, ProviderError> {
    if !dir.is_dir() {
        return Err(config_error(format!(
            "the local model directory {} does not exist or is not a directory",
            dir.display()
        )));
    }
    let config = read_json_object_if_present(&dir.join(CONFIG))?;
    let kind = match kind {
        Some(kind) => kind,
        None => detect_kind(dir, config.as_ref())?,
    };
    require_files(dir, kind)?;
    let dimension = match kind {
        LocalModelKind::Bert => {
            let config = config
                .as_ref()
                .ok_or_else(|| config_error(format!("{} has no {CONFIG}", dir.display())))?;
            positive_field(config, "hidden_size", &dir.join(CONFIG))?
        }
        LocalModelKind::Model2Vec => static_matrix_shape(&dir.join(WEIGHTS))?.1,
    };
    Ok(ModelInfo {
        kind,
        dimension,
        name: model_name(dir),
    })
}

fn detect_kind(
    dir: &Path,
    config: Option<&Map<String, Value>>,
) -> Result<LocalModelKind, ProviderError> {
    if let Some(config) = config {
        if config.get("model_type").and_then(Value::as_str) == Some("model2vec") {
            return Ok(LocalModelKind::Model2Vec);
        }
        let transformer = ["hidden_size", "num_attention_heads", "num_hidden_layers"]
            .iter()
            .all(|field| config.get(*field).is_some_and(Value::is_u64));
        if transformer {
            return Ok(LocalModelKind::Bert);
        }
    }
    let weights = dir.join(WEIGHTS);
    if weights.is_file() && static_matrix_shape(&weights).is_ok() {
        return Ok(LocalModelKind::Model2Vec);
    }
    Err(config_error(format!(
        "cannot tell what kind of model {} holds: it needs either a {CONFIG} with \
         hidden_size, num_attention_heads and num_hidden_layers (BERT) or a {WEIGHTS} with a \
         2-D `embeddings` tensor (model2vec); set CORTEX_LOCAL_MODEL_KIND=bert or model2vec",
        dir.display()
    )))
}

fn require_files(dir: &Path, kind: LocalModelKind) -> Result<(), ProviderError> {
    let needed: &[&str] = match kind {
        LocalModelKind::Bert => &[CONFIG, TOKENIZER, WEIGHTS],
        LocalModelKind::Model2Vec => &[TOKENIZER, WEIGHTS],
    };
    let missing: Vec<&str> = needed
        .iter()
        .copied()
        .filter(|file| !dir.join(file).is_file())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(config_error(format!(
            "the {kind} model in {} is missing {}",
            dir.display(),
            missing.join(", ")
        )))
    }
}

/// The name of the model a directory holds: its own name, or for a Hugging Face cache
/// snapshot (`models--org--name/snapshots/<revision>`) the repository's name.
/// `config.json`'s `_name_or_path` is not used: fine-tuned models often keep their base
/// model's name there (all-MiniLM-L6-v2 says `nreimers/MiniLM-L6-H384-uncased`).
pub(crate) fn model_name(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    if let (Some(parent), Some(grandparent)) = (dir.parent(), dir.parent().and_then(Path::parent))
        && name(parent).as_deref() == Some("snapshots")
        && let Some(repo) = name(grandparent)
        && let Some(rest) = repo.strip_prefix("models--")
        && let Some(last) = rest.rsplit("--").next()
    {
        return last.to_owned();
    }
    name(&dir).unwrap_or_else(|| "local-model".to_owned())
}

/// `(rows, columns)` of the model2vec matrix, read from the safetensors header only.
pub(crate) fn static_matrix_shape(path: &Path) -> Result<(usize, usize), ProviderError> {
    let header = safetensors_header(path)?;
    for name in STATIC_EMBEDDING_TENSORS {
        if let Some(shape) = header
            .get(name)
            .and_then(|t| t.get("shape"))
            .and_then(Value::as_array)
        {
            return match shape.as_slice() {
                [rows, cols] => match (rows.as_u64(), cols.as_u64()) {
                    (Some(rows), Some(cols)) if rows > 0 && cols > 0 => {
                        Ok((rows as usize, cols as usize))
                    }
                    _ => Err(config_error(format!(
                        "{}: tensor {name:?} has an empty or invalid shape",
                        path.display()
                    ))),
                },
                _ => Err(config_error(format!(
                    "{}: tensor {name:?} is not a matrix",
                    path.display()
                ))),
            };
        }
    }
    Err(config_error(format!(
        "{} has no `embeddings` tensor",
        path.display()
    )))
}

/// The JSON header of a safetensors file: an 8-byte little-endian length, then JSON.
fn safetensors_header(path: &Path) -> Result<Map<String, Value>, ProviderError> {
    let fail = |why: String| config_error(format!("cannot read {}: {why}", path.display()));
    let mut file = File::open(path).map_err(|e| fail(e.to_string()))?;
    let mut len = [0u8; 8];
    file.read_exact(&mut len).map_err(|e| fail(e.to_string()))?;
    let len = u64::from_le_bytes(len);
    if len > MAX_SAFETENSORS_HEADER {
        return Err(fail(format!(
            "a {len}-byte header is not a safetensors file"
        )));
    }
    let mut header = Vec::new();
    file.take(len)
        .read_to_end(&mut header)
        .map_err(|e| fail(e.to_string()))?;
    match serde_json::from_slice(&header) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(fail("the header is not a JSON object".into())),
        Err(e) => Err(fail(format!("the header is not JSON: {e}"))),
    }
}

pub(crate) fn read_json_object_if_present(
    path: &Path,
) -> Result<Option<Map<String, Value>>, ProviderError> {
    if !path.is_file() {
        return Ok(None);
    }
    read_json_object(path).map(Some)
}

pub(crate) fn read_json_object(path: &Path) -> Result<Map<String, Value>, ProviderError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| config_error(format!("cannot read {}: {e}", path.display())))?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(config_error(format!(
            "{} is not a JSON object",
            path.display()
        ))),
        Err(e) => Err(config_error(format!(
            "{} is not valid JSON: {e}",
            path.display()
        ))),
    }
}

pub(crate) fn positive_field(
    object: &Map<String, Value>,
    field: &str,
    path: &Path,
) -> Result<usize, ProviderError> {
    match object.get(field).and_then(Value::as_u64) {
        Some(n) if n > 0 => Ok(n as usize),
        _ => Err(config_error(format!(
            "{} has no positive `{field}`",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_safetensors(path: &Path, header: &str) {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn detects_bert_from_its_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(CONFIG),
            r#"{"model_type":"bert","hidden_size":384,"num_attention_heads":12,"num_hidden_layers":6}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join(TOKENIZER), "{}").unwrap();
        write_safetensors(&dir.path().join(WEIGHTS), "{}");
        let info = inspect(dir.path(), None).unwrap();
        assert_eq!(info.kind, LocalModelKind::Bert);
        assert_eq!(info.dimension, 384);
    }

    #[test]
    fn detects_model2vec_from_its_matrix_or_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TOKENIZER), "{}").unwrap();
        write_safetensors(
            &dir.path().join(WEIGHTS),
            r#"{"embeddings":{"dtype":"F32","shape":[10,4],"data_offsets":[0,160]}}"#,
        );
        let info = inspect(dir.path(), None).unwrap();
        assert_eq!((info.kind, info.dimension), (LocalModelKind::Model2Vec, 4));

        // model2vec's own config has `hidden_dim`, not a transformer's shape.
        std::fs::write(
            dir.path().join(CONFIG),
            r#"{"model_type":"model2vec","hidden_dim":4,"normalize":true}"#,
        )
        .unwrap();
        assert_eq!(
            inspect(dir.path(), None).unwrap().kind,
            LocalModelKind::Model2Vec
        );
    }

    #[test]
    fn unknown_layouts_and_missing_files_say_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG), r#"{"hidden_size":8}"#).unwrap();
        let err = inspect(dir.path(), None).unwrap_err().to_string();
        assert!(err.contains("CORTEX_LOCAL_MODEL_KIND"), "{err}");

        let err = inspect(dir.path(), Some(LocalModelKind::Bert))
            .unwrap_err()
            .to_string();
        assert!(err.contains("tokenizer.json, model.safetensors"), "{err}");

        let err = inspect(&dir.path().join("nope"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not exist"), "{err}");
    }

    #[test]
    fn names_come_from_the_directory_or_the_hub_cache() {
        let root = tempfile::tempdir().unwrap();
        let plain = root.path().join("all-MiniLM-L6-v2");
        std::fs::create_dir_all(&plain).unwrap();
        assert_eq!(model_name(&plain), "all-MiniLM-L6-v2");
        let snapshot = root
            .path()
            .join("models--sentence-transformers--all-MiniLM-L6-v2/snapshots/c9745ed1");
        std::fs::create_dir_all(&snapshot).unwrap();
        assert_eq!(model_name(&snapshot), "all-MiniLM-L6-v2");
    }

    #[test]
    fn corrupt_safetensors_headers_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WEIGHTS);
        std::fs::write(&path, u64::MAX.to_le_bytes()).unwrap();
        assert!(static_matrix_shape(&path).is_err());
        write_safetensors(&path, "[1,2]");
        assert!(static_matrix_shape(&path).is_err());
        write_safetensors(
            &path,
            r#"{"embeddings":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#,
        );
        let err = static_matrix_shape(&path).unwrap_err().to_string();
        assert!(err.contains("not a matrix"), "{err}");
    }
}
