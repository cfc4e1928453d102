//! `cortex import`: records written into a store idempotently, from a `cortex export` file
//! or, with `--from`, from where memories live today (ChatGPT's and Claude's data exports,
//! the MCP memory server's `memory.jsonl`, mem0, a basic-memory folder).
//!
//! Every source is turned into the lines of the export format (docs/FORMAT.md) and written
//! by one [`writer::Importer`]: ids and timestamps kept, what is already there skipped.
//! Each file of this module is one concept; docs/ARCHITECTURE.md's module map lists them.

pub mod basic_memory;
pub mod chatgpt;
pub mod claude;
pub mod command;
pub mod cortex;
pub mod foreign;
pub mod graph;
pub mod mcp_memory;
pub mod mem0;
pub mod note;
pub mod source;
pub mod stream;
pub mod writer;
