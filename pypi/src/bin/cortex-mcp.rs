//! The wheel's `cortex-mcp`: the server (`cortex_mcp::entry`), with its allocator.

use std::process::ExitCode;

/// jemalloc, as the server's own binary has it (mcp/src/main.rs says why).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    cortex_mcp::entry::main()
}
