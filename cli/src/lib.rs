//! The `cortex` command: administration of the store the MCP server uses ([`admin`]:
//! add, search, list, forget, history, stats, doctor, export, import, migrate, reembed).
//! The retrieval benchmarks are not in the product: they are the `cortex-bench` crate.
//! [`cli`] is the command line, [`run`] runs a parsed command. The parts are
//! public so tests and other tools can drive them without the binary.
//!
//! The administration commands read the environment and open the store through
//! `cortex_app` (`ServerConfig`, `open_store`, `build_engine`), so they act on exactly the
//! store and embedder the server would.

pub mod admin;
pub mod cli;
pub mod entry;
pub mod error;
pub mod model;
pub mod run;

pub use error::CommandError;
