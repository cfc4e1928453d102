//! The `cortex` program: parses the command line, sets up logging on stderr and runs the
//! command. Its binaries (`cli/src/main.rs`, and the wheel's in `pypi/`) are one call to
//! [`main`].

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt;

use crate::cli::Cli;

/// Runs `cortex` with the process's arguments and environment: what its binaries do.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn,cortex_cli=info"));
    // Coloured only on a terminal: a log redirected to a file (a benchmark run's, say)
    // keeps no escape codes.
    log_subscriber(filter, std::io::stderr, std::io::stderr().is_terminal()).init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(crate::run::execute(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The log format: plain lines on `writer`, coloured when `ansi`.
fn log_subscriber<W>(filter: EnvFilter, writer: W, ansi: bool) -> impl tracing::Subscriber
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(ansi)
        .finish()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex, PoisonError};

    use super::*;

    /// A writer into a shared buffer, standing for a redirected stderr.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(ansi: bool) -> String {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = log_subscriber(EnvFilter::new("info"), move || writer.clone(), ansi);
        tracing::subscriber::with_default(subscriber, || tracing::warn!(run = 1, "cache miss"));
        let bytes = out.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn the_log_has_colour_codes_only_when_asked_for_a_terminal() {
        let plain = logged(false);
        assert!(
            plain.contains("WARN") && plain.contains("cache miss"),
            "{plain}"
        );
        assert!(!plain.contains('\u{1b}'), "{plain:?}");
        assert!(logged(true).contains('\u{1b}'), "a terminal gets colours");
    }
}
