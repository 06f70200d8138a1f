//! Shadow judging: every recorded write re-judged by the hook's engine ([`Rules`]) under a
//! config, with no override store (nothing on disk is read or consumed) and the session's turn
//! state following what actually happened.

use super::source::{Outcome, Session, Step, Write};
use crate::clock::ManualClock;
use crate::hook::rules::{Rules, WriteAsk};
use crate::hook::session::AgentTurn;
use loopward_core::{AgentId, AuditEvent, Decision};
use std::collections::{BTreeSet, HashMap};

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
pub(crate) fn judge_session<'s>(rules: &Rules, session: &'s Session) -> (Vec<Judged<'s>>, u64) {
    let clock = ManualClock::new(0);
    let mut agents: HashMap<String, AgentTurn> = HashMap::new();
    let mut plan_fresh = false;
    let mut turn = 0u64;
    let mut out = Vec::new();
    // Where each turn's writes start in `out`, to mark later plans.
    let mut turn_start = 0usize;
    for step in &session.steps {
        match step {
            Step::Human => {
                turn += 1;
                agents.clear();
                plan_fresh = false;
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
                let keys = rules.unit_keys(rel, &reps);
                let action = format!("tool:{}", w.tool);
                let ask = WriteAsk {
                    caller: &caller,
                    call_id: Some(&w.call_id),
                    action: &action,
                    raw: Some(&w.raw),
                    rel,
                    keys: &keys,
                };
                let state = agents.entry(w.agent.clone()).or_default();
                let v = rules.judge_write_with(&ask, Some(state), plan_fresh, None, &clock);
                if v.sprawl_fired {
                    state.sprawl_fired = true;
                }
                let decisions = v
                    .events
                    .into_iter()
                    .filter_map(|e| match e {
                        AuditEvent::GateDecision { gate, decision, .. } => Some((gate, decision)),
                        _ => None,
                    })
                    .collect();
                // The history goes on as it happened: a write that stood counts for the turn.
                // A write with no recorded result is taken to have run (the history does not say otherwise).
                let stood = matches!(w.outcome, Outcome::Kept | Outcome::Unknown);
                let is_plan = stood && rules.is_plan(rel, w.content.as_deref().unwrap_or(""));
                if stood {
                    state.touch(keys, BTreeSet::from([rel.clone()]));
                }
                if is_plan {
                    plan_fresh = true;
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
