//! Helpers shared by the CLI's integration tests.

pub mod anthropic_server;
