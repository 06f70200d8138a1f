//! Gate decisions: which gate, its mode, and what it said (its [`Refusal`](crate::Refusal)).

use crate::Refusal;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::{Arc, LazyLock};

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

/// How a gate was changed at run time ([`AuditEvent::GateChanged`](crate::AuditEvent)),
/// written as its word (`add`, `remove`, `mode`).
///
/// ```
/// use loopward_core::GateChange;
/// assert_eq!(serde_json::to_string(&GateChange::Mode).unwrap(), r#""mode""#);
/// let back: GateChange = serde_json::from_str(r#""remove""#).unwrap();
/// assert_eq!((back, back.as_str()), (GateChange::Remove, "remove"));
/// assert!(serde_json::from_str::<GateChange>(r#""rename""#).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GateChange {
    /// A gate was added.
    Add,
    /// A gate was removed.
    Remove,
    /// A gate's mode was set.
    Mode,
}

impl GateChange {
    /// The word the ledger writes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Remove => "remove",
            Self::Mode => "mode",
        }
    }
}

impl fmt::Display for GateChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of gate decided: loopward's own gates, and [`GateKind::Custom`] for yours.
///
/// Reports read the kind, never the name: a territory's decisions count as territory decisions
/// (and its advisory warnings as unauthorised writes) whatever the territory is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GateKind {
    /// Control files (the config, loopward's state): never writable by an agent.
    Control,
    /// A territory: paths only its owners may write.
    Territory,
    /// The sprawl gate: a plan before the third unit of work in a turn.
    Sprawl,
    /// A review gate: a handoff that must pass through a reviewer.
    Review,
    /// The policy itself could not tell what a call would change.
    Policy,
    /// A path outside the workspace.
    Workspace,
    /// The kernel sandbox around a shell command.
    Sandbox,
    /// The watch around a shell command (snapshot, compare, revert).
    ShellWatch,
    /// One handoff per turn.
    OneHandoff,
    /// A gate someone else wrote.
    Custom,
}

impl GateKind {
    /// Every kind, in declaration order (a kind's place is its discriminant).
    const ALL: [Self; 10] = [
        Self::Control,
        Self::Territory,
        Self::Sprawl,
        Self::Review,
        Self::Policy,
        Self::Workspace,
        Self::Sandbox,
        Self::ShellWatch,
        Self::OneHandoff,
        Self::Custom,
    ];

    /// The kind's word, as the ledger writes it (and the name of a gate of which there is one).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Control => "control",
            Self::Territory => "territory",
            Self::Sprawl => "sprawl",
            Self::Review => "review",
            Self::Policy => "policy",
            Self::Workspace => "workspace",
            Self::Sandbox => "sandbox",
            Self::ShellWatch => "shell_watch",
            Self::OneHandoff => "one_handoff",
            Self::Custom => "custom",
        }
    }
}

/// Each kind's word, made once: the name [`GateId::of`] shares instead of allocating per decision.
pub(crate) static KIND_NAMES: LazyLock<[Arc<str>; GateKind::ALL.len()]> =
    LazyLock::new(|| GateKind::ALL.map(|k| Arc::from(k.as_str())));

impl fmt::Display for GateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Which gate decided: its kind and its name. In a ledger record the name is `gate` and the kind
/// `gate_kind`.
///
/// ```
/// use loopward_core::{GateId, GateKind};
/// let t = GateId::new(GateKind::Territory, "territory:planner");
/// assert_eq!(t.kind, GateKind::Territory);
/// assert_eq!(t.to_string(), "territory:planner");
/// assert_eq!(&*GateId::of(GateKind::Sprawl).name, "sprawl");
/// ```
///
/// The name is shared: cloning an id, as every decision of a gate does, copies no text.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GateId {
    // Fields in sorted order of their serialised names (`gate` < `gate_kind`): the ledger writes
    // them as declared (see `AuditEvent`). Gate ids still order by kind, then name (below).
    /// The gate's name, as configured (unique in a policy; what `loopward gates` lists).
    #[serde(rename = "gate")]
    pub name: Arc<str>,
    /// The gate's kind.
    #[serde(rename = "gate_kind")]
    pub kind: GateKind,
}

impl Ord for GateId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.kind, &self.name).cmp(&(other.kind, &other.name))
    }
}

impl PartialOrd for GateId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl GateId {
    /// A gate of `kind` called `name`. A gate that decides often makes its id once and clones it.
    pub fn new(kind: GateKind, name: impl Into<Arc<str>>) -> Self {
        Self {
            kind,
            name: name.into(),
        }
    }

    /// The one gate of a kind there is one of (`control`, `sprawl`, …): named after its kind,
    /// with a name made once per kind, not per call.
    pub fn of(kind: GateKind) -> Self {
        Self::new(kind, Arc::clone(&KIND_NAMES[kind as usize]))
    }
}

impl fmt::Display for GateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.name)
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

#[cfg(test)]
mod tests {
    use super::{GateId, GateKind};
    use std::sync::Arc;

    #[test]
    fn every_kind_has_its_own_word_in_its_place() {
        for (i, k) in GateKind::ALL.into_iter().enumerate() {
            assert_eq!(k as usize, i, "{k}");
            assert_eq!(&*GateId::of(k).name, k.as_str());
        }
    }

    #[test]
    fn ids_of_one_kind_share_their_name() {
        let (a, b) = (GateId::of(GateKind::Sprawl), GateId::of(GateKind::Sprawl));
        assert!(Arc::ptr_eq(&a.name, &b.name));
    }

    #[test]
    fn a_shared_name_is_written_and_read_as_a_string() {
        let id = GateId::new(GateKind::Territory, "territory:planner");
        let text = serde_json::to_string(&id).unwrap();
        assert_eq!(
            text,
            r#"{"gate":"territory:planner","gate_kind":"territory"}"#
        );
        assert_eq!(serde_json::from_str::<GateId>(&text).unwrap(), id);
    }
}
