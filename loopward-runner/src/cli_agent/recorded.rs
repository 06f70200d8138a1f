//! A loop's sessions as its ledger recorded them, for `loopward replay`: a [`CliAgent`] given
//! them runs no client and no verifier; it records each turn's session and verification as they
//! were, charges the cost they reported, and judges them again (verify, repeat, class-jump) with
//! the same code, so the replay compares the loop's decisions.
//!
//! [`CliAgent`]: super::CliAgent

use super::agent::{Inner, Session};
use super::host::TOOLS;
use super::verify::Verdict;
use crate::context::TurnContext;
use crate::model::ModelError;
use crate::turn::{TurnError, TurnOutcome};
use loopward_core::LayerId;
use loopward_core::{AgentId, AuditEvent, Scope, Usage};
use std::collections::BTreeMap;

/// The records of each turn that the agent made itself (its session, the model calls inside,
/// its hook's decisions, the reported cost, the hook ledger's link in older runs, the
/// verification and its judgement), by turn.
#[derive(Debug, Default)]
pub struct RecordedSessions {
    /// Each record with the agent it was recorded for when that was not the turn's (a
    /// subagent acting inside a session, as its hook recorded it).
    turns: BTreeMap<u32, Vec<(Option<AgentId>, AuditEvent)>>,
}

/// The layers whose decisions a CLI agent records itself.
const OWN_LAYERS: [LayerId; 5] = [
    LayerId::Session,
    LayerId::SessionLedger,
    LayerId::Resume,
    LayerId::Budget,
    LayerId::Verify,
];

impl RecordedSessions {
    /// Takes them from one part of a run's records (from its start or a resume to the next).
    pub fn from_records(records: &[(Scope, AuditEvent)]) -> Self {
        let mut turns: BTreeMap<u32, Vec<(Option<AgentId>, AuditEvent)>> = BTreeMap::new();
        // Records of a hook decision still to come: made again as they were (the session's
        // client is not run again, so neither is its hook).
        let mut hooked = 0u64;
        for (scope, e) in records {
            let Some(turn) = scope.turn else { continue };
            if hooked > 0 {
                hooked -= 1;
                turns
                    .entry(turn.0)
                    .or_default()
                    .push((scope.agent.clone(), e.clone()));
                continue;
            }
            let own = match e {
                AuditEvent::LayerDecision {
                    layer: LayerId::Hook,
                    detail,
                    ..
                } => {
                    hooked = detail.as_hook().map_or(0, |h| h.records);
                    true
                }
                // A call the session made over MCP is run again through the gates.
                AuditEvent::ToolRequested { call_id, .. }
                    if call_id.as_str().starts_with(super::relay::CALL_PREFIX) =>
                {
                    true
                }
                AuditEvent::ToolRequested { tool, .. }
                | AuditEvent::ToolStarted { tool, .. }
                | AuditEvent::ToolFinished { tool, .. } => {
                    TOOLS.contains(&tool.as_str()) || tool == super::agent::VERIFY
                }
                AuditEvent::ModelCall { .. } | AuditEvent::ModelReply { .. } => true,
                // The budget's own verdicts (spent) are the turn layer's, not the agent's.
                AuditEvent::LayerDecision {
                    layer: LayerId::Budget,
                    detail,
                    ..
                } => detail.as_reported_cost().is_some(),
                AuditEvent::LayerDecision { layer, .. } => OWN_LAYERS.contains(layer),
                _ => false,
            };
            if own {
                turns.entry(turn.0).or_default().push((None, e.clone()));
            }
        }
        Self { turns }
    }

    /// The recorded records of turn `n`, if it has any.
    pub(crate) fn turn(&self, n: u32) -> Option<&[(Option<AgentId>, AuditEvent)]> {
        self.turns.get(&n).map(Vec::as_slice)
    }
}

impl Inner {
    /// A turn as its ledger recorded it: the agent's own records made again, its cost charged,
    /// its verification judged again.
    pub(super) async fn replayed(
        &self,
        turn: &TurnContext,
        rec: &RecordedSessions,
    ) -> Result<TurnOutcome, TurnError> {
        let n = turn.turn().0;
        let events = rec.turn(n).ok_or_else(|| {
            TurnError::Model(ModelError::Local(format!(
                "the ledger holds no session for turn {n}: the run stopped before it"
            )))
        })?;
        let mut session = Session {
            content: String::new(),
            answer: String::new(),
            claimed: false,
            usage: Usage::default(),
        };
        let mut verdict: Option<Verdict> = None;
        let (mut before, mut after) = (String::new(), String::new());
        for (agent, e) in events {
            if agent.is_some() {
                // A hook's record of a subagent, made again for it.
                turn.record_as(agent.clone(), e.clone())?;
                continue;
            }
            match e {
                AuditEvent::LayerDecision {
                    layer: LayerId::Budget,
                    detail,
                    ..
                } => {
                    let cost = detail
                        .as_reported_cost()
                        .map_or(0, |r| r.reported_cost_micros);
                    crate::layers::budget::charge_reported(turn, cost)?;
                }
                // What the session had written when it handed off: its handoff, run again
                // below, is judged by the same paths.
                AuditEvent::LayerDecision {
                    layer: LayerId::Session,
                    detail,
                    ..
                } => match detail.as_session_changes() {
                    Some(changes) => super::changes::written(turn, changes.into_owned().changed)?,
                    None => turn.record(e)?,
                },
                // Judged again below.
                AuditEvent::LayerDecision {
                    layer: LayerId::Verify,
                    detail,
                    ..
                } => {
                    let d = detail.as_verify();
                    (before, after) = d.as_ref().map_or_else(Default::default, |d| {
                        (d.workspace_before.clone(), d.workspace_after.clone())
                    });
                    if let Some(v) = &mut verdict {
                        v.code = d.and_then(|d| d.code);
                    }
                }
                AuditEvent::ToolFinished {
                    tool,
                    is_error,
                    output,
                    ..
                } => {
                    let text = output.clone().unwrap_or_default();
                    if TOOLS.contains(&tool.as_str()) {
                        session.claimed = !is_error;
                        session.content = text;
                    } else {
                        verdict = Some(Verdict {
                            passed: !is_error,
                            code: None,
                            output: text,
                        });
                    }
                    turn.record(e)?;
                }
                AuditEvent::ToolRequested {
                    call_id,
                    tool,
                    arguments,
                } if call_id.as_str().starts_with(super::relay::CALL_PREFIX) => {
                    let call = loopward_core::ToolCall {
                        id: call_id.clone(),
                        name: tool.clone(),
                        arguments: arguments.clone(),
                    };
                    match &self.loop_tools {
                        Some(tools) => {
                            tools.call(turn, call).await?;
                        }
                        None => turn.record(e)?,
                    }
                }
                AuditEvent::ModelCall { usage, .. } => {
                    session.usage += *usage;
                    turn.record(e)?;
                }
                AuditEvent::ModelReply { text, .. } => {
                    session.answer.clone_from(text);
                    turn.record(e)?;
                }
                _ => turn.record(e)?,
            }
        }
        if let Some(out) = self.handed_off(turn, None, &session) {
            return Ok(out);
        }
        let verdict = verdict.ok_or_else(|| {
            TurnError::Model(ModelError::Local(format!(
                "the ledger holds no verification for turn {n}: the run stopped before it"
            )))
        })?;
        self.outcome(turn, session, &verdict, (&before, &after))
    }
}
