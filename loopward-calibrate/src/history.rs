//! What the rest of a recorded session shows about an action, and so how a firing on it is
//! assessed.

use super::layers;
use super::shadow::Judged;
use super::source::{Outcome, Session, Step};
use super::{Assessment, Firing};
use std::collections::HashMap;

/// What the rest of a session shows about an action: later writes of each file, and whether
/// the session went on well.
pub(super) struct History {
    /// Per file: (step, turn, agent) of each write that stood.
    writes: HashMap<String, Vec<(usize, u64, String)>>,
    /// Turns in the session.
    turns: u64,
    /// The recorded run completed (`None`: a transcript, or the run did not end).
    completed: Option<bool>,
    transcript: bool,
}

impl History {
    pub(super) fn of(session: &Session, turns: u64) -> Self {
        let mut writes: HashMap<String, Vec<(usize, u64, String)>> = HashMap::new();
        let mut turn = 0u64;
        for (i, s) in session.steps.iter().enumerate() {
            match s {
                Step::Human => turn += 1,
                Step::Write(w) if matches!(w.call.outcome, Outcome::Kept) => {
                    if let Some(rel) = &w.rel {
                        writes.entry(rel.clone()).or_default().push((
                            i,
                            turn.max(1),
                            w.call.agent.clone(),
                        ));
                    }
                }
                _ => {}
            }
        }
        Self {
            writes,
            turns,
            completed: layers::completed(session),
            transcript: session.kind != "ledger",
        }
    }

    /// One firing's assessment from the action's own outcome and what came after it.
    pub(super) fn assess(&self, j: &Judged) -> Assessment {
        match j.act.outcome {
            Outcome::Refused => return Assessment::Agreed,
            _ if j.act.flagged => return Assessment::Agreed,
            Outcome::Reverted => return Assessment::Reverted,
            Outcome::Unknown => return Assessment::Unknown,
            Outcome::Kept => {}
        }
        if j.plan_followed {
            return Assessment::PlanFollowed;
        }
        let reworked = j
            .act
            .file
            .as_ref()
            .and_then(|f| self.writes.get(f))
            .is_some_and(|ws| {
                ws.iter().any(|(step, turn, agent)| {
                    *step > j.step && (*turn > j.turn || *agent != j.act.agent)
                })
            });
        if reworked {
            return Assessment::Reworked;
        }
        let went_on_well = if self.transcript {
            Some(j.turn < self.turns)
        } else {
            self.completed
        };
        match went_on_well {
            Some(true) => Assessment::LikelyFalse,
            _ => Assessment::Unclear,
        }
    }
}

pub(super) fn firing(
    session: &Session,
    j: &Judged,
    text: String,
    assessment: Assessment,
) -> Firing {
    Firing {
        session: format!("{} {}", session.kind, session.id),
        turn: j.turn,
        agent: j.act.agent.clone(),
        action: j.act.action.clone(),
        text,
        assessment,
    }
}
