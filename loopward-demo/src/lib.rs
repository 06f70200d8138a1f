//! The offline story behind `cargo run -p loopward-demo`: nine chapters, each a real run of a
//! governed team on the scripted fake backend, every figure read back from its ledger.
//!
//! This crate prints; nothing depends on it.

pub mod demo;
