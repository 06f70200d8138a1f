//! The `loopward` command line: parsed by clap into flag-for-flag arguments, one module per
//! command, each returning the process exit code.
//!
//! ```
//! use clap::Parser;
//! use loopward_cli::cli::{Cli, Command};
//! let cli = Cli::try_parse_from(["loopward", "verify", "runs/r1"]).unwrap();
//! assert!(matches!(cli.command, Command::Verify(_)));
//! assert!(Cli::try_parse_from(["loopward", "run", "--backend", "carrier-pigeon"]).is_err());
//! ```

pub mod approve;
pub mod calibrate;
pub mod gates;
pub mod hook;
mod hook_install;
pub mod init;
pub mod override_cmd;
mod recorded;
pub mod replay;
pub mod report;
pub mod run;
pub mod sandbox;
pub mod say;
pub mod verify;

pub use run::exit_code;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// loopward: run LLM agent teams inside an outer loop that keeps them within their rules.
#[derive(Debug, Parser)]
#[command(
    name = "loopward",
    version,
    after_help = "Examples:\n  loopward init && loopward run\n  loopward report runs\n  loopward verify runs/<run-id>\n\nEvery command has --help with an example."
)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented starter loopward.toml and a matching fake script.
    Init(init::Args),
    /// Run the configured team on a task.
    Run(run::Args),
    /// Approve a run's pending stop-gate, so the run can resume.
    Approve(approve::Args),
    /// Deny a run's pending stop-gate.
    Deny(approve::Args),
    /// Grant, list or revoke one-shot overrides of territories.
    Override(override_cmd::Args),
    /// List, add or remove gates in loopward.toml.
    Gates(gates::Args),
    /// Check that a run's ledger is intact.
    Verify(verify::Args),
    /// Governance figures over all runs, computed from the ledgers.
    Report(report::Args),
    /// How often a candidate config's gates would have fired on recorded history.
    Calibrate(calibrate::Args),
    /// Re-run a recorded run offline and check every decision comes out the same.
    Replay(replay::Args),
    /// Answer agent-tool hooks (Claude Code) with the loopward.toml policy.
    Hook(hook::Args),
    /// Run a command in the kernel sandbox of one agent.
    Sandbox(sandbox::Args),
    /// Say something to a running run (taken at its next turn boundary).
    Say(say::Args),
}

/// Runs a parsed command line; errors are printed by the binary.
pub async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Init(a) => init::run(&a),
        Command::Run(a) => run::run(a).await,
        Command::Approve(a) => approve::run(&a, true).await,
        Command::Deny(a) => approve::run(&a, false).await,
        Command::Override(a) => override_cmd::run(a),
        Command::Gates(a) => gates::run(a),
        Command::Verify(a) => verify::run(&a),
        Command::Report(a) => report::run(&a),
        Command::Calibrate(a) => calibrate::run(&a),
        Command::Replay(a) => replay::run(a).await,
        Command::Hook(a) => hook::run(&a),
        Command::Sandbox(a) => Ok(sandbox::run(&a)),
        Command::Say(a) => say::run(&a),
    }
}
