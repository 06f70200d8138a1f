//! `loopward verify <run-dir>`: checks a run's ledger is intact.

use anyhow::Result;
use loopward_runner::audit::verify;
use loopward_term::render::{Printer, Tone};
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
    let mut out = Printer::stdout();
    match verify(&args.run_dir, None) {
        Ok(ok) => {
            let anchor = if ok.anchored {
                "anchored in index.jsonl"
            } else {
                "NOT anchored (the run did not finish, or its anchor is gone: truncation cannot be ruled out)"
            };
            out.line(
                Tone::Ok,
                format!(
                    "{}: intact — {} records, {} chain, final hash {}, {anchor}",
                    ok.run, ok.final_seq, ok.mac, ok.final_hash
                ),
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            out.line(Tone::Refusal, format!("NOT intact: {e}"));
            if let Some(seq) = e.first_bad_seq() {
                out.line(Tone::Plain, format!("first bad sequence number: {seq}"));
            }
            Ok(ExitCode::FAILURE)
        }
    }
}
