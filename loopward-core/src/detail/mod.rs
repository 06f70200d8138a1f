//! The details of a layer's decision ([`LayerDetail`]): typed for every detail the built-in
//! layers write, and JSON for custom layers and for anything a typed form cannot hold exactly.
//!
//! A typed detail is serialised only when it is written, to exactly the bytes the same figures
//! as a `serde_json` map give (keys in sorted order, absent keys omitted). Read back from a
//! ledger, a detail is typed in one place, [`LayerDetail::read`] (called when an
//! [`AuditEvent`](crate::AuditEvent) is deserialised): the typed form is taken only when
//! writing it again gives exactly the JSON that was read, so nothing read back ever writes other
//! bytes. An older ledger's detail with other keys, and a custom layer's, stay
//! [`LayerDetail::Json`]. Equality compares the JSON, so an event recorded in memory equals the
//! same event read back.
//!
//! Readers ask through the accessors (`as_class_jump`, `as_verify`, [`call_id`] …), which also
//! type a JSON detail of the same shape (one a writer built with `json!`): no module outside this
//! one picks a detail's keys by hand (`cargo xtask tidy` checks it).
//!
//! [`call_id`]: LayerDetail::call_id
//!
//! ```
//! use loopward_core::{AuditEvent, ClassJumpDetail, LayerDetail, LayerId};
//! use serde_json::json;
//! let typed = LayerDetail::ClassJump(ClassJumpDetail {
//!     allowed: 3, failures: 1, next: Some("tests-first".into()), source: None,
//!     strategy: "tests-first".into(), subtask: "fix the build".into(), tool: None,
//! });
//! let text = serde_json::to_string(&typed).unwrap();
//! let map = json!({"subtask": "fix the build", "strategy": "tests-first", "failures": 1,
//!                  "allowed": 3, "next": "tests-first"});
//! assert_eq!(text, serde_json::to_string(&map).unwrap());
//! // Read back with its layer, it is typed again.
//! let read = LayerDetail::read(&LayerId::ClassJump, map.clone());
//! assert!(matches!(read, LayerDetail::ClassJump(_)));
//! assert_eq!(read, typed);
//! assert_eq!(read.as_class_jump().unwrap().failures, 1);
//! // A key the typed form has no place for keeps it JSON, written as it was read.
//! let odd = json!({"subtask": "s", "strategy": "a", "failures": 1, "allowed": 3, "next": null,
//!                  "note": "by hand"});
//! assert!(matches!(LayerDetail::read(&LayerId::ClassJump, odd.clone()), LayerDetail::Json(v) if v == odd));
//! // An event read from a ledger line comes back typed.
//! let line = r#"{"kind":"layer_decision","decision":"retry","layer":"class_jump","detail":{"allowed":3,"failures":1,"next":"tests-first","strategy":"tests-first","subtask":"fix the build"}}"#;
//! let AuditEvent::LayerDecision { detail, .. } = serde_json::from_str(line).unwrap() else { panic!() };
//! assert!(matches!(detail, LayerDetail::ClassJump(_)));
//! assert_eq!(typed.to_string(), text);
//! ```

use crate::call::CallId;
use crate::layer_id::LayerId;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;

/// Writes `(key, value)` pairs as a map, skipping the `None`s. Callers list keys in sorted
/// order: the order a `serde_json` map (a `BTreeMap`) writes them in.
macro_rules! sorted_map {
    ($s:expr; $($key:literal => $value:expr),* $(,)?) => {{
        use serde::ser::SerializeMap;
        let mut m = $s.serialize_map(None)?;
        $( if let Some(v) = $value { m.serialize_entry($key, &v)?; } )*
        m.end()
    }};
}

mod engine;
mod run;
mod session;
#[cfg(test)]
mod tests;

pub use engine::{
    BudgetExceededDetail, CapReachedDetail, CapsAllowDetail, ClassJumpDetail,
    ClassJumpRefusedDetail, RateLimitDetail, RepeatDetail, ReportedCostDetail, StopGateDetail,
    TimeoutDetail, WallTimeDetail, WrappedUpDetail,
};
pub use run::{
    HookEventDetail, InboxRefusedDetail, PolicyVersionDetail, ResumeDetail, StopRefusedDetail,
    StoppedDetail,
};
pub use session::{
    HookDetail, NoProgressDetail, SessionChangesDetail, SessionEndedDetail, SessionLedgerDetail,
    SessionStartedDetail, VerifyDetail,
};

/// Declares [`LayerDetail`] with one variant per typed detail, its serialisation, and an
/// `as_…` accessor per variant.
macro_rules! layer_detail {
    ($( $(#[$doc:meta])* $variant:ident($ty:ident) => $as:ident; )*) => {
        /// What a layer recorded beside its decision.
        #[derive(Clone, Debug)]
        #[non_exhaustive]
        pub enum LayerDetail {
            /// Any JSON: what custom layers record, and a detail read back whose keys no typed
            /// form holds exactly (an older ledger's).
            Json(serde_json::Value),
            $( $(#[$doc])* $variant($ty), )*
        }

        impl Serialize for LayerDetail {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    Self::Json(v) => v.serialize(s),
                    $( Self::$variant(d) => d.serialize(s), )*
                }
            }
        }

        impl LayerDetail {
            $(
                #[doc = concat!("The detail as a [`", stringify!($ty), "`]: borrowed when it is \
                    one, typed from JSON of exactly its shape, `None` otherwise.")]
                pub fn $as(&self) -> Option<Cow<'_, $ty>> {
                    match self {
                        Self::$variant(d) => Some(Cow::Borrowed(d)),
                        Self::Json(v) => exact(v).map(Cow::Owned),
                        _ => None,
                    }
                }
            )*
        }
    };
}

layer_detail! {
    /// A class-jump verdict on a reported or observed attempt.
    ClassJump(ClassJumpDetail) => as_class_jump;
    /// Class-jump refusing a report (an unknown strategy, a subtask out of turn).
    ClassJumpRefused(ClassJumpRefusedDetail) => as_class_jump_refused;
    /// A stop-gate's verdict on an action.
    StopGate(StopGateDetail) => as_stop_gate;
    /// The caps layer letting a turn start.
    CapsAllow(CapsAllowDetail) => as_caps_allow;
    /// A counted cap reached (turns, hops, steps).
    CapReached(CapReachedDetail) => as_cap_reached;
    /// The wall-time cap reached.
    WallTime(WallTimeDetail) => as_wall_time;
    /// The wrap-up turn after a cap ended.
    WrappedUp(WrappedUpDetail) => as_wrapped_up;
    /// The rate limiter admitting or refusing a model call.
    RateLimit(RateLimitDetail) => as_rate_limit;
    /// The repeat layer counting an identical tool call.
    Repeat(RepeatDetail) => as_repeat;
    /// A CLI agent's sessions making no progress (the repeat layer's verdict on sessions).
    NoProgress(NoProgressDetail) => as_no_progress;
    /// A model call, tool call or turn timed out.
    Timeout(TimeoutDetail) => as_timeout;
    /// A token or cost budget spent.
    BudgetExceeded(BudgetExceededDetail) => as_budget_exceeded;
    /// Cost a CLI agent's session reported, charged to the budget.
    ReportedCost(ReportedCostDetail) => as_reported_cost;
    /// A file the inbox would not deliver.
    InboxRefused(InboxRefusedDetail) => as_inbox_refused;
    /// A resumed run's verdict on an interrupted tool call.
    Resume(ResumeDetail) => as_resume;
    /// A person's stop request refused (forged, damaged).
    StopRefused(StopRefusedDetail) => as_stop_refused;
    /// A person's stop request honoured.
    Stopped(StoppedDetail) => as_stopped;
    /// The policy version decisions are judged under.
    PolicyVersion(PolicyVersionDetail) => as_policy_version;
    /// A Claude Code hook event observed.
    HookEvent(HookEventDetail) => as_hook_event;
    /// A CLI agent's verifier's verdict on a session's work.
    Verify(VerifyDetail) => as_verify;
    /// A CLI agent's session started.
    SessionStarted(SessionStartedDetail) => as_session_started;
    /// A session a killed loop left behind, ended.
    SessionEnded(SessionEndedDetail) => as_session_ended;
    /// What a session changed in the workspace so far.
    SessionChanges(SessionChangesDetail) => as_session_changes;
    /// A session's own hook ledger, linked.
    SessionLedger(SessionLedgerDetail) => as_session_ledger;
    /// One hook event of a session, judged: the records that follow are its decision.
    Hook(HookDetail) => as_hook;
}

/// `T` when `v` is exactly what `T` writes: read, written again, and equal.
fn exact<T: DeserializeOwned + Serialize>(v: &serde_json::Value) -> Option<T> {
    let typed = T::deserialize(v).ok()?;
    (serde_json::to_value(&typed).ok()? == *v).then_some(typed)
}

impl LayerDetail {
    /// The detail `layer` recorded, read back as `v`: the built-in layer's typed detail whose
    /// writing gives exactly `v`, else `v` as JSON (a custom layer's detail, an older ledger's).
    /// The shapes one layer writes have different keys, so the layer alone picks the type.
    pub fn read(layer: &LayerId, v: serde_json::Value) -> Self {
        fn first(
            v: &serde_json::Value,
            tries: &[fn(&serde_json::Value) -> Option<LayerDetail>],
        ) -> Option<LayerDetail> {
            tries.iter().find_map(|t| t(v))
        }
        macro_rules! one_of {
            ($($variant:ident),+) => {
                first(&v, &[$(|v| exact(v).map(Self::$variant)),+])
            };
        }
        let typed = match layer {
            LayerId::Caps => one_of!(CapsAllow, CapReached, WallTime, WrappedUp),
            LayerId::Repeat => one_of!(Repeat, NoProgress),
            LayerId::ClassJump => one_of!(ClassJump, ClassJumpRefused),
            LayerId::StopGate => one_of!(StopGate),
            LayerId::RateLimit => one_of!(RateLimit),
            LayerId::Budget => one_of!(BudgetExceeded, ReportedCost),
            LayerId::Timeout => one_of!(Timeout),
            LayerId::Inbox => one_of!(InboxRefused),
            LayerId::Resume => one_of!(Resume),
            LayerId::ClaudeCode | LayerId::Codex | LayerId::GeminiCli => one_of!(HookEvent),
            LayerId::Stop => one_of!(Stopped, StopRefused),
            LayerId::Policy => one_of!(PolicyVersion),
            LayerId::Verify => one_of!(Verify),
            LayerId::Session => one_of!(SessionStarted, SessionEnded, SessionChanges),
            LayerId::SessionLedger => one_of!(SessionLedger),
            LayerId::Hook => one_of!(Hook),
            LayerId::Custom(_) => None,
        };
        typed.unwrap_or(Self::Json(v))
    }

    /// The tool call the decision was taken on, when its detail names one: a typed detail's
    /// `call_id` (shared, not copied), or a custom layer's `call_id` key.
    pub fn call_id(&self) -> Option<CallId> {
        match self {
            Self::Repeat(d) => Some(d.call_id.clone()),
            Self::Resume(d) => Some(d.call_id.clone()),
            Self::Timeout(d) => d.call_id.clone(),
            Self::Json(v) => v
                .get("call_id")
                .and_then(serde_json::Value::as_str)
                .map(CallId::from),
            _ => None,
        }
    }

    /// The cap a caps decision names as written (`turns_per_run`, `wall_time`, or the label
    /// `turns_per_run (3)` after a wrap-up turn).
    pub fn cap(&self) -> Option<Cow<'_, str>> {
        match self {
            Self::CapReached(d) => Some(Cow::Borrowed(&d.cap)),
            Self::WallTime(_) => Some(Cow::Borrowed(WallTimeDetail::CAP)),
            Self::WrappedUp(d) => Some(Cow::Borrowed(&d.cap)),
            Self::Json(_) => self
                .as_cap_reached()
                .map(|d| Cow::Owned(d.into_owned().cap))
                .or_else(|| {
                    self.as_wall_time()
                        .map(|_| Cow::Borrowed(WallTimeDetail::CAP))
                })
                .or_else(|| self.as_wrapped_up().map(|d| Cow::Owned(d.into_owned().cap))),
            _ => None,
        }
    }

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

/// A `layer_decision`'s fields (in `AuditEvent::LayerDecision`'s order), its detail typed by
/// [`LayerDetail::read`]: the one place a ledger's details are typed.
pub(crate) fn read_layer_decision<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<(crate::LayerVerdict, LayerDetail, LayerId), D::Error> {
    #[derive(Deserialize)]
    struct Fields {
        decision: crate::LayerVerdict,
        #[serde(default)]
        detail: serde_json::Value,
        layer: LayerId,
    }
    let f = Fields::deserialize(d)?;
    let detail = LayerDetail::read(&f.layer, f.detail);
    Ok((f.decision, detail, f.layer))
}

impl<'de> Deserialize<'de> for LayerDetail {
    /// As JSON: without its layer a detail cannot be typed; an
    /// [`AuditEvent`](crate::AuditEvent) read back types its layer decision's ([`LayerDetail::read`]).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(d).map(Self::Json)
    }
}
