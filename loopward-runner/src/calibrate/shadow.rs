//! Shadow judging: every recorded write re-judged by the policy engine
//! ([`Policy::decide_recorded`] under a [`Policy::shadow`]) under a config, with no override
//! store (nothing on disk is read or consumed) and the session's turn state following what
//! actually happened.

use super::source::{Outcome, Session, Step, Write};
use crate::clock::ManualClock;
use crate::gates::{Ask, Policy, SprawlTracker};
use loopward_core::{AgentId, AuditEvent, Decision};
use std::collections::BTreeSet;

/// What one config says about one recorded write.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Verdict {
    /// Every gate decision, as `(gate, decision)`.
    pub(crate) decisions: Vec<(String, Decision)>,
}

impl Verdict {
    /// The gates that denied or warned.
    pub(crate) fn fired(&self) -> BTreeSet<&str> {
        self.decisions
            .iter()
            .filter(|(_, d)| matches!(d, Decision::Deny(_) | Decision::Warn(_)))
            .map(|(g, _)| g.as_str())
            .collect()
    }
}

/// A write in its session, with what the history shows came after it.
#[derive(Clone, Debug)]
pub(crate) struct Judged<'s> {
    /// The write.
    pub(crate) write: &'s Write,
    /// Its turn number in the session (from 1).
    pub(crate) turn: u64,
    /// A plan was written later in the same turn, and stood.
    pub(crate) plan_followed: bool,
    /// The verdict.
    pub(crate) verdict: Verdict,
}

/// Re-judges a session under `rules`. Returns each judged write and the number of turns.
pub(crate) fn judge_session<'s>(policy: &Policy, session: &'s Session) -> (Vec<Judged<'s>>, u64) {
    let clock = ManualClock::new(0);
    let mut tracker = SprawlTracker::default();
    let mut turn = 0u64;
    let mut out = Vec::new();
    // Where each turn's writes start in `out`, to mark later plans.
    let mut turn_start = 0usize;
    for step in &session.steps {
        match step {
            Step::Human => {
                turn += 1;
                tracker.human();
                turn_start = out.len();
            }
            Step::Write(w) => {
                if turn == 0 {
                    turn = 1;
                }
                let (Some(rel), Ok(caller)) = (&w.rel, AgentId::new(w.agent.clone())) else {
                    continue;
                };
                let reps: Vec<(&str, &str)> = w
                    .replacements
                    .iter()
                    .map(|(a, b)| (a.as_str(), b.as_str()))
                    .collect();
                let action = format!("tool:{}", w.tool);
                let ask = Ask {
                    call_id: Some(&w.call_id),
                    ..Ask::new(&caller, &action, &[], &clock)
                };
                let v = policy.decide_recorded(&ask, rel, &reps, &mut tracker);
                let decisions = v
                    .events
                    .into_iter()
                    .filter_map(|e| match e {
                        AuditEvent::GateDecision { gate, decision, .. } => {
                            Some((gate.name, decision))
                        }
                        _ => None,
                    })
                    .collect();
                // The history goes on as it happened: a write that stood counts for the turn.
                // A write with no recorded result is taken to have run (the history does not say otherwise).
                let stood = matches!(w.outcome, Outcome::Kept | Outcome::Unknown);
                let is_plan = stood && policy.is_plan(rel, w.content.as_deref().unwrap_or(""));
                if stood {
                    tracker.touch(&caller, v.work.clone());
                }
                if is_plan {
                    tracker.plan();
                    for j in &mut out[turn_start..] {
                        let j: &mut Judged<'_> = j;
                        j.plan_followed = true;
                    }
                }
                out.push(Judged {
                    write: w,
                    turn,
                    plan_followed: false,
                    verdict: Verdict { decisions },
                });
            }
        }
    }
    (out, turn)
}
