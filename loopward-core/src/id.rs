//! Identifiers for runs, agents and turns.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

/// The longest agent name accepted; names appear in paths, prompts and ledgers.
pub const MAX_AGENT_NAME: usize = 64;

/// The name of an agent in a team (`planner`, `builder`, …).
///
/// Names are lowercase ASCII letters, digits, `-` and `_`, start with a letter, and are at most
/// [`MAX_AGENT_NAME`] bytes, so they are safe in file names, prompts and ledgers.
///
/// ```
/// use loopward_core::AgentId;
/// let a = AgentId::new("planner").unwrap();
/// assert_eq!(a.as_str(), "planner");
/// assert!(AgentId::new("../etc").is_err());
/// assert!(AgentId::new("").is_err());
/// ```
///
/// Cloning one is a reference-count increment: the name is shared, not copied.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentId(Arc<str>);

/// Why a string is not a valid [`AgentId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid agent name {name:?}: {why} (use lowercase letters, digits, '-' or '_', starting with a letter, at most 64 bytes)")]
pub struct InvalidAgentId {
    /// The rejected name.
    pub name: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl AgentId {
    /// Validates and wraps an agent name.
    pub fn new(name: impl Into<String>) -> Result<Self, InvalidAgentId> {
        let name = name.into();
        let why = if name.is_empty() {
            Some("it is empty")
        } else if name.len() > MAX_AGENT_NAME {
            Some("it is too long")
        } else if !name.as_bytes()[0].is_ascii_lowercase() {
            Some("it does not start with a lowercase letter")
        } else if !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            Some("it contains a character outside [a-z0-9_-]")
        } else {
            None
        };
        match why {
            Some(why) => Err(InvalidAgentId { name, why }),
            None => Ok(Self(name.into())),
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for AgentId {
    type Error = InvalidAgentId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl From<AgentId> for String {
    fn from(a: AgentId) -> String {
        a.0.as_ref().to_owned()
    }
}

impl Serialize for AgentId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for AgentId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::new(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The identifier of one run (one task given to a team). Chosen by the runner.
///
/// Cloning one is a reference-count increment. In serialised form it is the bare string (read
/// back as written, as before: a ledger names its run, and a reader reports what it names).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(Arc<str>);

impl RunId {
    /// Wraps a run id. Run ids become directory names, so only `[A-Za-z0-9_-]` is accepted.
    pub fn new(id: impl Into<String>) -> Option<Self> {
        let id = id.into();
        let ok = !id.is_empty()
            && id.len() <= 128
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        ok.then(|| Self(id.into()))
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Serialize for RunId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RunId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Self(String::deserialize(d)?.into()))
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The number of a turn within a run, counting from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TurnNumber(pub u32);

impl fmt::Display for TurnNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
