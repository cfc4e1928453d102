//! A store's contents as an export file: the JSON Lines format `cortex import` reads back
//! ([`format`], docs/FORMAT.md), one user's lines read a page at a time ([`pager`]), and the
//! writer of a whole export as JSON Lines or markdown ([`export`]).
//!
//! It lives here rather than in the `cortex` command so every application writes the same
//! bytes: `cortex export` writes an [`Export`] to a file, the web page streams its chunks,
//! and `cortex import` and `cortex migrate` read and write the same [`Line`]s.

pub mod export;
pub mod format;
pub mod pager;

pub use export::{Chunk, Export, ExportError, ExportFormat, export};
pub use format::{FORMAT_NAME, FORMAT_VERSION, Header, Line, MARKDOWN_TITLE, MemoryLine, Owned};
pub use pager::{PAGE, Pager};
