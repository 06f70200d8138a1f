//! The correctable refusals a model reads, and who gave them: a gate or a layer, by type.
//!
//! Who refused is a [`RefusedBy`], made only from a [`GateId`], a [`GateKind`] or a [`LayerId`],
//! so a refusal cannot name a gate that does not exist, nor swap its arguments. A plain string
//! does not make one:
//!
//! ```compile_fail
//! let r = loopward_core::Refusal::new("territory", "plan.md belongs to planner", "ask");
//! ```
//!
//! In the ledger it is the name it always was (`"gate":"territory:planner"`), read back as is.

use crate::decision::KIND_NAMES;
use crate::{GateId, GateKind, LayerId};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// The gate or layer that refused: its name, as the ledger writes it.
///
/// ```
/// use loopward_core::{GateId, GateKind, LayerId, RefusedBy};
/// let planner = GateId::new(GateKind::Territory, "territory:planner");
/// assert_eq!(RefusedBy::from(&planner), "territory:planner");
/// assert_eq!(RefusedBy::from(GateKind::Sprawl).as_str(), "sprawl");
/// assert_eq!(RefusedBy::from(&LayerId::RateLimit).to_string(), "rate_limit");
/// // One instance of a layer (a stop-gate, a cap): the layer, then the instance's own name.
/// assert_eq!(RefusedBy::layer_instance(&LayerId::StopGate, "tool:shell"), "stopgate:tool:shell");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RefusedBy(Arc<str>);

impl RefusedBy {
    /// One named instance of a layer (the stop-gate `tool:shell`, the cap `turns`), written
    /// `{layer}:{name}`.
    pub fn layer_instance(layer: &LayerId, name: &str) -> Self {
        Self(format!("{layer}:{name}").into())
    }

    /// The name, as the ledger writes it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&GateId> for RefusedBy {
    /// The gate's name (shared, not copied).
    fn from(gate: &GateId) -> Self {
        Self(Arc::clone(&gate.name))
    }
}

impl From<GateKind> for RefusedBy {
    /// The one gate of a kind there is one of (`control`, `sprawl`, …).
    fn from(kind: GateKind) -> Self {
        Self(Arc::clone(&KIND_NAMES[kind as usize]))
    }
}

impl From<&LayerId> for RefusedBy {
    /// The layer's word (`repeat`, `budget`, a custom layer's own name).
    fn from(layer: &LayerId) -> Self {
        Self(layer.as_str().into())
    }
}

impl fmt::Display for RefusedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl PartialEq<str> for RefusedBy {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for RefusedBy {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

/// A refusal: which gate refused, why, and what the model can do about it.
///
/// ```
/// use loopward_core::{GateKind, Refusal};
/// let r = Refusal::new(GateKind::Territory, "plan.md belongs to planner", "hand off to planner");
/// assert!(r.to_string().contains("hand off to planner"));
/// assert_eq!(r.gate, "territory");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    // Fields in sorted order of their names: the ledger writes them as declared (see `AuditEvent`).
    /// The gate or layer that refused.
    pub gate: RefusedBy,
    /// What to do instead, and how to contest the rule.
    pub hint: String,
    /// What was wrong: names the thing touched and the rule.
    pub reason: String,
}

impl Refusal {
    /// Builds a refusal by `gate` (a [`GateId`], a [`GateKind`] or a [`LayerId`]).
    pub fn new(
        gate: impl Into<RefusedBy>,
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

#[cfg(test)]
mod tests {
    use super::{Refusal, RefusedBy};
    use crate::{GateId, GateKind, LayerId};
    use std::sync::Arc;

    #[test]
    fn each_form_is_written_as_its_name_and_read_back_to_the_same_bytes() {
        let planner = GateId::new(GateKind::Territory, "territory:planner");
        let cases = [
            (RefusedBy::from(&planner), r#""territory:planner""#),
            (RefusedBy::from(GateKind::ShellWatch), r#""shell_watch""#),
            (RefusedBy::from(&LayerId::ClassJump), r#""class_jump""#),
            (
                RefusedBy::from(&LayerId::from("no_interns")),
                r#""no_interns""#,
            ),
            (
                RefusedBy::layer_instance(&LayerId::Caps, "turns"),
                r#""caps:turns""#,
            ),
        ];
        for (by, text) in cases {
            assert_eq!(serde_json::to_string(&by).unwrap(), text);
            let back: RefusedBy = serde_json::from_str(text).unwrap();
            assert_eq!(
                (serde_json::to_string(&back).unwrap().as_str(), &back),
                (text, &by)
            );
        }
    }

    #[test]
    fn a_refusal_reads_back_to_the_same_bytes() {
        let line = r#"{"gate":"review:builder->auditor","hint":"hand off","reason":"a\"b"}"#;
        let r: Refusal = serde_json::from_str(line).unwrap();
        assert_eq!(r.gate, "review:builder->auditor");
        assert_eq!(serde_json::to_string(&r).unwrap(), line);
    }

    #[test]
    fn a_gates_name_is_shared_not_copied() {
        let planner = GateId::new(GateKind::Territory, "territory:planner");
        assert!(Arc::ptr_eq(&RefusedBy::from(&planner).0, &planner.name));
        let (a, b) = (
            RefusedBy::from(GateKind::Sprawl),
            GateId::of(GateKind::Sprawl),
        );
        assert!(Arc::ptr_eq(&a.0, &b.name));
    }
}
