//! The bridge between a run's tower services and the Restate context of the invocation that
//! drives it.
//!
//! The runner's services are `'static` and know nothing of Restate; the Restate context is
//! borrowed by the handler. So the journaled layers send an [`Ask`] down a channel that the
//! handler's [`drive`] loop serves with the context, while it keeps polling the run. The work of
//! a step runs in the run's own task; the handler only tells it to go (live) or hands it the
//! journaled result (replay). The layers find the [`Journal`] on the run itself
//! ([`of`]: the workflow seeds the run's extensions with it), never in a task-local: the
//! turn travels in the request.

use crate::approver::Given;
use crate::ledger::ReplayLedger;
use crate::quota::object::{Debit, ProviderQuotaClient};
use crate::quota::SharedQuota;
use crate::wire::{PendingApproval, Verdict};
use loopward_runner::layers::stopgate::Answer;
use loopward_runner::model::ChatRequest;
use loopward_runner::{RunContext, TurnContext};
use restate_sdk::prelude::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// The journal of `run`, when it executes on Restate.
pub(crate) fn of(run: &RunContext) -> Option<Arc<Journal>> {
    run.extensions().get::<Journal>()
}

/// The journal a model call is to be journaled in: its run's, unless the call is made inside a
/// step (then it is part of that step) or outside any turn (then it belongs to no run).
pub(crate) fn for_model_call(req: &ChatRequest) -> Option<Arc<Journal>> {
    TurnContext::of(req)
        .and_then(|turn| of(turn.run()))
        .filter(|j| !j.in_step())
}

/// A journaled step could not be completed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the Restate journal could not complete step {step:?}: {why}")]
pub struct JournalError {
    /// The step's name.
    pub step: String,
    /// Why.
    pub why: String,
}

/// What a completed step left in the journal: its result and how far the run's ledger had got.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Done {
    value: serde_json::Value,
    cursor: u64,
}

/// One request from the run to the handler.
pub(crate) enum Ask {
    /// Journal a step: the handler answers `go` when the step must run live, and `done` with
    /// the journaled result either way.
    Step {
        name: String,
        go: oneshot::Sender<oneshot::Sender<Done>>,
        done: oneshot::Sender<Result<Done, String>>,
    },
    /// Take a permit from a provider's shared quota, waiting (durably) until it is given.
    Permit {
        quota: SharedQuota,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// Debit a reply's tokens from a provider's shared quota.
    Debit { quota: SharedQuota, tokens: u64 },
    /// Wait for a person's verdict on a stop-gate, durably.
    Verdict {
        pending: PendingApproval,
        reply: oneshot::Sender<Result<Verdict, String>>,
    },
}

/// The run's side of the bridge, kept on the run's extensions.
pub(crate) struct Journal {
    tx: mpsc::UnboundedSender<Ask>,
    ledger: Arc<ReplayLedger>,
    steps: AtomicU64,
    /// Steps whose work is running now. Restate steps do not nest and a run makes one call at
    /// a time, so a call (or a wait for a person) made while a step is open is made inside it.
    open: AtomicUsize,
    /// The verdicts a person gave before the open tool step, for the gates inside it.
    given: Mutex<Given>,
}

/// Counts a step as open while its work runs (dropped with the work, finished or not).
struct Open<'a>(&'a AtomicUsize);

impl<'a> Open<'a> {
    fn enter(open: &'a AtomicUsize) -> Self {
        open.fetch_add(1, Ordering::SeqCst);
        Self(open)
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Journal {
    pub(crate) fn new(ledger: Arc<ReplayLedger>) -> (Self, mpsc::UnboundedReceiver<Ask>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let journal = Self {
            tx,
            ledger,
            steps: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            given: Mutex::default(),
        };
        (journal, rx)
    }

    /// Whether a step's work is running (where no other step, and no wait for a person, can be
    /// journaled: Restate steps do not nest).
    pub(crate) fn in_step(&self) -> bool {
        self.open.load(Ordering::SeqCst) > 0
    }

    /// Hands the gates inside the next tool step the verdicts a person gave before it.
    pub(crate) fn hand(&self, given: Given) {
        *self.given.lock().unwrap_or_else(|p| p.into_inner()) = given;
    }

    /// The verdict given for `gate` on the action `action_key`, if one was handed.
    pub(crate) fn given(&self, gate: &str, action_key: &str) -> Option<Answer> {
        self.given
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(gate, action_key)
    }

    /// The ledger this run records into.
    pub(crate) fn ledger(&self) -> &Arc<ReplayLedger> {
        &self.ledger
    }

    /// Runs `work` as a journaled step named `name`: live the first time (the closure gets the
    /// step's ordinal, stable across replays), from the journal after that. Either way the
    /// caller gets the value as the journal holds it, so a live run and its replay see the same.
    pub(crate) async fn step<T, F, Fut>(&self, name: &str, work: F) -> Result<T, JournalError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = T>,
    {
        let ordinal = self.steps.fetch_add(1, Ordering::SeqCst) + 1;
        let fail = |why: String| JournalError {
            step: name.to_string(),
            why,
        };
        let (go_tx, go_rx) = oneshot::channel();
        let (done_tx, done_rx) = oneshot::channel();
        self.tx
            .send(Ask::Step {
                name: name.to_string(),
                go: go_tx,
                done: done_tx,
            })
            .map_err(|_| fail(ENDED.into()))?;
        if let Ok(result_tx) = go_rx.await {
            let value = {
                let _open = Open::enter(&self.open);
                work(ordinal).await
            };
            let value = serde_json::to_value(&value)
                .map_err(|e| fail(format!("its result cannot be journaled: {e}")))?;
            // The step's records are in the file before Restate journals the position they
            // reached (the ledger may hold records on the way to an action until a commit).
            loopward_core::AuditSink::commit(&*self.ledger).map_err(|e| fail(e.0))?;
            let _ = result_tx.send(Done {
                value,
                cursor: self.ledger.cursor(),
            });
        }
        let done = done_rx
            .await
            .map_err(|_| fail(ENDED.into()))?
            .map_err(fail)?;
        self.ledger.seek(done.cursor).map_err(|e| fail(e.0))?;
        serde_json::from_value(done.value)
            .map_err(|e| fail(format!("the journaled result cannot be read back: {e}")))
    }

    /// Takes a permit from `quota`'s provider, waiting durably until the quota gives one.
    pub(crate) async fn permit(&self, quota: SharedQuota) -> Result<(), String> {
        self.ask(|reply| Ask::Permit { quota, reply }).await
    }

    /// Debits `tokens` from `quota`'s provider (journaled; the run does not wait for it).
    pub(crate) fn debit(&self, quota: SharedQuota, tokens: u64) -> Result<(), String> {
        self.send(Ask::Debit { quota, tokens })
    }

    /// Waits, durably, for a person's verdict on `pending`.
    pub(crate) async fn verdict(&self, pending: PendingApproval) -> Result<Verdict, String> {
        self.ask(|reply| Ask::Verdict { pending, reply }).await
    }

    /// Sends the handler the request `ask` makes with a reply channel, and waits for its reply.
    async fn ask<T>(
        &self,
        ask: impl FnOnce(oneshot::Sender<Result<T, String>>) -> Ask,
    ) -> Result<T, String> {
        let (reply, rx) = oneshot::channel();
        self.send(ask(reply))?;
        rx.await.map_err(|_| ENDED.to_string())?
    }

    /// Sends the handler `ask`.
    fn send(&self, ask: Ask) -> Result<(), String> {
        self.tx.send(ask).map_err(|_| ENDED.to_string())
    }
}

/// Why a run's request to its handler failed: the handler is gone.
const ENDED: &str = "the invocation driving this run has ended";

/// The state key under which a run publishes the approval it waits for.
pub(crate) const PENDING_STATE: &str = "pending";

/// Polls `run` to the end, serving its journal requests with `ctx`.
pub(crate) async fn drive<F: Future>(
    ctx: &WorkflowContext<'_>,
    mut asks: mpsc::UnboundedReceiver<Ask>,
    run: F,
) -> Result<F::Output, HandlerError> {
    let mut run = std::pin::pin!(run);
    loop {
        let ask = tokio::select! {
            biased;
            ask = asks.recv() => ask,
            out = &mut run => return Ok(out),
        };
        let Some(ask) = ask else {
            return Ok(run.await);
        };
        match ask {
            Ask::Step { name, go, done } => {
                let step = ctx
                    .run(move || async move {
                        let (tx, rx) = oneshot::channel();
                        go.send(tx)
                            .map_err(|_| HandlerError::from("the run stopped waiting"))?;
                        let d = rx
                            .await
                            .map_err(|_| HandlerError::from("the run dropped the step"))?;
                        Ok(Json(d))
                    })
                    .name(name);
                let result = while_running(step, run.as_mut()).await?;
                let _ = done.send(result.map(Json::into_inner).map_err(|e| e.to_string()));
            }
            Ask::Permit { quota, reply } => {
                let result = while_running(permit(ctx, quota), run.as_mut()).await?;
                let _ = reply.send(result);
            }
            Ask::Debit { quota, tokens } => {
                ctx.object_client::<ProviderQuotaClient>(quota.provider())
                    .debit(Json(Debit { quota, tokens }))
                    .send();
            }
            Ask::Verdict { pending, reply } => {
                let (id, answer) = ctx.awakeable::<Json<Verdict>>();
                ctx.set(
                    PENDING_STATE,
                    Json(crate::wire::Waiting {
                        awakeable: id,
                        approval: pending,
                    }),
                );
                let result = while_running(answer, run.as_mut()).await?;
                ctx.clear(PENDING_STATE);
                let _ = reply.send(result.map(Json::into_inner).map_err(|e| e.to_string()));
            }
        }
    }
}

/// Asks the provider's quota object for a permit until it gives one, sleeping (a durable
/// timer) as long as it says between asks.
async fn permit(ctx: &WorkflowContext<'_>, quota: SharedQuota) -> Result<(), String> {
    loop {
        let grant = ctx
            .object_client::<ProviderQuotaClient>(quota.provider())
            .acquire(Json(quota.clone()))
            .call()
            .await
            .map_err(|e| e.to_string())?
            .into_inner();
        if grant.wait_ms == 0 {
            return Ok(());
        }
        ctx.sleep(std::time::Duration::from_millis(grant.wait_ms))
            .await
            .map_err(|e| e.to_string())?;
    }
}

/// Awaits `op` while still polling `run` (whose task does the step's work). The run cannot end
/// while it waits for `op`; if it does, the invocation fails.
async fn while_running<O, F: Future>(
    op: impl Future<Output = O>,
    mut run: std::pin::Pin<&mut F>,
) -> Result<O, HandlerError> {
    tokio::select! {
        biased;
        out = op => Ok(out),
        _ = &mut run => Err(HandlerError::from(
            "the run ended while a journaled step was still open; this is a bug in loopward-restate",
        )),
    }
}
