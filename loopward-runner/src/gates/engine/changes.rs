//! The shell judgement: a command is judged by what it changed. Each changed path is judged like
//! a file tool's write (control files, territories, one-shot overrides honoured); a link the
//! command made is a write at each of its ends; what may not stand is reported back for the
//! adapter to revert, and then recorded as a violation.

use super::super::policy::Policy;
use super::super::refusals;
use super::super::sprawl::Work;
use super::verdict::Verdict;
use crate::clock::Clock;
use loopward_core::{
    Action, AgentId, AuditEvent, CallId, Decision, Effect, EffectKind, EffectStatus, Refusal,
    Remedy,
};
use std::sync::Arc;

/// One path a command changed, as the adapter's before/after comparison found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedPath {
    /// The canonical workspace-relative path.
    pub path: String,
    /// Created, modified or deleted.
    pub kind: EffectKind,
    /// Whether it is a directory now (a directory is not a unit of work).
    pub dir: bool,
    /// The other places the change writes through: where a symbolic link made at `path` points,
    /// the other names of a hard-linked file ([`Policy::link_ends`] finds them on disk). An
    /// error (they could not be found) refuses the change.
    pub ends: Result<Vec<String>, String>,
}

impl ChangedPath {
    /// A change with no link ends.
    pub fn plain(path: impl Into<String>, kind: EffectKind) -> Self {
        Self {
            path: path.into(),
            kind,
            dir: false,
            ends: Ok(vec![]),
        }
    }
}

/// The paths one command changed, to judge.
#[derive(Clone, Copy)]
pub struct ShellAsk<'a> {
    /// The agent whose command it was.
    pub agent: &'a AgentId,
    /// The tool call's id.
    pub call_id: Option<&'a CallId>,
    /// The action (`tool:shell`, `tool:Bash` in the ledger).
    pub action: &'a Action,
    /// What changed, in path order.
    pub changes: &'a [ChangedPath],
    /// The clock overrides are checked against.
    pub clock: &'a dyn Clock,
}

/// What the engine says about a command's changes.
#[derive(Clone, Debug, PartialEq)]
pub struct ShellJudgement {
    /// The events to record now, in order (decisions; consumed overrides before theirs).
    pub events: Vec<AuditEvent>,
    /// Per change, in order: `None` when it stands, else why it must be put back.
    pub refusals: Vec<Option<Refusal>>,
    /// The work the standing changes count as (one command is one unit of work).
    pub work: Work,
}

/// What a judged command left: the violations to record, the effects it stands for, and what
/// the model reads about it.
#[derive(Clone, Debug, PartialEq)]
pub struct ShellOutcome {
    /// One `violation` per refused change, with what was done about it.
    pub violations: Vec<AuditEvent>,
    /// The command's effects: standing changes `ok`, put-back ones `reverted`.
    pub effects: Vec<Effect>,
    /// What to tell the model, when any change was refused.
    pub message: Option<String>,
}

impl Policy {
    /// Judges what a command changed. Overrides that authorise a change are consumed (the
    /// command has run; the change stands on them). Nothing is reverted here: the adapter
    /// puts back each change with a refusal and passes what happened to
    /// [`ShellJudgement::outcome`].
    pub fn judge_changes(&self, ask: &ShellAsk<'_>) -> ShellJudgement {
        let gates = self.gates();
        let mut events = Vec::new();
        let mut refusals = Vec::new();
        let mut kept = Vec::new();
        // Made once, shared by the command's decisions.
        let call_id: Option<CallId> = ask.call_id.cloned();
        for c in ask.changes {
            let path: Arc<str> = c.path.as_str().into();
            let mut verdicts =
                vec![self.judge_path(&gates, ask.agent, ask.clock, None, Arc::clone(&path))];
            if c.kind != EffectKind::Delete {
                match &c.ends {
                    Ok(ends) => verdicts.extend(ends.iter().filter(|e| **e != c.path).map(|e| {
                        let mut v =
                            self.judge_path(&gates, ask.agent, ask.clock, None, e.as_str().into());
                        if let Decision::Deny(r) = &mut v.decision {
                            r.reason = format!("{} is a link to {e}: {}", c.path, r.reason);
                        }
                        v
                    })),
                    Err(why) => verdicts.push(Verdict::whole(
                        loopward_core::GateId::of(loopward_core::GateKind::Policy),
                        loopward_core::GateMode::Enforce,
                        Decision::Deny(refusals::undecidable(&format!(
                            "where the link {} lands: {why}",
                            c.path
                        ))),
                    )),
                }
            }
            if let Some(by) = verdicts.iter().find(|v| v.denies()).map(|v| v.gate.clone()) {
                verdicts.iter_mut().for_each(|v| v.leave_override(&by));
            }
            let mut refusal = None;
            for mut v in verdicts {
                if !v.denies() {
                    if let Some(e) = self.consume(&gates, ask.agent, ask.clock, &mut v) {
                        events.push(e);
                    }
                }
                if v.path.is_none() {
                    v.path = Some(Arc::clone(&path));
                }
                if let (None, Decision::Deny(r)) = (&refusal, &v.decision) {
                    refusal = Some(r.clone());
                }
                events.push(v.into_event(call_id.as_ref(), ask.action));
            }
            if refusal.is_none() && !c.dir {
                kept.push(c.path.as_str());
            }
            refusals.push(refusal);
        }
        let work = match &gates.sprawl {
            Some(sg) => sg.work(kept, &[], self.plan_landed().as_deref()),
            None => Work::default(),
        };
        ShellJudgement {
            events,
            refusals,
            work,
        }
    }
}

impl ShellJudgement {
    /// Whether every change may stand.
    pub fn all_stand(&self) -> bool {
        self.refusals.iter().all(Option::is_none)
    }

    /// What the command left, given `changes` (as judged) and, for each refused change, what
    /// putting it back did (`remedies[i]` is read only where `refusals[i]` is set).
    pub fn outcome(&self, changes: &[ChangedPath], remedies: &[Option<Remedy>]) -> ShellOutcome {
        let mut out = ShellOutcome {
            violations: vec![],
            effects: vec![],
            message: None,
        };
        let mut reverted = Vec::new();
        let mut failed = Vec::new();
        let mut first: Option<&Refusal> = None;
        for (i, c) in changes.iter().enumerate() {
            let mut status = EffectStatus::Ok;
            if let Some(Some(r)) = self.refusals.get(i) {
                let remedy = remedies
                    .get(i)
                    .cloned()
                    .flatten()
                    .unwrap_or(Remedy::Unremedied {
                        why: "the adapter did not put it back".into(),
                    });
                if remedy.is_reverted() {
                    status = EffectStatus::Reverted;
                    reverted.push(c.path.as_str());
                } else {
                    failed.push(format!("{} ({remedy})", c.path));
                }
                out.violations.push(AuditEvent::Violation {
                    path: c.path.clone(),
                    remedy,
                    reason: r.reason.clone(),
                });
                first.get_or_insert(r);
            }
            out.effects.push(Effect {
                path: c.path.clone(),
                kind: c.kind.clone(),
                status,
            });
        }
        if let Some(r) = first {
            let mut text = format!(
                "refused by {}: the command changed paths you may not change, and those changes were reverted: {}. {}",
                r.gate,
                reverted.join(", "),
                r.reason
            );
            if !failed.is_empty() {
                text.push_str(&format!(
                    " Some could not be put back and were reported; a person must restore them: {}.",
                    failed.join("; ")
                ));
            }
            let end = if r.hint.ends_with('.') { " " } else { ". " };
            text.push_str(&format!(
                "\nWhat to do: {}{end}Other changes the command made stand.",
                r.hint
            ));
            out.message = Some(text);
        }
        out
    }
}
