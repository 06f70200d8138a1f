//! `loopward approve|deny <run> <gate>`: answers a run's durable stop-gate.

use anyhow::{bail, Result};
use loopward::config::{Config, CONFIG_FILE};
use loopward_runner::layers::stopgate::{self, find_pending, list_pending, pending_dir};
use loopward_term::render::{Printer, Tone};
use std::path::PathBuf;
use std::process::ExitCode;

/// Answer a run's pending stop-gate.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward approve run-20261130T052616Z-123 deploy
  loopward deny run-20261130T052616Z-123 deploy

A `durable` stop-gate writes a pending approval under .loopward/pending/ and ends the run
`awaiting_approval` (exit status 7). Answer it here, then `loopward run --resume <run>`: an
approved action runs exactly once; a denied one is refused.")]
pub struct Args {
    /// The run waiting for approval.
    pub run: String,
    /// The stop-gate's name (as `loopward run` printed it when the run paused).
    pub gate: String,
    /// The config file (its workspace holds .loopward/pending/).
    #[arg(long, default_value = CONFIG_FILE)]
    pub config: PathBuf,
}

pub(super) fn run(args: &Args, approve: bool) -> Result<ExitCode> {
    let cfg = Config::load(&args.config)?;
    let dir = pending_dir(&cfg.workspace_dir(&args.config));
    let found = find_pending(&dir, &args.run, &args.gate)?;
    if found.is_empty() {
        let waiting: Vec<String> = list_pending(&dir)?
            .into_iter()
            .map(|p| format!("{} {} ({})", p.run, p.gate, p.summary))
            .collect();
        bail!(
            "no approval of gate {:?} is pending for run {}; pending now: {}",
            args.gate,
            args.run,
            if waiting.is_empty() {
                "none".to_string()
            } else {
                waiting.join("; ")
            }
        );
    }
    let mut out = Printer::stdout();
    for p in found {
        let decided = if approve {
            stopgate::approve(&dir, &p.id)?
        } else {
            stopgate::deny(&dir, &p.id)?
        };
        let verb = if approve { "approved" } else { "denied" };
        out.line(
            Tone::Ok,
            format!(
                "{verb} {}: {} ({})",
                decided.id, decided.summary, decided.gate
            ),
        );
    }
    out.line(
        Tone::Dim,
        format!("resume the run: loopward run --resume {}", args.run),
    );
    Ok(ExitCode::SUCCESS)
}
