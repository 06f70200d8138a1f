//! What a resumed run's layers count from, so it is held to the same bounds as a run that was
//! never stopped: the turns, the layer decisions and the model calls of the part of the run that
//! is settled (fed back, not taken again).
//!
//! A layer that keeps a per-run counter (caps, the repeat layer, class-jump, the budget meter,
//! the sprawl gate's tracker) builds it from [`Resumed`] the first time a resumed run asks for it, instead of from zero.
//! What runs again on resume (the unfinished turn's turn layers, a call that never started or
//! that the policy retries) is left out: it is counted when it runs again, once.

use super::{CallState, Journal, RecordedDecision, ResumePolicy, SprawlStep, Step};
use crate::context::RunContext;
use loopward_core::{AgentId, CallId, Effect, LayerId, Usage};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The settled part of a resumed run, kept in the run's extensions.
#[derive(Debug)]
pub(crate) struct Resumed {
    finished_turns: Vec<FinishedTurn>,
    decisions: Vec<Settled>,
    model_calls: Vec<(String, Usage)>,
    sprawl: Vec<SettledSprawl>,
}

/// What the sprawl gate's tracker noted in the settled part of the run, in ledger order.
#[derive(Debug)]
pub(crate) enum SettledSprawl {
    /// A person spoke.
    Human,
    /// The gate fired for this agent.
    Fired(AgentId),
    /// This agent's call finished with these effects (and its edit's replacement).
    Finished {
        agent: AgentId,
        effects: Vec<Effect>,
        replacements: Vec<(String, String)>,
    },
}

/// A turn the journal holds whole: whose it was and whether it handed off.
#[derive(Debug)]
pub(crate) struct FinishedTurn {
    pub(crate) agent: AgentId,
    pub(crate) handed_off: bool,
}

/// A settled layer decision: its agent, its call (inside a tool call) and what was decided.
#[derive(Debug)]
pub(crate) struct Settled {
    pub(crate) agent: AgentId,
    pub(crate) call: Option<CallId>,
    pub(crate) decision: RecordedDecision,
}

impl Resumed {
    /// What `journal` settles, when resumed with `policy`.
    pub(crate) fn new(journal: &Journal, policy: &ResumePolicy) -> Self {
        let turns = journal.recorded_turns();
        let finished_turns = turns
            .iter()
            .filter(|t| t.ended.is_some())
            .map(|t| FinishedTurn {
                agent: t.agent.clone(),
                handed_off: t
                    .steps
                    .iter()
                    .any(|s| matches!(s, Step::Call(c) if c.handoff.is_some())),
            })
            .collect();
        // The unfinished turn runs its turn layers again, and the calls that go through the tool
        // stack again: their earlier decisions are taken again, so they are not counted here.
        let unfinished = turns.last().filter(|t| t.ended.is_none());
        let rerun: BTreeSet<&CallId> = unfinished
            .map(|t| {
                t.steps
                    .iter()
                    .filter_map(|s| match s {
                        Step::Call(c) => Some(c),
                        Step::Reply(_) => None,
                    })
                    .filter(|c| match c.state {
                        CallState::Requested => true,
                        CallState::Started => c.handoff.is_none() && policy.retries(&c.tool),
                        CallState::Finished { .. } => false,
                    })
                    .map(|c| &c.call_id)
                    .collect()
            })
            .unwrap_or_default();
        // A call (or a turn's own layers) taken again in a later part of the run counts from
        // that part only: its last part stands.
        let mut last_part: BTreeMap<(u32, Option<&CallId>), u32> = BTreeMap::new();
        for d in &journal.decisions {
            let part = last_part.entry((d.turn, d.call.as_ref())).or_default();
            *part = (*part).max(d.part);
        }
        let decisions = journal
            .decisions
            .iter()
            .filter(|d| last_part[&(d.turn, d.call.as_ref())] == d.part)
            .filter(|d| {
                let again = unfinished.is_some_and(|t| t.number == d.turn)
                    && d.call.as_ref().is_none_or(|c| rerun.contains(&c));
                !again
            })
            .map(|d| Settled {
                agent: d.agent.clone(),
                call: d.call.clone(),
                decision: d.decision.clone(),
            })
            .collect();
        let mut sprawl_part: BTreeMap<(u32, Option<&CallId>), u32> = BTreeMap::new();
        for s in &journal.sprawl {
            if let Some(turn) = s.turn {
                let part = sprawl_part.entry((turn, s.call.as_ref())).or_default();
                *part = (*part).max(s.part);
            }
        }
        let sprawl = journal
            .sprawl
            .iter()
            .filter_map(|s| {
                let (Some(turn), Some(agent)) = (s.turn, &s.agent) else {
                    return matches!(s.step, SprawlStep::Human).then_some(SettledSprawl::Human);
                };
                let again = unfinished.is_some_and(|t| t.number == turn)
                    && s.call.as_ref().is_none_or(|c| rerun.contains(&c));
                if again || sprawl_part[&(turn, s.call.as_ref())] != s.part {
                    return None;
                }
                Some(match &s.step {
                    SprawlStep::Human => SettledSprawl::Human,
                    SprawlStep::Fired => SettledSprawl::Fired(agent.clone()),
                    SprawlStep::Finished {
                        effects,
                        replacements,
                    } => SettledSprawl::Finished {
                        agent: agent.clone(),
                        effects: effects.clone(),
                        replacements: replacements.clone(),
                    },
                })
            })
            .collect();
        Self {
            finished_turns,
            decisions,
            model_calls: journal.model_calls.clone(),
            sprawl,
        }
    }

    /// Only what the tool stack counts (the repeat layer's and class-jump's evidence decisions,
    /// the sprawl tracker's notes): the part a run on an engine that journals each tool call
    /// does not rebuild by replaying, see [`super::seed_tool_stack`].
    pub(crate) fn tool_stack_only(mut self) -> Self {
        self.finished_turns.clear();
        self.model_calls.clear();
        self.decisions.retain(|d| {
            d.call.is_some()
                && (d.decision.layer == LayerId::Repeat
                    || (d.decision.layer == LayerId::ClassJump
                        && d.decision
                            .detail
                            .as_class_jump()
                            .is_some_and(|c| c.is_evidence())))
        });
        self
    }

    /// What the run this context belongs to settled before it was resumed (`None`: it was not
    /// resumed). Ask before taking the lock of the run's extensions for something else.
    pub(crate) fn of(run: &RunContext) -> Option<Arc<Self>> {
        run.extensions().get::<Self>()
    }

    /// The turns the journal holds whole, in order.
    pub(crate) fn finished_turns(&self) -> &[FinishedTurn] {
        &self.finished_turns
    }

    /// The settled decisions of `layer`, in ledger order.
    pub(crate) fn decisions<'a>(&'a self, layer: &'a LayerId) -> impl Iterator<Item = &'a Settled> {
        self.decisions
            .iter()
            .filter(move |d| &d.decision.layer == layer)
    }

    /// What the sprawl gate's tracker noted before the resume, in ledger order.
    pub(crate) fn sprawl(&self) -> &[SettledSprawl] {
        &self.sprawl
    }

    /// Every model call made before the resume (each was paid for): its model and usage.
    pub(crate) fn model_calls(&self) -> &[(String, Usage)] {
        &self.model_calls
    }
}
