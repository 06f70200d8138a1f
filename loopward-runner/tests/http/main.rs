//! The HTTP backends (OpenAI-compatible, Anthropic Messages) against canned servers on
//! 127.0.0.1, and an agent's turn over them: one test binary for the area.
#![cfg(feature = "http")]

mod agent;
mod anthropic;
#[path = "../one_agent/mod.rs"]
mod one_agent;
mod openai;
mod support;
