//! # loopward
//!
//! Run LLM agent teams inside an outer loop that keeps them within their rules. This crate is
//! what an embedder adds: the `loopward.toml` schema ([`config`]), the one place a config becomes
//! a governed [`Runner`](loopward_runner::Runner) ([`team`]: tools → policy gates → layers, every
//! configured concern on), the ledger seam ([`ledger`]), and re-exports of
//! [`loopward_core`] (the vocabulary), [`loopward_runner`] (the runner, layers, gates, audit) and
//! [`loopward_pages`] (`audit.html`, `runs/index.html`).
//!
//! | module | what |
//! |---|---|
//! | [`config`] | `loopward.toml`: parsed strictly, checked as a whole, precise errors |
//! | [`team`] | a governed [`Runner`](loopward_runner::Runner) from a config |
//! | [`backend`] | the model backend a config names (fake; `http`, `llama` behind features) |
//! | [`contain`] | the secrets masked in every record, and what sandboxed commands read and inherit |
//! | [`ledger`] | run folders and their `events.jsonl` |
//! | [`state`] | loopward's state directory (outside the workspace): ledger keys, sealed approvals and overrides |
//!
//! | feature | adds |
//! |---|---|
//! | `http` | the OpenAI-compatible and Anthropic HTTP backends |
//! | `otel` | OpenTelemetry export of the runner's spans |
//! | `llama` | local GGUF models through `loopward-llama` (compiles llama.cpp) |
//! | `cuda` | `llama` built with CUDA |
//!
//! A team from its config, in a few lines (see [`Team`]):
//!
//! ```no_run
//! # async fn run() -> anyhow::Result<()> {
//! let team = loopward::Team::from_config("loopward.toml")?.env(|k| std::env::var(k).ok());
//! // The task is what the person at the keyboard asked for (only a `Person` makes their words).
//! let task = loopward::core::Person::at_the_keyboard().says("Write a hello file under src/");
//! let report = team.run(task).await?;
//! println!("{}: {} turns", report.status.label(), report.turns);
//! # Ok(()) }
//! ```

pub mod backend;
pub mod config;
pub mod contain;
pub mod ledger;
pub mod state;
pub mod team;

pub use loopward_core as core;
/// Local GGUF models through llama.cpp (feature `llama`): the `loopward-llama` crate.
#[cfg(feature = "llama")]
pub use loopward_llama as llama;
pub use loopward_pages as pages;
pub use loopward_runner as runner;
pub use team::Team;

/// The README's code, compiled and checked as a doctest so it cannot rot.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
