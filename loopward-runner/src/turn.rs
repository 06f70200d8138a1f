//! The agent-turn service boundary: one call of one agent by the runner.

use crate::context::TurnContext;
use crate::model::ModelError;
use loopward_core::{AuditError, Effect, FinishReason, Handoff, Message, RunStatus, Usage};

/// One call of one agent.
#[derive(Clone, Debug)]
pub struct TurnRequest {
    /// The turn (agent, number, run, state).
    pub turn: TurnContext,
    /// The agent's conversation so far, without its system prompt.
    pub messages: Vec<Message>,
}

/// What a turn did.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnOutcome {
    /// Messages this turn added to the agent's conversation (model replies and tool results).
    pub messages: Vec<Message>,
    /// What the turn changed on disk.
    pub effects: Vec<Effect>,
    /// The handoff that stands, if any.
    pub handoff: Option<Handoff>,
    /// Tokens used.
    pub usage: Usage,
    /// Why the turn ended.
    pub finish: FinishReason,
    /// The model's last text.
    pub text: String,
}

/// Why a turn could not complete. Each ends the run with a distinct status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TurnError {
    /// The model call failed beyond what its layers could retry.
    #[error("model call failed: {0}")]
    Model(ModelError),
    /// The audit ledger could not record an event; the action it was to record did not run.
    #[error("{0}")]
    Audit(#[from] AuditError),
    /// A layer ended the run (cap, budget, stop-gate, exhausted strategies, …).
    #[error("run stopped: {}", .0.label())]
    Stop(RunStatus),
    /// The model's final answer was empty or whitespace only (no text, no tool call). An empty
    /// answer is not a finished task, so the run fails rather than completes.
    #[error("{agent}'s model answered with nothing (no text, no tool call); an empty answer does not complete a run. Check the model and its prompt, or give it more tokens")]
    EmptyReply {
        /// The agent whose model answered.
        agent: loopward_core::AgentId,
    },
    /// The model was cut off by its token limit mid-reply (a reply whose
    /// [`StopReason`](crate::model::StopReason) is `TokenLimit`: OpenAI-compatible
    /// `finish_reason: "length"`, Anthropic `stop_reason: "max_tokens"`): the answer is
    /// unfinished, so the turn ends here (none of the reply's calls run) and the run fails rather
    /// than completes. The reply is in the ledger (`model_reply` with `stop: token_limit`).
    #[error("{agent}'s model was cut off at its token limit mid-answer ({max_tokens}); an unfinished answer does not complete a run. Raise max_tokens for this agent, or ask for a shorter answer")]
    CutOff {
        /// The agent whose model answered.
        agent: loopward_core::AgentId,
        /// The limit, as configured (or "the backend's limit").
        max_tokens: String,
    },
}

impl From<ModelError> for TurnError {
    /// A ledger failure inside a model layer is an audit failure of the run, not a model failure.
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::Audit(e) => Self::Audit(e),
            other => Self::Model(other),
        }
    }
}

impl TurnError {
    /// The status a run ends with when a turn fails this way.
    pub fn status(&self) -> RunStatus {
        match self {
            Self::Model(e) => RunStatus::Failed {
                error: e.to_string(),
            },
            Self::Audit(e) => RunStatus::AuditFailed { error: e.0.clone() },
            Self::Stop(s) => s.clone(),
            Self::EmptyReply { .. } | Self::CutOff { .. } => RunStatus::Failed {
                error: self.to_string(),
            },
        }
    }
}

/// The type-erased agent-turn service that stacks are built from.
pub type BoxTurnService = tower::util::BoxCloneSyncService<TurnRequest, TurnOutcome, TurnError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_failure_in_a_model_layer_ends_the_run_audit_failed() {
        let e: TurnError = ModelError::Audit(AuditError("disk full".into())).into();
        assert_eq!(
            e.status(),
            RunStatus::AuditFailed {
                error: "disk full".into()
            }
        );
        let e: TurnError = ModelError::Transport("reset".into()).into();
        assert!(matches!(e.status(), RunStatus::Failed { error } if error.contains("reset")));
    }
}
