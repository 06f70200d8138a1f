//! Effects: what a tool call actually changed on disk.

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

/// What happened to a path.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EffectKind {
    /// The path did not exist and now does.
    Create,
    /// The path's content changed.
    Modify,
    /// The path existed and no longer does.
    Delete,
    /// The path was created by moving `from` (workspace-relative).
    Rename {
        /// Where it came from.
        from: String,
    },
    /// A link at the path was created (symbolic or hard).
    Link,
}

/// Whether an effect stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectStatus {
    /// The change happened and stands.
    Ok,
    /// The tool tried and failed; nothing changed.
    Failed,
    /// The change happened but was reverted by a gate.
    Reverted,
}

/// One change to one workspace path, made by a tool call.
///
/// Written as one object with its keys sorted (`{"from":…,"kind":"rename","path":…,"status":"ok"}`),
/// as the ledger writes every object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize)]
pub struct Effect {
    /// The canonical workspace-relative path (forward slashes, no `.` or `..`).
    pub path: String,
    /// What happened to it.
    #[serde(flatten)]
    pub kind: EffectKind,
    /// Whether it stands.
    pub status: EffectStatus,
}

impl EffectKind {
    /// The kind as written (`create`, `rename`, …).
    fn label(&self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Modify => "modify",
            Self::Delete => "delete",
            Self::Rename { .. } => "rename",
            Self::Link => "link",
        }
    }
}

impl Serialize for Effect {
    /// By hand, because a derived one writes the flattened kind's tag before its fields
    /// (`"kind":"rename","from":…`) and the ledger's keys are sorted.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let from = match &self.kind {
            EffectKind::Rename { from } => Some(from),
            EffectKind::Create | EffectKind::Modify | EffectKind::Delete | EffectKind::Link => None,
        };
        let mut st = s.serialize_struct("Effect", 3 + usize::from(from.is_some()))?;
        if let Some(from) = from {
            st.serialize_field("from", from)?;
        }
        st.serialize_field("kind", self.kind.label())?;
        st.serialize_field("path", &self.path)?;
        st.serialize_field("status", &self.status)?;
        st.end()
    }
}

impl Effect {
    /// An effect that happened and stands.
    pub fn ok(path: impl Into<String>, kind: EffectKind) -> Self {
        Self {
            path: path.into(),
            kind,
            status: EffectStatus::Ok,
        }
    }
}
