//! Building a [`Runner`]: its team, clock, caps, resume policy, inbox and stop requests,
//! checked once by [`RunnerBuilder::build`].

use super::{Runner, DEFAULT_MAX_TURNS};
use crate::clock::{Clock, SystemClock};
use crate::inbox::HumanInbox;
use crate::journal::ResumePolicy;
use crate::stop::StopRequests;
use crate::turn::BoxTurnService;
use crate::workspace::Workspace;
use loopward_core::AgentId;
use std::collections::BTreeMap;
use std::sync::Arc;

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
