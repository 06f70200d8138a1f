//! What a layer decided ([`LayerVerdict`]) and what that did to the action
//! ([`VerdictEffect`]): the closed vocabulary of `layer_decision` records.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Declares [`LayerVerdict`] once: each verdict with its doc and the word the ledger records,
/// from which `as_str` (and the tests' list of every verdict) are made.
macro_rules! layer_verdicts {
    (
        $(#[$meta:meta])*
        pub enum LayerVerdict {
            $($(#[doc = $doc:literal])+ $verdict:ident = $word:literal,)+
        }
    ) => {
        $(#[$meta])*
        pub enum LayerVerdict {
            $($(#[doc = $doc])+ $verdict,)+
        }

        impl LayerVerdict {
            /// Every verdict, in the order declared.
            #[cfg(test)]
            const ALL: &'static [Self] = &[$(Self::$verdict),+];

            /// The word the ledger records.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$verdict => $word,)+
                }
            }
        }
    };
}

layer_verdicts! {
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
        Allow = "allow",
        /// A rate limit admitted the call (after any wait).
        Admitted = "admitted",
        /// The action was refused; the run goes on (repeat, rate limit, class-jump).
        Refused = "refused",
        /// A cap was reached: the run stops.
        CapReached = "cap_reached",
        /// A cap was reached: one wrap-up turn with tools disabled runs first.
        WrapUp = "wrap_up",
        /// A token or cost budget is spent: the run stops.
        BudgetExceeded = "budget_exceeded",
        /// A turn took longer than its limit: the run stops.
        TurnTimedOut = "turn_timed_out",
        /// A model call took longer than its limit and failed.
        ModelCallTimedOut = "model_call_timed_out",
        /// A tool call took longer than its limit and was stopped.
        ToolCallTimedOut = "tool_call_timed_out",
        /// A stop-gate approved by itself (`mode = "auto"`).
        AutoApproved = "auto_approved",
        /// A person approved a stop-gate.
        Approved = "approved",
        /// A stop-gate denied: the action does not run and the run stops.
        Denied = "denied",
        /// A stop-gate asked for a durable approval: the run pauses.
        ApprovalRequested = "approval_requested",
        /// A durable approval is still pending: the run stays paused.
        StillPending = "still_pending",
        /// A durable approval was consumed by the action it approves.
        ApprovalConsumed = "approval_consumed",
        /// Class-jump: the failure is counted; the same strategy may try again.
        Retry = "retry",
        /// Class-jump: the strategy failed its allowance; the next strategy is current.
        ClassJump = "class_jump",
        /// Class-jump: every strategy failed its allowance; the run ends `Exhausted`.
        Exhausted = "exhausted",
        /// Class-jump: the subtask succeeded.
        Succeeded = "succeeded",
        /// Resume: an interrupted tool call was run again (its tool is in the resume policy).
        Retried = "retried",
        /// Resume: an interrupted tool call was not run again; the agent was told.
        Interrupted = "interrupted",
        /// The action happened without a decision before it (a hook saw it afterwards).
        Observed = "observed",
        /// A layer ended the run for its own reason (custom layers).
        Stopped = "stopped",
    }
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
        for &v in LayerVerdict::ALL {
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
