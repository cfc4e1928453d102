//! `cortex doctor`: what is configured, whether it works, and what to fix.

use std::sync::Arc;

use cortex_app::engine::{honour_store, open_store};
use cortex_app::{ServerConfig, Storage};
use cortex_core::{EmbedTask, TransferStore};
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
/// schema) is reported, not created, and pgvector is not installed. Only the embedder in effect is named (the one the server would use with
/// this store), and only once it could be built.
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
        let local = &config.providers.local;
        checks.push(check(
            "model files",
            match local.model_dir() {
                Some(dir) => {
                    let missing: Vec<&str> = ["config.json", "tokenizer.json"]
                        .into_iter()
                        .filter(|f| !dir.join(f).is_file())
                        .collect();
                    match missing.is_empty() {
                        true => Ok(format!("{}", dir.display())),
                        false => Err(format!("{} lacks {}", dir.display(), missing.join(", "))),
                    }
                }
                None => Err(
                    "no local model directory; run `bash scripts/fetch-test-model.sh` \
                             or set CORTEX_EMBED_MODEL_PATH"
                        .into(),
                ),
            },
        ));
    }
    let store = match &config.storage {
        // Opening creates the file: a check must not.
        Storage::Sqlite(c) if matches!(c.path.try_exists(), Ok(false)) => {
            checks.push(check(
                "store",
                Ok(format!(
                    "no store yet: SQLite {} does not exist; the first memory creates it",
                    c.path.display()
                )),
            ));
            None
        }
        // Opening installs pgvector and creates the schema: look first, without a pool.
        Storage::Postgres(c) => {
            let inspection = match cortex_postgres::inspect(c).await {
                Ok(found) => found,
                Err(e) => {
                    checks.push(check("store", Err(e.to_string())));
                    return checks;
                }
            };
            let store = if inspection.schema_version.is_none() {
                checks.push(check(
                    "store",
                    Ok(format!(
                        "no store yet: PostgreSQL schema {} holds no Cortex store; the first \
                         memory creates it",
                        c.schema_name()
                    )),
                ));
                None
            } else {
                match opened(&mut checks, &config.storage).await {
                    Some(store) => Some(store),
                    None => return checks,
                }
            };
            checks.push(check("pgvector", pgvector_check(&inspection)));
            store
        }
        storage => match opened(&mut checks, storage).await {
            Some(store) => Some(store),
            None => return checks,
        },
    };
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
    checks.push(check(
        "signature",
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
        },
    ));
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

/// The store, opened as the server would; `None` when it failed (recorded in `checks`).
async fn opened(checks: &mut Vec<Check>, storage: &Storage) -> Option<Arc<dyn TransferStore>> {
    match open_store(storage).await {
        Ok(store) => {
            let place = match storage {
                Storage::Sqlite(c) => format!("SQLite {}", c.path.display()),
                Storage::Postgres(c) => format!("PostgreSQL, schema {}", c.schema_name()),
            };
            checks.push(check("store", Ok(format!("{place} reachable"))));
            Some(store)
        }
        Err(e) => {
            checks.push(check("store", Err(e.to_string())));
            None
        }
    }
}

fn pgvector_check(found: &cortex_postgres::Inspection) -> Result<String, String> {
    match (&found.pgvector, &found.pgvector_available) {
        (Some(installed), _) => Ok(format!("version {installed}")),
        (None, Some(available)) => Ok(format!(
            "version {available} available, not yet installed in this database; the first \
             memory installs it (which needs the right to CREATE EXTENSION)"
        )),
        (None, None) => Err(
            "the vector extension is not installed and the server has no \
                             pgvector to install; see scripts/install-pgvector.sh"
                .into(),
        ),
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
