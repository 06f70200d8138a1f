//! `loopward approve|deny <run> <gate>`: answers a run's durable stop-gate — its sealed record in
//! loopward's state directory (`<state>/pending/`), or, with `--restate`, the awakeable a run on
//! Restate waits on.

use anyhow::{bail, Result};
use loopward::config::{Config, CONFIG_FILE};
use loopward_runner::layers::stopgate::{DurableError, PendingState};
use loopward_runner::{Clock, SystemClock};
use loopward_term::render::{Printer, Tone};
use std::path::PathBuf;
use std::process::ExitCode;

/// Answer a run's pending stop-gate.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward approve run-20261130T052616Z-123 deploy
  loopward deny run-20261130T052616Z-123 deploy

A `durable` stop-gate writes a sealed pending approval in loopward's state directory (outside
the workspace; a record any other process wrote or edited is refused) and ends the run
`awaiting_approval` (exit status 7). Answer it here, then `loopward run --resume <run>`: an
approved action runs exactly once; a denied one is refused. Of racing `approve` and `deny`
calls exactly one decides; the others say who decided and when, and exit 1.

With --restate, the run executes on Restate (loopward-restate) and waits on an awakeable while no
worker holds it; the verdict goes to the Restate server, from any machine that reaches it, and
the run goes on on whichever worker Restate picks:
  loopward approve moves-1 turn:reviewer --restate http://restate.internal:8080")]
pub struct Args {
    /// The run waiting for approval.
    pub run: String,
    /// The stop-gate's name (as `loopward run` printed it when the run paused).
    pub gate: String,
    /// The config file (its state directory holds the pending approvals).
    #[arg(long, default_value = CONFIG_FILE)]
    pub config: PathBuf,
    /// The run executes on Restate: its ingress (http://HOST:8080). No config is read.
    #[arg(long, value_name = "URL")]
    pub restate: Option<String>,
    /// The Restate admin API, where the pending approval is read (default: the ingress's host,
    /// port 9070).
    #[arg(long, value_name = "URL", requires = "restate")]
    pub restate_admin: Option<String>,
    /// Who decides, as the record and the ledger keep it (default: the login name).
    #[arg(long)]
    pub by: Option<String>,
}

#[cfg(feature = "restate")]
async fn run_restate(args: &Args, ingress: &str, approve: bool) -> Result<ExitCode> {
    let run = loopward_core::RunId::new(&args.run)
        .ok_or_else(|| anyhow::anyhow!("{:?} is not a run id", args.run))?;
    let server = super::restate::Restate::new(ingress, args.restate_admin.as_deref())?;
    let by = args.by.clone().unwrap_or_else(|| {
        if approve {
            "loopward approve".into()
        } else {
            "loopward deny".into()
        }
    });
    let decided = server
        .decide(&run, approve, &by, |w| {
            if w.approval.gate != args.gate {
                bail!(
                    "run {} waits at stop-gate {:?} ({}), not {:?}; nothing was decided",
                    args.run,
                    w.approval.gate,
                    w.approval.summary,
                    args.gate
                );
            }
            Ok(())
        })
        .await?;
    let verb = if approve { "approved" } else { "denied" };
    let mut out = Printer::stdout();
    out.line(
        Tone::Ok,
        format!(
            "{verb} {}: {} ({})",
            decided.id, decided.summary, decided.gate
        ),
    );
    out.line(
        Tone::Dim,
        "Restate holds the verdict; the run goes on as soon as a worker is up",
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "restate"))]
async fn run_restate(_: &Args, _: &str, _: bool) -> Result<ExitCode> {
    bail!("this loopward was built without Restate (the `restate` feature of loopward-cli); build it with default features to answer runs on Restate")
}

pub(super) async fn run(args: &Args, approve: bool) -> Result<ExitCode> {
    if let Some(ingress) = &args.restate {
        return run_restate(args, ingress, approve).await;
    }
    let cfg = Config::load(&args.config)?;
    let custody = super::state::open(&cfg, &args.config)?;
    let store = custody.approvals()?;
    let mut out = Printer::stdout();
    let scan = store.scan();
    // A record no stop-gate or `loopward approve` wrote (forged, edited, malformed) is refused
    // with the reason; it never blocks the others.
    for s in &scan.skipped {
        out.line(Tone::Refusal, format!("refused {}: {}", s.file, s.why));
    }
    let mine: Vec<_> = scan
        .records
        .iter()
        .filter(|r| r.run.as_str() == args.run && r.gate == args.gate)
        .collect();
    let waiting: Vec<_> = mine
        .iter()
        .filter(|r| r.state == PendingState::Pending)
        .collect();
    if waiting.is_empty() {
        if let Some(done) = mine.last() {
            bail!(
                "run {} at gate {:?}: already decided: {}; a decision cannot be changed. Resume the run: loopward run --resume {}",
                args.run,
                args.gate,
                done.decision_text(),
                args.run
            );
        }
        let others: Vec<String> = scan
            .records
            .iter()
            .filter(|p| p.state == PendingState::Pending)
            .map(|p| format!("{} {} ({})", p.run, p.gate, p.summary))
            .collect();
        bail!(
            "no approval of gate {:?} is pending for run {} in {}; pending now: {}",
            args.gate,
            args.run,
            store.dir().display(),
            if others.is_empty() {
                "none".to_string()
            } else {
                others.join("; ")
            }
        );
    }
    let by = args
        .by
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| {
            if approve {
                "loopward approve".into()
            } else {
                "loopward deny".into()
            }
        });
    let now = SystemClock.now_millis();
    let verb = if approve { "approved" } else { "denied" };
    let mut code = ExitCode::SUCCESS;
    for p in waiting {
        let decided = if approve {
            store.approve(&p.id, &by, now)
        } else {
            store.deny(&p.id, &by, now)
        };
        match decided {
            Ok(d) => out.line(
                Tone::Ok,
                format!("{verb} {}: {} ({}) by {by}", d.id, d.summary, d.gate),
            ),
            // Another `approve` or `deny` decided first: exactly one decision stands.
            Err(DurableError::AlreadyDecided { decision, .. }) => {
                out.line(
                    Tone::Refusal,
                    format!("{}: already decided: {decision}; nothing changed", p.id),
                );
                code = ExitCode::FAILURE;
            }
            Err(e) => return Err(e.into()),
        }
    }
    out.line(
        Tone::Dim,
        format!("resume the run: loopward run --resume {}", args.run),
    );
    Ok(code)
}
