//! The Restate workflow that runs loopward runs: one workflow per run id.

use crate::journal::{self, Journal, PENDING_STATE};
use crate::ledger::ReplayLedger;
use crate::wire::{PendingApproval, RunSummary, StartRun, Waiting};
use loopward::state::Custody;
use loopward_core::{Person, RunId};
use loopward_runner::audit::{LedgerOptions, EVENTS_FILE};
use loopward_runner::{Clock, SystemClock};
use loopward_runner::{RunSpec, Runner};
use restate_sdk::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;

/// The workflow's name as Restate knows it: runs are at `<ingress>/LoopwardRun/<run-id>/…`.
pub const WORKFLOW: &str = "LoopwardRun";

/// Runs loopward runs as Restate workflows, keyed by run id.
///
/// Handlers: `run` (the run itself, [`StartRun`] → [`RunSummary`]) and `pending` (shared:
/// the approval it waits for). A verdict resolves the run's awakeable at the ingress
/// ([`crate::ingress::Ingress::decide`]), which needs no worker.
#[derive(Clone)]
pub struct LoopwardRunService {
    inner: Arc<Inner>,
}

struct Inner {
    runner: Runner,
    runs_dir: PathBuf,
    ledger: Ledgers,
}

/// How a run's ledger is opened.
enum Ledgers {
    /// With these options, always.
    Options(LedgerOptions),
    /// Under the custody's keys: a new ledger under the current key, a reopened one under the
    /// key its first record names (an older key, after `loopward key rotate`).
    Custody(Custody, Arc<dyn Clock>),
}

impl Ledgers {
    fn options(&self, runs_dir: &std::path::Path, run: &RunId) -> Result<LedgerOptions, String> {
        match self {
            Self::Options(o) => Ok(o.clone()),
            Self::Custody(c, clock) => {
                let run_dir = runs_dir.join(run.as_str());
                let opts = if run_dir.join(EVENTS_FILE).exists() {
                    c.reopen_options(&run_dir, clock.clone())
                } else {
                    c.ledger_options(runs_dir, clock.clone())
                };
                opts.map_err(|e| format!("the ledger of run {run}: {e:#}"))
            }
        }
    }
}

impl std::fmt::Debug for LoopwardRunService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopwardRunService")
            .field("runner", &self.inner.runner)
            .field("runs_dir", &self.inner.runs_dir)
            .finish_non_exhaustive()
    }
}

impl LoopwardRunService {
    /// Serves `runner`'s runs, with their ledgers under `runs_dir` (on storage every worker
    /// shares) opened with `ledger` (its key and durability).
    pub fn new(runner: Runner, runs_dir: impl Into<PathBuf>, ledger: LedgerOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                runner,
                runs_dir: runs_dir.into(),
                ledger: Ledgers::Options(ledger),
            }),
        }
    }

    /// Serves `runner`'s runs with their ledgers keyed as `loopward run` keys them: chained
    /// under `custody`'s current key (a run reopened on another worker, or after `loopward key
    /// rotate`, under the key its ledger names), anchored with the index head kept in the
    /// state directory and copied to its witness; `loopward verify` checks them strictly. Get
    /// the custody from the facade ([`loopward::Team::find_custody`]) and give every worker
    /// the same state directory. Stamped by the system clock.
    pub fn keyed(runner: Runner, runs_dir: impl Into<PathBuf>, custody: Custody) -> Self {
        Self::keyed_with_clock(runner, runs_dir, custody, Arc::new(SystemClock))
    }

    /// [`LoopwardRunService::keyed`], with records stamped by `clock`.
    pub fn keyed_with_clock(
        runner: Runner,
        runs_dir: impl Into<PathBuf>,
        custody: Custody,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                runner,
                runs_dir: runs_dir.into(),
                ledger: Ledgers::Custody(custody, clock),
            }),
        }
    }
}

#[restate_sdk::workflow(name = "LoopwardRun")]
impl LoopwardRunService {
    /// Runs the run to its end.
    #[handler]
    async fn run(
        &self,
        ctx: WorkflowContext<'_>,
        start: Json<StartRun>,
    ) -> Result<Json<RunSummary>, HandlerError> {
        let start = start.into_inner();
        let run = RunId::new(ctx.key()).ok_or_else(|| {
            TerminalError::new_with_code(
                400,
                format!(
                    "the workflow key {:?} is not a run id (letters, digits, '-', '_', '.')",
                    ctx.key()
                ),
            )
        })?;
        // Another worker still holding the ledger, or an IO error: retried by Restate.
        // A key this worker does not hold (yet): retried too, until the key file is back.
        let opts = self
            .inner
            .ledger
            .options(&self.inner.runs_dir, &run)
            .map_err(HandlerError::from)?;
        let ledger = ReplayLedger::open(&self.inner.runs_dir, &run, opts)
            .map_err(|e| HandlerError::from(e.to_string()))?;
        let (journal, asks) = Journal::new(ledger.clone());
        // The start request is the run's task channel, as argv is the CLI's: the application
        // that calls the ingress sends what its person asked for (journaled by Restate).
        let task = Person::at_the_keyboard().says(start.task);
        let spec = RunSpec::new(run.clone(), task, start.first, ledger.clone())
            .with_audit_location(ledger.ledger().run_dir());
        let runner = self.inner.runner.clone();
        // The run's layers find the journal on the run itself (no task-local).
        let seeded = runner.run_seeded(spec, move |ext| {
            ext.get_or_insert_with(|| journal);
        });
        let report = journal::drive(&ctx, asks, seeded).await?;
        let finished = ctx
            .run(|| {
                let ledger = ledger.clone();
                async move {
                    ledger
                        .ledger()
                        .finish()
                        .map(|f| Json((f.final_seq, f.final_hash)))
                        .map_err(|e| HandlerError::from(e.to_string()))
                }
            })
            .name("finish ledger")
            .await?
            .into_inner();
        Ok(Json(RunSummary {
            status: report.status,
            turns: report.turns,
            usage: report.usage,
            final_text: report.final_text,
            records: finished.0,
            final_hash: finished.1,
        }))
    }

    /// The approval the run waits for, if any.
    #[handler]
    async fn pending(
        &self,
        ctx: SharedWorkflowContext<'_>,
    ) -> Result<Json<Option<PendingApproval>>, HandlerError> {
        let waiting = ctx.get::<Json<Waiting>>(PENDING_STATE).await?;
        Ok(Json(waiting.map(|w| w.into_inner().approval)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopward_runner::audit::KeyRing;

    /// A new run takes the current key; a run reopened after a rotation keeps the key its
    /// ledger names.
    #[test]
    fn a_reopened_ledger_keeps_its_key_after_a_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        let state = loopward_runner::StateDir::at(dir.path().join("state")).unwrap();
        let keys = KeyRing::load_or_create(&state.root().join("keys")).unwrap();
        let first = keys.current().unwrap().id().clone();
        let custody = |keys| {
            Ledgers::Custody(
                Custody::new(state.clone(), keys, loopward::config::ChainKind::HmacSha256),
                Arc::new(SystemClock),
            )
        };
        let run = RunId::new("r1").unwrap();
        let opts = custody(keys.clone()).options(&runs, &run).unwrap();
        assert_eq!(opts.key.as_ref().map(|k| k.id()), Some(&first));
        let ledger = ReplayLedger::open(&runs, &run, opts).unwrap();
        let scope = loopward_core::Scope {
            run: run.clone(),
            turn: None,
            agent: None,
        };
        let said = loopward_core::AuditEvent::HumanMessage {
            content: (&loopward_core::Person::at_the_keyboard().says("go")).into(),
        };
        loopward_core::AuditSink::record(&*ledger, &scope, &said).unwrap();
        drop(ledger);
        let rotated = keys.rotate().unwrap();
        let second = rotated.current().unwrap().id().clone();
        assert_ne!(first, second);
        let ledgers = custody(rotated);
        let opts = ledgers.options(&runs, &run).unwrap();
        assert_eq!(opts.key.as_ref().map(|k| k.id()), Some(&first));
        let fresh = ledgers.options(&runs, &RunId::new("r2").unwrap()).unwrap();
        assert_eq!(fresh.key.as_ref().map(|k| k.id()), Some(&second));
        // Without the ledger's key: refused, with what to do.
        let state2 = loopward_runner::StateDir::at(dir.path().join("other")).unwrap();
        let other = KeyRing::load_or_create(&state2.root().join("keys")).unwrap();
        let err = custody(other).options(&runs, &run).unwrap_err();
        assert!(err.contains("does not hold"), "{err}");
    }
}
