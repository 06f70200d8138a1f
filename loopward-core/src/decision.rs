//! Gate decisions and the correctable refusals a model reads.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How a gate acts on what it would deny.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateMode {
    /// Deny and refuse the action (the default).
    #[default]
    Enforce,
    /// Allow, but warn and log the would-be denial (exists to measure compliance).
    Advisory,
}

/// A refusal: which gate refused, why, and what the model can do about it.
///
/// ```
/// use loopward_core::Refusal;
/// let r = Refusal::new("territory", "plan.md belongs to planner", "hand off to planner");
/// assert!(r.to_string().contains("hand off to planner"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The name of the gate or layer that refused.
    pub gate: String,
    /// What was wrong: names the thing touched and the rule.
    pub reason: String,
    /// What to do instead, and how to contest the rule.
    pub hint: String,
}

impl Refusal {
    /// Builds a refusal.
    pub fn new(
        gate: impl Into<String>,
        reason: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Self {
            gate: gate.into(),
            reason: reason.into(),
            hint: hint.into(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused by {}: {}", self.gate, self.reason)?;
        if !self.hint.is_empty() {
            write!(f, "\nWhat to do: {}", self.hint)?;
        }
        Ok(())
    }
}

/// A gate's decision on one action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// The action may run.
    Allow,
    /// The action may run because a one-shot override was consumed for it.
    Override {
        /// The override's id (its sentinel name).
        id: String,
        /// The reason the person gave when granting it.
        reason: String,
    },
    /// An advisory gate would have denied; the action runs anyway.
    Warn(Refusal),
    /// The action must not run.
    Deny(Refusal),
}

impl Decision {
    /// Whether the action may run.
    pub fn permits(&self) -> bool {
        !matches!(self, Self::Deny(_))
    }

    /// A short label for ledgers and reports.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Override { .. } => "override",
            Self::Warn(_) => "warn",
            Self::Deny(_) => "deny",
        }
    }
}
