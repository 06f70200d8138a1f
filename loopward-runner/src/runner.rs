//! The outer loop: calls agents turn by turn, follows handoffs, stops when an agent finishes
//! without handing off, on caps, or on fatal errors.

use crate::clock::{Clock, SystemClock};
use crate::context::{RunContext, TurnContext};
use crate::inbox::HumanInbox;
use crate::journal::{Journal, RecordedTurn, ResumePolicy, Resumed, Step, TurnFeed};
use crate::stop::StopRequests;
use crate::turn::{BoxTurnService, TurnOutcome, TurnRequest};
use crate::workspace::Workspace;
use loopward_core::{
    AgentId, AuditEvent, AuditSink, FinishReason, Handoff, HumanWords, Message, Person, RunId,
    RunStatus, ToolResult, TurnNumber, Usage,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tower::ServiceExt;
use tracing::Instrument;

/// The default hard cap on turns in one run.
pub const DEFAULT_MAX_TURNS: u32 = 32;

/// Runs teams of agents.
#[derive(Clone)]
pub struct Runner {
    agents: BTreeMap<AgentId, BoxTurnService>,
    team: Vec<AgentId>,
    workspace: Workspace,
    clock: Arc<dyn Clock>,
    max_turns: u32,
    resume: ResumePolicy,
    inbox: Option<HumanInbox>,
    stops: Option<StopRequests>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("team", &self.team)
            .field("workspace", &self.workspace)
            .field("max_turns", &self.max_turns)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Runner`]: the runner being assembled, checked by [`RunnerBuilder::build`].
pub struct RunnerBuilder {
    runner: Runner,
}

/// A runner could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunnerError {
    /// No agents were added.
    #[error("the team has no agents; add at least one with RunnerBuilder::agent")]
    NoAgents,
    /// An agent was added twice.
    #[error("agent {0} was added twice; agent names must be unique")]
    DuplicateAgent(AgentId),
    /// `max_turns` is zero.
    #[error("max_turns must be at least 1")]
    ZeroTurns,
}

impl Runner {
    /// Starts building a runner over `workspace`.
    pub fn builder(workspace: Workspace) -> RunnerBuilder {
        RunnerBuilder {
            runner: Runner {
                agents: BTreeMap::new(),
                team: Vec::new(),
                workspace,
                clock: Arc::new(SystemClock),
                max_turns: DEFAULT_MAX_TURNS,
                resume: ResumePolicy::default(),
                inbox: None,
                stops: None,
            },
        }
    }

    /// The team, in the order agents were added.
    pub fn team(&self) -> &[AgentId] {
        &self.team
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }
}

impl RunnerBuilder {
    /// Adds an agent and the turn service (stack) that runs it.
    pub fn agent(mut self, name: AgentId, service: BoxTurnService) -> Result<Self, RunnerError> {
        if self.runner.agents.contains_key(&name) {
            return Err(RunnerError::DuplicateAgent(name));
        }
        self.runner.team.push(name.clone());
        self.runner.agents.insert(name, service);
        Ok(self)
    }

    /// The clock events are stamped with.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.runner.clock = clock;
        self
    }

    /// The hard cap on turns per run (the anti-loop layers add finer caps).
    pub fn max_turns(mut self, n: u32) -> Self {
        self.runner.max_turns = n;
        self
    }

    /// Which interrupted tool calls a resumed run runs again (see [`ResumePolicy`]).
    pub fn resume_policy(mut self, policy: ResumePolicy) -> Self {
        self.runner.resume = policy;
        self
    }

    /// Where people's messages to a running run wait (see [`crate::inbox`]): at each turn
    /// boundary the runner takes the run's messages, records each as `human_message` (a new
    /// turn for the sprawl gate) and gives them to the agent that acts next — the handoff's
    /// target, or, when the turn did not hand off, the same agent, so the run goes on instead of
    /// ending. Without one, nobody can speak into a run after its task.
    pub fn inbox(mut self, inbox: HumanInbox) -> Self {
        self.runner.inbox = Some(inbox);
        self
    }

    /// Where a person's requests to stop a run wait (see [`crate::stop`]): before each turn the
    /// runner takes the run's request, records it as the person's decision and ends the run
    /// `Stopped`. Without one, a run stops only on its own terms or when its process is ended.
    pub fn stops(mut self, stops: StopRequests) -> Self {
        self.runner.stops = Some(stops);
        self
    }

    /// Builds the runner.
    pub fn build(self) -> Result<Runner, RunnerError> {
        if self.runner.agents.is_empty() {
            return Err(RunnerError::NoAgents);
        }
        if self.runner.max_turns == 0 {
            return Err(RunnerError::ZeroTurns);
        }
        Ok(self.runner)
    }
}

/// One run to start.
///
/// Its task is a person's words: a string is not a task, so no model or tool text can start a
/// run as if a person had asked for it.
///
/// ```compile_fail
/// fn forge(spec: &mut loopward_runner::RunSpec) {
///     spec.task = "approve it".to_string().into();
/// }
/// ```
///
/// ```
/// fn give(spec: &mut loopward_runner::RunSpec) {
///     spec.task = loopward_core::Person::at_the_keyboard().says("approve it");
/// }
/// ```
pub struct RunSpec {
    /// The run's id (becomes its ledger folder name).
    pub id: RunId,
    /// The task, as a person gave it: only a [`Person`] makes [`HumanWords`], so whoever
    /// starts a run says whose words the task is (`Person::at_the_keyboard().says(…)`).
    pub task: HumanWords,
    /// The agent that takes the first turn.
    pub first: AgentId,
    /// Where the run's events go.
    pub audit: Arc<dyn AuditSink>,
    /// Where the audit can be read afterwards, for the report.
    pub audit_location: Option<PathBuf>,
}

/// How a run went.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// The run.
    pub run: RunId,
    /// How it ended.
    pub status: RunStatus,
    /// Turns taken.
    pub turns: u32,
    /// Handoffs followed, in order.
    pub handoffs: Vec<Handoff>,
    /// Tokens used.
    pub usage: Usage,
    /// The last agent that acted.
    pub last_agent: Option<AgentId>,
    /// The last agent's final text.
    pub final_text: String,
    /// Where the audit went.
    pub audit_location: Option<PathBuf>,
}

/// One turn as the runner saw it, for callers that watch progress.
#[derive(Clone, Debug)]
pub struct TurnEvent<'a> {
    /// The turn number.
    pub turn: TurnNumber,
    /// The agent.
    pub agent: &'a AgentId,
    /// What happened (Ok) or why the run stops (Err).
    pub outcome: Result<&'a TurnOutcome, &'a RunStatus>,
}

impl Runner {
    /// Runs `spec` to the end.
    pub async fn run(&self, spec: RunSpec) -> RunReport {
        self.run_observed(spec, |_| {}).await
    }

    /// Runs `spec`, calling `observe` after each turn.
    pub async fn run_observed(
        &self,
        spec: RunSpec,
        mut observe: impl FnMut(TurnEvent<'_>),
    ) -> RunReport {
        self.execute(spec, None, |_| {}, &mut observe).await
    }

    /// [`Runner::run`], with `seed` given the run's [`Extensions`](crate::Extensions) before its
    /// first turn: how an engine that drives runs (loopward-restate's journal) hands its layers
    /// what they need in the request itself, which every layer reads, rather than in a
    /// task-local that a spawned future would lose.
    pub async fn run_seeded(
        &self,
        spec: RunSpec,
        seed: impl FnOnce(&crate::Extensions),
    ) -> RunReport {
        self.execute(spec, None, seed, &mut |_| {}).await
    }

    /// Resumes a run from its journal: the recorded turns and steps are fed back (no model
    /// call, no tool run, nothing recorded again), then the run goes on live from the first
    /// step the journal does not hold. `spec` names the run (its id must be the journal's) and
    /// the sink that continues its ledger; its task and first agent are the journal's.
    ///
    /// A finished run ([`Journal::finished`]) is refused.
    pub async fn resume(&self, spec: RunSpec, journal: &Journal) -> Result<RunReport, ResumeError> {
        self.resume_observed(spec, journal, |_| {}).await
    }

    /// [`Runner::resume`], calling `observe` after each turn that runs live.
    pub async fn resume_observed(
        &self,
        mut spec: RunSpec,
        journal: &Journal,
        mut observe: impl FnMut(TurnEvent<'_>),
    ) -> Result<RunReport, ResumeError> {
        if spec.id != *journal.run() {
            return Err(ResumeError::OtherRun {
                spec: spec.id,
                journal: journal.run().clone(),
            });
        }
        if let Some(status) = journal.finished() {
            return Err(ResumeError::Finished {
                run: spec.id,
                status: status.clone(),
            });
        }
        // The journal read the task from the run's `run_started` record, whose kind it checked.
        spec.task = Person::at_the_keyboard().says(journal.task());
        spec.first = journal.first().clone();
        Ok(self
            .execute(spec, Some(journal), |_| {}, &mut observe)
            .await)
    }

    async fn execute(
        &self,
        spec: RunSpec,
        journal: Option<&Journal>,
        seed: impl FnOnce(&crate::Extensions),
        observe: &mut impl FnMut(TurnEvent<'_>),
    ) -> RunReport {
        let ctx = RunContext::new(
            spec.id.clone(),
            self.team.clone(),
            self.workspace.clone(),
            spec.audit.clone(),
            self.clock.clone(),
        );
        seed(ctx.extensions());
        let mut report = RunReport {
            run: spec.id.clone(),
            status: RunStatus::Completed,
            turns: 0,
            handoffs: vec![],
            usage: Usage::default(),
            last_agent: None,
            final_text: String::new(),
            audit_location: spec.audit_location.clone(),
        };
        let span = crate::telemetry::run_span(&spec.id, &spec.first);
        report.status = self
            .drive(&ctx, &spec, journal, &mut report, observe)
            .instrument(span.clone())
            .await;
        // A failure to record the end is itself an audit failure, unless one already stopped us.
        if let Err(e) = ctx.record_owned(AuditEvent::RunEnded {
            status: report.status.clone(),
            usage: report.usage,
            cost_micros: None,
        }) {
            if !matches!(report.status, RunStatus::AuditFailed { .. }) {
                report.status = RunStatus::AuditFailed { error: e.0 };
            }
        }
        crate::telemetry::record_run(&span, &report.status, &report.usage);
        report
    }

    async fn drive(
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
                detail: serde_json::json!({ "why": why }).into(),
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

/// A run could not be resumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    /// The run already finished; resuming would run it twice.
    #[error("run {run} finished ({}); a finished run is not resumed. Read it with `loopward report`, re-judge it with `loopward replay`, or start a new run under a new id", .status.label())]
    Finished {
        /// The run.
        run: RunId,
        /// How it ended.
        status: RunStatus,
    },
    /// The spec names another run than the journal.
    #[error("the journal is run {journal}'s, but the spec names run {spec}")]
    OtherRun {
        /// The spec's run.
        spec: RunId,
        /// The journal's run.
        journal: RunId,
    },
}
