//! What agents said to the people watching a run, read back from its records.
//!
//! An agent's [`say`](crate::tools::Say) is recorded as every tool call is: its words in the
//! call's request, then its result. Words count as said only once that result is not an error
//! (a gate, a limit or the tool itself may refuse them). They are never a person's message.
//!
//! ```
//! use loopward_core::{AgentId, AuditEvent, CallId};
//! use loopward_runner::audit::Sayings;
//! let builder = AgentId::new("builder").unwrap();
//! let mut sayings = Sayings::default();
//! let asked = AuditEvent::ToolRequested { call_id: "c1".into(), tool: "say".into(),
//!     arguments: serde_json::json!({"text": "tests pass; merging next"}) };
//! assert!(sayings.fold(Some(&builder), &asked).is_none());
//! let done = AuditEvent::ToolFinished { call_id: "c1".into(), tool: "say".into(),
//!     is_error: false, effects: vec![], output: None, summary: String::new() };
//! let said = sayings.fold(Some(&builder), &done).unwrap();
//! assert_eq!(said.to_string(), "builder said: tests pass; merging next");
//! ```

use crate::tools::SAY_TOOL;
use loopward_core::{AgentId, AuditEvent, CallId};
use std::collections::HashMap;

/// Words an agent said to the people watching its run (a `say` call that went through); an
/// agent's, never a person's ([`loopward_core::Said`] is made from a person's words only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSaid {
    /// Who said it (`None`: a record outside any agent's turn).
    pub agent: Option<AgentId>,
    /// The words, as recorded (secrets already masked).
    pub text: String,
}

impl AgentSaid {
    /// Who said it, in words: the agent's name (`an agent` when the record names none).
    pub fn speaker(&self) -> &str {
        self.agent.as_ref().map_or("an agent", AgentId::as_str)
    }
}

/// `<agent> said: <text>`, as every page shows it.
impl std::fmt::Display for AgentSaid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} said: {}", self.speaker(), self.text)
    }
}

/// Pairs each `say` call's request (its words) with its end, over records in ledger order.
#[derive(Clone, Debug, Default)]
pub struct Sayings {
    /// The words of `say` calls requested and not yet ended, by call id.
    asked: HashMap<CallId, String>,
}

impl Sayings {
    /// Folds one event of `agent`: the words said, when it ends a `say` call that went through.
    pub fn fold(&mut self, agent: Option<&AgentId>, event: &AuditEvent) -> Option<AgentSaid> {
        match event {
            AuditEvent::ToolRequested {
                call_id,
                tool,
                arguments,
            } if tool == SAY_TOOL => {
                let text = arguments.get("text").and_then(serde_json::Value::as_str);
                match text {
                    Some(t) => self.asked.insert(call_id.clone(), t.to_string()),
                    None => self.asked.remove(call_id),
                };
                None
            }
            AuditEvent::ToolFinished {
                call_id,
                tool,
                is_error,
                ..
            } if tool == SAY_TOOL => {
                let text = self.asked.remove(call_id)?;
                (!is_error).then(|| AgentSaid {
                    agent: agent.cloned(),
                    text,
                })
            }
            _ => None,
        }
    }

    /// Whether a record of this kind can take part in a `say` (the others need not be parsed).
    pub fn concerns(kind: &str) -> bool {
        matches!(kind, "tool_requested" | "tool_finished")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn asked(id: &str, arguments: serde_json::Value) -> AuditEvent {
        AuditEvent::ToolRequested {
            call_id: id.into(),
            tool: SAY_TOOL.into(),
            arguments,
        }
    }

    fn ended(id: &str, is_error: bool) -> AuditEvent {
        AuditEvent::ToolFinished {
            call_id: id.into(),
            tool: SAY_TOOL.into(),
            is_error,
            effects: vec![],
            output: None,
            summary: String::new(),
        }
    }

    #[test]
    fn words_of_a_refused_say_were_not_said() {
        let a = AgentId::new("a").unwrap();
        let mut s = Sayings::default();
        assert!(s
            .fold(Some(&a), &asked("c1", json!({"text": "x"})))
            .is_none());
        assert!(s.fold(Some(&a), &ended("c1", true)).is_none());
        // A call id used again later (another turn) is paired with its own request.
        s.fold(Some(&a), &asked("c1", json!({"text": "y"})));
        let said = s.fold(Some(&a), &ended("c1", false)).unwrap();
        assert_eq!(said.text, "y");
        // An end with no request (or a request without text) says nothing.
        assert!(s.fold(Some(&a), &ended("c1", false)).is_none());
        s.fold(None, &asked("c2", json!({})));
        assert!(s.fold(None, &ended("c2", false)).is_none());
    }

    #[test]
    fn other_tools_are_not_sayings() {
        let mut s = Sayings::default();
        let read = AuditEvent::ToolRequested {
            call_id: "c".into(),
            tool: "read_file".into(),
            arguments: json!({"text": "x"}),
        };
        assert!(s.fold(None, &read).is_none());
        let done = AuditEvent::ToolFinished {
            call_id: "c".into(),
            tool: "read_file".into(),
            is_error: false,
            effects: vec![],
            output: None,
            summary: String::new(),
        };
        assert!(s.fold(None, &done).is_none());
    }
}
