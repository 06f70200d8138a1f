//! The application behind the `loopward-demo` and `loopward` binaries: config loading, team
//! assembly, the ledger seam, terminal rendering, the CLI commands and the demo's chapters.
//!
//! This crate is the only one in loopward that prints or reads argv; nothing depends on it.
//!
//! | module | what |
//! |---|---|
//! | [`config`] | `loopward.toml`: parsed strictly, checked as a whole, precise errors |
//! | [`team`] | a [`Runner`](loopward_runner::Runner) from a config: tools, gates, layers |
//! | [`ledger`] | run folders and their `events.jsonl` |
//! | [`timeline`] | a run as a person reads it, printed as the ledger records it |
//! | [`render`] | colour on a terminal, plain text elsewhere |
//! | [`cli`] | the `loopward` commands |
//! | [`demo`] | the eight chapters of `loopward-demo` |

pub mod approver;
pub mod backend;
pub mod cli;
pub mod config;
pub mod demo;
pub mod ledger;
pub mod render;
pub mod team;
pub mod timeline;
