//! Adapter tests against a local mock HTTP server (wiremock on 127.0.0.1). No test
//! reaches a real model or the internet.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

mod anthropic;
mod common;
mod config;
mod gemini;
mod openai;
mod rerank;
mod retry;
