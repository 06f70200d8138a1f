//! `loopward report [<runs-dir>] [--json] [--html]`: governance figures over all runs, recomputed from
//! the ledgers alone.

use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// Governance figures over all runs, computed from the ledgers.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward report              # the runs/ folder here, as a table
  loopward report runs --json  # stable JSON, for scripts
  loopward report --html       # also write runs/index.html: every run at a glance")]
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
    if args.html {
        let path = loopward::ledger::write_index_html(&args.runs_dir)?;
        if !args.json {
            out.line(
                loopward_term::render::Tone::Dim,
                format!("wrote {}", path.display()),
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
