//! `loopward say <run> "…"`: a person's message into a running (or paused) run, through the
//! workspace's inbox (`.loopward/inbox/<run>/`, a control folder no agent can write), sealed
//! under the ledger key. The run
//! picks it up at its next turn boundary and records it as a human message.

use anyhow::{bail, Context, Result};
use loopward::config::{Config, CONFIG_FILE};
use loopward::ledger;
use loopward_core::{Person, RunId};
use loopward_runner::{Clock, SystemClock};
use loopward_term::render::{Printer, Tone};
use std::path::PathBuf;
use std::process::ExitCode;

/// Say something to a running run.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example:
  loopward say run-20261130T052616Z-123 \"Also add a test for the empty case.\"

The message waits in .loopward/inbox/<run>/ (a control folder: no agent's tool or sandboxed
command can write it), sealed under the ledger key (a file put there any other way is refused). The run takes it at its next turn boundary, records it in the ledger as a
human message (which starts a new turn for the sprawl gate) and gives it to the agent that acts
next; if that turn did not hand off, the same agent goes on to answer you. A run paused for an
approval takes it when it is resumed. A finished run is refused.")]
pub struct Args {
    /// The run to speak to.
    pub run: String,
    /// What you say.
    pub message: String,
    /// The config file (its workspace holds the runs and .loopward/inbox/).
    #[arg(long, default_value = CONFIG_FILE)]
    pub config: PathBuf,
}

pub(super) fn run(args: &Args) -> Result<ExitCode> {
    let cfg = Config::load(&args.config)?;
    let workspace = cfg.workspace_dir(&args.config);
    let runs_dir = workspace.join(&cfg.run.runs_dir);
    let id = RunId::new(&args.run).with_context(|| {
        format!(
            "{:?} is not a run id: use letters, digits, '-' and '_'",
            args.run
        )
    })?;
    let dir = ledger::run_dir(&runs_dir, &id);
    if !dir.join(ledger::EVENTS_FILE).exists() {
        bail!(
            "there is no run {id} in {}: nothing to say it to; start one with `loopward run --task \"…\"`",
            runs_dir.display()
        );
    }
    if let Ok(journal) = ledger::journal(&dir) {
        if let Some(status) = journal.finished() {
            bail!(
                "run {id} has finished ({}); nothing more reaches it. Start a new run with your message as its task: `loopward run --task \"…\"`",
                status.label()
            );
        }
    }
    // Sealed under the ledger key, as the run expects (a file written any other way is refused).
    super::state::open(&cfg, &args.config)?
        .inbox(&workspace)?
        // The person at this terminal typed the message: this command talks to a person.
        .say(
            &id,
            &Person::at_the_keyboard().says(args.message.as_str()),
            SystemClock.now_millis(),
        )
        .with_context(|| format!("cannot send the message to run {id}"))?;
    let mut out = Printer::stdout();
    out.line(
        Tone::Ok,
        format!("said to run {id}: it reaches the run at its next turn boundary"),
    );
    out.line(
        Tone::Dim,
        format!(
            "waiting in {}; recorded in the ledger as a human message when taken",
            workspace
                .join(loopward_runner::inbox::INBOX_DIR)
                .join(id.as_str())
                .display()
        ),
    );
    Ok(ExitCode::SUCCESS)
}
