//! What a run and a turn carry: the run's identity, its audit sink and workspace, and the
//! turn state that tools and gates read and write.

use crate::clock::Clock;
use crate::extensions::Extensions;
use crate::model::{ChatRequest, TurnSlot};
use crate::workspace::Workspace;
use loopward_core::{
    AgentId, AuditError, AuditEvent, AuditSink, Effect, Handoff, RunId, RunStatus, Scope,
    TurnNumber,
};
use std::sync::{Arc, Mutex, MutexGuard};

/// Shared by every turn of one run. Cheap to clone.
#[derive(Clone)]
pub struct RunContext {
    inner: Arc<RunInner>,
}

struct RunInner {
    run: RunId,
    team: Vec<AgentId>,
    workspace: Workspace,
    audit: Arc<dyn AuditSink>,
    clock: Arc<dyn Clock>,
    extensions: Extensions,
}

impl RunContext {
    /// Builds the context of one run.
    pub fn new(
        run: RunId,
        team: Vec<AgentId>,
        workspace: Workspace,
        audit: Arc<dyn AuditSink>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            inner: Arc::new(RunInner {
                run,
                team,
                workspace,
                audit,
                clock,
                extensions: Extensions::default(),
            }),
        }
    }

    /// The run's id.
    pub fn run(&self) -> &RunId {
        &self.inner.run
    }

    /// The agents of the team, in configuration order.
    pub fn team(&self) -> &[AgentId] {
        &self.inner.team
    }

    /// The workspace agents act in.
    pub fn workspace(&self) -> &Workspace {
        &self.inner.workspace
    }

    /// The clock.
    pub fn clock(&self) -> &dyn Clock {
        &*self.inner.clock
    }

    /// State layers and gates keep for the whole run.
    pub fn extensions(&self) -> &Extensions {
        &self.inner.extensions
    }

    /// The audit sink.
    pub fn audit_sink(&self) -> &Arc<dyn AuditSink> {
        &self.inner.audit
    }

    /// Records a run-level event (no turn, no agent).
    pub fn record(&self, event: &AuditEvent) -> Result<(), AuditError> {
        self.inner.audit.record(&self.scope(), event)
    }

    /// Records a run-level event the caller no longer needs ([`AuditSink::record_owned`]: a
    /// sink that keeps events takes it instead of copying it).
    pub fn record_owned(&self, event: AuditEvent) -> Result<(), AuditError> {
        self.inner.audit.record_owned(&self.scope(), event)
    }

    /// The scope of run-level events. The ids are shared, so this copies no text.
    fn scope(&self) -> Scope {
        Scope {
            run: self.inner.run.clone(),
            turn: None,
            agent: None,
        }
    }
}

impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("run", &self.inner.run)
            .field("team", &self.inner.team)
            .finish_non_exhaustive()
    }
}

/// One turn: one call of one agent. Tool calls within a turn run one after another, so the
/// first handoff registered is the one that stands.
#[derive(Clone, Debug)]
pub struct TurnContext {
    inner: Arc<TurnInner>,
}

#[derive(Debug)]
struct TurnInner {
    run: RunContext,
    agent: AgentId,
    turn: TurnNumber,
    state: Mutex<TurnState>,
    extensions: Extensions,
}

/// What a turn has done so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TurnState {
    /// Effects of this turn's tool calls, in order.
    pub effects: Vec<Effect>,
    /// The handoff that stands, if one was registered.
    pub handoff: Option<Handoff>,
    /// Tool calls made so far this turn (refused ones included).
    pub steps: u32,
    /// The step cap the agent ended this turn on ([`FinishReason::StepCap`]), when it did: its
    /// own `max_steps`, which may be lower than the run's `limits.steps_per_turn`, so the caps
    /// layer records the limit that was actually reached.
    ///
    /// [`FinishReason::StepCap`]: loopward_core::FinishReason::StepCap
    pub step_limit: Option<u32>,
    /// Whether tools are disabled for this turn (a final wrap-up turn).
    pub tools_disabled: bool,
    /// Set by [`TurnContext::end_run`]: how the run ends after this turn. No later tool call of
    /// the turn runs (the rest of the reply that caused it included), a handoff made after it
    /// does not stand, and the runner ends the run with this status once the turn is recorded.
    pub run_ends: Option<RunStatus>,
}

/// Why a handoff could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandoffError {
    /// A handoff already stands this turn.
    #[error("a handoff to {standing} already stands this turn; only one handoff per turn is allowed, and the first one stands. Finish your reply; {standing} will take over")]
    AlreadyHandedOff {
        /// The target of the standing handoff.
        standing: AgentId,
    },
    /// The target is not on the team.
    #[error("there is no agent named {to:?} on this team; hand off to one of: {team}")]
    UnknownAgent {
        /// The name given.
        to: String,
        /// The team, comma-separated.
        team: String,
    },
    /// An agent cannot hand off to itself.
    #[error("{0} cannot hand off to itself; finish the work or hand off to another agent")]
    ToSelf(AgentId),
}

impl TurnContext {
    /// Starts a turn of `agent`.
    pub fn new(run: RunContext, agent: AgentId, turn: TurnNumber) -> Self {
        Self {
            inner: Arc::new(TurnInner {
                run,
                agent,
                turn,
                state: Mutex::new(TurnState::default()),
                extensions: Extensions::default(),
            }),
        }
    }

    /// The slot a model call of this turn carries ([`ChatRequest::turn`]); [`LlmAgent`] sets
    /// it on every request it makes, so the layers around the model know the turn on whatever
    /// task they run.
    ///
    /// [`LlmAgent`]: crate::LlmAgent
    pub fn slot(&self) -> TurnSlot {
        TurnSlot::new(self.clone())
    }

    /// The turn a model call belongs to, if its request carries one (see [`TurnContext::slot`]).
    /// A call without a turn (a backend called directly) has no ledger to record on: a layer
    /// that must record its decision refuses it, a layer that only waits or times it lets it
    /// through unrecorded.
    ///
    /// ```
    /// use loopward_core::{AgentId, RunId, TurnNumber};
    /// use loopward_runner::{audit::MemorySink, model::{ChatRequest, TurnSlot}, RunContext,
    ///     SystemClock, TurnContext, Workspace};
    /// use std::sync::Arc;
    /// let dir = tempfile::tempdir().unwrap();
    /// let a = AgentId::new("a").unwrap();
    /// let run = RunContext::new(RunId::new("r").unwrap(), vec![a.clone()], Workspace::new(dir.path()).unwrap(),
    ///     Arc::new(MemorySink::default()), Arc::new(SystemClock));
    /// let turn = TurnContext::new(run, a.clone(), TurnNumber(1));
    /// let mut req = ChatRequest { agent: a, messages: vec![], tools: vec![], max_tokens: None,
    ///     turn: TurnSlot::empty() };
    /// assert!(TurnContext::of(&req).is_none());
    /// req.turn = turn.slot();
    /// assert_eq!(TurnContext::of(&req).unwrap().turn(), TurnNumber(1));
    /// ```
    pub fn of(req: &ChatRequest) -> Option<&TurnContext> {
        req.turn.get()
    }

    /// The run this turn belongs to.
    pub fn run(&self) -> &RunContext {
        &self.inner.run
    }

    /// The agent whose turn it is.
    pub fn agent(&self) -> &AgentId {
        &self.inner.agent
    }

    /// The turn's number in the run.
    pub fn turn(&self) -> TurnNumber {
        self.inner.turn
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        self.inner.run.workspace()
    }

    /// State layers and gates keep for this turn only.
    pub fn extensions(&self) -> &Extensions {
        &self.inner.extensions
    }

    /// Locks the turn state.
    pub fn state(&self) -> MutexGuard<'_, TurnState> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A snapshot of the effects so far.
    pub fn effects(&self) -> Vec<Effect> {
        self.state().effects.clone()
    }

    /// Appends effects of a finished tool call.
    pub fn push_effects(&self, effects: impl IntoIterator<Item = Effect>) {
        self.state().effects.extend(effects);
    }

    /// Ends the run after this turn with `status` (the first call stands): tools are disabled
    /// at once, so the rest of the reply that caused it does not run, and the model may only
    /// answer in text. Used by class-jump when a subtask is exhausted and by stop-gates when a
    /// person denies an action.
    pub fn end_run(&self, status: RunStatus) {
        let mut st = self.state();
        st.tools_disabled = true;
        if st.run_ends.is_none() {
            st.run_ends = Some(status);
        }
    }

    /// Registers a handoff. The first one stands; later ones are refused, naming it.
    pub fn register_handoff(&self, handoff: Handoff) -> Result<(), HandoffError> {
        if !self.run().team().contains(&handoff.to) {
            let team = self
                .run()
                .team()
                .iter()
                .filter(|a| **a != handoff.from)
                .map(AgentId::as_str)
                .collect::<Vec<_>>()
                .join(", ");
            return Err(HandoffError::UnknownAgent {
                to: handoff.to.to_string(),
                team,
            });
        }
        if handoff.to == handoff.from {
            return Err(HandoffError::ToSelf(handoff.to));
        }
        let mut st = self.state();
        if let Some(standing) = &st.handoff {
            return Err(HandoffError::AlreadyHandedOff {
                standing: standing.to.clone(),
            });
        }
        st.handoff = Some(handoff);
        Ok(())
    }

    /// The scope events of this turn are recorded under. The ids are shared, so this copies
    /// no text.
    pub fn scope(&self) -> Scope {
        Scope {
            run: self.run().run().clone(),
            turn: Some(self.inner.turn),
            agent: Some(self.inner.agent.clone()),
        }
    }

    /// Records an event of this turn.
    pub fn record(&self, event: &AuditEvent) -> Result<(), AuditError> {
        self.run().audit_sink().record(&self.scope(), event)
    }

    /// Records an event of this turn that the caller no longer needs
    /// ([`AuditSink::record_owned`]: a sink that keeps events takes it instead of copying it).
    pub fn record_owned(&self, event: AuditEvent) -> Result<(), AuditError> {
        self.run().audit_sink().record_owned(&self.scope(), event)
    }

    /// Records an event of this turn that `agent` took (a subagent of a CLI session, by its
    /// name), or the turn's agent when `None`.
    pub(crate) fn record_as(
        &self,
        agent: Option<AgentId>,
        event: AuditEvent,
    ) -> Result<(), AuditError> {
        let mut scope = self.scope();
        if agent.is_some() {
            scope.agent = agent;
        }
        self.run().audit_sink().record_owned(&scope, event)
    }

    /// Makes the decisions recorded so far durable ([`AuditSink::commit`]): called just before
    /// the action they authorise runs. An error means the action must not run.
    pub fn commit(&self) -> Result<(), AuditError> {
        self.run().audit_sink().commit()
    }
}
