//! `loopward approve|deny <run> <gate>`: answers a run's durable stop-gate.

use crate::config::{Config, CONFIG_FILE};
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::process::ExitCode;

/// Answer a run's pending stop-gate.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward approve run-20261130T052616Z-123 deploy
  loopward deny run-20261130T052616Z-123 deploy --reason \"not on a Friday\"

The pending approval is under .loopward/pending/; `loopward run` resumes the run afterwards and the
approved action runs exactly once.")]
pub struct Args {
    /// The run waiting for approval.
    pub run: String,
    /// The stop-gate (as printed by `loopward run` when it paused).
    pub gate: String,
    /// Why (recorded in the ledger).
    #[arg(long, default_value = "")]
    pub reason: String,
    /// The config file (its workspace holds .loopward/).
    #[arg(long, default_value = CONFIG_FILE)]
    pub config: PathBuf,
}

pub(super) fn run(args: &Args, approve: bool) -> Result<ExitCode> {
    let cfg = Config::load(&args.config)?;
    let _workspace = cfg.workspace_dir(&args.config);
    let verb = if approve { "approve" } else { "deny" };
    bail!(
        "cannot {verb} {} for run {}: this build has no durable stop-gates yet",
        args.gate,
        args.run
    )
}
