//! Folding ledger records into a [`Journal`].

use super::{
    CallState, Journal, PastDecision, PastSprawl, RecordedCall, RecordedDecision, RecordedReply,
    RecordedTurn, SprawlStep, Step,
};
use loopward_core::{AuditEvent, CallId, GateKind, LayerId, RunId, Scope, ToolName, Usage};

/// A ledger that cannot be read as a journal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// The ledger holds no `run_started` record: the run was killed before its first record.
    #[error("the ledger of run {run} has no run_started record: the run was stopped before it began; start it again under the same id")]
    NotStarted {
        /// The run (`-` when the ledger is empty).
        run: String,
    },
    /// Records of two runs are mixed.
    #[error("record {index} belongs to run {found}, not {run}; a journal is one run's ledger")]
    OtherRun {
        /// The run the ledger is of.
        run: RunId,
        /// The run the record names.
        found: RunId,
        /// The record's position (from 1).
        index: usize,
    },
    /// A step was recorded before model replies were (a ledger from an older loopward).
    #[error("record {index} ({kind}) follows a model call whose reply was not recorded: this ledger was written before runs were journaled and cannot be resumed mid-run; start a new run")]
    Unjournaled {
        /// The record's position (from 1).
        index: usize,
        /// Its kind.
        kind: &'static str,
    },
}

impl Journal {
    /// Reads a run's records (in ledger order) as its journal.
    pub fn from_records(records: &[(Scope, AuditEvent)]) -> Result<Self, JournalError> {
        let mut p = Parser::default();
        for (i, (scope, event)) in records.iter().enumerate() {
            p.fold(i + 1, scope, event)?;
        }
        let (Some(run), Some((task, first))) = (p.run, p.started) else {
            return Err(JournalError::NotStarted {
                run: records
                    .first()
                    .map_or_else(|| "-".into(), |(s, _)| s.run.to_string()),
            });
        };
        let mut turns = p.turns;
        if let Some(last) = turns.last_mut() {
            if last.ended.is_none() {
                drop_after_pause(last);
            }
        }
        Ok(Self {
            run,
            task,
            first,
            turns,
            end: p.end,
            decisions: p.decisions,
            model_calls: p.model_calls,
            sprawl: p.sprawl,
        })
    }
}

#[derive(Default)]
struct Parser {
    run: Option<RunId>,
    started: Option<(String, loopward_core::AgentId)>,
    turns: Vec<RecordedTurn>,
    end: Option<loopward_core::RunStatus>,
    /// Usage of a model call whose reply is not recorded yet.
    call_usage: Option<Usage>,
    /// Every layer decision, where it was taken.
    decisions: Vec<PastDecision>,
    /// Every model call made (paid for), with its model.
    model_calls: Vec<(String, Usage)>,
    /// What the sprawl gate's tracker saw.
    sprawl: Vec<PastSprawl>,
    /// Which part of the run the records are of (0, then +1 at each `run_resumed`).
    part: u32,
}

impl Parser {
    fn fold(
        &mut self,
        index: usize,
        scope: &Scope,
        event: &AuditEvent,
    ) -> Result<(), JournalError> {
        match &self.run {
            None => self.run = Some(scope.run.clone()),
            Some(run) if *run != scope.run => {
                return Err(JournalError::OtherRun {
                    run: run.clone(),
                    found: scope.run.clone(),
                    index,
                })
            }
            Some(_) => {}
        }
        let unjournaled = |call_usage: &Option<Usage>| match call_usage {
            Some(_) => Err(JournalError::Unjournaled {
                index,
                kind: event.kind(),
            }),
            None => Ok(()),
        };
        match event {
            AuditEvent::RunStarted { task, agent } => {
                // A ledger resumed by an older loopward restarted the run from its first turn.
                self.started = Some((task.clone(), agent.clone()));
                self.turns.clear();
                self.end = None;
            }
            AuditEvent::RunResumed { .. } => {
                self.part += 1;
                self.end = None;
                self.call_usage = None;
                if let Some(last) = self.turns.last_mut() {
                    drop_after_pause(last);
                }
            }
            AuditEvent::RunEnded { status, .. } => self.end = Some(status.clone()),
            AuditEvent::TurnStarted { agent } => {
                self.call_usage = None;
                self.turns.push(RecordedTurn {
                    number: scope.turn.map_or(self.turns.len() as u32 + 1, |t| t.0),
                    agent: agent.clone(),
                    steps: vec![],
                    decisions: vec![],
                    ended: None,
                    ends_run: None,
                    heard: vec![],
                });
            }
            AuditEvent::HumanMessage { content } => {
                // The task's own record comes before any turn; later ones follow a turn.
                if let Some(turn) = self.turns.last_mut() {
                    turn.heard.push(content.to_string());
                }
                self.sprawl.push(PastSprawl {
                    part: self.part,
                    turn: None,
                    agent: None,
                    call: None,
                    step: SprawlStep::Human,
                });
            }
            AuditEvent::ModelCall { usage, model, .. } => {
                // A model call without a recorded reply (killed in between) is made again.
                self.call_usage = Some(*usage);
                self.model_calls.push((model.clone(), *usage));
            }
            AuditEvent::ModelReply {
                text,
                tool_calls,
                stop,
            } => {
                let usage = self.call_usage.take().unwrap_or_default();
                if let Some(turn) = self.turns.last_mut() {
                    turn.steps.push(Step::Reply(RecordedReply {
                        text: text.clone(),
                        tool_calls: tool_calls.clone(),
                        usage,
                        stop: *stop,
                    }));
                }
            }
            AuditEvent::ToolRequested {
                call_id,
                tool,
                arguments,
            } => {
                unjournaled(&self.call_usage)?;
                if let Some(turn) = self.turns.last_mut() {
                    turn.steps.push(Step::Call(RecordedCall {
                        call_id: call_id.clone(),
                        tool: tool.clone(),
                        state: CallState::Requested,
                        effects: vec![],
                        handoff: None,
                        arguments: arguments.clone(),
                        paused: false,
                    }));
                }
            }
            AuditEvent::ToolStarted { call_id, .. } => {
                if let Some(c) = self.call(call_id) {
                    c.state = CallState::Started;
                }
            }
            AuditEvent::ToolFinished {
                call_id,
                is_error,
                effects,
                summary,
                output,
                ..
            } => {
                let part = self.part;
                let (turn, agent) = (scope.turn.map(|t| t.0), scope.agent.clone());
                let mut noted = None;
                if let Some(c) = self.call(call_id) {
                    noted = Some(PastSprawl {
                        part,
                        turn,
                        agent,
                        call: Some(call_id.clone()),
                        step: SprawlStep::Finished {
                            effects: effects.clone(),
                            replacements: replacement(&c.tool, &c.arguments),
                        },
                    });
                    c.effects.clone_from(effects);
                    c.state = CallState::Finished {
                        content: output.clone().unwrap_or_else(|| summary.clone()),
                        is_error: *is_error,
                    };
                }
                self.sprawl.extend(noted);
            }
            AuditEvent::GateDecision { call_id, gate, .. } if gate.kind == GateKind::Sprawl => {
                self.sprawl.push(PastSprawl {
                    part: self.part,
                    turn: scope.turn.map(|t| t.0),
                    agent: scope.agent.clone(),
                    call: call_id.clone(),
                    step: SprawlStep::Fired,
                });
            }
            AuditEvent::HandoffRegistered(h) => {
                if let Some(c) = self.open_call() {
                    c.handoff = Some(h.clone());
                }
            }
            AuditEvent::LayerDecision {
                layer,
                decision,
                detail,
            } => {
                // A stop-gate decision that left the action waiting: a resumed run runs that action
                // through its gates again, so the approval given meanwhile is consumed.
                let pending = *layer == LayerId::StopGate && decision.pending();
                let (part, call) = (self.part, self.open_call().map(|c| c.call_id.clone()));
                if let (Some(turn), Some(agent)) = (scope.turn, &scope.agent) {
                    self.decisions.push(PastDecision {
                        part,
                        turn: turn.0,
                        agent: agent.clone(),
                        call,
                        decision: RecordedDecision {
                            layer: layer.clone(),
                            decision: *decision,
                            detail: detail.clone(),
                        },
                    });
                }
                if let Some(c) = self.open_call() {
                    c.paused |= pending;
                } else if let Some(turn) = self.turns.last_mut().filter(|t| t.steps.is_empty()) {
                    turn.decisions.push(RecordedDecision {
                        layer: layer.clone(),
                        decision: *decision,
                        detail: detail.clone(),
                    });
                }
            }
            AuditEvent::TurnEnded {
                finish,
                usage,
                ends_run,
            } => {
                unjournaled(&self.call_usage)?;
                if let Some(turn) = self.turns.last_mut() {
                    turn.ended = Some((finish.clone(), *usage));
                    turn.ends_run.clone_from(ends_run);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The last call of the current turn with this id that has not finished (a call resumed
    /// after a pause finishes a second time: its last result stands).
    fn call(&mut self, id: &CallId) -> Option<&mut RecordedCall> {
        let turn = self.turns.last_mut()?;
        let mut found = None;
        for step in turn.steps.iter_mut().rev() {
            if let Step::Call(c) = step {
                if c.call_id == *id {
                    let open = !matches!(c.state, CallState::Finished { .. }) || c.paused;
                    if open {
                        return Some(c);
                    }
                    found.get_or_insert(c);
                }
            }
        }
        found
    }

    /// The call under way: the current turn's last call, if it has not finished.
    fn open_call(&mut self) -> Option<&mut RecordedCall> {
        match self.turns.last_mut()?.steps.last_mut()? {
            Step::Call(c) if !matches!(c.state, CallState::Finished { .. }) => Some(c),
            _ => None,
        }
    }
}

/// The (old, new) pair an `edit_file` call's arguments replace: one replacement repeated across
/// files is one unit of work for the sprawl gate.
fn replacement(tool: &ToolName, arguments: &serde_json::Value) -> Vec<(String, String)> {
    if tool != "edit_file" {
        return vec![];
    }
    match (arguments.get("old"), arguments.get("new")) {
        (Some(serde_json::Value::String(old)), Some(serde_json::Value::String(new)))
            if !old.is_empty() =>
        {
            vec![(old.clone(), new.clone())]
        }
        _ => vec![],
    }
}

/// A turn paused for a durable approval continues at the paused call: what the agent did after
/// the pause (its wrap-up reply, with tools disabled) is not part of the run that goes on.
fn drop_after_pause(turn: &mut RecordedTurn) {
    let Some(at) = turn.steps.iter().position(
        |s| matches!(s, Step::Call(c) if c.paused && matches!(c.state, CallState::Finished { .. })),
    ) else {
        return;
    };
    turn.steps.truncate(at + 1);
    if let Some(Step::Call(c)) = turn.steps.last_mut() {
        c.state = CallState::Requested;
        c.paused = false;
        c.effects.clear();
    }
}
