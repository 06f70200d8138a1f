//! `loopward report [<runs-dir>] [--json] [--html]`: governance figures over all runs, recomputed from
//! the ledgers that verify (strictly, as `loopward verify` checks them).

use super::state::{verify_options, CheckArgs};
use anyhow::Result;
use loopward::config::CONFIG_FILE;
use loopward_term::render::{Printer, Tone};
use std::path::PathBuf;
use std::process::ExitCode;

/// Governance figures over all runs, computed from the ledgers.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward report              # the runs/ folder here, as a table
  loopward report runs --json  # stable JSON, for scripts
  loopward report --html       # also write runs/index.html: every run at a glance
  loopward report --unfinished # also count runs still going

Only ledgers that verify are counted (keyed, every anchor checked); the others are listed as
LEFT OUT with the reason. Exit status: 0 every run verified; 1 some run was left out.")]
pub struct Args {
    /// The folder holding one folder per run.
    #[arg(default_value = "runs")]
    pub runs_dir: PathBuf,
    /// Print stable JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write `<runs-dir>/index.html`: one row per run with a mini swimlane, linking to each
    /// run's `audit.html` (runs that do not verify are marked).
    #[arg(long)]
    pub html: bool,
    /// The config file: its state directory holds the keys.
    #[arg(long, default_value = CONFIG_FILE)]
    pub config: PathBuf,
    /// What is accepted, and the keys and witness to check with.
    #[command(flatten)]
    pub check: CheckArgs,
}

pub(super) fn run(args: &Args) -> Result<ExitCode> {
    let opts = verify_options(&args.config, &args.runs_dir, &args.check)?;
    let report = loopward::ledger::report(&args.runs_dir, &opts)?;
    let text = if args.json {
        report.to_json()
    } else {
        report.to_table()
    };
    let mut out = Printer::stdout();
    out.block(Tone::Plain, &text);
    if args.html {
        let path = loopward::ledger::write_index_html(&args.runs_dir, &opts)?;
        if !args.json {
            out.line(Tone::Dim, format!("wrote {}", path.display()));
        }
    }
    if report.invalid.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::FAILURE)
    }
}
