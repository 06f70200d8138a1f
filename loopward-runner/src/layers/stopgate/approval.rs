//! The approval capability and the trait a person answers through.

use super::action::GatedAction;
use futures::future::BoxFuture;
use loopward_core::{AgentId, RunId};
use serde::Serialize;
use std::sync::Arc;

/// Permission to run one exact action, minted only by a stop-gate.
///
/// It has no public constructor and is not `Clone`: the gated services run an action only after
/// [`Approval::authorise`] consumed an approval for that very action.
///
/// ```compile_fail,E0451
/// use loopward_runner::layers::stopgate::{Approval, GatedAction, Granted};
/// // Private fields: an approval cannot be forged outside the gate.
/// let forged = Approval {
///     action: GatedAction::Phase { name: "deploy".into() },
///     gate: "deploy".into(),
///     granted: Granted::Auto,
/// };
/// ```
///
/// ```compile_fail,E0599
/// use loopward_runner::layers::stopgate::Approval;
/// let forged = Approval::default(); // no Default, no new, no Deserialize
/// ```
///
/// The one way to get one is to ask a gate:
///
/// ```
/// use loopward_runner::layers::stopgate::{GatedAction, Granted, StopGateConfig, StopGates, StopMode};
/// use loopward_runner::layers::testing::{run, turn};
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let gates = StopGates::new(&[StopGateConfig::phase("deploy", StopMode::Auto)]).unwrap();
/// let dir = tempfile::tempdir().unwrap();
/// let (run, _sink) = run(dir.path(), "r1");
/// let approvals = gates.before_phase(&turn(&run, "builder", 1), "deploy").await.unwrap();
/// assert_eq!(approvals.len(), 1);
/// assert_eq!(approvals[0].granted(), &Granted::Auto);
/// let deploy = GatedAction::Phase { name: "deploy".into() };
/// let other = GatedAction::Phase { name: "release".into() };
/// assert!(!approvals[0].authorises(&other));
/// for a in approvals { a.authorise(&deploy).unwrap(); }
/// # });
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct Approval {
    action: Arc<GatedAction>,
    gate: Arc<str>,
    granted: Granted,
}

/// How an approval was granted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "how", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Granted {
    /// An `auto` gate approved and logged that it did.
    Auto,
    /// A person answered through an [`Approver`].
    Person {
        /// Who, as the approver reported it.
        by: String,
    },
    /// A durable pending record was approved (`loopward approve`) and consumed.
    Durable {
        /// The pending record's id.
        pending: String,
    },
}

/// An approval was presented for an action it does not name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("approval from gate {gate} is for {approved}, not for {attempted}; ask for approval of this action")]
pub struct ApprovalMismatch {
    /// The gate that minted the approval.
    pub gate: String,
    /// The action it approves.
    pub approved: String,
    /// The action it was presented for.
    pub attempted: String,
}

impl Approval {
    pub(super) fn mint(gate: &Arc<str>, action: &Arc<GatedAction>, granted: Granted) -> Self {
        Self {
            action: action.clone(),
            gate: gate.clone(),
            granted,
        }
    }

    /// The action this approval names.
    pub fn action(&self) -> &GatedAction {
        &self.action
    }

    /// The gate that minted it.
    pub fn gate(&self) -> &str {
        &self.gate
    }

    /// How it was granted.
    pub fn granted(&self) -> &Granted {
        &self.granted
    }

    /// Whether it names `action`.
    pub fn authorises(&self, action: &GatedAction) -> bool {
        *self.action == *action
    }

    /// Uses the approval for `action`; it is consumed either way, so it can serve only once.
    pub fn authorise(self, action: &GatedAction) -> Result<(), ApprovalMismatch> {
        if self.authorises(action) {
            Ok(())
        } else {
            Err(ApprovalMismatch {
                gate: self.gate.to_string(),
                approved: self.action.key(),
                attempted: action.key(),
            })
        }
    }
}

/// What an interactive gate asks a person.
#[derive(Clone, Debug)]
pub struct ApprovalRequest {
    /// The run.
    pub run: RunId,
    /// The agent acting.
    pub agent: AgentId,
    /// The gate's name.
    pub gate: String,
    /// The exact action.
    pub action: GatedAction,
    /// A one-line human description (the tool and its arguments, the phase, …).
    pub summary: String,
    /// Why the action is gated (what the gate stands before), in words.
    pub why: String,
    /// The turn that asks. Its run's extensions are where an engine that drives the run keeps
    /// what its approver needs (loopward-restate's journal), so the approver finds it in the
    /// request rather than in a task-local.
    pub turn: crate::TurnContext,
}

/// A person's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Run the action once.
    Approve {
        /// Who approved.
        by: String,
    },
    /// Do not run it.
    Deny {
        /// Why (the agent reads it).
        reason: String,
    },
}

/// How an `interactive` gate reaches a person. The terminal prompt lives in the application
/// crate; the library never prompts. Closures `Fn(&ApprovalRequest) -> Answer` implement it.
pub trait Approver: Send + Sync + 'static {
    /// Asks about one action. A gate that gets no answer within its timeout denies.
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer>;
}

impl<F> Approver for F
where
    F: Fn(&ApprovalRequest) -> Answer + Send + Sync + 'static,
{
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        let answer = self(&request);
        Box::pin(async move { answer })
    }
}
