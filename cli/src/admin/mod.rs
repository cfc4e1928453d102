//! The administration commands: the store the server uses, from the shell.

pub mod commands;
pub mod doctor;
pub mod error;
pub mod import;
pub mod migrate;
pub mod progress;
pub mod reembed;
pub mod summary;
pub mod token;
pub mod ui;

use std::sync::Arc;

use cortex_app::engine::{honour_store, open_store};
use cortex_app::{Engine, ServerConfig, Storage, StoreSettings, build_engine};
use cortex_core::transfer::TransferStore;
use cortex_postgres::config::redact_url;

pub use error::AdminError;

/// The configuration and the store it names, opened.
#[derive(Debug)]
pub struct Context {
    pub config: ServerConfig,
    pub store: Arc<dyn TransferStore>,
}

impl Context {
    /// Reads the environment as the server does and opens its store.
    pub async fn open() -> Result<Self, AdminError> {
        let mut config = ServerConfig::from_env()?;
        let store = open_store(&config.storage).await?;
        config.providers = honour_store(&config.providers, &*store).await?;
        Ok(Self { config, store })
    }

    /// The user a command runs as: `--user`, else the server's.
    pub fn user(&self, flag: Option<&str>) -> Result<String, AdminError> {
        user_or(flag, &self.config.user_id)
    }

    /// The engine the server would build (embedder, layers), over the same store.
    pub async fn engine(&self) -> Result<Engine, AdminError> {
        Ok(build_engine(&self.config).await?)
    }

    /// For the commands that go through the engine: it, and the user (`--user`, else the
    /// server's).
    pub async fn engine_for(flag: Option<&str>) -> Result<(Engine, String), AdminError> {
        let ctx = Self::open().await?;
        let user = ctx.user(flag)?;
        Ok((ctx.engine().await?, user))
    }
}

/// The store alone, for the commands that never embed or generate (stats, list, export,
/// migrate): only the storage and user settings are read, so a bad or missing embedder
/// or layer setting does not stop them.
#[derive(Debug)]
pub struct StoreContext {
    pub settings: StoreSettings,
    pub store: Arc<dyn TransferStore>,
}

impl StoreContext {
    /// Reads the storage and user settings as the server does and opens the store.
    pub async fn open() -> Result<Self, AdminError> {
        let settings = StoreSettings::from_env()?;
        let store = open_store(&settings.storage).await?;
        Ok(Self { settings, store })
    }

    /// The user a command runs as: `--user`, else the server's.
    pub fn user(&self, flag: Option<&str>) -> Result<String, AdminError> {
        user_or(flag, &self.settings.user_id)
    }
}

fn user_or(flag: Option<&str>, configured: &str) -> Result<String, AdminError> {
    let user = flag.unwrap_or(configured).to_owned();
    cortex_core::memory::validate_user(&user)?;
    Ok(user)
}

/// The storage `--to` names, which must be what it claims: a `postgres://` or
/// `postgresql://` URL that parses and names a host (the other `CORTEX_PG_*` settings
/// from the environment), or a SQLite file path that does not look like a URL. Anything
/// else (another scheme, a postgres URL missing its `//` or its colon, one that does not
/// parse) is refused here, before anything is opened or created.
pub fn storage_of(target: &str) -> Result<Storage, AdminError> {
    let schemes = cortex_app::backend::target_schemes();
    let expected = format!(
        "give a {} URL, or a SQLite file path",
        schemes
            .iter()
            .map(|s| format!("{s}://"))
            .collect::<Vec<_>>()
            .join(" or ")
    );
    let target = target.trim();
    if target.is_empty() {
        return Err(AdminError::Usage(format!("--to is empty; {expected}")));
    }
    let shown = redact_url(target);
    let scheme = url_scheme(target).map(str::to_ascii_lowercase);
    let kind = cortex_app::backend::kind_for_target(scheme.as_deref());
    match (scheme, kind) {
        (Some(scheme), Some(kind)) => {
            let Some(rest) = target[scheme.len() + 1..].strip_prefix("//") else {
                return Err(AdminError::Usage(format!(
                    "--to {shown} is not a valid {} URL: write {scheme}://user@host:port/database",
                    kind.name()
                )));
            };
            // Drivers read the scheme in lower case only.
            let url = format!("{scheme}://{rest}");
            kind.for_target(&url, "--to").map_err(|e| match e {
                cortex_core::error::StoreError::Config(message) => AdminError::Usage(message),
                other => AdminError::Store(other),
            })
        }
        (Some(scheme), None) => Err(AdminError::Usage(format!(
            "--to {shown} is a {scheme}: URL; cortex migrates into {} only: {expected} (a file \
             whose name starts with a word and a colon needs ./ in front)",
            cortex_app::backend::registered_names().join(" or ")
        ))),
        (None, _) if target.contains("://") => Err(AdminError::Usage(format!(
            "--to {shown} looks like a URL but has no valid scheme; {expected}"
        ))),
        (None, _) if let Some(scheme) = missing_colon(target) => Err(AdminError::Usage(format!(
            "--to {shown} looks like a URL without its colon: write \
                 {scheme}://user@host:port/database (a SQLite file path needs no double slash)"
        ))),
        (None, Some(kind)) => Ok(kind.for_target(target, "--to")?),
        (None, None) => Err(AdminError::Usage(format!(
            "--to {shown}: no backend of this build takes a file path; {expected}"
        ))),
    }
}

/// The scheme of `text` when it starts like a URL (RFC 3986: a letter, then letters,
/// digits, `+`, `-` or `.`, then a colon). One letter is not taken for a scheme: it would
/// be a Windows drive (`C:`).
fn url_scheme(text: &str) -> Option<&str> {
    let (head, _) = text.split_once(':')?;
    let mut chars = head.chars();
    let first = chars.next()?;
    (head.len() >= 2
        && first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(head)
}

/// `postgres//host/db`: a URL whose colon was lost; the scheme to write instead (its
/// backend's first).
fn missing_colon(text: &str) -> Option<&'static str> {
    let lower = text.to_ascii_lowercase();
    let (head, _) = lower.split_once("//")?;
    let kind = cortex_app::backend::kind_for_target(Some(head)).filter(|_| !head.is_empty())?;
    kind.schemes().first().copied()
}

/// Refuses a migration whose destination is its source: the same SQLite file however the
/// path is spelled (symlinks, `..`, relative), or the same Postgres database and schema.
pub fn check_not_itself(source: &Storage, target: &Storage) -> Result<(), AdminError> {
    match source.same_store(target.as_ref())? {
        true => Err(AdminError::Usage(format!(
            "--to names the store being migrated, {}, itself; give another store",
            source.describe()
        ))),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_are_told_from_paths() {
        for (text, scheme) in [
            ("mysql://x@y/z", Some("mysql")),
            ("postgresql:/bad", Some("postgresql")),
            ("file:a.db", Some("file")),
            ("a+b.c-d:x", Some("a+b.c-d")),
            ("C:\\data\\a.db", None),
            ("./a:b.db", None),
            ("/tmp/a:b.db", None),
            ("a.db", None),
            ("2x:y", None),
        ] {
            assert_eq!(url_scheme(text), scheme, "{text}");
        }
        assert_eq!(missing_colon("Postgres//h/db"), Some("postgres"));
        assert_eq!(missing_colon("postgresql//h/db"), Some("postgres"));
        assert_eq!(missing_colon("postgres/h.db"), None);
        assert_eq!(missing_colon("//h/db"), None);
    }
}
