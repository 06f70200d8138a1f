//! The Restate workflow that runs loopward runs: one workflow per run id.

use crate::journal::{self, Journal, PENDING_STATE};
use crate::ledger::ReplayLedger;
use crate::wire::{PendingApproval, RunSummary, StartRun, Waiting};
use loopward_core::RunId;
use loopward_runner::audit::LedgerOptions;
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
    ledger: LedgerOptions,
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
                ledger,
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
        let ledger = ReplayLedger::open(&self.inner.runs_dir, &run, self.inner.ledger.clone())
            .map_err(|e| HandlerError::from(e.to_string()))?;
        let (journal, asks) = Journal::new(ledger.clone());
        let spec = RunSpec {
            id: run.clone(),
            task: start.task,
            first: start.first,
            audit: ledger.clone(),
            audit_location: Some(ledger.ledger().run_dir()),
        };
        let runner = self.inner.runner.clone();
        let report = journal::drive(&ctx, asks, journal::scope(journal, runner.run(spec))).await?;
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
