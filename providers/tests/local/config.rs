//! Choosing the local embedder from environment variables, and the no-key fallback.

use std::collections::HashMap;
use std::path::Path;

use cortex_core::{error::ProviderError, provider::EmbedTask};
use cortex_providers::{EmbedProviderKind, ProviderConfig};

use crate::common::{model_dir, strings};
use crate::model2vec::write_static_model;

fn config(pairs: &[(&str, &str)]) -> Result<ProviderConfig, ProviderError> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    ProviderConfig::from_env_map(|name| map.get(name).cloned())
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[tokio::test]
async fn local_is_chosen_by_name_and_reads_its_signature_from_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny-static");
    write_static_model(&model, &[]);
    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", "LOCAL"),
        ("CORTEX_EMBED_MODEL_PATH", path(&model)),
    ])
    .unwrap();
    assert_eq!(c.embed.provider, EmbedProviderKind::Local);
    assert_eq!(c.embedding_signature().encode(), "tiny-static@3");
    let embedder = c.build_embedder().unwrap();
    assert_eq!(embedder.name(), "local");
    assert_eq!(embedder.embedding_signature(), c.embedding_signature());
    let result = embedder
        .embed(&strings(&["hello"]), EmbedTask::Document)
        .await
        .unwrap();
    assert_eq!(result.vectors[0], vec![1.0, 0.0, 0.0]);

    // CORTEX_EMBED_MODEL renames; CORTEX_EMBED_DIM must match the model.
    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", "local"),
        ("CORTEX_EMBED_MODEL_PATH", path(&model)),
        ("CORTEX_EMBED_MODEL", "my-static"),
        ("CORTEX_EMBED_DIM", "3"),
    ])
    .unwrap();
    assert_eq!(c.embedding_signature().encode(), "my-static@3");
    assert_eq!(
        c.build_embedder().unwrap().embedding_signature().encode(),
        "my-static@3"
    );
    let err = config(&[
        ("CORTEX_EMBED_PROVIDER", "local"),
        ("CORTEX_EMBED_MODEL_PATH", path(&model)),
        ("CORTEX_EMBED_DIM", "384"),
    ])
    .unwrap_err();
    assert!(matches!(err, ProviderError::Config(_)));
    assert!(err.to_string().contains("CORTEX_EMBED_DIM=3"), "{err}");

    let err = config(&[
        ("CORTEX_EMBED_PROVIDER", "local"),
        ("CORTEX_EMBED_MODEL_PATH", path(&model)),
        ("CORTEX_LOCAL_MODEL_KIND", "bert"),
    ])
    .unwrap_err();
    assert!(err.to_string().contains("config.json"), "{err}");
}

#[test]
fn the_real_model_is_configured_from_its_directory() {
    let Some(dir) = model_dir() else { return };
    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", "local"),
        ("CORTEX_EMBED_MODEL_PATH", path(&dir)),
        ("CORTEX_LOCAL_BATCH_SIZE", "4"),
    ])
    .unwrap();
    assert_eq!(c.embed.dimension, 384);
    assert_eq!(c.local.batch_size, 4);
    let embedder = c.build_embedder().unwrap();
    assert_eq!(embedder.embedding_signature().dimension, 384);
}

#[test]
fn without_a_provider_or_key_a_model_path_selects_local() {
    let dir = tempfile::tempdir().unwrap();
    write_static_model(dir.path(), &[]);
    let c = config(&[("CORTEX_EMBED_MODEL_PATH", path(dir.path()))]).unwrap();
    assert_eq!(c.embed.provider, EmbedProviderKind::Local);
    assert!(!c.embed.explicit);
    assert_eq!(c.build_embedder().unwrap().name(), "local");

    // A Gemini key keeps Gemini the default, as it was before.
    let c = config(&[
        ("CORTEX_EMBED_MODEL_PATH", path(dir.path())),
        ("GOOGLE_API_KEY", "k"),
    ])
    .unwrap();
    assert_eq!(c.embed.provider, EmbedProviderKind::Gemini);
    assert_eq!(c.embedding_signature().encode(), "gemini-embedding-001@768");
}

#[test]
fn without_a_provider_or_key_the_default_model_directory_selects_local() {
    let home = tempfile::tempdir().unwrap();
    let c = config(&[("HOME", path(home.path()))]).unwrap();
    assert_eq!(c.embed.provider, EmbedProviderKind::Gemini);

    write_static_model(&home.path().join(".cortex/models/all-MiniLM-L6-v2"), &[]);
    let c = config(&[("HOME", path(home.path()))]).unwrap();
    assert_eq!(c.embed.provider, EmbedProviderKind::Local);
    assert_eq!(c.embedding_signature().encode(), "all-MiniLM-L6-v2@3");
    assert_eq!(c.build_embedder().unwrap().name(), "local");
}

#[test]
fn with_nothing_configured_the_error_says_what_to_set() {
    let home = tempfile::tempdir().unwrap();
    let c = config(&[("HOME", path(home.path()))]).unwrap();
    let err = c.build_embedder().unwrap_err();
    assert!(matches!(err, ProviderError::Config(_)), "{err:?}");
    let text = err.to_string();
    for needed in [
        "CORTEX_EMBED_MODEL_PATH",
        ".cortex/models/all-mpnet-base-v2",
        "fetch-mpnet-model.sh",
        "`cortex model fetch`",
        "uvx --from cortex-memory-server cortex model fetch",
        "GEMINI_API_KEY",
        "CORTEX_EMBED_PROVIDER=fake",
    ] {
        assert!(text.contains(needed), "{needed} missing from: {text}");
    }
}

#[cfg(not(feature = "hf-hub"))]
#[test]
fn asking_for_local_without_a_model_explains_where_to_put_one() {
    let home = tempfile::tempdir().unwrap();
    let err = config(&[
        ("HOME", path(home.path())),
        ("CORTEX_EMBED_PROVIDER", "local"),
    ])
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("CORTEX_EMBED_MODEL_PATH")
            && text.contains("hf-hub")
            && text.contains("`cortex model fetch`"),
        "{text}"
    );

    let err = config(&[
        ("CORTEX_EMBED_PROVIDER", "local"),
        (
            "CORTEX_EMBED_MODEL_PATH",
            path(&home.path().join("missing")),
        ),
    ])
    .unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

/// With the `hf-hub` feature the model is downloaded at build time, so the signature
/// comes from the known size of the default model (nothing is downloaded here).
#[cfg(feature = "hf-hub")]
#[test]
fn with_hf_hub_a_missing_model_is_a_pending_download() {
    let home = tempfile::tempdir().unwrap();
    let c = config(&[
        ("HOME", path(home.path())),
        ("CORTEX_EMBED_PROVIDER", "local"),
    ])
    .unwrap();
    assert_eq!(c.embedding_signature().encode(), "all-MiniLM-L6-v2@384");
    let err = config(&[
        ("HOME", path(home.path())),
        ("CORTEX_EMBED_PROVIDER", "local"),
        ("CORTEX_LOCAL_MODEL_REPO", "someone/unknown-model"),
    ])
    .unwrap_err();
    assert!(err.to_string().contains("CORTEX_EMBED_DIM"), "{err}");
}
