//! The stop-gate layers and services for turns and tool calls.

use super::action::GatedAction;
use super::config::Fixed;
use super::gates::{Awaiting, StopGates, Verdict};
use crate::layers::canonical_json;
use crate::layers::from_fn::{from_fn, layer_fn, FromFn, FromFnLayer, NextTool, NextTurn};
use crate::tool::{ToolError, ToolInvocation, ToolOutput};
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use loopward_core::{LayerId, Refusal, RefusedBy, RunStatus};

/// Gates an agent's turns (`point = "turn"`) and pauses the run when a tool gate waits for a
/// durable approval. The layer is its policy (see [`from_fn`](crate::layers::from_fn)).
pub type StopGateTurnLayer = FromFnLayer<StopGatePolicy>;

/// Gates tool calls (`point = "tool"`, `"write"`, `"handoff"`): the same policy as
/// [`StopGateTurnLayer`], at the tool boundary.
pub type StopGateToolLayer = FromFnLayer<StopGatePolicy>;

impl StopGates {
    /// The turn layer of these gates.
    pub fn turn_layer(&self) -> StopGateTurnLayer {
        from_fn(StopGatePolicy {
            gates: self.clone(),
        })
    }

    /// The tool layer of these gates.
    pub fn tool_layer(&self) -> StopGateToolLayer {
        // One policy serves both boundaries.
        self.turn_layer()
    }
}

/// See [`StopGateTurnLayer`].
pub type StopGateTurnService<S> = FromFn<StopGatePolicy, S>;

/// See [`StopGateToolLayer`].
pub type StopGateToolService<S> = FromFn<StopGatePolicy, S>;

/// The stop-gates' policy, at a turn (the turn gates; a run waiting for a durable approval
/// pauses) and at a tool call (the tool, write and handoff gates; an approval is bound to the
/// exact call).
#[derive(Clone, Debug)]
pub struct StopGatePolicy {
    gates: StopGates,
}

fn awaiting(run: &crate::RunContext) -> Option<String> {
    run.extensions()
        .get::<Awaiting>()
        .and_then(|a| a.0.lock().unwrap_or_else(|p| p.into_inner()).clone())
}

layer_fn!(StopGatePolicy, turn(TurnRequest) -> Result<TurnOutcome, TurnError>);

impl StopGatePolicy {
    async fn turn(self, req: TurnRequest, next: NextTurn) -> Result<TurnOutcome, TurnError> {
        let Self { gates } = self;
        let turn = req.turn.clone();
        if let Some(pending) = awaiting(turn.run()) {
            return Err(TurnError::Stop(RunStatus::AwaitingApproval { pending }));
        }
        let action = GatedAction::Turn {
            agent: turn.agent().clone(),
        };
        for approval in gates.before_turn(&turn).await? {
            approval.authorise(&action).map_err(|e| {
                TurnError::Stop(RunStatus::Stopped {
                    reason: e.to_string(),
                })
            })?;
        }
        let result = next.run(req).await;
        if let Some(pending) = awaiting(turn.run()) {
            return Err(TurnError::Stop(RunStatus::AwaitingApproval { pending }));
        }
        result
    }
}

/// A one-line description of a call for the person deciding (at most 300 characters).
pub(super) fn summary(inv: &ToolInvocation) -> String {
    let s = format!("{} {}", inv.call.name, canonical_json(&inv.call.arguments));
    let mut out: String = s.chars().take(300).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

layer_fn!(StopGatePolicy, tool_call(ToolInvocation) -> Result<ToolOutput, ToolError>);

impl StopGatePolicy {
    async fn tool_call(self, inv: ToolInvocation, next: NextTool) -> Result<ToolOutput, ToolError> {
        let Self { gates } = self;
        let gated = gates.tool_gates(&inv);
        if gated.is_empty() {
            return next.run(inv).await;
        }
        let fixed = Fixed::new(
            GatedAction::tool(inv.call.name.clone(), &inv.call.arguments),
            summary(&inv),
        );
        let (action, summary) = (&*fixed.action, &*fixed.summary);
        let mut approvals = vec![];
        for gate in gated {
            let verdict = gates
                .decide(&inv.turn, gate, &fixed)
                .await
                .map_err(ToolError::Audit)?;
            match verdict {
                Verdict::Approved(a) => approvals.push(a),
                Verdict::Denied(reason) => {
                    // A denial ends the reply at this call and the run after this turn,
                    // as a denied turn does.
                    inv.turn.end_run(RunStatus::Stopped {
                        reason: format!("stop-gate {} denied {summary}: {reason}", gate.name),
                    });
                    return Err(ToolError::Refused(Refusal::new(
                        RefusedBy::layer_instance(&LayerId::StopGate, &gate.name),
                        format!("a person's approval is required for {summary} and it was not given: {reason}"),
                        "the run stops after this reply; say in your reply what you were doing and why the call was needed",
                    )));
                }
                Verdict::Pending(id) => {
                    inv.turn.state().tools_disabled = true;
                    return Err(ToolError::Refused(Refusal::new(
                        RefusedBy::layer_instance(&LayerId::StopGate, &gate.name),
                        format!("{summary} waits for a person's approval (pending {id}); the run pauses after this reply"),
                        "finish your reply in text; the call runs once the approval is given and the run is started again",
                    )));
                }
            }
        }
        for approval in approvals {
            approval.authorise(action).map_err(|e| {
                ToolError::Refused(Refusal::new(&LayerId::StopGate, e.to_string(), ""))
            })?;
        }
        next.run(inv).await
    }
}
