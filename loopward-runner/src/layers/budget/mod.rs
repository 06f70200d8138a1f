//! Token and cost budgets per run. [`BudgetMeterLayer`] (on the model service) adds each call's
//! tokens and cost — priced by the model that answered, from the configured prices — to the
//! run's totals and refuses the next call once a budget is spent; [`BudgetLayer`] (on the turn
//! service) refuses turns once it is spent and ends the run
//! [`BudgetExceeded`](loopward_core::RunStatus::BudgetExceeded), recording the figures. Use
//! both (the turn layer makes the run visible to the meter): a run overshoots by at most the
//! one model call that crossed the line.
//!
//! ```
//! use loopward_core::{AgentId, Person, Price, RunId, RunStatus};
//! use loopward_runner::layers::budget::{BudgetConfig, BudgetLayer};
//! use loopward_runner::{audit::MemorySink, model::{fake::{FakeModel, Script}, BoxModelService},
//!     BoxTurnService, LlmAgent, Runner, RunSpec, Workspace};
//! use std::sync::Arc;
//! use tower::Layer;
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let a = AgentId::new("a").unwrap();
//! let mut script = Script::default();
//! script.say(&a, "a long answer that costs tokens");
//! let budget = BudgetLayer::new(BudgetConfig { max_tokens: Some(5), ..BudgetConfig::default() }).unwrap();
//! let model = BoxModelService::new(budget.meter().layer(FakeModel::new(script)));
//! let agent = LlmAgent::builder(a.clone(), model).build();
//! let dir = tempfile::tempdir().unwrap();
//! let runner = Runner::builder(Workspace::new(dir.path()).unwrap())
//!     .agent(a.clone(), BoxTurnService::new(budget.layer(agent))).unwrap().build().unwrap();
//! let task = Person::at_the_keyboard().says("hi");
//! let spec = RunSpec::new(RunId::new("r1").unwrap(), task, a, Arc::new(MemorySink::default()));
//! let report = runner.run(spec).await;
//! assert!(matches!(report.status, RunStatus::BudgetExceeded { budget } if budget.starts_with("tokens")));
//! # });
//! ```

mod layer;
mod service;

pub use layer::{BudgetConfig, BudgetLayer, BudgetMeterLayer};
pub use service::{charge_reported, BudgetMeter, BudgetPolicy, BudgetService};
