//! `cortex`: administers the store the MCP server uses (`cortex_cli::entry`).

use std::process::ExitCode;

fn main() -> ExitCode {
    cortex_cli::entry::main()
}
