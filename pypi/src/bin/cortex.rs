//! The wheel's `cortex`: the administration command (`cortex_cli::entry`).

use std::process::ExitCode;

fn main() -> ExitCode {
    cortex_cli::entry::main()
}
