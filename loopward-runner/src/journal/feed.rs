//! What a resumed turn is fed from its journal: the agent takes recorded replies and results
//! from here, in the order it took them, and goes live at the first step that is not here.

use super::{
    CallState, RecordedCall, RecordedDecision, RecordedReply, RecordedTurn, ResumePolicy, Step,
};
use loopward_core::{CallId, Effect, Handoff, LayerVerdict, ToolName};
use std::collections::VecDeque;
use std::sync::Mutex;

/// The recorded steps of the one turn a resumed run continues, kept in that turn's extensions.
#[derive(Debug)]
pub(crate) struct TurnFeed {
    steps: Mutex<VecDeque<Step>>,
    decisions: Mutex<Vec<RecordedDecision>>,
    policy: ResumePolicy,
}

/// What the agent does with a call the journal holds.
#[derive(Debug)]
pub(crate) enum FedCall {
    /// It finished: its recorded result is the result.
    Finished {
        content: String,
        is_error: bool,
        effects: Vec<Effect>,
        handoff: Option<Handoff>,
    },
    /// Run it through the tool stack again, without recording its request twice: it never
    /// started, it was paused for an approval, or it was interrupted and the policy retries it.
    Again { retried: bool },
    /// It was interrupted and the policy does not run it again.
    Interrupted { handoff: Option<Handoff> },
}

impl FedCall {
    /// The fate of recorded call `c`: an interrupted call runs again if it `retries` (and did
    /// not hand off).
    fn of(c: RecordedCall, retries: bool) -> Self {
        match c.state {
            CallState::Finished { content, is_error } => Self::Finished {
                content,
                is_error,
                effects: c.effects,
                handoff: c.handoff,
            },
            CallState::Requested => Self::Again { retried: false },
            CallState::Started if c.handoff.is_none() && retries => Self::Again { retried: true },
            CallState::Started => Self::Interrupted { handoff: c.handoff },
        }
    }
}

impl TurnFeed {
    pub(crate) fn new(turn: &RecordedTurn, policy: ResumePolicy) -> Self {
        Self {
            steps: Mutex::new(turn.steps.iter().cloned().collect()),
            decisions: Mutex::new(turn.decisions.clone()),
            policy,
        }
    }

    fn steps(&self) -> std::sync::MutexGuard<'_, VecDeque<Step>> {
        self.steps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next recorded reply, if the next step is one. Anything else means the turn went
    /// another way than recorded: the rest of the feed is dropped and the turn goes live.
    pub(crate) fn next_reply(&self) -> Option<RecordedReply> {
        let mut steps = self.steps();
        match steps.pop_front() {
            Some(Step::Reply(r)) => Some(r),
            Some(Step::Call(_)) => {
                steps.clear();
                None
            }
            None => None,
        }
    }

    /// The recorded fate of call `id`, if the next step is that call.
    pub(crate) fn take_call(&self, id: &CallId, tool: &ToolName) -> Option<FedCall> {
        let mut steps = self.steps();
        let Some(Step::Call(c)) = steps.front() else {
            steps.clear();
            return None;
        };
        if c.call_id != *id || c.tool != *tool {
            steps.clear();
            return None;
        }
        let Some(Step::Call(c)) = steps.pop_front() else {
            return None;
        };
        Some(FedCall::of(c, self.policy.retries(tool)))
    }

    /// The recorded fate of call `id` of `tool`, wherever it is among the turn's steps (a CLI
    /// agent's session records model replies between its call's start and end).
    pub(crate) fn find_call(&self, id: &CallId, tool: &ToolName) -> Option<FedCall> {
        let c = self.steps().iter().find_map(|s| match s {
            Step::Call(c) if c.call_id == *id && c.tool == *tool => Some(c.clone()),
            _ => None,
        })?;
        Some(FedCall::of(c, false))
    }

    /// The handoff a call of the turn registered, if any (a CLI agent's session hands off
    /// through a tool it calls over MCP, between its call's start and end).
    pub(crate) fn handoff(&self) -> Option<Handoff> {
        self.steps().iter().find_map(|s| match s {
            Step::Call(c) => c.handoff.clone(),
            Step::Reply(_) => None,
        })
    }

    /// Takes the first recorded decision of `layer` before the turn's first step that `pick`
    /// accepts (a turn gate's verdict given before the process ended is not asked again).
    pub(crate) fn take_decision(
        &self,
        layer: &loopward_core::LayerId,
        pick: impl Fn(LayerVerdict, &loopward_core::LayerDetail) -> bool,
    ) -> Option<RecordedDecision> {
        let mut decisions = self.decisions.lock().unwrap_or_else(|p| p.into_inner());
        let at = decisions
            .iter()
            .position(|d| &d.layer == layer && pick(d.decision, &d.detail))?;
        Some(decisions.remove(at))
    }
}
