//! The loop a run goes round: a turn, what people said, and who acts next; a resumed run fed
//! back from its journal until it goes on live.

use super::{RunReport, RunSpec, Runner, TurnEvent};
use crate::context::{RunContext, TurnContext};
use crate::journal::{Journal, RecordedTurn, Resumed, Step, TurnFeed};
use crate::turn::TurnRequest;
use loopward_core::{
    AgentId, AuditEvent, FinishReason, Handoff, Message, Person, RunStatus, ToolResult, TurnNumber,
};
use std::collections::BTreeMap;
use tower::ServiceExt;
use tracing::Instrument;

impl Runner {
    pub(super) async fn drive(
        &self,
        ctx: &RunContext,
        spec: &RunSpec,
        journal: Option<&Journal>,
        report: &mut RunReport,
        observe: &mut impl FnMut(TurnEvent<'_>),
    ) -> RunStatus {
        let audit_failed = |e: loopward_core::AuditError| RunStatus::AuditFailed { error: e.0 };
        if !self.team.contains(&spec.first) {
            return RunStatus::Failed {
                error: format!(
                    "the first agent {} is not on the team ({})",
                    spec.first,
                    self.team
                        .iter()
                        .map(AgentId::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
        }
        if let Some(j) = journal {
            // The layers' per-run counters start from what the journal settled.
            ctx.extensions()
                .get_or_insert_with(|| Resumed::new(j, &self.resume));
        }
        let opening = match journal {
            Some(j) => ctx.record_owned(AuditEvent::RunResumed {
                previous: j.end().cloned(),
                replayed_turns: j
                    .recorded_turns()
                    .iter()
                    .filter(|t| t.ended.is_some())
                    .count() as u32,
                interrupted: j.interrupted(),
            }),
            None => ctx
                .record_owned(AuditEvent::RunStarted {
                    task: spec.task.content().to_string(),
                    agent: spec.first.clone(),
                })
                .and_then(|()| {
                    ctx.record_owned(AuditEvent::HumanMessage {
                        content: (&spec.task).into(),
                    })
                }),
        };
        if let Err(e) = opening {
            return audit_failed(e);
        }
        let mut histories: BTreeMap<AgentId, Vec<Message>> = BTreeMap::new();
        histories.insert(spec.first.clone(), vec![Message::human(spec.task.clone())]);
        let mut agent = spec.first.clone();
        // The journal's finished turns are fed back whole; its unfinished last turn is run
        // through the agent's stack with its recorded steps.
        let recorded = journal.map_or(&[][..], Journal::recorded_turns);
        let mut unfinished: Option<&RecordedTurn> = None;
        for t in recorded {
            if t.agent != agent || t.number != report.turns + 1 {
                return diverged(t, &agent);
            }
            if t.ended.is_none() {
                unfinished = Some(t);
                break;
            }
            report.turns = t.number;
            report.last_agent = Some(agent.clone());
            let (outcome_messages, text, handoff) = fed_back(t);
            histories
                .entry(agent.clone())
                .or_default()
                .extend(outcome_messages);
            if let Some((_, usage)) = &t.ended {
                report.usage += *usage;
            }
            report.final_text = text;
            // A turn that ended the run (killed before the run's end was recorded) ends it again.
            if let Some(status) = &t.ends_run {
                return status.clone();
            }
            let again = matches!(&t.ended, Some((FinishReason::Unverified, _)));
            match self.next_agent(
                &mut histories,
                spec,
                handoff,
                (&agent, again),
                t.heard.clone(),
                report,
            ) {
                Some(next) => agent = next,
                None => return RunStatus::Completed,
            }
        }
        loop {
            // The clock is read only where a person can stop the run: a run without stop
            // requests stamps its records as before.
            if let Some(stops) = &self.stops {
                match crate::stop::honour(stops, ctx, self.clock.now_millis(), report.turns) {
                    Ok(Some(status)) => return status,
                    Ok(None) => {}
                    Err(e) => return audit_failed(e),
                }
            }
            if report.turns >= self.max_turns {
                return RunStatus::CapReached {
                    cap: format!("max_turns ({})", self.max_turns),
                };
            }
            report.turns += 1;
            let number = TurnNumber(report.turns);
            let turn = TurnContext::new(ctx.clone(), agent.clone(), number);
            match unfinished.take() {
                // Its turn_started is in the ledger already.
                Some(t) => {
                    turn.extensions()
                        .get_or_insert_with(|| TurnFeed::new(t, self.resume.clone()));
                }
                None => {
                    if let Err(e) = turn.record_owned(AuditEvent::TurnStarted {
                        agent: agent.clone(),
                    }) {
                        return audit_failed(e);
                    }
                }
            }
            let history = histories.entry(agent.clone()).or_default();
            let service = self.agents[&agent].clone();
            let span = crate::telemetry::turn_span(ctx.run(), &agent, number);
            let result = service
                .oneshot(TurnRequest {
                    turn: turn.clone(),
                    messages: history.clone(),
                })
                .instrument(span.clone())
                .await;
            crate::telemetry::record_turn(&span, result.as_ref());
            let outcome = match result {
                Ok(o) => o,
                Err(e) => {
                    let status = e.status();
                    observe(TurnEvent {
                        turn: number,
                        agent: &agent,
                        outcome: Err(&status),
                    });
                    return status;
                }
            };
            // Only an agent whose turn ran has words; a turn refused before it ran leaves the
            // previous speaker's text under the previous speaker's name.
            report.last_agent = Some(agent.clone());
            history.extend(outcome.messages.iter().cloned());
            report.usage += outcome.usage;
            report.final_text.clone_from(&outcome.text);
            let ends_run = turn.state().run_ends.clone();
            if let Err(e) = turn.record_owned(AuditEvent::TurnEnded {
                finish: outcome.finish.clone(),
                usage: outcome.usage,
                ends_run: ends_run.clone(),
            }) {
                return audit_failed(e);
            }
            observe(TurnEvent {
                turn: number,
                agent: &agent,
                outcome: Ok(&outcome),
            });
            if let Some(status) = ends_run {
                return status;
            }
            let heard = match self.hear(ctx) {
                Ok(heard) => heard,
                Err(e) => return audit_failed(e),
            };
            let again = outcome.finish == FinishReason::Unverified;
            match self.next_agent(
                &mut histories,
                spec,
                outcome.handoff,
                (&agent, again),
                heard,
                report,
            ) {
                Some(next) => agent = next,
                None => return RunStatus::Completed,
            }
        }
    }

    /// Takes what people said into the run since the last turn boundary: each message is
    /// recorded as a human message (a new turn for the sprawl gate); each file the inbox would
    /// not deliver is recorded with the reason.
    fn hear(&self, ctx: &RunContext) -> Result<Vec<String>, loopward_core::AuditError> {
        let Some(inbox) = &self.inbox else {
            return Ok(vec![]);
        };
        let taken = inbox.take(ctx.run(), self.clock.now_millis());
        for why in &taken.refused {
            ctx.record_owned(AuditEvent::LayerDecision {
                layer: loopward_core::LayerId::Inbox,
                decision: loopward_core::LayerVerdict::Refused,
                detail: loopward_core::LayerDetail::InboxRefused(
                    loopward_core::InboxRefusedDetail { why: why.clone() },
                ),
            })?;
        }
        for said in &taken.said {
            // What the inbox delivered is a person's (`loopward say`, sealed under the key).
            let words = loopward_core::Person::at_the_keyboard().says(said.clone());
            crate::gates::human_message(ctx, &words)?;
        }
        Ok(taken.said)
    }

    /// Who acts next, after `agent`'s turn: the handoff's target, else `agent` itself when a
    /// person spoke (it answers) or its work was not verified (`again`:
    /// [`FinishReason::Unverified`]), else nobody (the run is complete). What people said goes
    /// to that agent's conversation after the handoff's notice.
    fn next_agent(
        &self,
        histories: &mut BTreeMap<AgentId, Vec<Message>>,
        spec: &RunSpec,
        handoff: Option<Handoff>,
        (agent, again): (&AgentId, bool),
        heard: Vec<String>,
        report: &mut RunReport,
    ) -> Option<AgentId> {
        let next = match handoff {
            Some(h) => self.hand_over(histories, spec, h, report),
            None if heard.is_empty() && !again => return None,
            None => agent.clone(),
        };
        histories
            .entry(next.clone())
            .or_default()
            .extend(heard.into_iter().map(|said| {
                // Only what a person sent into the inbox (`loopward say`) is heard here.
                Message::human(Person::at_the_keyboard().says(said))
            }));
        Some(next)
    }

    /// Passes the work to the handoff's target: its conversation gets the task (the first
    /// time) and the handoff's message, as notices.
    fn hand_over(
        &self,
        histories: &mut BTreeMap<AgentId, Vec<Message>>,
        spec: &RunSpec,
        handoff: Handoff,
        report: &mut RunReport,
    ) -> AgentId {
        let next = histories.entry(handoff.to.clone()).or_default();
        if next.is_empty() {
            next.push(Message::notice(format!(
                "The task this run was started with (from a person): {}",
                spec.task.content()
            )));
        }
        next.push(Message::notice(format!(
            "{} handed the work to you: {}",
            handoff.from, handoff.message
        )));
        let to = handoff.to.clone();
        report.handoffs.push(handoff);
        to
    }
}

/// A finished recorded turn as the agent's conversation saw it: its replies and results, its
/// last text and its handoff.
fn fed_back(t: &RecordedTurn) -> (Vec<Message>, String, Option<Handoff>) {
    let mut messages = vec![];
    let mut text = String::new();
    let mut handoff = None;
    for step in &t.steps {
        match step {
            Step::Reply(r) => {
                text.clone_from(&r.text);
                messages.push(Message::model(r.text.clone(), r.tool_calls.clone()));
            }
            Step::Call(c) => {
                if let crate::journal::CallState::Finished { content, is_error } = &c.state {
                    messages.push(Message::Tool(ToolResult {
                        call_id: c.call_id.clone(),
                        name: c.tool.clone(),
                        content: content.clone(),
                        is_error: *is_error,
                    }));
                }
                if handoff.is_none() {
                    handoff.clone_from(&c.handoff);
                }
            }
        }
    }
    (messages, text, handoff)
}

/// The journal does not follow the run's own order: resuming would guess, so it fails.
fn diverged(t: &RecordedTurn, agent: &AgentId) -> RunStatus {
    RunStatus::Failed {
        error: format!(
            "the journal's turn {} is {}'s, but the run reaches turn {} with {agent}: the ledger does not follow this team; resume with the config the run was made with",
            t.number, t.agent, t.number
        ),
    }
}
