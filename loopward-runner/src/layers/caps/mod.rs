//! Anti-loop caps: turns per run, turns per agent, handoff hops, tool steps per turn and wall
//! time per run. Every run ends within them whatever the model does.
//!
//! At a cap the layer either stops the run with [`RunStatus::CapReached`](loopward_core::RunStatus::CapReached) naming the cap, or
//! ([`OnCap::WrapUp`]) grants one final turn with tools disabled and then stops: with wrap-up a
//! run takes at most `turns_per_run + 1` turns. The steps cap is enforced by the agent
//! ([`LlmAgentBuilder::max_steps`](crate::LlmAgentBuilder::max_steps), set it from
//! [`CapsConfig::steps_per_turn`]); this layer turns a turn that ended on it into the run's end.
//!
//! Each turn let through is recorded as `LayerDecision { layer: "caps", decision: LayerVerdict::Allow }`
//! with the counts; a cap as `cap_reached` (or `wrap_up`) with the figures.
//!
//! ```
//! use loopward_core::{AgentId, Person, RunId, RunStatus};
//! use loopward_runner::layers::caps::{CapsConfig, CapsLayer};
//! use loopward_runner::{audit::MemorySink, model::{fake::{FakeModel, Script}, BoxModelService},
//!     tools, BoxTurnService, LlmAgent, Runner, RunSpec, Workspace};
//! use serde_json::json;
//! use std::sync::Arc;
//! use tower::Layer;
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let (a, b) = (AgentId::new("a").unwrap(), AgentId::new("b").unwrap());
//! let mut script = Script::default();
//! for _ in 0..10 { // two agents that hand the work back and forth
//!     script.call(&a, "handoff", json!({"to": "b", "message": "yours"}));
//!     script.call(&b, "handoff", json!({"to": "a", "message": "yours"}));
//! }
//! let model = BoxModelService::new(FakeModel::new(script));
//! let caps = CapsLayer::new(CapsConfig { turns_per_run: 3, ..CapsConfig::default() }).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! let mut runner = Runner::builder(Workspace::new(dir.path()).unwrap());
//! for name in [&a, &b] {
//!     let agent = LlmAgent::builder(name.clone(), model.clone())
//!         .tools(tools::builtin(&[a.clone(), b.clone()])).build();
//!     runner = runner.agent(name.clone(), BoxTurnService::new(caps.layer(agent))).unwrap();
//! }
//! let task = Person::at_the_keyboard().says("ping-pong");
//! let sink = Arc::new(MemorySink::default());
//! let spec = RunSpec::new(RunId::new("r1").unwrap(), task, a, sink);
//! let report = runner.build().unwrap().run(spec).await;
//! assert_eq!(report.status, RunStatus::CapReached { cap: "turns_per_run (3)".into() });
//! assert_eq!(report.turns, 4); // the fourth turn was refused before the agent ran
//! # });
//! ```

mod layer;
mod service;

pub use layer::{CapsConfig, CapsLayer, OnCap};
pub use service::{CapsPolicy, CapsService, Counts, Hit};
