//! One gate's verdict on one path, and the path judgement every action goes through: control
//! files, then territories (finding a one-shot override where one is needed).

use super::super::overrides::Sentinel;
use super::super::policy::{Gates, Policy};
use super::super::refusals;
use super::super::territory::Territory;
use crate::clock::Clock;
use loopward_core::{
    Action, AgentId, AuditEvent, CallId, Decision, GateId, GateKind, GateMode, Refusal,
};
use std::sync::Arc;

/// One gate's verdict on one path of one action. Its gate id and paths are shared with the gate
/// and the call's other verdicts, not copied.
#[derive(Clone, Debug)]
pub(crate) struct Verdict {
    pub(crate) gate: GateId,
    pub(crate) mode: GateMode,
    pub(crate) path_raw: Option<Arc<str>>,
    pub(crate) path: Option<Arc<str>>,
    pub(crate) decision: Decision,
    /// The override this path needs once every gate allows (found, not yet taken).
    pub(crate) needs: Option<Sentinel>,
    /// The action as recorded, when not the ask's (a handoff's review: [`Action::Handoff`]).
    pub(crate) action: Option<Action>,
    /// Where the deciding rule is written, when read from a file (shared with the rule).
    pub(crate) source: Option<Arc<str>>,
}

impl Verdict {
    /// A verdict on the action as a whole (no path).
    pub(crate) fn whole(gate: GateId, mode: GateMode, decision: Decision) -> Self {
        Self {
            gate,
            mode,
            path_raw: None,
            path: None,
            decision,
            needs: None,
            action: None,
            source: None,
        }
    }

    pub(crate) fn denies(&self) -> bool {
        !self.decision.permits()
    }

    /// The ledger event, made of the verdict itself and the call's shared id and action.
    pub(crate) fn into_event(self, call_id: Option<&CallId>, action: &Action) -> AuditEvent {
        AuditEvent::GateDecision {
            call_id: call_id.cloned(),
            gate: self.gate,
            mode: self.mode,
            action: self.action.unwrap_or_else(|| action.clone()),
            path_raw: self.path_raw,
            path: self.path,
            decision: self.decision,
            source: self.source,
        }
    }

    /// Another gate refused the action: an override this path would have used stays for the
    /// next try, and the census says so.
    pub(crate) fn leave_override(&mut self, refused_by: &GateId) {
        if let Some(s) = self.needs.take() {
            let path = self.path.as_deref().unwrap_or("");
            self.decision = Decision::Deny(refusals::unused_override(
                &self.gate, path, &s.id, refused_by,
            ));
        }
    }
}

/// A path's decision: the gate, its mode, what it says, the override it needs, and where the
/// deciding rule is written.
type PathDecision = (
    GateId,
    GateMode,
    Decision,
    Option<Sentinel>,
    Option<Arc<str>>,
);

/// Where a territory is written, shared.
fn source(t: &Territory) -> Option<Arc<str>> {
    t.config().source.get().cloned()
}

impl Policy {
    /// Control, then territories (finding an override where one is needed). Decides; takes
    /// nothing. The verdict holds the paths given, shared.
    pub(in crate::gates) fn judge_path(
        &self,
        gates: &Gates,
        agent: &AgentId,
        clock: &dyn Clock,
        raw: Option<Arc<str>>,
        rel: Arc<str>,
    ) -> Verdict {
        let (gate, mode, decision, needs, source) = self.path_decision(gates, agent, clock, &rel);
        Verdict {
            gate,
            mode,
            path_raw: raw,
            path: Some(rel),
            decision,
            needs,
            action: None,
            source,
        }
    }

    /// [`Policy::judge_path`]'s decision: which gate, its mode, what it says, the override it
    /// needs, and where the deciding rule is written.
    fn path_decision(
        &self,
        gates: &Gates,
        agent: &AgentId,
        clock: &dyn Clock,
        rel: &str,
    ) -> PathDecision {
        if self.inner.control.covers(rel) {
            let d = Decision::Deny(refusals::control(rel));
            return (
                GateId::of(GateKind::Control),
                GateMode::Enforce,
                d,
                None,
                None,
            );
        }
        let covering = gates.index.covering(&gates.territories, rel);
        let foreign = || covering.iter().copied().filter(|t| !t.owned_by(agent));
        let ttl = self.inner.overrides.ttl_limit();
        let refusal = |t: &Territory, e: Option<&_>| {
            refusals::territory(
                t,
                agent,
                rel,
                e,
                ttl,
                self.outside_team(agent),
                self.passing(),
            )
        };
        if let Some(t) = foreign().find(|t| t.mode() == GateMode::Enforce) {
            let found = if self.inner.shadow {
                Err(None)
            } else {
                self.inner.overrides.find(agent, rel, clock).map_err(Some)
            };
            return match found {
                Ok(s) => {
                    let d = Decision::Override {
                        id: s.id.clone(),
                        reason: s.reason.clone(),
                    };
                    (t.id(), GateMode::Enforce, d, Some(s), source(t))
                }
                Err(e) => {
                    let d = Decision::Deny(refusal(t, e.as_ref()));
                    (t.id(), GateMode::Enforce, d, None, source(t))
                }
            };
        }
        if let Some(t) = foreign().next() {
            let d = Decision::Warn(refusal(t, None));
            return (t.id(), GateMode::Advisory, d, None, source(t));
        }
        match covering.first() {
            Some(t) => (t.id(), GateMode::Enforce, Decision::Allow, None, source(t)),
            None => (
                GateId::of(GateKind::Territory),
                GateMode::Enforce,
                Decision::Allow,
                None,
                None,
            ),
        }
    }

    /// Why `agent` may not have written `rel`, for a write found after it ran without a
    /// decision (`None` when control files and territories allow it, or an override would).
    pub fn guarded(&self, agent: &AgentId, rel: &str, clock: &dyn Clock) -> Option<Refusal> {
        match self.path_decision(&self.gates(), agent, clock, rel) {
            (_, _, Decision::Deny(r), _, _) => Some(r),
            _ => None,
        }
    }

    /// Takes the override a verdict needs: its consumption event, to be recorded before the
    /// decision. On failure (taken by a racing call, expired since) the verdict becomes a denial.
    pub(in crate::gates) fn consume(
        &self,
        gates: &Gates,
        agent: &AgentId,
        clock: &dyn Clock,
        v: &mut Verdict,
    ) -> Option<AuditEvent> {
        v.needs.take()?;
        let path = v.path.clone().unwrap_or_default();
        match self.inner.overrides.take(agent, &path, clock) {
            Ok(taken) => {
                v.decision = Decision::Override {
                    id: taken.id.clone(),
                    reason: taken.reason.clone(),
                };
                Some(AuditEvent::OverrideConsumed {
                    id: taken.id,
                    agent: agent.clone(),
                    path: taken.path,
                    reason: taken.reason,
                })
            }
            Err(e) => {
                let ttl = self.inner.overrides.ttl_limit();
                v.decision =
                    Decision::Deny(match gates.territories.iter().find(|t| t.id() == v.gate) {
                        Some(t) => refusals::territory(
                            t,
                            agent,
                            &path,
                            Some(&e),
                            ttl,
                            self.outside_team(agent),
                            self.passing(),
                        ),
                        None => Refusal::new(&v.gate, e.to_string(), ""),
                    });
                None
            }
        }
    }
}
