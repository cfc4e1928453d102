//! One place that wires a Cortex application: the configuration read from the
//! environment ([`ServerConfig`], every variable in [`ENV_VARS`]), the store it names
//! ([`open_store`]) and the engine over it ([`build_engine`]). The MCP server and the
//! `cortex` command both build through here, so an admin command acts on exactly the store
//! and embedder the server would, and neither application depends on the other. The export
//! format and its writer ([`transfer`]) live here too, so the command and the web page write
//! the same files.

pub mod backend;
pub mod config;
pub mod dates;
pub mod engine;
pub mod env;
pub mod filters;
pub mod stats;
pub mod structure;
pub mod transfer;

pub use backend::{Backend, BackendKind, Footprint, Inspection, Presence, Storage};
pub use config::{
    ConfigError, ENV_VARS, HttpAuth, OAuthSettings, ServerConfig, StoreSettings, env_var,
};
pub use engine::{
    Engine, EngineError, build_engine, build_engine_from_env, honour_store, open_key_store,
    open_store,
};
pub use filters::{FilterError, FilterText};
pub use stats::{MemoryStats, memory_stats};
pub use structure::{EntityArg, EventArg, RelationArg, StructureArgs};
