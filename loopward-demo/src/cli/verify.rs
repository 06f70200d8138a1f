//! `loopward verify <run-dir>`: checks a run's ledger is intact.

use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// Check that a run's ledger is intact.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example:
  loopward verify runs/run-20261130T052616Z-123

Exit status: 0 intact; 1 not intact (the first bad sequence number and what is wrong are named).")]
pub struct Args {
    /// The run's folder (holding events.jsonl).
    pub run_dir: PathBuf,
}

pub(super) fn run(args: &Args) -> Result<ExitCode> {
    crate::ledger::verify_command(&args.run_dir)
}
