//! The Cortex MCP server: the memory engine's tools for AI agents, over stdio or
//! streamable HTTP.
//!
//! Six tools: `memorize`, `recall`, `recall_about`, `recall_timeline`, `list_memories` and
//! `forget`. Configuration is environment-only ([`ServerConfig`], [`ENV_VARS`]); the engine
//! is built from it lazily on the first tool call ([`LazyEngine`]), so a host can start the
//! server and list its tools before any key is set. Every refusal or failure of a call is a
//! tool result with `isError: true` and an actionable message ([`ToolError`]).
//! `docs/CONFIGURATION.md` shows how to run it and configure MCP hosts.

pub use cortex_app::{config, dates};

pub mod answers;
pub mod args;
pub mod auth;
pub mod drain;
pub mod engine;
pub mod entry;
pub mod error;
pub mod hosts;
pub mod http;
pub mod http_screen;
pub mod inbound;
pub mod logging;
pub mod metrics;
pub mod oauth;
pub mod origin;
pub mod output;
pub mod prompts;
pub mod rate;
pub mod read_error;
pub mod resource_uri;
pub mod resources;
pub mod server;
pub mod sessions;
pub mod stdio;
pub mod tools;
pub mod web;

pub use auth::{BearerToken, Credentials, TokenError};
pub use config::{ConfigError, ENV_VARS, ServerConfig, Storage, StoreSettings};
pub use engine::{Engine, EngineError, LazyEngine, build_engine, build_engine_from_env};
pub use error::{Tool, ToolError};
pub use hosts::AllowedHosts;
pub use http::{HttpError, HttpPolicy, MCP_PATH};
pub use server::{INSTRUCTIONS, ServeError, serve_stdio};
pub use tools::CortexServer;
