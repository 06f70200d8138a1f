//! What was done about a change the rules forbid, once it was found.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What was done about a forbidden change ([`AuditEvent::Violation`](crate::AuditEvent)).
///
/// Only [`Remedy::Reverted`] means the workspace is as the rules allow; the report counts every
/// other remedy as an unauthorised write.
///
/// ```
/// use loopward_core::Remedy;
/// assert_eq!(serde_json::to_string(&Remedy::Reverted).unwrap(), r#""reverted""#);
/// let kept = Remedy::NotReverted { why: "disk full".into() };
/// assert_eq!(kept.to_string(), "not reverted: disk full");
/// assert!(Remedy::Reverted.is_reverted() && !kept.is_reverted());
/// // Ledgers written before the type existed held free text; they still read.
/// let old: Remedy = serde_json::from_str(r#""reverted""#).unwrap();
/// assert_eq!(old, Remedy::Reverted);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Remedy {
    /// The change was put back: the workspace is as it was before it.
    Reverted,
    /// Putting it back was tried and failed; a person must restore it.
    NotReverted {
        /// Why the revert failed.
        why: String,
    },
    /// Nothing could be done (the change was found after it stood, or could not be judged).
    Unremedied {
        /// Why, and what a person should do.
        why: String,
    },
}

impl Remedy {
    /// Whether the change was put back.
    pub fn is_reverted(&self) -> bool {
        matches!(self, Self::Reverted)
    }
}

impl fmt::Display for Remedy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reverted => f.write_str("reverted"),
            Self::NotReverted { why } => write!(f, "not reverted: {why}"),
            Self::Unremedied { why } => write!(f, "none: {why}"),
        }
    }
}

impl<'de> Deserialize<'de> for Remedy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "snake_case")]
        enum Typed {
            Reverted,
            NotReverted { why: String },
            Unremedied { why: String },
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Typed(Typed),
            Text(String),
        }
        Ok(match Either::deserialize(d)? {
            Either::Typed(Typed::Reverted) => Self::Reverted,
            Either::Typed(Typed::NotReverted { why }) => Self::NotReverted { why },
            Either::Typed(Typed::Unremedied { why }) => Self::Unremedied { why },
            // Free text from before the type: "reverted", "not reverted: …", "none: …".
            Either::Text(t) if t.trim() == "reverted" => Self::Reverted,
            Either::Text(t) => match t.strip_prefix("not reverted: ") {
                Some(why) => Self::NotReverted { why: why.into() },
                None => Self::Unremedied {
                    why: t.strip_prefix("none: ").unwrap_or(&t).into(),
                },
            },
        })
    }
}
