//! `loopward key show|rotate`: the ledger keys in loopward's state directory.

use anyhow::{Context, Result};
use loopward::config::{Config, CONFIG_FILE};
use loopward_term::render::{Printer, Tone};
use std::path::PathBuf;
use std::process::ExitCode;

/// Show or rotate the ledger keys.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward key show
  loopward key rotate

Rotating adds a new key and makes it current: new runs, anchors, overrides and approvals use it.
Old keys stay, so the runs chained under them still verify. docs/ledger.md says how to retire a
key and what a verifier elsewhere needs.")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
    /// The config file (its workspace's state directory holds the keys).
    #[arg(long, global = true, default_value = CONFIG_FILE)]
    pub config: PathBuf,
}

/// `key` sub-commands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List the keys held and which one is current.
    #[command(after_help = "Example:\n  loopward key show")]
    Show,
    /// Add a new key and make it current (old keys stay, to verify old runs).
    #[command(after_help = "Example:\n  loopward key rotate")]
    Rotate,
}

pub(super) fn run(args: &Args) -> Result<ExitCode> {
    let cfg = Config::load(&args.config)?;
    let custody = super::state::open(&cfg, &args.config)?;
    let dir = custody.state().root().join("keys");
    let mut out = Printer::stdout();
    let ring = match args.action {
        Action::Show => custody.keys().clone(),
        Action::Rotate => {
            let old = custody.keys().current().map(|k| k.id().clone());
            let ring =
                custody.keys().clone().rotate().with_context(|| {
                    format!("cannot rotate the ledger key in {}", dir.display())
                })?;
            let new = ring
                .current()
                .map(|k| k.id().to_string())
                .unwrap_or_default();
            out.line(
                Tone::Ok,
                format!(
                    "rotated: {new} is now current{}",
                    old.map(|o| format!(
                        "; {o} is kept, so the runs chained under it still verify"
                    ))
                    .unwrap_or_default()
                ),
            );
            ring
        }
    };
    let current = ring.current().map(|k| k.id().clone());
    for k in ring.keys() {
        let mark = if Some(k.id()) == current.as_ref() {
            "current"
        } else {
            "kept for verifying"
        };
        out.line(
            Tone::Plain,
            format!(
                "{}  {mark}  {}",
                k.id(),
                dir.join(format!("{}.key", k.id())).display()
            ),
        );
    }
    if ring.keys().next().is_none() {
        out.line(
            Tone::Dim,
            format!(
                "no ledger keys in {} ([ledger] chain = \"sha256\": ledgers are keyless)",
                dir.display()
            ),
        );
    }
    Ok(ExitCode::SUCCESS)
}
