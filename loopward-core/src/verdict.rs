//! What a layer decided ([`LayerVerdict`]) and what that did to the action
//! ([`VerdictEffect`]): the closed vocabulary of `layer_decision` records.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A layer's decision, as recorded in [`AuditEvent::LayerDecision`](crate::AuditEvent).
///
/// Written in the ledger as its snake_case word (`cap_reached`, `approved`, …).
///
/// ```
/// use loopward_core::{LayerVerdict, VerdictEffect};
/// assert_eq!(LayerVerdict::CapReached.as_str(), "cap_reached");
/// assert_eq!(LayerVerdict::CapReached.effect(), VerdictEffect::Stopped);
/// let v: LayerVerdict = serde_json::from_str("\"approved\"").unwrap();
/// assert_eq!(v.effect(), VerdictEffect::Allowed);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LayerVerdict {
    /// The action may go on (caps, repeat, a custom layer).
    Allow,
    /// A rate limit admitted the call (after any wait).
    Admitted,
    /// The action was refused; the run goes on (repeat, rate limit, class-jump).
    Refused,
    /// A cap was reached: the run stops.
    CapReached,
    /// A cap was reached: one wrap-up turn with tools disabled runs first.
    WrapUp,
    /// A token or cost budget is spent: the run stops.
    BudgetExceeded,
    /// A turn took longer than its limit: the run stops.
    TurnTimedOut,
    /// A model call took longer than its limit and failed.
    ModelCallTimedOut,
    /// A tool call took longer than its limit and was stopped.
    ToolCallTimedOut,
    /// A stop-gate approved by itself (`mode = "auto"`).
    AutoApproved,
    /// A person approved a stop-gate.
    Approved,
    /// A stop-gate denied: the action does not run and the run stops.
    Denied,
    /// A stop-gate asked for a durable approval: the run pauses.
    ApprovalRequested,
    /// A durable approval is still pending: the run stays paused.
    StillPending,
    /// A durable approval was consumed by the action it approves.
    ApprovalConsumed,
    /// Class-jump: the failure is counted; the same strategy may try again.
    Retry,
    /// Class-jump: the strategy failed its allowance; the next strategy is current.
    ClassJump,
    /// Class-jump: every strategy failed its allowance; the run ends `Exhausted`.
    Exhausted,
    /// Class-jump: the subtask succeeded.
    Succeeded,
    /// Resume: an interrupted tool call was run again (its tool is in the resume policy).
    Retried,
    /// Resume: an interrupted tool call was not run again; the agent was told.
    Interrupted,
    /// The action happened without a decision before it (a hook saw it afterwards).
    Observed,
    /// A layer ended the run for its own reason (custom layers).
    Stopped,
}

/// What a [`LayerVerdict`] did to the action it was taken on: the census columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictEffect {
    /// The action went ahead.
    Allowed,
    /// The action was refused; the run went on.
    Refused,
    /// The action was refused and the run stops (or pauses for a person).
    Stopped,
    /// Recorded for the census; no action was let through or held back by it.
    Noted,
}

impl LayerVerdict {
    /// The word the ledger records.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Admitted => "admitted",
            Self::Refused => "refused",
            Self::CapReached => "cap_reached",
            Self::WrapUp => "wrap_up",
            Self::BudgetExceeded => "budget_exceeded",
            Self::TurnTimedOut => "turn_timed_out",
            Self::ModelCallTimedOut => "model_call_timed_out",
            Self::ToolCallTimedOut => "tool_call_timed_out",
            Self::AutoApproved => "auto_approved",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::ApprovalRequested => "approval_requested",
            Self::StillPending => "still_pending",
            Self::ApprovalConsumed => "approval_consumed",
            Self::Retry => "retry",
            Self::ClassJump => "class_jump",
            Self::Exhausted => "exhausted",
            Self::Succeeded => "succeeded",
            Self::Retried => "retried",
            Self::Interrupted => "interrupted",
            Self::Observed => "observed",
            Self::Stopped => "stopped",
        }
    }

    /// What the verdict did to its action.
    pub fn effect(self) -> VerdictEffect {
        match self {
            Self::Allow
            | Self::Admitted
            | Self::AutoApproved
            | Self::Approved
            | Self::ApprovalConsumed
            | Self::Retried => VerdictEffect::Allowed,
            Self::Refused | Self::ModelCallTimedOut | Self::ToolCallTimedOut => {
                VerdictEffect::Refused
            }
            Self::CapReached
            | Self::WrapUp
            | Self::BudgetExceeded
            | Self::TurnTimedOut
            | Self::Denied
            | Self::ApprovalRequested
            | Self::StillPending
            | Self::Exhausted
            | Self::Stopped => VerdictEffect::Stopped,
            Self::Retry
            | Self::ClassJump
            | Self::Succeeded
            | Self::Interrupted
            | Self::Observed => VerdictEffect::Noted,
        }
    }

    /// Whether a stop-gate verdict lets its action run.
    pub fn approves(self) -> bool {
        matches!(
            self,
            Self::AutoApproved | Self::Approved | Self::ApprovalConsumed
        )
    }

    /// Whether a stop-gate verdict leaves its action waiting for a durable approval.
    pub fn pending(self) -> bool {
        matches!(self, Self::ApprovalRequested | Self::StillPending)
    }
}

impl fmt::Display for LayerVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_verdict_is_written_as_its_word() {
        use LayerVerdict::*;
        for v in [
            Allow,
            Admitted,
            Refused,
            CapReached,
            WrapUp,
            BudgetExceeded,
            TurnTimedOut,
            ModelCallTimedOut,
            ToolCallTimedOut,
            AutoApproved,
            Approved,
            Denied,
            ApprovalRequested,
            StillPending,
            ApprovalConsumed,
            Retry,
            ClassJump,
            Exhausted,
            Succeeded,
            Retried,
            Interrupted,
            Observed,
            Stopped,
        ] {
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", v.as_str()));
            assert_eq!(serde_json::from_str::<LayerVerdict>(&json).unwrap(), v);
        }
    }

    #[test]
    fn an_unknown_word_does_not_read_as_a_verdict() {
        assert!(serde_json::from_str::<LayerVerdict>("\"maybe\"").is_err());
    }
}
