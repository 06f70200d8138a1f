//! # loopward-restate
//!
//! Runs loopward runs as durable [Restate](https://restate.dev) workflows, with the official
//! Rust SDK. A run survives the death of the worker executing it and resumes on another worker,
//! without calling the model again for a recorded reply and without repeating a tool's effect.
//!
//! | piece | what it does |
//! |---|---|
//! | [`JournaledModelLayer`] | each model call is a journaled step |
//! | [`JournaledToolLayer`] | each tool call (gates, effect, shell watch) is a journaled step |
//! | [`Restate`] | the hook a `loopward.toml` team takes: `Team::durable(Arc::new(Restate))` |
//! | [`SharedQuotaLayer`], [`ProviderQuota`] | a provider's rate limit held by all workers together (a virtual object keyed by provider) |
//! | [`RestateApprover`] | `interactive` stop-gates wait on a Restate awakeable; the worker lets go |
//! | [`LoopwardRunService`] | the `LoopwardRun` workflow: `run`, `pending` |
//! | [`ReplayLedger`] | the run's ledger: one ledger, each record once, across workers |
//! | [`ingress`] | start a run, see what it waits for, approve or deny it, over HTTP |
//!
//! The layers pass calls straight through when a run is not executing on Restate, so one team
//! serves both: switching a team to Restate is `.durable(Arc::new(Restate))` on its
//! `loopward::Team` (or the three layers, by hand) and a worker that serves
//! [`LoopwardRunService`] (`examples/worker.rs`). See `docs/durability.md` for what survives what.
//!
//! ```
//! use loopward_core::AgentId;
//! use loopward_restate::{JournaledModelLayer, JournaledToolLayer, LoopwardRunService};
//! use loopward_runner::{audit::LedgerOptions, model::{fake::{FakeModel, Script}, BoxModelService},
//!     tool::{BoxToolService, ToolExecutor}, tools, BoxTurnService, LlmAgent, Runner, Workspace};
//! use tower::Layer;
//! let dir = tempfile::tempdir().unwrap();
//! let a = AgentId::new("a").unwrap();
//! let model = BoxModelService::new(JournaledModelLayer.layer(FakeModel::new(Script::default())));
//! let tools = BoxToolService::new(JournaledToolLayer.layer(ToolExecutor));
//! let agent = LlmAgent::builder(a.clone(), model)
//!     .tools(tools::builtin(std::slice::from_ref(&a)))
//!     .tool_stack(tools)
//!     .build();
//! let runner = Runner::builder(Workspace::new(dir.path()).unwrap())
//!     .agent(a, BoxTurnService::new(agent)).unwrap()
//!     .build().unwrap();
//! let service = LoopwardRunService::new(runner, dir.path().join("runs"), LedgerOptions::default());
//! // A worker serves it; Restate (through a load balancer, for N workers) calls it.
//! let endpoint = restate_sdk::endpoint::Endpoint::builder().bind(service).build();
//! let _worker = restate_sdk::http_server::HttpServer::new(endpoint); // .serve(listener).await

//! ```

mod approver;
mod engine;
pub mod ingress;
mod journal;
mod ledger;
mod model;
mod quota;
mod tool;
mod wire;
mod workflow;

pub use approver::{pending_id, RestateApprover};
pub use engine::{Restate, RestateWithQuota};
pub use journal::JournalError;
pub use ledger::{OpenError, ReplayLedger};
pub use model::{JournaledModel, JournaledModelLayer};
pub use quota::{
    ProviderQuota, QuotaError, SharedQuota, SharedQuotaLayer, SharedQuotaService, QUOTA_OBJECT,
};
pub use tool::{AskingToolLayer, JournaledTool, JournaledToolLayer, INTERRUPTED, STATE_ONLY_TOOLS};
pub use wire::{PendingApproval, RunSummary, StartRun, Verdict};
pub use workflow::{LoopwardRunService, WORKFLOW};
