//! The Cortex MCP server (being built).
