//! The policy engine: the one place an action is decided, whichever enforcement point asks.
//!
//! An adapter (the runner's [`PolicyLayer`](super::PolicyLayer), the Claude Code
//! [`hook`](crate::hook)) maps what it sees to an [`Ask`] — who acts, and what the action
//! touches as declared [`Access`]es — and records the [`Judgement`]'s events before the action
//! runs. For a shell command the adapter asks after the fact, with the paths the command
//! changed ([`Policy::judge_changes`]). The engine reads the workspace (links, sentinels, the
//! plan) and writes nothing, except the one claim that consumes an override, made only when
//! every gate allows ([`Policy::judge`]; [`Policy::decide`] is the dry run that takes nothing).
//!
//! ```
//! use loopward_core::{Action, AgentId, Decision};
//! use loopward_runner::gates::{Ask, Policy, PolicyConfig, SprawlTracker};
//! use loopward_runner::{tool::Access, ManualClock, Workspace};
//! let dir = tempfile::tempdir().unwrap();
//! let ws = Workspace::new(dir.path()).unwrap();
//! let cfg = PolicyConfig::from_toml("[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"").unwrap();
//! let policy = Policy::from_config(&cfg, ws.clone()).unwrap();
//! let builder = AgentId::new("builder").unwrap();
//! let accesses = [Access::Write(ws.resolve("plan.md").unwrap())];
//! let clock = ManualClock::new(0);
//! let write = Action::tool("write_file");
//! let ask = Ask::new(&builder, &write, &accesses, &clock);
//! let j = policy.judge(&ask, &mut SprawlTracker::default());
//! assert!(j.denial.unwrap().reason.contains("plan.md belongs to planner"));
//! assert_eq!(j.events.len(), 1); // the denial, to record before answering
//! ```

mod changes;
mod verdict;

pub use changes::{ChangedPath, ShellAsk, ShellJudgement, ShellOutcome};
pub(crate) use verdict::Verdict;

use super::policy::{Gates, Policy};
use super::refusals;
use super::sprawl::{SprawlTracker, SprawlVerdict, Work};
use super::targets::Target;
use crate::clock::Clock;
use crate::tool::Access;
use loopward_core::{
    Action, AgentId, AuditEvent, Decision, Effect, EffectKind, EffectStatus, GateMode,
};
use loopward_core::{CallId, GateId, GateKind, Refusal};
use std::sync::Arc;

/// The (old, new) pairs of a call's edits.
fn replacements(accesses: &[Access]) -> Vec<(&str, &str)> {
    accesses
        .iter()
        .filter_map(|a| match a {
            Access::Edit { old, new, .. } => Some((old.as_str(), new.as_str())),
            _ => None,
        })
        .collect()
}

/// One action to judge: who acts and what it touches.
#[derive(Clone, Copy)]
pub struct Ask<'a> {
    /// The acting agent.
    pub agent: &'a AgentId,
    /// The tool call's id, when the action is one.
    pub call_id: Option<&'a CallId>,
    /// The action (`tool:write_file`, `tool:Edit` in the ledger).
    pub action: &'a Action,
    /// What it touches, declared before it runs and resolved by the canonicaliser.
    pub accesses: &'a [Access],
    /// This turn's effects so far (the review gates arm on them).
    pub effects: &'a [Effect],
    /// Whether a handoff already stands this turn (then the one-handoff rule answers a second).
    pub handoff_stands: bool,
    /// The team, when the adapter has one (a handoff outside it is not judged by review gates).
    pub team: &'a [AgentId],
    /// The clock overrides are checked against.
    pub clock: &'a dyn Clock,
}

impl<'a> Ask<'a> {
    /// An action with no turn history (no effects yet, no handoff standing).
    pub fn new(
        agent: &'a AgentId,
        action: &'a Action,
        accesses: &'a [Access],
        clock: &'a dyn Clock,
    ) -> Self {
        Self {
            agent,
            call_id: None,
            action,
            accesses,
            effects: &[],
            handoff_stands: false,
            team: &[],
            clock,
        }
    }
}

/// What the engine decided about one action.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Judgement {
    /// The events to record before the action runs (or before answering that it may not), in
    /// order: each consumed override comes before the decision it authorises.
    pub events: Vec<AuditEvent>,
    /// Why the action must not run; `None` when it may.
    pub denial: Option<Refusal>,
    /// What advisory gates would have refused.
    pub warnings: Vec<Refusal>,
    /// Overrides the action would consume (a [`Policy::decide`] result; [`Policy::judge`] has
    /// consumed them, and lists them in `events`).
    pub pending: Vec<String>,
    /// The work it counts as, for the sprawl tracker once it has run
    /// ([`SprawlTracker::touch`]).
    pub work: Work,
}

impl Judgement {
    /// Whether the action may run.
    pub fn permits(&self) -> bool {
        self.denial.is_none()
    }

    /// Ids of the overrides consumed for it.
    pub fn consumed(&self) -> impl Iterator<Item = (&str, &str)> {
        self.events.iter().filter_map(|e| match e {
            AuditEvent::OverrideConsumed { id, reason, .. } => Some((id.as_str(), reason.as_str())),
            _ => None,
        })
    }

    /// The verdicts' events, moved into them (not copied), with the denial and warnings. The
    /// call's id is made once and shared by its events.
    fn from_verdicts(verdicts: Vec<Verdict>, ask: &Ask<'_>, work: Work) -> Self {
        let mut j = Self {
            work,
            events: Vec::with_capacity(verdicts.len()),
            ..Self::default()
        };
        let call_id: Option<CallId> = ask.call_id.filter(|_| !verdicts.is_empty()).cloned();
        for v in verdicts {
            match &v.decision {
                Decision::Deny(r) if j.denial.is_none() => j.denial = Some(r.clone()),
                Decision::Warn(r) => j.warnings.push(r.clone()),
                _ => {}
            }
            if let Some(s) = &v.needs {
                j.pending.push(s.id.clone());
            }
            j.events.push(v.into_event(call_id.as_ref(), ask.action));
        }
        j
    }
}

impl Policy {
    /// Decides an action and, when every gate allows, consumes the overrides it needs (each
    /// consumption is an event before the decision it authorises). A sprawl refusal is noted in
    /// `tracker` (the gate refuses once per turn); the work done is not: call
    /// [`SprawlTracker::touch`] with [`Judgement::work`] once the action has run and stands.
    pub fn judge(&self, ask: &Ask<'_>, tracker: &mut SprawlTracker) -> Judgement {
        let gates = self.gates();
        let (mut verdicts, work, fired) = self.verdicts(&gates, ask, tracker);
        if fired {
            tracker.fire(ask.agent);
        }
        if verdicts.iter().any(Verdict::denies) {
            return Judgement::from_verdicts(verdicts, ask, work);
        }
        let mut consumed = Vec::new();
        for (i, v) in verdicts.iter_mut().enumerate() {
            if let Some(e) = self.consume(&gates, ask.agent, ask.clock, v) {
                consumed.push((i, e));
            }
        }
        let mut j = Judgement::from_verdicts(verdicts, ask, work);
        // Each consumption goes right before the decision it authorises.
        for (i, e) in consumed.into_iter().rev() {
            j.events.insert(i, e);
        }
        j
    }

    /// Decides an action without consuming anything or noting anything: what [`Policy::judge`]
    /// would say, with the overrides it would take in [`Judgement::pending`] (their decisions
    /// read `override`). For replays and calibration.
    pub fn decide(&self, ask: &Ask<'_>, tracker: &SprawlTracker) -> Judgement {
        let gates = self.gates();
        let (verdicts, work, _) = self.verdicts(&gates, ask, tracker);
        Judgement::from_verdicts(verdicts, ask, work)
    }

    /// Every verdict on an action, the work it does, and whether the sprawl gate fired.
    fn verdicts(
        &self,
        gates: &Gates,
        ask: &Ask<'_>,
        tracker: &SprawlTracker,
    ) -> (Vec<Verdict>, Work, bool) {
        let handoff = ask.accesses.iter().find_map(|a| match a {
            Access::Handoff { to } => Some(to),
            _ => None,
        });
        let mut verdicts = match handoff {
            Some(to) => self.judge_handoff(gates, ask, to),
            None => vec![],
        };
        let targets = match self.targets(ask.accesses) {
            Ok(t) => t,
            Err(why) => {
                let d = Decision::Deny(refusals::undecidable(&why));
                verdicts.push(Verdict::whole(
                    GateId::of(GateKind::Policy),
                    GateMode::Enforce,
                    d,
                ));
                return (verdicts, Work::default(), false);
            }
        };
        let replacements = replacements(ask.accesses);
        self.write_verdicts(gates, ask, verdicts, &targets, &replacements, tracker)
    }

    /// The verdicts on writing `targets` (with `replacements`), after `verdicts` already taken.
    fn write_verdicts(
        &self,
        gates: &Gates,
        ask: &Ask<'_>,
        mut verdicts: Vec<Verdict>,
        targets: &[Target],
        replacements: &[(&str, &str)],
        tracker: &SprawlTracker,
    ) -> (Vec<Verdict>, Work, bool) {
        verdicts.extend(targets.iter().map(|(raw, rel)| {
            self.judge_path(gates, ask.agent, ask.clock, raw.clone(), Arc::clone(rel))
        }));
        if let Some(by) = verdicts.iter().find(|v| v.denies()).map(|v| v.gate.clone()) {
            verdicts.iter_mut().for_each(|v| v.leave_override(&by));
            return (verdicts, Work::default(), false);
        }
        let Some(sg) = &gates.sprawl else {
            return (verdicts, Work::default(), false);
        };
        let plan = self.plan_landed_in(gates);
        let files = targets.iter().map(|(_, rel)| rel.as_ref());
        let work = sg.work(files, replacements, plan.as_deref());
        let SprawlVerdict::Refuse { touched, n } = tracker.verdict(sg, ask.agent, &work) else {
            return (verdicts, work, false);
        };
        let plan_path = &sg.config().plan_path;
        let plan_owner = gates.territories.iter().find(|t| {
            t.covers(plan_path) && !t.owned_by(ask.agent) && t.mode() == GateMode::Enforce
        });
        let files: Vec<&str> = work.files.iter().map(String::as_str).collect();
        let touched: Vec<&str> = touched.iter().map(String::as_str).collect();
        let refusal = refusals::sprawl(sg.config(), plan_owner, &files, &touched, n);
        let mode = sg.config().mode;
        let decision = match mode {
            GateMode::Enforce => Decision::Deny(refusal),
            GateMode::Advisory => Decision::Warn(refusal),
        };
        let mut v = Verdict::whole(GateId::of(GateKind::Sprawl), mode, decision);
        v.path = work.files.iter().next().map(|f| Arc::from(f.as_str()));
        v.source = sg.config().source.get().cloned();
        if v.denies() {
            verdicts.iter_mut().for_each(|x| x.leave_override(&v.gate));
        }
        verdicts.push(v);
        (verdicts, work, true)
    }

    /// The review gates on a handoff to `to` ([`judge_handoff`](super::review::judge_handoff)),
    /// recorded as the action [`Action::Handoff`]. When a handoff already stands, the one-handoff rule
    /// answers instead (the handoff tool refuses it, naming the one that stands); a handoff to
    /// the caller itself or outside the team is not one a review gate judges (the tool refuses
    /// it).
    fn judge_handoff(&self, gates: &Gates, ask: &Ask<'_>, to: &AgentId) -> Vec<Verdict> {
        let outside = !ask.team.is_empty() && !ask.team.contains(to);
        if ask.handoff_stands || to == ask.agent || outside {
            return vec![];
        }
        super::review::judge_handoff(&gates.reviews, ask.agent, ask.effects, Some(to.as_str()))
            .into_iter()
            .map(|v| {
                let mut verdict = Verdict::whole(v.gate.id(), v.gate.mode(), v.decision);
                verdict.action = Some(Action::Handoff(to.clone()));
                verdict.source = v.gate.config().source.get().cloned();
                verdict
            })
            .collect()
    }

    /// The work a call with these accesses counts as for the sprawl gate: the unit keys of the
    /// paths it writes (the plan excluded) and of its edits' replacements. For an adapter that
    /// notes the work after the call in another process than the one that judged it.
    pub fn work(&self, accesses: &[Access]) -> Work {
        let gates = self.gates();
        match (&gates.sprawl, self.targets(accesses)) {
            (Some(sg), Ok(targets)) => {
                let plan = self.plan_landed();
                let files = targets.iter().map(|(_, rel)| rel.as_ref());
                sg.work(files, &replacements(accesses), plan.as_deref())
            }
            _ => Work::default(),
        }
    }

    /// The work a finished call counts as, from its recorded `effects` (those that stand, both
    /// ends of a rename) and its edit's `replacements`: what [`Policy::work`] said of it when it
    /// was judged, for a tracker rebuilt from a run's ledger.
    pub(crate) fn recorded_work(&self, effects: &[Effect], replacements: &[(&str, &str)]) -> Work {
        let gates = self.gates();
        let Some(sg) = &gates.sprawl else {
            return Work::default();
        };
        let files = effects
            .iter()
            .filter(|e| e.status == EffectStatus::Ok)
            .flat_map(|e| {
                let from = match &e.kind {
                    EffectKind::Rename { from } => Some(from.as_str()),
                    _ => None,
                };
                std::iter::once(e.path.as_str()).chain(from)
            });
        sg.work(files, replacements, self.plan_landed().as_deref())
    }

    /// Where the plan lands (the configured path, links followed), when a sprawl gate is on.
    /// Resolved once while no link on its way can have changed (the gates' `plan_cache` module
    /// says when the cached answer is dropped).
    pub fn plan_rel(&self) -> Option<String> {
        self.plan_landed().map(|p| p.to_string())
    }

    /// [`Policy::plan_rel`], shared with the cache rather than copied (asked a few times a call).
    pub(in crate::gates) fn plan_landed(&self) -> Option<Arc<str>> {
        self.plan_landed_in(&self.gates())
    }

    /// [`Policy::plan_landed`] under gates the caller already holds.
    fn plan_landed_in(&self, gates: &Gates) -> Option<Arc<str>> {
        let sg = gates.sprawl.as_ref()?;
        if self.inner.shadow {
            return Some(sg.config().plan_path.as_str().into());
        }
        self.inner.plan_cache.get(|| {
            self.inner
                .workspace
                .resolve(&sg.config().plan_path)
                .ok()
                .map(|p| p.rel().into())
        })
    }

    /// Whether one of `accesses` may move where the plan lands (see
    /// [`plan_cache`](super::plan_cache)): then the cache is dropped once the call has run.
    pub(in crate::gates) fn may_move_plan(&self, accesses: &[Access]) -> bool {
        let gates = self.gates();
        let Some(sg) = &gates.sprawl else {
            return false;
        };
        let landed = self.plan_landed_in(&gates);
        let moves = |p: &crate::WorkPath| {
            super::plan_cache::moves_plan(p.rel(), &sg.config().plan_path, landed.as_deref())
        };
        accesses.iter().any(|a| match a {
            Access::Read(_) | Access::Handoff { .. } => false,
            Access::Write(p) | Access::Delete(p) | Access::Edit { path: p, .. } => moves(p),
            Access::Rename { from, to } => moves(from) || moves(to),
            Access::Link { path, target } => moves(path) || moves(target),
            Access::Exec => true,
        })
    }

    /// Decides a recorded write to the canonical workspace-relative `rel` (with its edits'
    /// `replacements`) under a [`Policy::shadow`]: what the engine would have said, judged like
    /// [`Policy::judge`] with no override available and nothing on disk read. A sprawl refusal
    /// is noted in `tracker`; note the work with [`SprawlTracker::touch`] if the write stood.
    pub fn decide_recorded(
        &self,
        ask: &Ask<'_>,
        rel: &str,
        replacements: &[(&str, &str)],
        tracker: &mut SprawlTracker,
    ) -> Judgement {
        let gates = self.gates();
        let targets = [(None, Arc::from(rel))];
        let (verdicts, work, fired) =
            self.write_verdicts(&gates, ask, vec![], &targets, replacements, tracker);
        if fired {
            tracker.fire(ask.agent);
        }
        Judgement::from_verdicts(verdicts, ask, work)
    }

    /// Whether `content` written to `rel` is a plan: `rel` is where the plan lands and its first
    /// line carries the marker.
    pub fn is_plan(&self, rel: &str, content: &str) -> bool {
        let gates = self.gates();
        gates
            .sprawl
            .as_ref()
            .is_some_and(|sg| self.plan_landed().as_deref() == Some(rel) && sg.is_plan(content))
    }

    /// Notes a plan in `tracker` when `effects` (an action's, as they stand) wrote the plan file
    /// and its first line carries the marker. A plan so written clears the sprawl gate until the
    /// next human message.
    pub fn note_plan(&self, effects: &[Effect], tracker: &mut SprawlTracker) {
        if effects.is_empty() {
            return;
        }
        let gates = self.gates();
        let (Some(sg), Some(plan)) = (&gates.sprawl, self.plan_landed_in(&gates)) else {
            return;
        };
        let wrote = effects.iter().any(|e| {
            e.status == EffectStatus::Ok
                && *e.path == *plan
                && !matches!(e.kind, EffectKind::Delete)
        });
        if !wrote {
            return;
        }
        let abs = self.inner.workspace.root().join(&*plan);
        if std::fs::symlink_metadata(&abs).is_ok_and(|m| m.is_file()) {
            if let Ok(text) = std::fs::read_to_string(&abs) {
                if sg.is_plan(&text) {
                    tracker.plan();
                }
            }
        }
    }
}
