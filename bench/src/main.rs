//! `cortex-bench`: parses the arguments, logs on stderr, runs the benchmark and prints
//! its report.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use cortex_bench::args::BenchArgs;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    let args = BenchArgs::parse();
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn,cortex_bench=info"));
    // Coloured only on a terminal: a run's log redirected to a file keeps no escape codes.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match cortex_bench::run::execute(&args, &cortex_app::env_var).await {
        Ok(text) => {
            if !args.quiet {
                print!("{text}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
