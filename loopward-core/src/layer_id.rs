//! Which layer took a decision, as a type: the built-in layers by name, any other layer by the
//! name it gives itself. Written in the ledger as the same word it always was (`caps`,
//! `class_jump`, `stopgate` …) and read back as the same variant, so no reader matches a layer
//! by its spelling.
//!
//! ```
//! use loopward_core::LayerId;
//! assert_eq!(LayerId::ClassJump.as_str(), "class_jump");
//! assert_eq!(LayerId::from("class_jump"), LayerId::ClassJump);
//! // A layer of the application's own keeps its name, and is never taken for a built-in one.
//! let mine = LayerId::from("no_interns");
//! assert_eq!((mine.as_str(), mine.is_builtin()), ("no_interns", false));
//! // The ledger's bytes are the word.
//! assert_eq!(serde_json::to_string(&LayerId::StopGate).unwrap(), r#""stopgate""#);
//! let back: LayerId = serde_json::from_str(r#""rate_limit""#).unwrap();
//! assert_eq!(back, LayerId::RateLimit);
//! ```

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;

/// The layer a [`LayerDecision`](crate::AuditEvent::LayerDecision) comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum LayerId {
    /// Turn, hop, step and wall-time caps.
    Caps,
    /// The same call repeated.
    Repeat,
    /// Failed attempts of one class: jump to another.
    ClassJump,
    /// Stop-gates: a person's approval before a call, a turn or a phase.
    StopGate,
    /// Rate limits.
    RateLimit,
    /// Budgets.
    Budget,
    /// Timeouts.
    Timeout,
    /// A person's message delivered into a running run.
    Inbox,
    /// A resumed run's replay of its journal.
    Resume,
    /// An event of a Claude Code session the hook observed.
    ClaudeCode,
    /// An event of a Codex session the hook observed.
    Codex,
    /// An event of a Gemini CLI session the hook observed.
    GeminiCli,
    /// A person's kill switch (`loopward serve`'s stop), taken at a turn boundary.
    Stop,
    /// The policy a hook session judges with (its version, noted when it changes).
    Policy,
    /// A CLI agent's verifier: what it said of the session's work (a claim of done refused).
    Verify,
    /// A CLI agent's session (started, ended).
    Session,
    /// A CLI agent's session's own hook ledger, linked by its count and last hash (runs
    /// before the hook's decisions were recorded in the run's ledger).
    SessionLedger,
    /// One hook event of a CLI agent's session, judged by the loop: the records that follow
    /// (its `records` of them) are that event's decision, in the run's ledger.
    Hook,
    /// A layer of someone else's, by its own name.
    Custom(Cow<'static, str>),
}

impl LayerId {
    /// Every built-in layer.
    pub const BUILTIN: [Self; 18] = [
        Self::Caps,
        Self::Repeat,
        Self::ClassJump,
        Self::StopGate,
        Self::RateLimit,
        Self::Budget,
        Self::Timeout,
        Self::Inbox,
        Self::Resume,
        Self::ClaudeCode,
        Self::Codex,
        Self::GeminiCli,
        Self::Stop,
        Self::Policy,
        Self::Verify,
        Self::Session,
        Self::SessionLedger,
        Self::Hook,
    ];

    /// The word the ledger writes.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Caps => "caps",
            Self::Repeat => "repeat",
            Self::ClassJump => "class_jump",
            Self::StopGate => "stopgate",
            Self::RateLimit => "rate_limit",
            Self::Budget => "budget",
            Self::Timeout => "timeout",
            Self::Inbox => "inbox",
            Self::Resume => "resume",
            Self::ClaudeCode => "claude_code",
            Self::Codex => "codex",
            Self::GeminiCli => "gemini",
            Self::Stop => "stop",
            Self::Policy => "policy",
            Self::Verify => "verify",
            Self::Session => "session",
            Self::SessionLedger => "session_ledger",
            Self::Hook => "hook",
            Self::Custom(name) => name,
        }
    }

    /// Whether it is one of loopward's own layers.
    pub fn is_builtin(&self) -> bool {
        !matches!(self, Self::Custom(_))
    }

    /// The layer a word names: a built-in one's word is that layer, any other a custom layer.
    fn parse(word: Cow<'static, str>) -> Self {
        Self::BUILTIN
            .into_iter()
            .find(|b| b.as_str() == word)
            .unwrap_or(Self::Custom(word))
    }
}

impl From<&'static str> for LayerId {
    fn from(word: &'static str) -> Self {
        Self::parse(Cow::Borrowed(word))
    }
}

impl From<String> for LayerId {
    fn from(word: String) -> Self {
        Self::parse(Cow::Owned(word))
    }
}

impl fmt::Display for LayerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for LayerId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for LayerId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::LayerId;

    #[test]
    fn every_builtin_reads_back_as_itself_and_no_custom_name_as_a_builtin() {
        for b in LayerId::BUILTIN {
            assert_eq!(LayerId::from(b.as_str().to_string()), b);
            assert!(b.is_builtin());
        }
        for word in ["classjump", "Caps", "", "stop_gate"] {
            assert!(!LayerId::from(word).is_builtin(), "{word}");
        }
    }
}
