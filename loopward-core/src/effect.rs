//! Effects: what a tool call actually changed on disk.

use serde::{Deserialize, Serialize};

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
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Effect {
    /// The canonical workspace-relative path (forward slashes, no `.` or `..`).
    pub path: String,
    /// What happened to it.
    #[serde(flatten)]
    pub kind: EffectKind,
    /// Whether it stands.
    pub status: EffectStatus,
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
