//! What goes over the wire: a run's start request and result, the approval it waits for, and a
//! person's verdict. All JSON.

use loopward_core::{AgentId, RunStatus, Usage};
use loopward_runner::layers::stopgate::GatedAction;
use serde::{Deserialize, Serialize};

/// Starts a run: the body of `LoopwardRun/<run-id>/run`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartRun {
    /// The task, as a person gave it: the workflow makes it the run's
    /// [`HumanWords`](loopward_core::HumanWords), so only an application that talks to a person
    /// should start runs (whoever can call the ingress can).
    pub task: String,
    /// The agent that takes the first turn.
    pub first: AgentId,
}

/// How a run ended: the result of `LoopwardRun/<run-id>/run`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// How it ended.
    pub status: RunStatus,
    /// Turns taken.
    pub turns: u32,
    /// Tokens used.
    pub usage: Usage,
    /// The last agent's final text.
    pub final_text: String,
    /// The ledger's records when it was finished.
    pub records: u64,
    /// The ledger's final hash, as anchored in `runs/index.jsonl`.
    pub final_hash: String,
}

/// The approval a run waits for: what `LoopwardRun/<run-id>/pending` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The id to approve or deny it by (the gate and the exact action).
    pub id: String,
    /// The agent acting.
    pub agent: AgentId,
    /// The stop-gate's name.
    pub gate: String,
    /// The exact action.
    pub action: GatedAction,
    /// A one-line description for a person.
    pub summary: String,
}

/// What the run stores while it waits: the approval and the awakeable that answers it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Waiting {
    pub(crate) awakeable: String,
    pub(crate) approval: PendingApproval,
}

/// A person's verdict: the body of `LoopwardRun/<run-id>/approve` (or `deny`, with a reason).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case", deny_unknown_fields)]
pub enum Verdict {
    /// Run the action once.
    Approve {
        /// The pending id this verdict is for; it must match what the run waits for.
        id: String,
        /// Who approved.
        by: String,
    },
    /// Do not run it.
    Deny {
        /// The pending id this verdict is for.
        id: String,
        /// Why (the agent reads it).
        reason: String,
    },
}

impl Verdict {
    /// The pending id it answers.
    pub fn id(&self) -> &str {
        match self {
            Self::Approve { id, .. } | Self::Deny { id, .. } => id,
        }
    }
}
