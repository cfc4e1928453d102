//! The server's log: stderr, filtered by `RUST_LOG`, as text lines for a person or JSON
//! lines for a collector (`CORTEX_LOG_FORMAT=json`), each line of a request carrying its
//! request id (the `request` and `tool` spans, see `http` and `server`).

/// The log filter when `RUST_LOG` is unset: rmcp logs every client's `initialize` (and
/// each session's end) at INFO, which is noise in a host's log; its warnings still show.
pub const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One human-readable line per event, coloured on a terminal.
    #[default]
    Text,
    /// One JSON object per event, with its fields and the spans it happened in.
    Json,
}

/// A `CORTEX_LOG_FORMAT` that is neither `text` nor `json`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CORTEX_LOG_FORMAT must be text or json, got {0:?}")]
pub struct LogFormatError(pub String);

impl LogFormat {
    /// Reads `CORTEX_LOG_FORMAT` through `lookup`; unset means text.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, LogFormatError> {
        match lookup("CORTEX_LOG_FORMAT") {
            None => Ok(Self::Text),
            Some(value) => match value.trim().to_ascii_lowercase().as_str() {
                "" | "text" => Ok(Self::Text),
                "json" => Ok(Self::Json),
                _ => Err(LogFormatError(value)),
            },
        }
    }
}

/// Installs the process's subscriber. Logs go to stderr: on stdio, stdout is the MCP
/// channel and one stray line breaks it. Text is coloured only on a terminal: MCP hosts
/// and docker keep stderr in log files.
pub fn init(format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;

    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        // The current span's fields (the request id, the tool, the user) on every line, and
        // the enclosing spans' too: a collector filters on them without parsing text.
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_is_read_and_checked() {
        let read = |value: Option<&str>| LogFormat::from_lookup(|_| value.map(str::to_owned));
        assert_eq!(read(None), Ok(LogFormat::Text));
        assert_eq!(read(Some("")), Ok(LogFormat::Text));
        assert_eq!(read(Some(" JSON ")), Ok(LogFormat::Json));
        assert_eq!(read(Some("text")), Ok(LogFormat::Text));
        assert_eq!(
            read(Some("logfmt")),
            Err(LogFormatError("logfmt".to_owned()))
        );
    }
}
