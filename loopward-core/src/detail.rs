//! The details of a layer's decision ([`LayerDetail`]): typed for the built-in layers' frequent
//! decisions, so deciding builds no JSON map, and JSON for everything else.
//!
//! A typed detail is serialised only when it is written, to exactly the bytes the same figures
//! as a `serde_json` map give (keys in sorted order, absent keys omitted). Read back from a
//! ledger, every detail is [`LayerDetail::Json`]; equality compares the JSON, so an event
//! recorded in memory equals the same event read back.
//!
//! ```
//! use loopward_core::{ClassJumpDetail, LayerDetail};
//! use serde_json::json;
//! let typed = LayerDetail::ClassJump(ClassJumpDetail {
//!     allowed: 3, failures: 1, next: Some("tests-first".into()), source: None,
//!     strategy: "tests-first".into(), subtask: "fix the build".into(), tool: None,
//! });
//! let text = serde_json::to_string(&typed).unwrap();
//! let map = json!({"subtask": "fix the build", "strategy": "tests-first", "failures": 1,
//!                  "allowed": 3, "next": "tests-first"});
//! assert_eq!(text, serde_json::to_string(&map).unwrap());
//! let read: LayerDetail = serde_json::from_str(&text).unwrap();
//! assert_eq!(read, typed);
//! assert_eq!(typed.to_json()["failures"], 1);
//! assert_eq!(typed.to_string(), text);
//! ```

use crate::id::AgentId;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::sync::Arc;

/// What a layer recorded beside its decision.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum LayerDetail {
    /// Any JSON: what custom layers record, the built-in layers' rarer decisions, and every
    /// detail read back from a ledger.
    Json(serde_json::Value),
    /// A class-jump verdict on a reported or observed attempt.
    ClassJump(ClassJumpDetail),
    /// A stop-gate's verdict on an action.
    StopGate(StopGateDetail),
    /// The caps layer letting a turn start.
    CapsAllow(CapsAllowDetail),
    /// The rate limiter admitting or refusing a model call.
    RateLimit(RateLimitDetail),
    /// The repeat layer counting an identical tool call.
    Repeat(RepeatDetail),
}

impl LayerDetail {
    /// The detail as JSON: borrowed when it is JSON already, built otherwise.
    pub fn to_json(&self) -> Cow<'_, serde_json::Value> {
        match self {
            Self::Json(v) => Cow::Borrowed(v),
            typed => Cow::Owned(serde_json::to_value(typed).unwrap_or_default()),
        }
    }

    /// The detail as JSON, by value.
    pub fn into_json(self) -> serde_json::Value {
        match self {
            Self::Json(v) => v,
            typed => serde_json::to_value(&typed).unwrap_or_default(),
        }
    }

    /// Whether it is JSON `null` (a record without details).
    pub fn is_null(&self) -> bool {
        matches!(self, Self::Json(serde_json::Value::Null))
    }
}

/// The detail as compact JSON, as a `serde_json::Value` displays it.
impl std::fmt::Display for LayerDetail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Json(v) => v.fmt(f),
            typed => f.write_str(&serde_json::to_string(typed).map_err(|_| std::fmt::Error)?),
        }
    }
}

impl Default for LayerDetail {
    /// `null`: what a record without a detail reads back as.
    fn default() -> Self {
        Self::Json(serde_json::Value::Null)
    }
}

impl From<serde_json::Value> for LayerDetail {
    fn from(v: serde_json::Value) -> Self {
        Self::Json(v)
    }
}

impl PartialEq for LayerDetail {
    /// Equal when their JSON is: a typed detail equals the same figures read back.
    fn eq(&self, other: &Self) -> bool {
        self.to_json() == other.to_json()
    }
}

impl Serialize for LayerDetail {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Json(v) => v.serialize(s),
            Self::ClassJump(d) => d.serialize(s),
            Self::StopGate(d) => d.serialize(s),
            Self::CapsAllow(d) => d.serialize(s),
            Self::RateLimit(d) => d.serialize(s),
            Self::Repeat(d) => d.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for LayerDetail {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(d).map(Self::Json)
    }
}

/// Writes `(key, value)` pairs as a map, skipping the `None`s. Callers list keys in sorted
/// order: the order a `serde_json` map (a `BTreeMap`) writes them in.
macro_rules! sorted_map {
    ($s:expr; $($key:literal => $value:expr),* $(,)?) => {{
        let mut m = $s.serialize_map(None)?;
        $( if let Some(v) = $value { m.serialize_entry($key, &v)?; } )*
        m.end()
    }};
}

/// A class-jump verdict: `{allowed, failures, next, source?, strategy, subtask, tool?}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassJumpDetail {
    /// Failures each strategy is allowed.
    pub allowed: u32,
    /// Failures of the strategy so far.
    pub failures: u32,
    /// The strategy the next attempt must use (`null` when exhausted or done).
    pub next: Option<Arc<str>>,
    /// `evidence` when the failure was counted from a tool's result, not reported.
    pub source: Option<&'static str>,
    /// The strategy the attempt used.
    pub strategy: Arc<str>,
    /// The subtask.
    pub subtask: Arc<str>,
    /// The tool whose failed result was counted (with `source`).
    pub tool: Option<Arc<str>>,
}

impl Serialize for ClassJumpDetail {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        sorted_map!(s;
            "allowed" => Some(self.allowed),
            "failures" => Some(self.failures),
            "next" => Some(self.next.as_deref()),
            "source" => self.source,
            "strategy" => Some(&*self.strategy),
            "subtask" => Some(&*self.subtask),
            "tool" => self.tool.as_deref(),
        )
    }
}

/// A stop-gate's verdict: `{action, by?, dir?, gate, id?, mode, reason?, summary}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopGateDetail {
    /// The action's key (`phase:deploy`, `tool:shell:<digest>`).
    pub action: Arc<str>,
    /// Who approved, for a person's approval.
    pub by: Option<String>,
    /// Where a durable gate keeps its pending record.
    pub dir: Option<&'static str>,
    /// The gate's name.
    pub gate: Arc<str>,
    /// The durable pending record's id.
    pub id: Option<String>,
    /// The gate's mode (`auto`, `deny`, `interactive`, `durable`).
    pub mode: &'static str,
    /// Why it denied.
    pub reason: Option<String>,
    /// The action in words.
    pub summary: Arc<str>,
}

impl Serialize for StopGateDetail {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        sorted_map!(s;
            "action" => Some(&*self.action),
            "by" => self.by.as_deref(),
            "dir" => self.dir,
            "gate" => Some(&*self.gate),
            "id" => self.id.as_deref(),
            "mode" => Some(self.mode),
            "reason" => self.reason.as_deref(),
            "summary" => Some(&*self.summary),
        )
    }
}

/// The caps layer letting a turn start: `{hops, turn, turns_per_run}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapsAllowDetail {
    /// Handoffs so far in the run.
    pub hops: u32,
    /// The turn's number among the run's counted turns.
    pub turn: u32,
    /// The run's turn cap.
    pub turns_per_run: u32,
}

impl Serialize for CapsAllowDetail {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        sorted_map!(s;
            "hops" => Some(self.hops),
            "turn" => Some(self.turn),
            "turns_per_run" => Some(self.turns_per_run),
        )
    }
}

/// The rate limiter's decision on a model call: `{agent, reason?, tokens, waited_ms?}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimitDetail {
    /// The agent calling.
    pub agent: AgentId,
    /// Why it was refused.
    pub reason: Option<String>,
    /// The tokens the call was estimated at.
    pub tokens: u64,
    /// How long it waited to be admitted, in milliseconds.
    pub waited_ms: Option<u64>,
}

impl Serialize for RateLimitDetail {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        sorted_map!(s;
            "agent" => Some(self.agent.as_str()),
            "reason" => self.reason.as_deref(),
            "tokens" => Some(self.tokens),
            "waited_ms" => self.waited_ms,
        )
    }
}

/// The repeat layer's count of an identical call: `{call_id, count, digest, limit, tool}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepeatDetail {
    /// The tool call.
    pub call_id: String,
    /// How many times this exact call was made in the run, this one included.
    pub count: u32,
    /// The SHA-256 of the tool and its canonical arguments.
    pub digest: String,
    /// How many identical calls are allowed.
    pub limit: u32,
    /// The tool.
    pub tool: String,
}

impl Serialize for RepeatDetail {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        sorted_map!(s;
            "call_id" => Some(&self.call_id),
            "count" => Some(self.count),
            "digest" => Some(&self.digest),
            "limit" => Some(self.limit),
            "tool" => Some(&self.tool),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn same_bytes(typed: LayerDetail, map: serde_json::Value) {
        let direct = serde_json::to_string(&typed).unwrap();
        assert_eq!(direct, serde_json::to_string(&map).unwrap());
        // Through a `Value`, as a ledger that converts first would write it.
        let via = serde_json::to_string(&serde_json::to_value(&typed).unwrap()).unwrap();
        assert_eq!(via, direct);
        assert_eq!(typed.to_string(), map.to_string());
        assert_eq!(typed, LayerDetail::Json(map));
    }

    #[test]
    fn typed_details_write_the_bytes_of_their_json_maps() {
        let sub: Arc<str> = "fix \"it\"".into();
        same_bytes(
            LayerDetail::ClassJump(ClassJumpDetail {
                allowed: 3,
                failures: 3,
                next: None,
                source: Some("evidence"),
                strategy: "a".into(),
                subtask: sub.clone(),
                tool: Some("shell".into()),
            }),
            json!({"source": "evidence", "tool": "shell", "subtask": &*sub, "strategy": "a",
                   "failures": 3, "allowed": 3, "next": null}),
        );
        same_bytes(
            LayerDetail::StopGate(StopGateDetail {
                action: "phase:deploy".into(),
                by: None,
                dir: Some(".loopward/pending"),
                gate: "stopgate-1".into(),
                id: Some("p1".into()),
                mode: "durable",
                reason: None,
                summary: "enter phase deploy".into(),
            }),
            json!({"gate": "stopgate-1", "mode": "durable", "action": "phase:deploy",
                   "summary": "enter phase deploy", "id": "p1", "dir": ".loopward/pending"}),
        );
        same_bytes(
            LayerDetail::StopGate(StopGateDetail {
                action: "turn:b".into(),
                by: Some("ann".into()),
                dir: None,
                gate: "g".into(),
                id: None,
                mode: "interactive",
                reason: Some("no".into()),
                summary: "s".into(),
            }),
            json!({"gate": "g", "mode": "interactive", "action": "turn:b", "summary": "s",
                   "by": "ann", "reason": "no"}),
        );
        same_bytes(
            LayerDetail::CapsAllow(CapsAllowDetail {
                hops: 2,
                turn: 7,
                turns_per_run: 40,
            }),
            json!({"turn": 7, "turns_per_run": 40, "hops": 2}),
        );
        let agent = AgentId::new("builder").unwrap();
        same_bytes(
            LayerDetail::RateLimit(RateLimitDetail {
                agent: agent.clone(),
                reason: None,
                tokens: 120,
                waited_ms: Some(0),
            }),
            json!({"agent": agent, "tokens": 120, "waited_ms": 0}),
        );
        same_bytes(
            LayerDetail::RateLimit(RateLimitDetail {
                agent: agent.clone(),
                reason: Some("quota".into()),
                tokens: u64::MAX,
                waited_ms: None,
            }),
            json!({"agent": agent, "tokens": u64::MAX, "reason": "quota"}),
        );
    }

    #[test]
    fn a_repeat_detail_writes_the_bytes_of_its_json_map() {
        same_bytes(
            LayerDetail::Repeat(RepeatDetail {
                call_id: "c\u{1}".into(),
                count: 3,
                digest: "ab".into(),
                limit: 2,
                tool: "write_file".into(),
            }),
            json!({"call_id": "c\u{1}", "tool": "write_file", "digest": "ab", "count": 3,
                   "limit": 2}),
        );
    }

    #[test]
    fn a_detail_reads_back_as_json_and_defaults_to_null() {
        let d: LayerDetail = serde_json::from_str(r#"{"b":1,"a":[2]}"#).unwrap();
        assert!(matches!(&d, LayerDetail::Json(v) if v == &json!({"a": [2], "b": 1})));
        assert_eq!(d.to_json()["b"], 1);
        assert_eq!(d.to_string(), r#"{"a":[2],"b":1}"#);
        assert!(LayerDetail::default().is_null());
        assert_eq!(LayerDetail::default().into_json(), serde_json::Value::Null);
    }
}
