//! Shadow judging by the policy engine: every recorded write, command change and handoff re-judged
//! ([`Policy::decide_recorded`] and [`Policy::decide`] under a [`Policy::shadow`]) under a
//! config, with no override store (nothing on disk is read or consumed) and the session's turn
//! state (effects, the standing handoff, the sprawl tracker) following what actually happened.

use super::source::{Outcome, Session, Step, Write};
use super::Assessment;
use loopward_core::{
    Action, AgentId, AuditEvent, Decision, Effect, EffectKind, EffectStatus, GateKind, Refusal,
};
use loopward_runner::gates::{Ask, Policy, SprawlTracker, ONE_HANDOFF_GATE};
use loopward_runner::tool::Access;
use loopward_runner::ManualClock;
use std::collections::BTreeSet;

/// What one config says about one recorded action.
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

/// The recorded action a verdict is about.
#[derive(Clone, Debug)]
pub(crate) struct Act {
    /// The agent that acted.
    pub(crate) agent: String,
    /// The tool and what it touched (`Write src/a.rs`, `handoff → auditor`, `turn of builder`).
    pub(crate) action: String,
    /// The file it wrote, when it wrote one.
    pub(crate) file: Option<String>,
    /// What became of it.
    pub(crate) outcome: Outcome,
    /// The recorded config flagged it (a warning or an override).
    pub(crate) flagged: bool,
}

impl Act {
    fn write(w: &Write) -> Self {
        Self {
            agent: w.call.agent.clone(),
            action: format!("{} {}", w.call.tool, w.rel.as_deref().unwrap_or(&w.raw)),
            file: w.rel.clone(),
            outcome: w.call.outcome,
            flagged: w.flagged,
        }
    }
}

/// An action in its session, with what the history shows came after it.
#[derive(Clone, Debug)]
pub(crate) struct Judged {
    /// Its index in the session's steps (the same action under two configs has the same one).
    pub(crate) step: usize,
    /// The action.
    pub(crate) act: Act,
    /// Its turn number in the session (from 1; a person's message starts one).
    pub(crate) turn: u64,
    /// A plan was written later in the same turn, and stood.
    pub(crate) plan_followed: bool,
    /// The verdict.
    pub(crate) verdict: Verdict,
    /// What the history says of a gate's firing here, when the judge knows better than the
    /// action's own outcome (a stop of the whole run, a repeat after the workspace changed).
    pub(crate) fixed: Vec<(String, Assessment)>,
}

impl Judged {
    /// What the judge knows of `gate`'s firing here, if it knows better than the outcome.
    pub(crate) fn fixed(&self, gate: &str) -> Option<Assessment> {
        self.fixed.iter().find(|(g, _)| g == gate).map(|(_, a)| *a)
    }
}

/// Re-judges a session's writes and handoffs under `policy`. Returns each judged action and
/// the number of turns.
pub(crate) fn judge_session(policy: &Policy, session: &Session) -> (Vec<Judged>, u64) {
    let clock = ManualClock::new(0);
    let mut tracker = SprawlTracker::default();
    let mut turn = 0u64;
    let mut out = Vec::new();
    // Where each turn's writes start in `out`, to mark later plans.
    let mut turn_start = 0usize;
    // The agent turn's effects so far (the review gates arm on them) and its standing handoff.
    let mut effects: Vec<Effect> = Vec::new();
    let mut standing: Option<String> = None;
    for (step, s) in session.steps.iter().enumerate() {
        match s {
            Step::Human => {
                turn += 1;
                tracker.human();
                turn_start = out.len();
                effects.clear();
                standing = None;
            }
            Step::Turn(..) => {
                effects.clear();
                standing = None;
            }
            Step::Write(w) => {
                turn = turn.max(1);
                let (Some(rel), Ok(caller)) = (&w.rel, AgentId::new(w.call.agent.clone())) else {
                    continue;
                };
                let reps: Vec<(&str, &str)> = w
                    .replacements
                    .iter()
                    .map(|(a, b)| (a.as_str(), b.as_str()))
                    .collect();
                let action = Action::tool(w.call.tool.clone());
                let ask = Ask {
                    call_id: Some(&w.call.call_id),
                    ..Ask::new(&caller, &action, &[], &clock)
                };
                let v = policy.decide_recorded(&ask, rel, &reps, &mut tracker);
                // The history goes on as it happened: a write that stood counts for the turn.
                // A write with no recorded result is taken to have run (the history does not say otherwise).
                let stood = matches!(w.call.outcome, Outcome::Kept | Outcome::Unknown);
                let is_plan = stood && policy.is_plan(rel, w.content.as_deref().unwrap_or(""));
                if stood {
                    tracker.touch(&caller, v.work.clone());
                    if w.call.effects.is_empty() {
                        effects.push(Effect::ok(rel.clone(), EffectKind::Modify));
                    }
                }
                effects.extend(w.call.effects.iter().cloned());
                if is_plan {
                    tracker.plan();
                    for j in &mut out[turn_start..] {
                        let j: &mut Judged = j;
                        j.plan_followed = true;
                    }
                }
                out.push(Judged {
                    step,
                    act: Act::write(w),
                    turn,
                    plan_followed: false,
                    verdict: Verdict {
                        decisions: decisions(v.events),
                    },
                    fixed: vec![],
                });
            }
            Step::Call(c) => {
                turn = turn.max(1);
                if c.outcome != Outcome::Refused {
                    effects.extend(c.effects.iter().cloned());
                }
                if c.tool != "handoff" {
                    // A command's recorded changes, each judged as a write by its agent (what the
                    // shell watch does after the fact). A change the kernel sandbox stopped left
                    // no path in the record, so it cannot be judged.
                    let Ok(caller) = AgentId::new(c.agent.clone()) else {
                        continue;
                    };
                    for e in &c.effects {
                        let action = Action::tool(c.tool.clone());
                        let ask = Ask {
                            call_id: Some(&c.call_id),
                            ..Ask::new(&caller, &action, &[], &clock)
                        };
                        let v = policy.decide_recorded(&ask, &e.path, &[], &mut tracker);
                        let stood = e.status == EffectStatus::Ok;
                        if stood {
                            tracker.touch(&caller, v.work.clone());
                        }
                        out.push(Judged {
                            step,
                            act: Act {
                                agent: c.agent.clone(),
                                action: format!("{} → {}", c.tool, e.path),
                                file: Some(e.path.clone()),
                                outcome: if stood {
                                    Outcome::Kept
                                } else {
                                    Outcome::Reverted
                                },
                                flagged: false,
                            },
                            turn,
                            plan_followed: false,
                            verdict: Verdict {
                                decisions: decisions(v.events),
                            },
                            fixed: vec![],
                        });
                    }
                    continue;
                }
                let (Some(to), Ok(caller)) = (
                    c.arguments
                        .get("to")
                        .and_then(|v| v.as_str())
                        .and_then(|t| AgentId::new(t).ok()),
                    AgentId::new(c.agent.clone()),
                ) else {
                    continue;
                };
                let decisions = match &standing {
                    // The one-handoff rule: the handoff tool refuses a second handoff in a turn.
                    Some(first) => vec![(
                        ONE_HANDOFF_GATE.to_string(),
                        Decision::Deny(Refusal::new(
                            GateKind::OneHandoff,
                            format!("a handoff to {first} already stands this turn; only one handoff per turn is allowed, and the first one stands"),
                            format!("finish your reply; {first} takes over next"),
                        )),
                    )],
                    None => {
                        let accesses = [Access::Handoff { to: to.clone() }];
                        let action = Action::tool(c.tool.clone());
                        let ask = Ask {
                            call_id: Some(&c.call_id),
                            effects: &effects,
                            ..Ask::new(&caller, &action, &accesses, &clock)
                        };
                        decisions(policy.decide(&ask, &tracker).events)
                    }
                };
                // The history goes on as it happened: a handoff that stood stands.
                if standing.is_none() && c.outcome != Outcome::Refused {
                    standing = Some(to.to_string());
                }
                out.push(Judged {
                    step,
                    act: Act {
                        agent: c.agent.clone(),
                        action: format!("handoff → {to}"),
                        file: None,
                        outcome: c.outcome,
                        flagged: false,
                    },
                    turn,
                    plan_followed: false,
                    verdict: Verdict { decisions },
                    fixed: vec![],
                });
            }
        }
    }
    (out, turn)
}

fn decisions(events: Vec<AuditEvent>) -> Vec<(String, Decision)> {
    events
        .into_iter()
        .filter_map(|e| match e {
            AuditEvent::GateDecision { gate, decision, .. } => {
                Some((gate.name.to_string(), decision))
            }
            _ => None,
        })
        .collect()
}
