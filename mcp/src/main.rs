//! `cortex-mcp`: serves Cortex over MCP on stdio (the default) or streamable HTTP
//! (`cortex_mcp::entry`).

use std::process::ExitCode;

/// jemalloc with its background purging thread rather than the system allocator: glibc's
/// keeps what a burst of HTTP sessions freed (3,000 abandoned sessions left the process
/// at 6x its size after they expired), while jemalloc returns freed pages to the OS
/// within seconds (docs/RELIABILITY.md).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    cortex_mcp::entry::main()
}
