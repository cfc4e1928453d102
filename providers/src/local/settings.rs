//! The local embedder's settings, read from `CORTEX_*` variables. Compiled even without
//! the `local` feature, so a slim build can still parse them and explain what is missing.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use cortex_core::error::ProviderError;

/// The model a default installation uses: all-mpnet-base-v2, English, 768 dimensions
/// (docs/RETRIEVAL.md has the measurements that chose it over all-MiniLM-L6-v2).
pub const DEFAULT_LOCAL_MODEL_REPO: &str = "sentence-transformers/all-mpnet-base-v2";

/// The default before all-mpnet-base-v2: its directory is still used when it is the only
/// model on disk, so an installation that fetched it keeps working (and a store written
/// with it keeps its signature) until `cortex reembed` moves it on.
pub const PREVIOUS_LOCAL_MODEL_REPO: &str = "sentence-transformers/all-MiniLM-L6-v2";

/// Texts per forward pass. 32 keeps padding waste low (texts are sorted by length
/// first) while a batch of 256-token texts stays around 100 MB of activations.
pub const DEFAULT_LOCAL_BATCH_SIZE: usize = 32;

/// How a model directory is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalModelKind {
    /// A sentence-transformers BERT: transformer, pooling, normalisation.
    Bert,
    /// A model2vec static model: one vector per token, averaged.
    Model2Vec,
}

impl LocalModelKind {
    const VALID: &'static str = "bert, model2vec";

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bert => "bert",
            Self::Model2Vec => "model2vec",
        }
    }
}

impl fmt::Display for LocalModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LocalModelKind {
    type Err = ProviderError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "bert" => Ok(Self::Bert),
            "model2vec" => Ok(Self::Model2Vec),
            other => Err(ProviderError::Config(format!(
                "CORTEX_LOCAL_MODEL_KIND={other:?} is not a known model kind; valid: {}",
                Self::VALID
            ))),
        }
    }
}

/// Where the local model is and how to run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalSettings {
    /// `CORTEX_EMBED_MODEL_PATH`: the model directory, `~/` expanded.
    pub model_path: Option<PathBuf>,
    /// `CORTEX_LOCAL_MODEL_REPO`: the hub id of the model the default directory holds
    /// (and, with the `hf-hub` feature, where it is downloaded from).
    pub repo: String,
    /// `~/.cortex/models/<name of repo>`, looked at when no path is given.
    pub default_dir: Option<PathBuf>,
    /// `~/.cortex/models/all-MiniLM-L6-v2`, looked at when the default directory holds no
    /// model and no repo was named (the previous default's place).
    pub previous_dir: Option<PathBuf>,
    /// `CORTEX_LOCAL_MODEL_KIND`; detected from the files when unset.
    pub kind: Option<LocalModelKind>,
    /// `CORTEX_LOCAL_BATCH_SIZE`.
    pub batch_size: usize,
}

impl LocalSettings {
    /// Reads the settings through `var` (already trimmed, empty meaning unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ProviderError> {
        let home = var("HOME")
            .or_else(|| var("USERPROFILE"))
            .map(PathBuf::from);
        let model_path = var("CORTEX_EMBED_MODEL_PATH").map(|p| expand_home(&p, home.as_deref()));
        let named = var("CORTEX_LOCAL_MODEL_REPO");
        let previous_dir = match named {
            Some(_) => None,
            None => home.as_ref().map(|h| {
                h.join(".cortex")
                    .join("models")
                    .join(repo_name(PREVIOUS_LOCAL_MODEL_REPO))
            }),
        };
        let repo = named.unwrap_or_else(|| DEFAULT_LOCAL_MODEL_REPO.into());
        let default_dir = home.map(|h| h.join(".cortex").join("models").join(repo_name(&repo)));
        let kind = var("CORTEX_LOCAL_MODEL_KIND")
            .map(|k| k.parse())
            .transpose()?;
        let batch_size = match var("CORTEX_LOCAL_BATCH_SIZE") {
            None => DEFAULT_LOCAL_BATCH_SIZE,
            Some(text) => match text.parse::<usize>() {
                Ok(n) if n >= 1 => n,
                _ => {
                    return Err(ProviderError::Config(format!(
                        "CORTEX_LOCAL_BATCH_SIZE={text:?} is not a positive whole number"
                    )));
                }
            },
        };
        Ok(Self {
            model_path,
            repo,
            default_dir,
            previous_dir,
            kind,
            batch_size,
        })
    }

    /// The directory to load: the explicit path, else the default directory if it
    /// holds a model, else the previous default's. `None` means there is nothing on disk
    /// yet.
    pub fn model_dir(&self) -> Option<&Path> {
        if let Some(path) = &self.model_path {
            return Some(path);
        }
        let holds_model = |dir: &&Path| dir.join("tokenizer.json").is_file();
        self.default_dir
            .as_deref()
            .filter(holds_model)
            .or_else(|| self.previous_dir.as_deref().filter(holds_model))
    }

    /// Whether a model is on disk or was asked for by path: the condition under which
    /// an unconfigured, keyless setup falls back to the local embedder.
    pub fn has_model(&self) -> bool {
        self.model_dir().is_some()
    }
}

/// The last segment of a hub id: `sentence-transformers/all-mpnet-base-v2` is stored
/// as `all-mpnet-base-v2`.
pub(crate) fn repo_name(repo: &str) -> &str {
    repo.rsplit('/').next().unwrap_or(repo)
}

pub(crate) fn expand_home(path: &str, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if path == "~" => home.map_or_else(|| PathBuf::from(path), Path::to_path_buf),
        _ => PathBuf::from(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(pairs: &[(&str, &str)]) -> Result<LocalSettings, ProviderError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        LocalSettings::from_vars(|name| map.get(name).cloned())
    }

    #[test]
    fn defaults_and_home_expansion() {
        let s = settings(&[("HOME", "/home/ada")]).unwrap();
        assert_eq!(s.model_path, None);
        assert_eq!(s.batch_size, DEFAULT_LOCAL_BATCH_SIZE);
        assert_eq!(
            s.default_dir.as_deref(),
            Some(Path::new("/home/ada/.cortex/models/all-mpnet-base-v2"))
        );
        assert_eq!(
            s.previous_dir.as_deref(),
            Some(Path::new("/home/ada/.cortex/models/all-MiniLM-L6-v2"))
        );

        let s = settings(&[
            ("HOME", "/home/ada"),
            ("CORTEX_EMBED_MODEL_PATH", "~/models/m"),
            ("CORTEX_LOCAL_MODEL_REPO", "minishlab/potion-base-8M"),
            ("CORTEX_LOCAL_MODEL_KIND", "Model2Vec"),
            ("CORTEX_LOCAL_BATCH_SIZE", "8"),
        ])
        .unwrap();
        assert_eq!(
            s.model_path.as_deref(),
            Some(Path::new("/home/ada/models/m"))
        );
        assert_eq!(s.model_dir(), Some(Path::new("/home/ada/models/m")));
        assert!(s.has_model());
        assert_eq!(
            s.default_dir.as_deref(),
            Some(Path::new("/home/ada/.cortex/models/potion-base-8M"))
        );
        assert_eq!(s.kind, Some(LocalModelKind::Model2Vec));
        assert_eq!(s.batch_size, 8);
    }

    #[test]
    fn the_previous_default_is_used_only_when_it_is_the_one_on_disk() {
        let home = tempfile::tempdir().unwrap();
        let models = home.path().join(".cortex/models");
        let holds = |name: &str| {
            std::fs::create_dir_all(models.join(name)).unwrap();
            std::fs::write(models.join(name).join("tokenizer.json"), "{}").unwrap();
        };
        let home_var = home.path().to_str().unwrap();
        holds("all-MiniLM-L6-v2");
        let s = settings(&[("HOME", home_var)]).unwrap();
        assert_eq!(
            s.model_dir(),
            Some(models.join("all-MiniLM-L6-v2").as_path())
        );
        holds("all-mpnet-base-v2");
        let s = settings(&[("HOME", home_var)]).unwrap();
        assert_eq!(
            s.model_dir(),
            Some(models.join("all-mpnet-base-v2").as_path())
        );
        // A repo named on purpose never falls back to another model.
        let s = settings(&[("HOME", home_var), ("CORTEX_LOCAL_MODEL_REPO", "org/other")]).unwrap();
        assert_eq!(s.model_dir(), None);
    }

    #[test]
    fn a_missing_default_directory_is_no_model() {
        let s = settings(&[("HOME", "/nonexistent-home-for-cortex-tests")]).unwrap();
        assert!(!s.has_model());
        let s = settings(&[]).unwrap();
        assert_eq!(s.default_dir, None);
        assert!(!s.has_model());
    }

    #[test]
    fn bad_values_are_config_errors() {
        let err = settings(&[("CORTEX_LOCAL_MODEL_KIND", "onnx")]).unwrap_err();
        assert!(err.to_string().contains("bert, model2vec"), "{err}");
        for bad in ["0", "-1", "many"] {
            let err = settings(&[("CORTEX_LOCAL_BATCH_SIZE", bad)]).unwrap_err();
            assert!(err.to_string().contains("CORTEX_LOCAL_BATCH_SIZE"), "{err}");
        }
    }
}
