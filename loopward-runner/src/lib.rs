//! # loopward-runner
//!
//! The outer-loop runner. It calls agents as subroutines, and every call is a
//! [`tower::Service`], so every concern is a [`tower::Layer`]:
//!
//! | boundary | request → response | built by |
//! |---|---|---|
//! | agent turn | [`TurnRequest`] → [`TurnOutcome`] | [`LlmAgent`] |
//! | model call | [`model::ChatRequest`] → [`model::ChatResponse`] | [`model::fake::FakeModel`], other backends |
//! | tool call | [`tool::ToolInvocation`] → [`tool::ToolOutput`] | [`tool::ToolExecutor`] over [`tools`] |
//!
//! [`Runner`] starts a run with a human task and a first agent, calls agents turn by turn,
//! follows handoffs, and stops when an agent finishes without handing off, on caps, or on fatal
//! errors. A person speaks into a running run through its [`inbox`]: a message is picked up at
//! the next turn boundary and starts a new turn for the gates. Every step is an
//! [`AuditEvent`](loopward_core::AuditEvent) in the run's sink.
//!
//! ## Features
//!
//! | feature | adds |
//! |---|---|
//! | (none) | the runner, layers, gates, the ledger, the built-in tools, the scripted fake backend |
//! | `http` | `model::http`: OpenAI-compatible and Anthropic backends (reqwest + rustls), streaming, retries |
//! | `otel` | `telemetry::otel`: export the runner's spans over OTLP/HTTP to any OpenTelemetry collector |
//!
//! ## Example: a two-agent scripted team
//!
//! ```
//! use loopward_core::{AgentId, Person, RunId, RunStatus};
//! use loopward_runner::{audit::MemorySink, model::{fake::{FakeModel, Script}, BoxModelService},
//!     tools, LlmAgent, Runner, RunSpec, BoxTurnService, Workspace};
//! use serde_json::json;
//! use std::sync::Arc;
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let planner = AgentId::new("planner").unwrap();
//! let builder = AgentId::new("builder").unwrap();
//! let mut script = Script::default();
//! script.call(&planner, "write_file", json!({"path": "plan.md", "content": "# Plan\n1. greet"}));
//! script.call(&planner, "handoff", json!({"to": "builder", "message": "plan is in plan.md"}));
//! script.call(&builder, "write_file", json!({"path": "hello.txt", "content": "hello"}));
//! script.say(&builder, "Done.");
//! let model = BoxModelService::new(FakeModel::new(script));
//! let team = [planner.clone(), builder.clone()];
//! let mut runner = Runner::builder(Workspace::new(dir.path()).unwrap());
//! for name in &team {
//!     let agent = LlmAgent::builder(name.clone(), model.clone()).tools(tools::builtin(&team)).build();
//!     runner = runner.agent(name.clone(), BoxTurnService::new(agent)).unwrap();
//! }
//! let runner = runner.build().unwrap();
//! let sink = Arc::new(MemorySink::default());
//! // The task is a person's words: only a `Person` makes them.
//! let task = Person::at_the_keyboard().says("say hello");
//! let spec = RunSpec::new(RunId::new("r1").unwrap(), task, planner, sink.clone());
//! let report = runner.run(spec).await;
//! assert_eq!(report.status, RunStatus::Completed);
//! assert_eq!(report.handoffs.len(), 1);
//! assert_eq!(std::fs::read_to_string(dir.path().join("hello.txt")).unwrap(), "hello");
//! # });
//! ```

mod agent;
mod atomic_file;
pub mod audit;
mod claimed_file;
pub mod cli_agent;
mod clock;
mod context;
mod duration;
pub mod egress;
mod extensions;
pub mod gates;
pub mod inbox;
pub mod journal;
pub mod layers;
pub mod leaf;
pub mod model;
mod path_text;
mod runner;
pub mod sandbox;
pub mod secrets;
mod state;
pub mod stop;
pub mod telemetry;
pub mod tool;
pub mod tools;
mod turn;
mod workspace;

pub use agent::{LlmAgent, LlmAgentBuilder, DEFAULT_MAX_STEPS};
pub use atomic_file::write_atomic;
pub use clock::{Clock, ManualClock, SystemClock};
pub use context::{HandoffError, RunContext, TurnContext, TurnState};
pub use extensions::Extensions;
pub use runner::{
    ResumeError, RunReport, RunSpec, Runner, RunnerBuilder, RunnerError, TurnEvent,
    DEFAULT_MAX_TURNS,
};
pub use state::StateDir;
pub use turn::{BoxTurnService, TurnError, TurnOutcome, TurnRequest};
pub use workspace::{PathError, WorkPath, Workspace, MAX_PATH_BYTES};
