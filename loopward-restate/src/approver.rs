//! Stop-gates that wait for a person on Restate.

use crate::journal;
use crate::wire::{PendingApproval, Verdict};
use futures::future::BoxFuture;
use loopward_runner::layers::stopgate::{Answer, ApprovalRequest, Approver};

/// The [`Approver`] of `interactive` stop-gates on Restate: the run waits on a Restate
/// awakeable, publishes what it waits for (`LoopwardRun/<run>/pending`), and Restate suspends
/// the invocation; no worker holds the run while the person thinks. `loopward approve --restate`
/// (or a POST to `LoopwardRun/<run>/approve`, from anywhere that reaches the ingress) resolves
/// it, and the run resumes on whichever worker Restate picks.
///
/// Give the gates a long `ask_timeout` (up to `"24h"`): the timeout runs only while a worker
/// holds the invocation, and a gate that times out denies.
///
/// A stop-gate on a tool (or a written path) runs inside the call's journaled step, where Restate
/// cannot wait (steps do not nest): [`JournaledToolLayer::asking`](crate::JournaledToolLayer::asking)
/// asks the person before the step, and this approver answers the gate inside it with that
/// verdict. Without it, such a gate denies, saying so. Outside Restate this approver denies too.
///
/// ```
/// use loopward_restate::RestateApprover;
/// use loopward_runner::layers::stopgate::{StopGateConfig, StopGates, StopMode};
/// use std::sync::Arc;
/// let gates = StopGates::new(&[StopGateConfig::turn("reviewer", StopMode::Interactive)])
///     .unwrap()
///     .with_approver(Arc::new(RestateApprover));
/// # let _ = gates;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct RestateApprover;

/// Verdicts a person gave before a tool call's step, by gate and action.
#[derive(Clone, Debug, Default)]
pub(crate) struct Given(Vec<(String, String, Answer)>);

impl Given {
    pub(crate) fn insert(&mut self, gate: &str, action_key: &str, answer: Answer) {
        self.0
            .push((gate.to_string(), action_key.to_string(), answer));
    }

    pub(crate) fn get(&self, gate: &str, action_key: &str) -> Option<Answer> {
        self.0
            .iter()
            .find(|(g, a, _)| g == gate && a == action_key)
            .map(|(_, _, answer)| answer.clone())
    }
}

/// The id a pending approval is approved by: the gate and the exact action.
///
/// ```
/// use loopward_restate::pending_id;
/// assert_eq!(pending_id("turn:reviewer", "turn:reviewer"), "turn:reviewer");
/// assert_eq!(pending_id("deploy", "tool:deploy:ab12"), "deploy@tool:deploy:ab12");
/// ```
pub fn pending_id(gate: &str, action_key: &str) -> String {
    if gate == action_key {
        gate.to_string()
    } else {
        format!("{gate}@{action_key}")
    }
}

impl Approver for RestateApprover {
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        let deny = |reason: &str| {
            let answer = Answer::Deny {
                reason: reason.into(),
            };
            Box::pin(async move { answer }) as BoxFuture<'static, Answer>
        };
        let Some(journal) = journal::of(request.turn.run()) else {
            return deny("this stop-gate waits for a person through Restate, and this run is not executing on Restate");
        };
        if journal.in_step() {
            if let Some(answer) = journal.given(&request.gate, &request.action.key()) {
                return Box::pin(async move { answer });
            }
            return deny("a stop-gate inside a tool step cannot wait for a person on Restate (steps do not nest); give the gates to the tool step (`JournaledToolLayer.asking(gates)`, as `Team::durable` does), or put the gate on the agent's turn, a phase or a handoff");
        }
        let id = pending_id(&request.gate, &request.action.key());
        let pending = PendingApproval {
            id: id.clone(),
            agent: request.agent,
            gate: request.gate,
            action: request.action,
            summary: request.summary,
        };
        Box::pin(async move {
            match journal.verdict(pending).await {
                Ok(Verdict::Approve { id: got, by }) if got == id => Answer::Approve { by },
                Ok(Verdict::Deny { id: got, reason }) if got == id => Answer::Deny { reason },
                Ok(other) => Answer::Deny {
                    reason: format!(
                        "the verdict named pending approval {:?}, not {id:?}; it was not honoured",
                        other.id()
                    ),
                },
                Err(why) => Answer::Deny {
                    reason: format!("no verdict could be had through Restate: {why}"),
                },
            }
        })
    }
}
