//! The `cortex` command: the LongMemEval benchmark harness (`cortex bench`), with its
//! parts public so tests and other tools can drive them without the binary.

pub mod admin;
pub mod bench;
pub mod cli;
pub mod error;
pub mod run;

pub use error::{BenchError, CommandError};
