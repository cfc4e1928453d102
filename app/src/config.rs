//! The server's configuration: environment variables only, never files or flags, so every
//! MCP host (Claude Desktop, Claude Code, Cursor, docker compose) configures it the same way.
//!
//! Reading goes through an injectable lookup ([`ServerConfig::from_lookup`]) so tests never
//! touch the process environment. Empty values count as unset, as in the providers crate:
//! `VAR=` in a compose file or `.env` then means "use the default".

use cortex_core::memory::validate_user;
use cortex_core::{engine::Layers, listing::MAX_LIMIT, profile::Tier};

pub use crate::backend::Storage;
use crate::env::set;
pub use crate::env::{ConfigError, env_var, parse_bool};
use cortex_providers::{LlmProviderKind, ProviderConfig, RerankerConfig};

/// Every environment variable the server reads, its own and those of the crates it wires
/// (providers, logging). `.env.example` and `docs/CONFIGURATION.md` list exactly these; a
/// test keeps them in step, and checks that docker compose sets nothing outside the list.
pub const ENV_VARS: &[&str] = &[
    // Storage and identity.
    "CORTEX_DB_PATH",
    "CORTEX_SQLITE_SYNCHRONOUS",
    "CORTEX_INDEX_SNAPSHOTS",
    "CORTEX_DATABASE_URL",
    "CORTEX_USER_ID",
    // Postgres (read by cortex_postgres::PostgresConfig).
    "CORTEX_DATABASE_POOL_SIZE",
    "CORTEX_PG_SCHEMA",
    "CORTEX_PG_DENSE_MODE",
    "CORTEX_PG_HNSW_THRESHOLD",
    "CORTEX_PG_PUSHDOWN",
    "CORTEX_PG_EF_SEARCH",
    "CORTEX_PG_HNSW_M",
    "CORTEX_PG_HNSW_EF_CONSTRUCTION",
    "CORTEX_PG_ANN_INDEX",
    "CORTEX_PG_IVF_LISTS",
    "CORTEX_PG_IVF_PROBES",
    "CORTEX_PG_PRUNE_BUDGET",
    "CORTEX_PG_LOOKUP_COST",
    "CORTEX_PG_PARALLEL_SEARCH",
    "CORTEX_PG_PLAIN_WALK",
    "CORTEX_PG_STATEMENT_TIMEOUT_SECS",
    "CORTEX_DATABASE_READ_URL",
    "CORTEX_PG_READ_WAIT_MS",
    "CORTEX_PG_REPLICA_MAX_LAG_MS",
    // Retrieval and the engine's optional layers.
    "CORTEX_TOP_K",
    "CORTEX_CACHE_MAX_BYTES",
    "CORTEX_TIER",
    "CORTEX_EPISODIC",
    "CORTEX_GRAPH",
    "CORTEX_DEDUP",
    "CORTEX_SOFT_UPDATE",
    // Providers (read by cortex_providers::ProviderConfig).
    "CORTEX_EMBED_PROVIDER",
    "CORTEX_EMBED_MODEL",
    "CORTEX_EMBED_DIM",
    "CORTEX_EMBED_MODEL_PATH",
    "CORTEX_LOCAL_MODEL_REPO",
    "CORTEX_LOCAL_MODEL_KIND",
    "CORTEX_LOCAL_BATCH_SIZE",
    "CORTEX_LLM_PROVIDER",
    "CORTEX_LLM_MODEL",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OLLAMA_API_KEY",
    "CORTEX_GEMINI_BASE_URL",
    "CORTEX_OPENAI_BASE_URL",
    "CORTEX_OLLAMA_BASE_URL",
    "CORTEX_ANTHROPIC_BASE_URL",
    "CORTEX_OPENAI_MAX_TOKENS_FIELD",
    "CORTEX_LLM_SEND_TEMPERATURE",
    "CORTEX_PROVIDER_TIMEOUT_SECS",
    "CORTEX_PROVIDER_MAX_ATTEMPTS",
    "CORTEX_PROVIDER_RETRY_BUDGET_SECS",
    // Reranker (read by cortex_providers::RerankerConfig).
    "CORTEX_RERANK_PROVIDER",
    "CORTEX_RERANK_MODEL",
    "CORTEX_RERANK_MODEL_PATH",
    "CORTEX_RERANK_DEPTH",
    "CORTEX_RERANK_BASE_URL",
    "COHERE_API_KEY",
    "JINA_API_KEY",
    "VOYAGE_API_KEY",
    // HTTP transport.
    "CORTEX_HTTP_AUTH",
    "CORTEX_HTTP_TOKEN",
    "CORTEX_OAUTH_ISSUER",
    "CORTEX_OAUTH_RESOURCE",
    "CORTEX_OAUTH_AUDIENCE",
    "CORTEX_OAUTH_JWKS_URL",
    "CORTEX_OAUTH_USER_CLAIM",
    "CORTEX_HTTP_ALLOWED_HOSTS",
    "CORTEX_HTTP_ALLOWED_ORIGINS",
    "CORTEX_HTTP_MAX_SESSIONS",
    "CORTEX_HTTP_USER_MAX_SESSIONS",
    "CORTEX_HTTP_SESSION_IDLE_SECS",
    "CORTEX_HTTP_DRAIN_SECS",
    "CORTEX_HTTP_USER_RPS",
    "CORTEX_HTTP_USER_BURST",
    // Logging: tracing-subscriber's filter, and text or JSON lines.
    "RUST_LOG",
    "CORTEX_LOG_FORMAT",
];

/// How the HTTP transport tells callers apart (`CORTEX_HTTP_AUTH`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum HttpAuth {
    /// One shared bearer token, `CORTEX_HTTP_TOKEN`; every caller is `CORTEX_USER_ID`.
    #[default]
    Token,
    /// Each caller is a user: by an API key from the store (`cortex token create`), by a
    /// JWT from an OAuth issuer, or either (`keys,oauth`).
    Callers {
        keys: bool,
        oauth: Option<OAuthSettings>,
    },
}

/// The OAuth resource-server settings (`CORTEX_OAUTH_*`): whose tokens are accepted and
/// which claim names the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    /// `CORTEX_OAUTH_ISSUER`: the `iss` every token must carry.
    pub issuer: String,
    /// `CORTEX_OAUTH_RESOURCE`: this server's public URL of `/mcp`, as clients reach it;
    /// named in the protected-resource metadata.
    pub resource: String,
    /// `CORTEX_OAUTH_AUDIENCE`: the `aud` every token must carry (default: the resource).
    pub audience: String,
    /// `CORTEX_OAUTH_JWKS_URL`: where the issuer's keys are; unset, they are found through
    /// the issuer's metadata (`/.well-known/openid-configuration`, then
    /// `/.well-known/oauth-authorization-server`).
    pub jwks_url: Option<String>,
    /// `CORTEX_OAUTH_USER_CLAIM`: the claim that names the user (default `sub`).
    pub user_claim: String,
}

impl HttpAuth {
    /// Reads `CORTEX_HTTP_AUTH` (`token`, the default; `keys`; `oauth`; or `keys,oauth`) and,
    /// with `oauth`, the `CORTEX_OAUTH_*` settings, through `get`.
    pub fn from_lookup(get: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |name: &str| set(get, name);
        let text = var("CORTEX_HTTP_AUTH").unwrap_or_else(|| "token".into());
        let bad = || ConfigError::Invalid {
            variable: "CORTEX_HTTP_AUTH",
            value: text.clone(),
            expected: "use token (one shared CORTEX_HTTP_TOKEN), keys (API keys from `cortex \
                       token create`), oauth (JWTs from CORTEX_OAUTH_ISSUER) or keys,oauth"
                .into(),
        };
        let modes: Vec<&str> = text.split(',').map(str::trim).collect();
        if modes == ["token"] {
            return Ok(HttpAuth::Token);
        }
        if modes.iter().any(|m| !matches!(*m, "keys" | "oauth")) {
            return Err(bad());
        }
        let oauth = match modes.contains(&"oauth") {
            false => None,
            true => {
                let required = |name: &'static str, what: &str| {
                    var(name).ok_or_else(|| {
                        ConfigError::Conflict(format!(
                            "CORTEX_HTTP_AUTH={text} needs {name}: {what}"
                        ))
                    })
                };
                let issuer = required("CORTEX_OAUTH_ISSUER", "the issuer URL tokens name in iss")?;
                let resource = required(
                    "CORTEX_OAUTH_RESOURCE",
                    "this server's public URL of /mcp, e.g. https://memory.example.com/mcp",
                )?;
                Some(OAuthSettings {
                    audience: var("CORTEX_OAUTH_AUDIENCE").unwrap_or_else(|| resource.clone()),
                    jwks_url: var("CORTEX_OAUTH_JWKS_URL"),
                    user_claim: var("CORTEX_OAUTH_USER_CLAIM").unwrap_or_else(|| "sub".into()),
                    issuer,
                    resource,
                })
            }
        };
        Ok(HttpAuth::Callers {
            keys: modes.contains(&"keys"),
            oauth,
        })
    }
}

/// `CORTEX_USER_ID` when unset.
pub const DEFAULT_USER_ID: &str = "default";

/// Everything the engine is built from. `Debug` never shows a key or a database password.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The one user every tool call reads and writes as.
    pub user_id: String,
    /// Default `limit` of recall, list and the keyed reads: `CORTEX_TOP_K`, else the
    /// tier's.
    pub top_k: usize,
    /// The cost/quality profile (`CORTEX_TIER`); sets the default top-k and rerank depth.
    pub tier: Tier,
    pub layers: Layers,
    pub storage: Storage,
    pub providers: ProviderConfig,
    /// The reranker (`CORTEX_RERANK_PROVIDER`), hosted or local, if any.
    pub reranker: Option<RerankerConfig>,
    /// Fused candidates the reranker orders (`CORTEX_RERANK_DEPTH`): else the tier's for a
    /// hosted reranker and [`LOCAL_RERANK_DEPTH`] for the local one, whose every candidate
    /// is a pass of a 12-layer model on this machine's CPU.
    pub rerank_depth: usize,
    /// Most bytes the per-user index cache holds (`CORTEX_CACHE_MAX_BYTES`; unset: no
    /// bound).
    pub cache_max_bytes: Option<usize>,
}

/// Where the store is and whose memories a call reads: the part of [`ServerConfig`] that
/// commands which never embed or generate need (`cortex stats`, `list`, `export`), read
/// without the provider and layer settings so that a bad one does not stop them.
#[derive(Debug, Clone)]
pub struct StoreSettings {
    /// `CORTEX_USER_ID`, else [`DEFAULT_USER_ID`].
    pub user_id: String,
    pub storage: Storage,
}

impl StoreSettings {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&env_var)
    }

    /// Reads settings through `get`, exactly as [`ServerConfig::from_lookup`] reads them.
    pub fn from_lookup(get: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |name: &str| set(get, name);
        Ok(Self {
            user_id: read_user(&var)?,
            storage: read_storage(&var)?,
        })
    }
}

fn read_user(var: &dyn Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    let user_id = var("CORTEX_USER_ID").unwrap_or_else(|| DEFAULT_USER_ID.to_owned());
    validate_user(&user_id).map_err(|_| ConfigError::Invalid {
        variable: "CORTEX_USER_ID",
        value: user_id.clone(),
        expected: "use 1-256 bytes of printable text".into(),
    })?;
    Ok(user_id)
}

/// Where memories live: the registered backend the settings select.
fn read_storage(var: &dyn Fn(&str) -> Option<String>) -> Result<Storage, ConfigError> {
    crate::backend::from_env(var)
}

impl ServerConfig {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&env_var)
    }

    /// Reads settings through `get`; empty or blank values count as unset.
    pub fn from_lookup(get: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |name: &str| set(get, name);

        let user_id = read_user(&var)?;

        let tier = match var("CORTEX_TIER") {
            None => Tier::default(),
            Some(text) => text.parse().map_err(|_| ConfigError::Invalid {
                variable: "CORTEX_TIER",
                value: text.clone(),
                expected: "use cheap or flagship".into(),
            })?,
        };

        let top_k = match var("CORTEX_TOP_K") {
            None => tier.profile().top_k,
            Some(text) => parse_limit("CORTEX_TOP_K", text)?,
        };

        let flag = |name: &'static str| -> Result<bool, ConfigError> {
            var(name).map_or(Ok(false), |text| parse_bool(name, &text))
        };
        let layers = Layers {
            episodic: flag("CORTEX_EPISODIC")?,
            graph: flag("CORTEX_GRAPH")?,
            dedup: flag("CORTEX_DEDUP")?,
            soft_update: flag("CORTEX_SOFT_UPDATE")?,
        };

        let storage = read_storage(&var)?;

        let providers = ProviderConfig::from_env_map(get)?;
        if providers.llm.provider == LlmProviderKind::None {
            // The engine would skip these layers without a model and only count failures;
            // an agent relying on them would get empty timelines and dossiers with no
            // hint why. Refusing says what to set.
            let needs_llm: Vec<&str> = [
                ("CORTEX_EPISODIC", layers.episodic),
                ("CORTEX_GRAPH", layers.graph),
                ("CORTEX_SOFT_UPDATE", layers.soft_update),
            ]
            .into_iter()
            .filter_map(|(name, on)| on.then_some(name))
            .collect();
            if !needs_llm.is_empty() {
                return Err(ConfigError::Conflict(format!(
                    "{} needs a generation model, but CORTEX_LLM_PROVIDER is none; set \
                     CORTEX_LLM_PROVIDER (gemini, openai, ollama or anthropic) or turn the \
                     layer off",
                    needs_llm.join(" and ")
                )));
            }
        }

        let reranker = RerankerConfig::from_env_map(|name| var(name))?.map(|mut rerank| {
            // One set of timeout and retry settings for every hosted model call.
            if let RerankerConfig::Hosted(hosted) = &mut rerank {
                hosted.http = providers.http.clone();
            }
            rerank
        });

        let rerank_depth = match var("CORTEX_RERANK_DEPTH") {
            None => match reranker {
                Some(RerankerConfig::Local { .. }) => LOCAL_RERANK_DEPTH,
                _ => tier.profile().rerank_depth,
            },
            Some(text) => parse_limit("CORTEX_RERANK_DEPTH", text)?,
        };

        let cache_max_bytes = match var("CORTEX_CACHE_MAX_BYTES") {
            None => None,
            Some(text) => Some(parse_bytes(&text).ok_or_else(|| ConfigError::Invalid {
                variable: "CORTEX_CACHE_MAX_BYTES",
                value: text.clone(),
                expected: "use a size in bytes, or with a unit: 512MiB, 2GiB, 500MB".into(),
            })?),
        };

        Ok(Self {
            user_id,
            top_k,
            tier,
            layers,
            storage,
            providers,
            reranker,
            rerank_depth,
            cache_max_bytes,
        })
    }
}

/// A count of memories, 1 to [`MAX_LIMIT`].
fn parse_limit(variable: &'static str, text: String) -> Result<usize, ConfigError> {
    match text.parse::<usize>() {
        Ok(k) if (1..=MAX_LIMIT).contains(&k) => Ok(k),
        _ => Err(ConfigError::Invalid {
            variable,
            value: text,
            expected: format!("use a whole number from 1 to {MAX_LIMIT}"),
        }),
    }
}

/// The local reranker's default depth (`CORTEX_RERANK_DEPTH` unset): measured in
/// docs/RETRIEVAL.md, "A second stage".
pub const LOCAL_RERANK_DEPTH: usize = 20;

/// `1048576`, `512MiB`, `2GiB`, `500MB`, `64KB` (binary units for Ki/Mi/Gi, decimal for
/// K/M/G); at least one byte.
pub fn parse_bytes(text: &str) -> Option<usize> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: usize = number.parse().ok()?;
    let scale: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(scale).filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use super::*;
    use crate::backend::SqliteBackend;
    use crate::env::with_system_home;
    use cortex_sqlite::Synchronous;

    fn sqlite_of(storage: &Storage) -> &cortex_sqlite::SqliteConfig {
        &storage
            .as_any()
            .downcast_ref::<SqliteBackend>()
            .expect("a SQLite store")
            .config
    }

    /// An MCP host's bare environment has no HOME: the models are then looked for under the
    /// system's home for the user, where the store's default path is.
    #[test]
    fn an_unset_home_reads_as_the_system_home() {
        let system = || Some(std::path::PathBuf::from("/home/ada"));
        assert_eq!(
            with_system_home("HOME", None, system).as_deref(),
            Some("/home/ada")
        );
        assert_eq!(
            with_system_home("HOME", Some("/tmp/h".into()), system).as_deref(),
            Some("/tmp/h")
        );
        assert_eq!(with_system_home("HOME", None, || None), None);
        assert_eq!(with_system_home("CORTEX_DB_PATH", None, system), None);
    }

    #[test]
    fn cache_sizes_read_with_their_units() {
        assert_eq!(parse_bytes("1048576"), Some(1 << 20));
        assert_eq!(parse_bytes("512MiB"), Some(512 << 20));
        assert_eq!(parse_bytes("2 GiB"), Some(2 << 30));
        assert_eq!(parse_bytes("500MB"), Some(500_000_000));
        for bad in ["", "0", "MiB", "12 parsecs", "-5", "1.5GiB"] {
            assert_eq!(parse_bytes(bad), None, "{bad:?}");
        }
        let err = config(&[("CORTEX_CACHE_MAX_BYTES", "lots")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("CORTEX_CACHE_MAX_BYTES"), "{err}");
        let set = config(&[("CORTEX_CACHE_MAX_BYTES", "1GiB")]).unwrap();
        assert_eq!(set.cache_max_bytes, Some(1 << 30));
    }

    #[test]
    fn http_auth_is_token_unless_keys_or_oauth_is_asked_for() {
        let auth = |pairs: &[(&str, &str)]| {
            let map: HashMap<String, String> = pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            HttpAuth::from_lookup(&move |name| map.get(name).cloned())
        };
        assert_eq!(auth(&[]).unwrap(), HttpAuth::Token);
        assert_eq!(auth(&[("CORTEX_HTTP_AUTH", " ")]).unwrap(), HttpAuth::Token);
        assert_eq!(
            auth(&[("CORTEX_HTTP_AUTH", "keys")]).unwrap(),
            HttpAuth::Callers {
                keys: true,
                oauth: None
            }
        );
        let err = auth(&[("CORTEX_HTTP_AUTH", "basic")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("CORTEX_HTTP_AUTH") && err.contains("keys"),
            "{err}"
        );
        let err = auth(&[("CORTEX_HTTP_AUTH", "oauth")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("CORTEX_OAUTH_ISSUER"), "{err}");
        let both = auth(&[
            ("CORTEX_HTTP_AUTH", "keys, oauth"),
            ("CORTEX_OAUTH_ISSUER", "https://id.example"),
            ("CORTEX_OAUTH_RESOURCE", "https://memory.example/mcp"),
        ])
        .unwrap();
        assert_eq!(
            both,
            HttpAuth::Callers {
                keys: true,
                oauth: Some(OAuthSettings {
                    issuer: "https://id.example".into(),
                    resource: "https://memory.example/mcp".into(),
                    audience: "https://memory.example/mcp".into(),
                    jwks_url: None,
                    user_claim: "sub".into(),
                })
            }
        );
    }

    fn config(pairs: &[(&str, &str)]) -> Result<ServerConfig, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ServerConfig::from_lookup(&|name| map.get(name).cloned())
    }

    #[test]
    fn defaults() {
        let c = config(&[("CORTEX_EMBED_PROVIDER", "fake")]).unwrap();
        assert_eq!(c.user_id, "default");
        assert_eq!(c.top_k, 10);
        assert!(c.reranker.is_none());
        assert_eq!(c.tier, Tier::Cheap);
        assert_eq!(c.layers, Layers::default());
        let sqlite = sqlite_of(&c.storage);
        assert!(sqlite.path.ends_with(".cortex/memory.db"), "{sqlite:?}");
        assert_eq!(sqlite.synchronous, Synchronous::Full);
    }

    #[test]
    fn booleans_accept_the_documented_spellings_and_refuse_others() {
        for (text, want) in [("1", true), ("TRUE", true), ("yes", true), ("0", false)] {
            let c = config(&[
                ("CORTEX_GRAPH", text),
                ("CORTEX_DEDUP", text),
                ("CORTEX_LLM_PROVIDER", "fake"),
            ])
            .unwrap();
            assert_eq!(c.layers.graph, want, "{text}");
            assert_eq!(c.layers.dedup, want, "{text}");
        }
        let c = config(&[
            ("CORTEX_EPISODIC", "no"),
            ("CORTEX_SOFT_UPDATE", "yes"),
            ("CORTEX_LLM_PROVIDER", "fake"),
        ])
        .unwrap();
        assert!(!c.layers.episodic && c.layers.soft_update);
        let err = config(&[("CORTEX_EPISODIC", "maybe")]).unwrap_err();
        assert!(
            err.to_string().contains("CORTEX_EPISODIC=\"maybe\""),
            "{err}"
        );
        assert!(config(&[("CORTEX_SOFT_UPDATE", "2")]).is_err());
    }

    #[test]
    fn layers_that_call_a_model_need_one() {
        let err = config(&[("CORTEX_GRAPH", "1"), ("CORTEX_EPISODIC", "1")]).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("CORTEX_EPISODIC and CORTEX_GRAPH") && msg.contains("CORTEX_LLM_PROVIDER"),
            "{msg}"
        );
        // Dedup compares embeddings only.
        assert!(config(&[("CORTEX_DEDUP", "1")]).unwrap().layers.dedup);
    }

    #[test]
    fn top_k_tier_and_user_are_validated() {
        assert_eq!(config(&[("CORTEX_TOP_K", "25")]).unwrap().top_k, 25);
        for bad in ["0", "1001", "-3", "ten"] {
            let err = config(&[("CORTEX_TOP_K", bad)]).unwrap_err();
            assert!(err.to_string().contains("CORTEX_TOP_K"), "{err}");
        }
        let flagship = config(&[("CORTEX_TIER", "Flagship")]).unwrap();
        assert_eq!(flagship.tier, Tier::Flagship);
        assert_eq!(
            flagship.top_k,
            Tier::Flagship.profile().top_k,
            "the tier's depth"
        );
        let pinned = config(&[("CORTEX_TIER", "flagship"), ("CORTEX_TOP_K", "7")]).unwrap();
        assert_eq!(pinned.top_k, 7, "CORTEX_TOP_K wins over the tier");
        let err = config(&[("CORTEX_TIER", "premium")]).unwrap_err();
        assert!(err.to_string().contains("cheap or flagship"), "{err}");
        assert_eq!(
            config(&[("CORTEX_USER_ID", "alice")]).unwrap().user_id,
            "alice"
        );
        assert!(config(&[("CORTEX_USER_ID", "a\u{7}b")]).is_err());
    }

    #[test]
    fn a_reranker_is_configured_with_its_key_and_the_shared_http_settings() {
        let c = config(&[
            ("CORTEX_RERANK_PROVIDER", "cohere"),
            ("COHERE_API_KEY", "co-secret-key"),
            ("CORTEX_PROVIDER_TIMEOUT_SECS", "5"),
        ])
        .unwrap();
        let Some(RerankerConfig::Hosted(rerank)) = c.reranker.as_ref() else {
            panic!("expected a hosted reranker, got {:?}", c.reranker);
        };
        assert_eq!(rerank.http.timeout, std::time::Duration::from_secs(5));
        assert!(!format!("{c:?}").contains("co-secret-key"));
        let err = config(&[("CORTEX_RERANK_PROVIDER", "voyage")]).unwrap_err();
        assert!(err.to_string().contains("VOYAGE_API_KEY"), "{err}");
        assert!(
            config(&[("CORTEX_RERANK_PROVIDER", "none")])
                .unwrap()
                .reranker
                .is_none()
        );
    }

    #[test]
    fn the_local_reranker_has_its_own_depth_and_the_variable_wins() {
        let local = config(&[("CORTEX_RERANK_PROVIDER", "local"), ("HOME", "/home/ada")]).unwrap();
        assert!(matches!(local.reranker, Some(RerankerConfig::Local { .. })));
        assert_eq!(local.rerank_depth, LOCAL_RERANK_DEPTH);
        let hosted = config(&[("CORTEX_RERANK_PROVIDER", "jina"), ("JINA_API_KEY", "k")]).unwrap();
        assert_eq!(hosted.rerank_depth, Tier::default().profile().rerank_depth);
        let pinned = config(&[
            ("CORTEX_RERANK_PROVIDER", "local"),
            ("HOME", "/home/ada"),
            ("CORTEX_RERANK_DEPTH", "12"),
        ])
        .unwrap();
        assert_eq!(pinned.rerank_depth, 12);
        for bad in ["0", "ten", "1001"] {
            let err = config(&[("CORTEX_RERANK_DEPTH", bad)]).unwrap_err();
            assert!(err.to_string().contains("CORTEX_RERANK_DEPTH"), "{err}");
        }
    }

    #[test]
    fn empty_values_mean_unset() {
        let c = config(&[("CORTEX_TOP_K", ""), ("CORTEX_USER_ID", "  ")]).unwrap();
        assert_eq!((c.top_k, c.user_id.as_str()), (10, "default"));
    }

    #[test]
    fn storage_selection() {
        let c = config(&[("CORTEX_DB_PATH", "/tmp/x.db")]).unwrap();
        assert!(sqlite_of(&c.storage).path.as_path() == Path::new("/tmp/x.db"));
        let c = config(&[
            ("CORTEX_DB_PATH", "/tmp/x.db"),
            ("CORTEX_SQLITE_SYNCHRONOUS", "Normal"),
        ])
        .unwrap();
        assert_eq!(sqlite_of(&c.storage).synchronous, Synchronous::Normal);
        assert!(sqlite_of(&c.storage).index_snapshots);
        let c = config(&[("CORTEX_INDEX_SNAPSHOTS", "false")]).unwrap();
        assert!(!sqlite_of(&c.storage).index_snapshots);
        let bad = config(&[("CORTEX_INDEX_SNAPSHOTS", "sometimes")]).unwrap_err();
        assert!(bad.to_string().contains("CORTEX_INDEX_SNAPSHOTS"), "{bad}");
        let bad = config(&[("CORTEX_SQLITE_SYNCHRONOUS", "off")]).unwrap_err();
        assert!(
            bad.to_string().contains("CORTEX_SQLITE_SYNCHRONOUS"),
            "{bad}"
        );
        let c = config(&[
            ("CORTEX_DATABASE_URL", "postgres://u:hunter2@db/cortex"),
            ("CORTEX_DATABASE_POOL_SIZE", "3"),
            ("CORTEX_PG_DENSE_MODE", "exact"),
        ])
        .unwrap();
        let pg = &c
            .storage
            .as_any()
            .downcast_ref::<crate::backend::PostgresBackend>()
            .expect("a database URL selects Postgres")
            .config;
        assert_eq!(pg.pool_size, 3);
        let shown = format!("{c:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        let err = config(&[
            ("CORTEX_DATABASE_URL", "postgres://db/cortex"),
            ("CORTEX_PG_DENSE_MODE", "fuzzy"),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("CORTEX_PG_DENSE_MODE"), "{err}");
        let err = config(&[
            ("CORTEX_DB_PATH", "/tmp/x.db"),
            ("CORTEX_DATABASE_URL", "postgres://db/cortex"),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("not both"), "{err}");
        if let Some(home) = std::env::home_dir() {
            let c = config(&[("CORTEX_DB_PATH", "~/work.db")]).unwrap();
            assert_eq!(sqlite_of(&c.storage).path, home.join("work.db"));
        }
    }

    #[test]
    fn store_settings_ignore_the_provider_and_layer_settings() {
        let map: HashMap<&str, &str> = [
            ("CORTEX_DB_PATH", "/tmp/x.db"),
            ("CORTEX_USER_ID", "ada"),
            ("CORTEX_EMBED_PROVIDER", "bogus"),
            ("CORTEX_GRAPH", "1"),
            ("CORTEX_TOP_K", "ten"),
        ]
        .into_iter()
        .collect();
        let get = |name: &str| map.get(name).map(|v| (*v).to_owned());
        assert!(ServerConfig::from_lookup(&get).is_err());
        let s = StoreSettings::from_lookup(&get).unwrap();
        assert_eq!(s.user_id, "ada");
        assert!(sqlite_of(&s.storage).path.as_path() == Path::new("/tmp/x.db"));
        let err = StoreSettings::from_lookup(&|name: &str| match name {
            "CORTEX_DB_PATH" => Some("/tmp/x.db".into()),
            "CORTEX_DATABASE_URL" => Some("postgres://h/db".into()),
            _ => None,
        })
        .unwrap_err();
        assert!(err.to_string().contains("not both"), "{err}");
    }

    #[test]
    fn provider_settings_flow_through_and_keys_stay_hidden() {
        let c = config(&[
            ("CORTEX_EMBED_PROVIDER", "fake"),
            ("CORTEX_EMBED_DIM", "64"),
            ("GEMINI_API_KEY", "sk-very-secret"),
        ])
        .unwrap();
        assert_eq!(c.providers.embed.dimension, 64);
        assert!(!format!("{c:?}").contains("sk-very-secret"));
        let err = config(&[("CORTEX_EMBED_PROVIDER", "nope")]).unwrap_err();
        assert!(err.to_string().contains("CORTEX_EMBED_PROVIDER"), "{err}");
    }
}
