//! `cortex doctor`: what is configured, whether it works, and what to fix.

use std::sync::Arc;

use cortex_app::engine::{honour_store, open_store};
use cortex_app::{Presence, ServerConfig, Storage};
use cortex_core::{provider::EmbedTask, transfer::TransferStore};
use cortex_providers::EmbedProviderKind;
use serde::Serialize;

use crate::admin::error::AdminError;
use crate::cli::DoctorArgs;

/// One check's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

fn check(name: &'static str, result: Result<String, String>) -> Check {
    match result {
        Ok(detail) => Check {
            name,
            ok: true,
            detail,
        },
        Err(detail) => Check {
            name,
            ok: false,
            detail,
        },
    }
}

/// Runs every check that the configuration allows; a failed step skips those after it
/// that need it. Read-only: a store that does not exist yet (a SQLite file, a Postgres
/// schema) is reported, not created, and pgvector is not installed. Only the embedder in
/// effect is named (the one the server would use with this store), and only once it could
/// be built.
pub async fn run_checks(online: bool) -> Vec<Check> {
    let mut checks = Vec::new();
    let config = match ServerConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            checks.push(check("configuration", Err(e.to_string())));
            return checks;
        }
    };
    checks.push(check(
        "configuration",
        Ok(format!(
            "user {:?}, tier {}",
            config.user_id,
            config.tier.as_str()
        )),
    ));
    if config.providers.embed.provider == EmbedProviderKind::Local {
        checks.push(check("model files", model_files(&config.providers.local)));
    }
    // A look that writes nothing first: opening would create the store.
    let inspection = config.storage.inspect().await;
    let store = match inspection.presence {
        Presence::Unreachable(why) => {
            checks.push(check("store", Err(why)));
            return checks;
        }
        Presence::Absent(what) => {
            checks.push(check("store", Ok(what)));
            None
        }
        Presence::Present => match opened(&mut checks, &config.storage).await {
            Some(store) => Some(store),
            None => return checks,
        },
    };
    for (name, result) in inspection.checks {
        checks.push(check(name, result));
    }
    // As the server would: a store written by the local model keeps it.
    let providers = match &store {
        Some(store) => match honour_store(&config.providers, &**store).await {
            Ok(p) => p,
            Err(e) => {
                checks.push(check("signature", Err(e.to_string())));
                return checks;
            }
        },
        None => config.providers.clone(),
    };
    let embedder = providers.build_embedder_async().await;
    // What the embedder in effect writes; unknown while it cannot be built.
    let configured = embedder.as_ref().ok().map(|e| e.embedding_signature());
    let stored = match &store {
        Some(store) => store.signature().await.map_err(|e| e.to_string()),
        None => Ok(None),
    };
    checks.push(check("signature", signature_check(stored, configured)));
    checks.push(check(
        "embedder",
        embedder
            .as_ref()
            .map(|e| {
                let name = e.name();
                match matches!(name, "local" | "fake") || online {
                    // In process: built means it embeds.
                    true => format!("{name}, {} ready", e.embedding_signature()),
                    false => format!(
                        "{name}, {}: configured, not called (its key and network are only \
                         tried by `cortex doctor --online`)",
                        e.embedding_signature()
                    ),
                }
            })
            .map_err(|e| e.to_string()),
    ));
    if online && let Ok(embedder) = embedder {
        let probe = embedder
            .embed(&["cortex doctor".to_owned()], EmbedTask::Query)
            .await;
        checks.push(check(
            "online call",
            probe
                .map(|r| {
                    let dim = r.vectors.first().map_or(0, Vec::len);
                    format!("one vector of {dim} dimensions")
                })
                .map_err(|e| e.to_string()),
        ));
    }
    checks
}

/// The local model's directory holds the files the embedder loads.
fn model_files(local: &cortex_providers::LocalSettings) -> Result<String, String> {
    let Some(dir) = local.model_dir() else {
        return Err(
            "no local model directory; run `cortex model fetch` (or, in a checkout, \
                    `bash scripts/fetch-mpnet-model.sh`) or set CORTEX_EMBED_MODEL_PATH"
                .into(),
        );
    };
    let missing: Vec<&str> = ["config.json", "tokenizer.json"]
        .into_iter()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    match missing.is_empty() {
        true => Ok(format!("{}", dir.display())),
        false => Err(format!("{} lacks {}", dir.display(), missing.join(", "))),
    }
}

/// The store's signature against the embedder's in effect (unknown while it cannot be
/// built).
fn signature_check(
    stored: Result<Option<cortex_core::signature::EmbeddingSignature>, String>,
    configured: Option<cortex_core::signature::EmbeddingSignature>,
) -> Result<String, String> {
    match (stored, configured) {
        (Ok(None), Some(configured)) => Ok(format!(
            "empty store; the first memory records {configured}"
        )),
        (Ok(None), None) => Ok("empty store".to_owned()),
        (Ok(Some(stored)), Some(configured)) if stored == configured => {
            Ok(format!("{stored} matches"))
        }
        (Ok(Some(stored)), Some(configured)) => {
            Err(AdminError::SignatureMismatch { stored, configured }.to_string())
        }
        (Ok(Some(stored)), None) => Ok(format!(
            "the store holds vectors of {stored}; no embedder to compare (see below)"
        )),
        (Err(e), _) => Err(e),
    }
}

/// The store, opened as the server would; `None` when it failed (recorded in `checks`).
async fn opened(checks: &mut Vec<Check>, storage: &Storage) -> Option<Arc<dyn TransferStore>> {
    match open_store(storage).await {
        Ok(store) => {
            checks.push(check(
                "store",
                Ok(format!("{} reachable", storage.describe())),
            ));
            Some(store)
        }
        Err(e) => {
            checks.push(check("store", Err(e.to_string())));
            None
        }
    }
}

pub async fn doctor(args: DoctorArgs) -> Result<(), AdminError> {
    let checks = run_checks(args.online).await;
    if args.json {
        let text = serde_json::to_string_pretty(&checks)
            .map_err(|e| AdminError::Usage(format!("cannot write JSON: {e}")))?;
        println!("{text}");
    } else {
        for c in &checks {
            println!(
                "{} {:<13} {}",
                if c.ok { "ok  " } else { "FAIL" },
                c.name,
                c.detail
            );
        }
    }
    let failed = checks.iter().filter(|c| !c.ok).count();
    match failed {
        0 => Ok(()),
        n => Err(AdminError::Usage(format!("{n} check(s) failed"))),
    }
}
