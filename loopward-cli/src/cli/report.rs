//! `loopward report [<runs-dir>] [--json]`: governance figures over all runs, recomputed from
//! the ledgers alone.

use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// Governance figures over all runs, computed from the ledgers.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward report              # the runs/ folder here, as a table
  loopward report runs --json  # stable JSON, for scripts")]
pub struct Args {
    /// The folder holding one folder per run.
    #[arg(default_value = "runs")]
    pub runs_dir: PathBuf,
    /// Print stable JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn run(args: &Args) -> Result<ExitCode> {
    let report = loopward::ledger::report(&args.runs_dir)?;
    let text = if args.json {
        report.to_json()
    } else {
        report.to_table()
    };
    let mut out = loopward_term::render::Printer::stdout();
    out.block(loopward_term::render::Tone::Plain, &text);
    Ok(ExitCode::SUCCESS)
}
