//! `loopward report [<runs-dir>] [--json] [--html]`: governance figures over all runs, recomputed from
//! the ledgers that verify (strictly, as `loopward verify` checks them).

use super::state::{verify_options, CheckArgs};
use anyhow::Result;
use loopward::config::{Config, CONFIG_FILE};
use loopward_term::render::{Printer, Tone};
use std::path::PathBuf;
use std::process::ExitCode;

/// Governance figures over all runs, computed from the ledgers.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward report              # the config's runs folder (runs/ by default), as a table
  loopward report runs --json  # stable JSON, for scripts
  loopward report --html       # also write runs/index.html: every run at a glance
  loopward report --unfinished # also count runs still going

Only ledgers that verify are counted (keyed, every anchor checked); the others are listed as
LEFT OUT with the reason. Exit status: 0 every run verified; 1 some run was left out.")]
pub struct Args {
    /// The folder holding one folder per run (default: the config's `run.runs_dir`, or `runs`
    /// when there is no config).
    pub runs_dir: Option<PathBuf>,
    /// The config whose `run.runs_dir` to report on, and whose state directory holds the keys
    /// (default: ./loopward.toml when present).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print stable JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write `<runs-dir>/index.html`: one row per run with a mini swimlane, linking to each
    /// run's `audit.html` (runs that do not verify are marked).
    #[arg(long)]
    pub html: bool,
    /// What is accepted, and the keys and witness to check with.
    #[command(flatten)]
    pub check: CheckArgs,
}

/// The runs folder: as given, else the config's `run.runs_dir` (beside the config's
/// workspace), else `runs`.
fn runs_dir(args: &Args) -> Result<PathBuf> {
    if let Some(dir) = &args.runs_dir {
        return Ok(dir.clone());
    }
    let config = match &args.config {
        Some(c) => c.clone(),
        None => {
            let here = PathBuf::from(CONFIG_FILE);
            if !here.is_file() {
                return Ok(PathBuf::from("runs"));
            }
            here
        }
    };
    let cfg = Config::load(&config)?;
    let dir = cfg.workspace_dir(&config).join(&cfg.run.runs_dir);
    // `./runs` reads as `runs`.
    Ok(dir
        .strip_prefix(".")
        .map_or_else(|_| dir.clone(), PathBuf::from))
}

pub(super) fn run(args: &Args) -> Result<ExitCode> {
    let runs_dir = runs_dir(args)?;
    if !runs_dir.is_dir() {
        anyhow::bail!(
            "there is no runs folder at {}\nwhat to do: run the team first (`loopward run`), or name the folder that holds the runs: `loopward report <runs-dir>`",
            runs_dir.display()
        );
    }
    let config = args
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(CONFIG_FILE));
    let opts = verify_options(&config, &runs_dir, &args.check)?;
    let report = loopward::ledger::report(&runs_dir, &opts)?;
    let text = if args.json {
        report.to_json()
    } else {
        report.to_table()
    };
    let mut out = Printer::stdout();
    out.block(Tone::Plain, &text);
    if args.html {
        let path = loopward::ledger::write_index_html(&runs_dir, &opts)?;
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
