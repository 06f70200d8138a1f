//! Tool calls as journaled steps.

use crate::approver::{pending_id, Given};
use crate::journal;
use crate::ledger::ReplayLedger;
use crate::wire::{PendingApproval, Verdict};
use futures::future::BoxFuture;
use loopward_core::{AuditError, Effect};
use loopward_runner::journal::seed_tool_stack;
use loopward_runner::layers::from_fn::{from_fn, FromFn, LayerFn, NextTool};
use loopward_runner::layers::stopgate::StopGates;
use loopward_runner::tool::{ToolError, ToolInvocation, ToolOutput};
use loopward_runner::RunContext;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Tools that change nothing but the run's own state (the turn's handoff slot, the class-jump
/// tracker). They run again on a replay, which rebuilds that state; every other tool is a
/// journaled step.
pub const STATE_ONLY_TOOLS: &[&str] = &["handoff", "report_attempt"];

/// Makes each tool call a journaled step when the run executes on Restate. Put it around the
/// whole tool stack (outside the policy gates): a call's gate decisions, its effect and the
/// shell watch's comparison are one step, done and recorded once; a replay reads the result
/// from the journal and moves the ledger past the step's records.
///
/// A worker that dies inside a step leaves it open; Restate runs it again on another worker.
/// The step's start was marked first (`<runs>/<run>/steps/<n>.started`, created exclusively),
/// so the second attempt finds the mark and does not guess: the call is not run again, and the
/// model reads that it was interrupted and that its effect may or may not have happened.
///
/// ```
/// use loopward_restate::JournaledToolLayer;
/// use loopward_runner::tool::{BoxToolService, ToolExecutor};
/// use tower::Layer;
/// let stack = BoxToolService::new(JournaledToolLayer.layer(ToolExecutor));
/// # let _ = stack;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct JournaledToolLayer;

impl<S> tower::Layer<S> for JournaledToolLayer {
    type Service = JournaledTool<S>;
    fn layer(&self, inner: S) -> JournaledTool<S> {
        tower::Layer::layer(&from_fn(JournaledToolPolicy { gates: None }), inner)
    }
}

impl JournaledToolLayer {
    /// The same layer, asking the `interactive` stop-gates among `gates` that stand before a
    /// call (on its tool, or on a path it writes) for a person's verdict before the call's step:
    /// the run waits on a Restate awakeable there, outside any step, so Restate suspends it and
    /// no worker holds it; the gate inside the step is then answered with the verdict given
    /// (and records it, once). Give it the gates of the stack inside ([`StopGates`] are cheap
    /// to clone).
    ///
    /// ```
    /// use loopward_restate::{JournaledToolLayer, RestateApprover};
    /// use loopward_runner::layers::stopgate::{StopGateConfig, StopGates, StopMode};
    /// use loopward_runner::tool::{BoxToolService, ToolExecutor};
    /// use std::sync::Arc;
    /// use tower::Layer;
    /// let gates = StopGates::new(&[StopGateConfig::tool("shell", StopMode::Interactive)])
    ///     .unwrap()
    ///     .with_approver(Arc::new(RestateApprover));
    /// let inner = BoxToolService::new(gates.tool_layer().layer(ToolExecutor));
    /// let stack = BoxToolService::new(JournaledToolLayer.asking(gates).layer(inner));
    /// # let _ = stack;
    /// ```
    pub fn asking(self, gates: StopGates) -> AskingToolLayer {
        AskingToolLayer { gates }
    }
}

/// [`JournaledToolLayer`] that asks a call's `interactive` stop-gates before its step (see
/// [`JournaledToolLayer::asking`]).
#[derive(Clone, Debug)]
pub struct AskingToolLayer {
    gates: StopGates,
}

impl<S> tower::Layer<S> for AskingToolLayer {
    type Service = JournaledTool<S>;
    fn layer(&self, inner: S) -> JournaledTool<S> {
        let gates = Some(self.gates.clone());
        tower::Layer::layer(&from_fn(JournaledToolPolicy { gates }), inner)
    }
}

/// The service [`JournaledToolLayer`] builds: the layer kit's [`FromFn`] around its policy.
pub type JournaledTool<S> = FromFn<JournaledToolPolicy, S>;

/// [`JournaledToolLayer`]'s policy: the call, its gates and its effect as one journaled step
/// (with [`JournaledToolLayer::asking`], a person's verdicts waited for before it).
#[derive(Clone, Debug)]
pub struct JournaledToolPolicy {
    gates: Option<StopGates>,
}

/// Marks a run whose tool stack was seeded from its ledger in this process.
struct Seeded;

/// A tool result as the journal holds it.
#[derive(Serialize, Deserialize)]
enum Journaled {
    Output {
        content: String,
        is_error: bool,
        effects: Vec<Effect>,
    },
    /// The call failed; `audit` marks a ledger failure (fatal to the run).
    Failed { text: String, audit: bool },
}

/// What the model reads for a call whose worker died while it ran.
pub const INTERRUPTED: &str = "interrupted: the worker running this call stopped before it \
finished, so its effect may or may not have happened; it was not run again. Check the result \
(read the files it would have changed) before calling it again";

impl LayerFn<ToolInvocation, ToolOutput, ToolError> for JournaledToolPolicy {
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn call(&mut self, inv: ToolInvocation, next: NextTool) -> Self::Future {
        let journal = journal::of(inv.turn.run()).filter(|j| !j.in_step());
        if let Some(j) = journal.as_ref() {
            if STATE_ONLY_TOOLS.contains(&inv.call.name.as_str()) {
                // Not a step: it reaches the tool stack on a replay too, so the stack's counters
                // are seeded before it if this is the first call they see in this process.
                let seeded = seed(j.ledger(), inv.turn.run());
                return Box::pin(async move {
                    seeded.map_err(|text| ToolError::Audit(AuditError(text)))?;
                    next.run(inv).await
                });
            }
        }
        let Some(journal) = journal else {
            return Box::pin(next.run(inv));
        };
        let asks = self
            .gates
            .as_ref()
            .map(|g| g.asks_for(&inv))
            .unwrap_or_default();
        Box::pin(async move {
            // A person's verdicts first, each waited for outside any step.
            let mut given = Given::default();
            for request in asks {
                let id = pending_id(&request.gate, &request.action.key());
                let pending = PendingApproval {
                    id: id.clone(),
                    agent: request.agent,
                    gate: request.gate.clone(),
                    action: request.action.clone(),
                    summary: request.summary,
                };
                let verdict = journal.verdict(pending).await.map_err(|why| {
                    ToolError::Audit(AuditError(format!(
                        "no verdict could be had through Restate: {why}"
                    )))
                })?;
                given.insert(
                    &request.gate,
                    &request.action.key(),
                    verdict_for(&id, verdict),
                );
            }
            let name = format!("tool {} {}", inv.call.name, inv.call.id);
            let marks = journal.ledger().ledger().run_dir().join("steps");
            let ledger = journal.ledger().clone();
            // The gates inside the step find the verdicts on the run's journal.
            journal.hand(given);
            let journaled = journal
                .step(&name, |n| async move {
                    if let Err(text) = mark_started(&marks, n) {
                        return Journaled::Failed { text, audit: false };
                    }
                    if let Err(text) = seed(&ledger, inv.turn.run()) {
                        return Journaled::Failed { text, audit: true };
                    }
                    match next.run(inv).await {
                        Ok(o) => Journaled::Output {
                            content: o.content,
                            is_error: o.is_error,
                            effects: o.effects,
                        },
                        Err(ToolError::Audit(e)) => Journaled::Failed {
                            text: e.0,
                            audit: true,
                        },
                        Err(e) => Journaled::Failed {
                            text: e.to_string(),
                            audit: false,
                        },
                    }
                })
                .await;
            journal.hand(Given::default());
            let journaled = journaled.map_err(|e| ToolError::Audit(AuditError(e.to_string())))?;
            match journaled {
                Journaled::Output {
                    content,
                    is_error,
                    effects,
                } => Ok(ToolOutput {
                    content,
                    is_error,
                    effects,
                }),
                Journaled::Failed { text, audit: true } => Err(ToolError::Audit(AuditError(text))),
                Journaled::Failed { text, .. } => Err(ToolError::Failed(text)),
            }
        })
    }
}

/// Seeds the tool stack's per-run counters of `run` from what the run accounted for in its
/// ledger, the first time a call reaches the stack in this process: the calls Restate's journal
/// fed back before it never reached the stack, so it counts them from the ledger (the repeat
/// layer, class-jump's failure evidence, the sprawl gate). Later calls find it done.
fn seed(ledger: &ReplayLedger, run: &RunContext) -> Result<(), String> {
    if run.extensions().get::<Seeded>().is_some() {
        return Ok(());
    }
    run.extensions().get_or_insert_with(|| Seeded);
    seed_tool_stack(run, &ledger.accounted()).map_err(|e| {
        format!(
            "the tool stack's counters cannot be rebuilt from the ledger {} ({e}); run `loopward verify` on it",
            ledger.ledger().path().display()
        )
    })
}

/// A person's verdict on pending approval `id`, as the gate's answer.
fn verdict_for(id: &str, verdict: Verdict) -> loopward_runner::layers::stopgate::Answer {
    use loopward_runner::layers::stopgate::Answer;
    match verdict {
        Verdict::Approve { id: got, by } if got == id => Answer::Approve { by },
        Verdict::Deny { id: got, reason } if got == id => Answer::Deny { reason },
        other => Answer::Deny {
            reason: format!(
                "the verdict named pending approval {:?}, not {id:?}; it was not honoured",
                other.id()
            ),
        },
    }
}

/// Marks step `n` started; an existing mark means an earlier attempt started it and died.
fn mark_started(dir: &Path, n: u64) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "not run: the step mark folder {} cannot be created ({e})",
            dir.display()
        )
    })?;
    let path = dir.join(format!("{n}.started"));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|f| f.sync_all())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(INTERRUPTED.into()),
        Err(e) => Err(format!(
            "not run: the step mark {} cannot be written ({e})",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_started_twice_is_interrupted_and_not_run_again() {
        let dir = tempfile::tempdir().unwrap();
        let marks = dir.path().join("steps");
        assert_eq!(mark_started(&marks, 3), Ok(()));
        assert_eq!(
            mark_started(&marks, 4),
            Ok(()),
            "another step has its own mark"
        );
        let again = mark_started(&marks, 3).unwrap_err();
        assert_eq!(again, INTERRUPTED);
        assert!(again.contains("may or may not have happened"));
    }
}
