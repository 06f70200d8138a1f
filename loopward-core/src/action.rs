//! What a gate or layer decides on: an [`Action`], typed here and written `kind:name` in the
//! ledger and in `loopward.toml` (`tool:write_file`, `handoff:auditor`).

use crate::{AgentId, InvalidAgentId, ToolName};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// One action a decision is taken on. Its text form, `kind:name`, is what the ledger's
/// `action` fields hold; [`Action::from_str`] reads it back and refuses anything else.
///
/// ```
/// use loopward_core::{Action, AgentId};
/// let a: Action = "handoff:auditor".parse().unwrap();
/// assert_eq!(a, Action::Handoff(AgentId::new("auditor").unwrap()));
/// assert_eq!(Action::tool("write_file").to_string(), "tool:write_file");
/// // A tool's name may hold a colon; only the first one separates the kind.
/// assert_eq!("tool:mcp:fs".parse::<Action>().unwrap(), Action::tool("mcp:fs"));
/// let err = "deploy".parse::<Action>().unwrap_err();
/// assert!(err.to_string().contains("expected kind:name"), "{err}");
/// assert!("handoff:".parse::<Action>().is_err());
/// assert_eq!(serde_json::to_string(&Action::tool("shell")).unwrap(), r#""tool:shell""#);
/// // The name is shared: every decision on one call clones the action without copying it.
/// let call = Action::tool(String::from("write_file"));
/// assert!(matches!(&call, Action::Tool(name) if name == "write_file"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Action {
    /// Calling a tool (`tool:<name>`), as the agent's tool set or the client names it.
    Tool(ToolName),
    /// Handing the work on to an agent (`handoff:<agent>`).
    Handoff(AgentId),
    /// An agent's turn (`turn:<agent>`).
    Turn(AgentId),
    /// Entering a named phase of the run (`phase:<name>`).
    Phase(Arc<str>),
}

impl Action {
    /// The action of calling `tool`.
    pub fn tool(tool: impl Into<ToolName>) -> Self {
        Self::Tool(tool.into())
    }

    /// The kind, as written before the colon.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Tool(_) => "tool",
            Self::Handoff(_) => "handoff",
            Self::Turn(_) => "turn",
            Self::Phase(_) => "phase",
        }
    }

    /// What the action names: the tool, the agent or the phase.
    pub fn name(&self) -> &str {
        match self {
            Self::Tool(n) => n.as_str(),
            Self::Phase(n) => n,
            Self::Handoff(a) | Self::Turn(a) => a.as_str(),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind(), self.name())
    }
}

/// Text that is not an [`Action`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not an action: {why}; expected kind:name with kind one of tool, handoff, turn, phase (e.g. tool:write_file, handoff:auditor)")]
pub struct InvalidAction {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub why: String,
}

impl FromStr for Action {
    type Err = InvalidAction;

    fn from_str(text: &str) -> Result<Self, InvalidAction> {
        let bad = |why: String| InvalidAction {
            text: text.to_string(),
            why,
        };
        let Some((kind, name)) = text.split_once(':') else {
            return Err(bad("no kind".into()));
        };
        if name.trim().is_empty() {
            return Err(bad(format!("the {kind} has no name")));
        }
        let agent = |n: &str| AgentId::new(n).map_err(|e: InvalidAgentId| bad(e.to_string()));
        match kind {
            "tool" => Ok(Self::Tool(name.into())),
            "phase" => Ok(Self::Phase(name.into())),
            "handoff" => Ok(Self::Handoff(agent(name)?)),
            "turn" => Ok(Self::Turn(agent(name)?)),
            other => Err(bad(format!("unknown kind {other:?}"))),
        }
    }
}

impl Serialize for Action {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::Action;
    use crate::{AgentId, AuditEvent, Decision, GateId, GateKind, GateMode};

    fn decision(action: Action) -> AuditEvent {
        AuditEvent::GateDecision {
            call_id: Some("c1".into()),
            gate: GateId::of(GateKind::Review),
            mode: GateMode::Enforce,
            action,
            path_raw: None,
            source: None,
            path: None,
            decision: Decision::Allow,
        }
    }

    #[test]
    fn the_ledger_keeps_its_action_strings_and_reads_them_back() {
        let auditor = AgentId::new("auditor").unwrap();
        for (action, text) in [
            (Action::tool("write_file"), r#""action":"tool:write_file""#),
            (Action::Handoff(auditor), r#""action":"handoff:auditor""#),
        ] {
            let line = serde_json::to_string(&decision(action.clone())).unwrap();
            assert!(line.contains(text), "{line}");
            let back: AuditEvent = serde_json::from_str(&line).unwrap();
            assert_eq!(back, decision(action));
        }
    }

    #[test]
    fn a_record_whose_action_is_not_one_does_not_read() {
        let line = serde_json::to_string(&decision(Action::tool("x")))
            .unwrap()
            .replace("tool:x", "handoff to auditor");
        let err = serde_json::from_str::<AuditEvent>(&line).unwrap_err();
        assert!(err.to_string().contains("is not an action"), "{err}");
    }
}
