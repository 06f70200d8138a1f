//! The recommended stacks, built from the `loopward.toml` tables.
//!
//! Order, outermost first, and why:
//!
//! - **turn**: caps → stop-gates → budget → class-jump → turn timeout → agent.
//!   Caps first, so nothing runs past them; gates before any spending; the timeout innermost so
//!   it measures the agent, not the gates' wait for a person.
//! - **tool**: repeat → stop-gates → class-jump evidence → tool timeout → executor. A repeated
//!   call is refused before a person is asked about it again; only what the tool itself did
//!   (failed, timed out) counts as a failed attempt, never a refusal.
//! - **model**: budget meter → rate limit → model timeout → backend. A spent budget does not
//!   wait for a quota; waiting for a quota is not a timeout.

use super::budget::{BudgetConfig, BudgetLayer};
use super::caps::{CapsConfig, CapsLayer};
use super::classjump::{ClassJump, ClassJumpConfig};
use super::ratelimit::{RateConfig, RateLimitLayer};
use super::repeat::{RepeatConfig, RepeatLayer};
use super::stopgate::{Approver, StopGateConfig, StopGates};
use super::timeout::{TimeoutConfig, Timeouts};
use super::ConfigError;
use crate::model::BoxModelService;
use crate::tool::BoxToolService;
use crate::turn::BoxTurnService;
use serde::Deserialize;
use std::sync::Arc;
use tower::Layer;

/// The layer tables of `loopward.toml`. Unknown keys are not refused here because the file has
/// other tables too; the application's whole-file struct should deny them.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct LayersConfig {
    /// `[limits]`.
    pub limits: CapsConfig,
    /// `[repeat]`.
    pub repeat: RepeatConfig,
    /// `[[stopgate]]`.
    pub stopgate: Vec<StopGateConfig>,
    /// `[rate]`.
    pub rate: RateConfig,
    /// `[budget]`, if any.
    pub budget: Option<BudgetConfig>,
    /// `[timeout]`.
    pub timeout: TimeoutConfig,
    /// `[class_jump]`, if any.
    pub class_jump: Option<ClassJumpConfig>,
}

/// Validated layers, ready to wrap an agent, its tool executor and its model.
///
/// ```
/// use loopward_core::{AgentId, Person, RunId, RunStatus};
/// use loopward_runner::layers::stack::{LayersConfig, Stack};
/// use loopward_runner::{audit::MemorySink, model::{fake::{FakeModel, Script}, BoxModelService},
///     tool::{BoxToolService, ToolExecutor}, tools, BoxTurnService, LlmAgent, Runner, RunSpec, Workspace};
/// use serde_json::json;
/// use std::sync::Arc;
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let config: LayersConfig = toml::from_str(r#"
///     [limits]
///     turns_per_run = 4
///     [[stopgate]]
///     point = "tool"
///     tool = "shell"
///     mode = "deny"
///     [budget]
///     max_tokens = 100000
/// "#).unwrap();
/// let stack = Stack::new(&config).unwrap();
/// let a = AgentId::new("a").unwrap();
/// let mut script = Script::default();
/// script.call(&a, "shell", json!({"command": "rm -rf build"}));
/// script.say(&a, "I was not allowed to.");
/// let agent = LlmAgent::builder(a.clone(), stack.model(BoxModelService::new(FakeModel::new(script))))
///     .tools(tools::builtin(std::slice::from_ref(&a)))
///     .tool_stack(stack.tools(BoxToolService::new(ToolExecutor)))
///     .max_steps(stack.steps_per_turn())
///     .build();
/// let dir = tempfile::tempdir().unwrap();
/// let runner = Runner::builder(Workspace::new(dir.path()).unwrap())
///     .agent(a.clone(), stack.turn(BoxTurnService::new(agent))).unwrap().build().unwrap();
/// let sink = Arc::new(MemorySink::default());
/// let task = Person::at_the_keyboard().says("clean");
/// let report = runner.run(RunSpec::new(RunId::new("r1").unwrap(), task, a, sink.clone())).await;
/// // A denied call ends the reply there and the run after the turn, with its last words kept.
/// assert!(matches!(report.status, RunStatus::Stopped { .. }));
/// assert_eq!(report.final_text, "I was not allowed to.");
/// let denied = sink.events().iter().any(|(_, e)| matches!(e,
///     loopward_core::AuditEvent::LayerDecision { layer, decision, .. }
///         if *layer == loopward_core::LayerId::StopGate && *decision == loopward_core::LayerVerdict::Denied));
/// assert!(denied);
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct Stack {
    caps: CapsLayer,
    repeat: RepeatLayer,
    gates: StopGates,
    rate: RateLimitLayer,
    budget: Option<BudgetLayer>,
    timeouts: Timeouts,
    class_jump: Option<ClassJump>,
}

impl Stack {
    /// Validates every table; the error names the first bad field. Build it inside the tokio
    /// runtime whose clock the rate limits should follow.
    pub fn new(config: &LayersConfig) -> Result<Self, ConfigError> {
        Ok(Self {
            caps: CapsLayer::new(config.limits.clone())?,
            repeat: RepeatLayer::new(config.repeat.clone())?,
            gates: StopGates::new(&config.stopgate)?,
            rate: RateLimitLayer::new(config.rate.clone())?,
            budget: config.budget.clone().map(BudgetLayer::new).transpose()?,
            timeouts: Timeouts::new(config.timeout.clone())?,
            class_jump: config.class_jump.clone().map(ClassJump::new).transpose()?,
        })
    }

    /// The approver `interactive` gates ask.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.gates = self.gates.with_approver(approver);
        self
    }

    /// Where `durable` stop-gates keep their records, and the keys they are sealed under
    /// (default: the workspace's keyless `.loopward/pending/`).
    pub fn with_approvals(mut self, store: crate::layers::stopgate::ApprovalStore) -> Self {
        self.gates = self.gates.with_store(store);
        self
    }

    /// The stop-gates (for [`StopGates::before_phase`]).
    pub fn gates(&self) -> &StopGates {
        &self.gates
    }

    /// The class-jump tracker, when configured (add its [`ClassJump::tool`] to the agents).
    pub fn class_jump(&self) -> Option<&ClassJump> {
        self.class_jump.as_ref()
    }

    /// The steps cap to give [`LlmAgentBuilder::max_steps`](crate::LlmAgentBuilder::max_steps).
    pub fn steps_per_turn(&self) -> u32 {
        self.caps.config().steps_per_turn
    }

    /// Wraps a model backend.
    pub fn model(&self, backend: BoxModelService) -> BoxModelService {
        self.model_step(backend, |s| s)
    }

    /// Wraps a model backend, with `step` between the budget meter and the rate limit: where a
    /// durable engine journals the call (`loopward_restate::JournaledModelLayer`), so a reply
    /// read back from the journal still counts toward the budget and waits for no quota again.
    pub fn model_step(
        &self,
        backend: BoxModelService,
        step: impl FnOnce(BoxModelService) -> BoxModelService,
    ) -> BoxModelService {
        let inner = BoxModelService::new(self.timeouts.model_layer().layer(backend));
        let inner = step(BoxModelService::new(self.rate.layer(inner)));
        match &self.budget {
            Some(b) => BoxModelService::new(b.meter().layer(inner)),
            None => inner,
        }
    }

    /// Wraps a tool executor.
    pub fn tools(&self, executor: BoxToolService) -> BoxToolService {
        let mut inner = BoxToolService::new(self.timeouts.tool_layer().layer(executor));
        if let Some(cj) = &self.class_jump {
            inner = BoxToolService::new(cj.evidence_layer().layer(inner));
        }
        let inner = BoxToolService::new(self.gates.tool_layer().layer(inner));
        BoxToolService::new(self.repeat.layer(inner))
    }

    /// Wraps an agent's turn service.
    pub fn turn(&self, agent: BoxTurnService) -> BoxTurnService {
        let mut s = BoxTurnService::new(self.timeouts.turn_layer().layer(agent));
        if let Some(cj) = &self.class_jump {
            s = BoxTurnService::new(cj.layer().layer(s));
        }
        if let Some(b) = &self.budget {
            s = BoxTurnService::new(b.layer(s));
        }
        s = BoxTurnService::new(self.gates.turn_layer().layer(s));
        BoxTurnService::new(self.caps.layer(s))
    }
}
