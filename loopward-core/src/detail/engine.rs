//! The details the engine's layers write: caps, repeat, class-jump, stop-gates, rate limits,
//! timeouts and budgets.
//!
//! Fields are declared in sorted order of their written names (the ledger's keys are sorted); a
//! detail with an optional key it omits serialises by hand ([`sorted_map!`]) or skips it.

use crate::call::{CallId, ToolName};
use crate::id::AgentId;
use crate::usage::Usage;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::Arc;

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
    pub tool: Option<ToolName>,
}

impl ClassJumpDetail {
    /// The `source` of a failure counted from a tool's result.
    pub const EVIDENCE: &'static str = "evidence";

    /// Whether the failure was counted from a tool's result, not reported by the agent.
    pub fn is_evidence(&self) -> bool {
        self.source == Some(Self::EVIDENCE)
    }
}

/// The `'static` word of `words` that `word` is: a detail with any other word cannot be held by
/// its typed form, and stays JSON.
fn known<E: serde::de::Error>(word: &str, words: &[&'static str]) -> Result<&'static str, E> {
    words
        .iter()
        .copied()
        .find(|w| *w == word)
        .ok_or_else(|| E::custom(format!("{word:?} is not one of {words:?}")))
}

impl<'de> Deserialize<'de> for ClassJumpDetail {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            allowed: u32,
            failures: u32,
            next: Option<Arc<str>>,
            source: Option<String>,
            strategy: Arc<str>,
            subtask: Arc<str>,
            tool: Option<ToolName>,
        }
        let r = Raw::deserialize(d)?;
        Ok(Self {
            allowed: r.allowed,
            failures: r.failures,
            next: r.next,
            source: r.source.map(|s| known(&s, &[Self::EVIDENCE])).transpose()?,
            strategy: r.strategy,
            subtask: r.subtask,
            tool: r.tool,
        })
    }
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
            "tool" => self.tool.as_ref().map(ToolName::as_str),
        )
    }
}

/// Class-jump refusing a report: `{reason, strategy, subtask}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassJumpRefusedDetail {
    /// Why (the error the agent was told).
    pub reason: String,
    /// The strategy reported.
    pub strategy: String,
    /// The subtask reported.
    pub subtask: String,
}

/// A stop-gate's verdict: `{action, by?, dir?, gate, id?, mode, reason?, summary}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopGateDetail {
    /// The action's key (`phase:deploy`, `tool:shell:<digest>`).
    pub action: Arc<str>,
    /// Who approved, for a person's approval.
    pub by: Option<String>,
    /// Where a durable gate keeps its pending record (one of [`Self::DIRS`]).
    pub dir: Option<&'static str>,
    /// The gate's name.
    pub gate: Arc<str>,
    /// The durable pending record's id.
    pub id: Option<String>,
    /// The gate's mode (one of [`Self::MODES`]).
    pub mode: &'static str,
    /// Why it denied.
    pub reason: Option<String>,
    /// The action in words.
    pub summary: Arc<str>,
}

impl StopGateDetail {
    /// The modes a stop-gate has; a detail read back with another stays JSON.
    pub const MODES: [&'static str; 4] = ["auto", "deny", "interactive", "durable"];
    /// Where durable gates keep pending records (the workspace's folder, or the state
    /// directory's for a keyed store); a detail read back with another stays JSON.
    pub const DIRS: [&'static str; 2] = [".loopward/pending", "<state>/pending"];
}

impl<'de> Deserialize<'de> for StopGateDetail {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            action: Arc<str>,
            by: Option<String>,
            dir: Option<String>,
            gate: Arc<str>,
            id: Option<String>,
            mode: String,
            reason: Option<String>,
            summary: Arc<str>,
        }
        let r = Raw::deserialize(d)?;
        Ok(Self {
            action: r.action,
            by: r.by,
            dir: r.dir.map(|d| known(&d, &Self::DIRS)).transpose()?,
            gate: r.gate,
            id: r.id,
            mode: known(&r.mode, &Self::MODES)?,
            reason: r.reason,
            summary: r.summary,
        })
    }
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapsAllowDetail {
    /// Handoffs so far in the run.
    pub hops: u32,
    /// The turn's number among the run's counted turns.
    pub turn: u32,
    /// The run's turn cap.
    pub turns_per_run: u32,
}

/// A counted cap reached: `{cap, limit, value}` (`turns_per_run`, `turns_per_agent`,
/// `handoff_hops`, `steps_per_turn`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapReachedDetail {
    /// The cap's key.
    pub cap: String,
    /// Its limit.
    pub limit: u64,
    /// The count that reached it.
    pub value: u64,
}

/// The wall-time cap reached: `{cap: "wall_time", limit_ms, value_ms}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct WallTimeDetail {
    /// The limit, in milliseconds.
    pub limit_ms: u64,
    /// The time the run had taken, in milliseconds.
    pub value_ms: u64,
}

impl WallTimeDetail {
    /// The cap's key, as written.
    pub const CAP: &'static str = "wall_time";
}

impl Serialize for WallTimeDetail {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        sorted_map!(s;
            "cap" => Some(Self::CAP),
            "limit_ms" => Some(self.limit_ms),
            "value_ms" => Some(self.value_ms),
        )
    }
}

/// The run ending after its wrap-up turn: `{after: "wrap_up", cap, text}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct WrappedUpDetail {
    /// The cap reached and its limit (`turns_per_run (3)`).
    pub cap: String,
    /// What the wrap-up turn answered.
    pub text: String,
}

impl Serialize for WrappedUpDetail {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        sorted_map!(s;
            "after" => Some("wrap_up"),
            "cap" => Some(&self.cap),
            "text" => Some(&self.text),
        )
    }
}

/// The rate limiter's decision on a model call: `{agent, reason?, tokens, waited_ms?}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepeatDetail {
    /// The tool call.
    pub call_id: CallId,
    /// How many times this exact call was made in the run, this one included.
    pub count: u32,
    /// The SHA-256 of the tool and its canonical arguments.
    pub digest: String,
    /// How many identical calls are allowed.
    pub limit: u32,
    /// The tool.
    pub tool: ToolName,
}

/// A timeout: `{agent}` of a model call, `{call_id, tool}` of a tool call, or neither for a turn;
/// with `limit_ms`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeoutDetail {
    /// The agent whose model call timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentId>,
    /// The tool call that timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<CallId>,
    /// The limit, in milliseconds.
    pub limit_ms: u64,
    /// The tool of the call that timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolName>,
}

/// A budget spent: `{budget, cost_micros, limit, usage, used}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetExceededDetail {
    /// Which budget (`tokens`, `cost`).
    pub budget: String,
    /// The run's cost so far, in micro-dollars.
    pub cost_micros: u64,
    /// The budget's limit.
    pub limit: u64,
    /// The run's tokens so far.
    pub usage: Usage,
    /// What the budget counts, used so far.
    pub used: u64,
}

/// Cost a session reported, charged to the run's budget:
/// `{reported_cost_micros, reported_total_micros}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedCostDetail {
    /// This report's cost, in micro-dollars.
    pub reported_cost_micros: u64,
    /// Every reported cost of the run so far, this one included.
    pub reported_total_micros: u64,
}
