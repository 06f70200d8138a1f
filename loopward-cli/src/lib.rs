//! The commands behind the `loopward` binary. This library exists for the binary and its tests;
//! embedders use the `loopward` crate instead.

pub mod cli;
mod error_text;
pub mod heartbeat;
pub mod observe;

pub use error_text::error_text;
