//! The outer loop: calls agents turn by turn, follows handoffs, stops when an agent finishes
//! without handing off, on caps, or on fatal errors.

mod builder;
mod drive;

pub use builder::{RunnerBuilder, RunnerError};

use crate::clock::Clock;
use crate::context::RunContext;
use crate::inbox::HumanInbox;
use crate::journal::{Journal, ResumePolicy};
use crate::stop::StopRequests;
use crate::turn::{BoxTurnService, TurnOutcome};
use crate::workspace::Workspace;
use loopward_core::{
    AgentId, AuditEvent, AuditSink, Handoff, HumanWords, Person, RunId, RunStatus, TurnNumber,
    Usage,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
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

impl Runner {
    /// The team, in the order agents were added.
    pub fn team(&self) -> &[AgentId] {
        &self.team
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
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

impl RunSpec {
    /// A run `id` of `task`, started by `first`, its events going to `audit`; no audit
    /// location (add one with [`RunSpec::with_audit_location`]).
    ///
    /// ```
    /// use loopward_core::{AgentId, Person, RunId};
    /// use loopward_runner::{audit::MemorySink, RunSpec};
    /// use std::sync::Arc;
    ///
    /// let sink = Arc::new(MemorySink::default());
    /// let spec = RunSpec::new(
    ///     RunId::new("r1").unwrap(),
    ///     Person::at_the_keyboard().says("say hello"),
    ///     AgentId::new("planner").unwrap(),
    ///     sink.clone(),
    /// );
    /// assert_eq!(spec.id.as_str(), "r1");
    /// assert_eq!(spec.first.as_str(), "planner");
    /// assert_eq!(spec.audit_location, None);
    /// ```
    pub fn new(id: RunId, task: HumanWords, first: AgentId, audit: Arc<dyn AuditSink>) -> Self {
        Self {
            id,
            task,
            first,
            audit,
            audit_location: None,
        }
    }

    /// This spec, saying where its audit can be read afterwards (for the report).
    ///
    /// ```
    /// use loopward_core::{AgentId, Person, RunId};
    /// use loopward_runner::{audit::MemorySink, RunSpec};
    /// use std::path::Path;
    /// use std::sync::Arc;
    ///
    /// let spec = RunSpec::new(
    ///     RunId::new("r1").unwrap(),
    ///     Person::at_the_keyboard().says("say hello"),
    ///     AgentId::new("planner").unwrap(),
    ///     Arc::new(MemorySink::default()),
    /// )
    /// .with_audit_location("runs/r1");
    /// assert_eq!(spec.audit_location.as_deref(), Some(Path::new("runs/r1")));
    /// ```
    pub fn with_audit_location(self, path: impl Into<PathBuf>) -> Self {
        Self {
            audit_location: Some(path.into()),
            ..self
        }
    }
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
