//! Reading settings: the one reader of the process environment, the error a bad setting
//! gives, and the value parsers every setting shares (the store's, the server's).

use std::path::PathBuf;

use cortex_core::setting::{SWITCH_WORDS, parse_switch};
use cortex_core::{error::ProviderError, error::StoreError};

/// The one reader of the process environment: every setting the app and the commands use
/// comes through here (or through a lookup a test passes instead), trimmed, with an empty
/// or blank value counting as unset, so `VAR=` in a compose file means "the default".
///
/// `HOME` unset (an MCP host may start the server with a bare environment) reads as the
/// system's home for the user, the one the store's default path is found under, so the
/// local models are looked for beside it, not nowhere.
pub fn env_var(name: &str) -> Option<String> {
    with_system_home(
        name,
        set(&|name| std::env::var(name).ok(), name),
        std::env::home_dir,
    )
}

/// [`env_var`]'s one exception: `HOME`, when unset, is `system_home()`.
pub(crate) fn with_system_home(
    name: &str,
    value: Option<String>,
    system_home: impl FnOnce() -> Option<std::path::PathBuf>,
) -> Option<String> {
    match (name, value) {
        ("HOME", None) => system_home().map(|home| home.display().to_string()),
        (_, value) => value,
    }
}

/// A bad or contradictory setting; the message names the variable and what it accepts.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("{variable}={value:?} is not valid; {expected}")]
    Invalid {
        variable: &'static str,
        value: String,
        expected: String,
    },
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Provider(#[from] ProviderError),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// `get(name)`, trimmed; empty or blank counts as unset.
pub(crate) fn set(get: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    get(name)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// A switch (see [`cortex_core::setting::parse_switch`]).
pub fn parse_bool(variable: &'static str, text: &str) -> Result<bool, ConfigError> {
    parse_switch(text).ok_or_else(|| ConfigError::Invalid {
        variable,
        value: text.to_owned(),
        expected: format!("use {SWITCH_WORDS}"),
    })
}

/// MCP hosts pass `env` values verbatim, without a shell to expand `~`; doing it here lets
/// a config file say `~/.cortex/work.db` and mean it.
pub(crate) fn expand_home(path: &str) -> Result<PathBuf, ConfigError> {
    let rest = match path.strip_prefix("~/") {
        Some(rest) => rest,
        None if path == "~" => "",
        None => return Ok(PathBuf::from(path)),
    };
    let home = std::env::home_dir().ok_or_else(|| ConfigError::Invalid {
        variable: "CORTEX_DB_PATH",
        value: path.to_owned(),
        expected: "no home directory is known to expand ~; give an absolute path".into(),
    })?;
    Ok(home.join(rest))
}
