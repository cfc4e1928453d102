//! Model providers for Cortex, behind core's [`LLMProvider`](cortex_core::LLMProvider).

pub mod fake;

pub use fake::FakeProvider;
