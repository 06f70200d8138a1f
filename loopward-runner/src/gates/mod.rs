//! Policy gates at the point of action.
//!
//! Gates sit in the tool stack ([`PolicyLayer`]) and decide on every call before it runs, from
//! the [`Access`](crate::tool::Access)es the tool declared, resolved by the one canonicaliser
//! ([`Workspace::resolve`](crate::Workspace::resolve)):
//!
//! | gate | what it refuses | the way out it offers |
//! |---|---|---|
//! | [`ControlFiles`] | any write to `.loopward/`, the config file, the runs directory | none: a person changes them |
//! | [`Territory`] | a write, delete, rename or link into paths another agent owns | hand off to the owner, or consume a one-shot override ([`OverrideStore`]) |
//! | [`SprawlGate`] | starting a third unit of work since the last human message with no plan | write the plan (first line carries the marker) |
//! | [`ReviewGate`] | handing off to anyone but the reviewer after touching reviewed files | hand off to the reviewer, or appeal in the reply |
//! | one handoff per turn | a second handoff in a turn | none needed: the first stands |
//! | shell watch ([`Snapshot`]) | shell changes the caller may not make: reverted, recorded as violations | use the file tools on paths you own |
//!
//! Every decision — allow, override, warn and deny — is a `GateDecision` event recorded before
//! the action runs. Gates are data ([`Policy::list`], [`Policy::add`], [`Policy::remove`],
//! [`Policy::set_mode`], each change a `GateChanged` event); a gate in `advisory` mode allows and
//! records the denial it would have made as `Decision::Warn`. Anything a gate cannot decide is
//! denied.
//!
//! ```
//! use loopward_core::{AgentId, RunId, TurnNumber};
//! use loopward_runner::{audit::MemorySink, gates::{Policy, PolicyConfig, PolicyLayer},
//!     tool::{BoxToolService, ToolExecutor, ToolInvocation, Tool}, tools::WriteFile,
//!     RunContext, SystemClock, TurnContext, Workspace};
//! use serde_json::json;
//! use std::sync::Arc;
//! use tower::ServiceExt;
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let ws = Workspace::new(dir.path()).unwrap();
//! let cfg = PolicyConfig::from_toml("[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"").unwrap();
//! let stack = PolicyLayer::new(Policy::from_config(&cfg, ws.clone()).unwrap())
//!     .wrap(BoxToolService::new(ToolExecutor));
//! let builder = AgentId::new("builder").unwrap();
//! let run = RunContext::new(RunId::new("r").unwrap(), vec![builder.clone()], ws,
//!     Arc::new(MemorySink::default()), Arc::new(SystemClock));
//! let turn = TurnContext::new(run, builder, TurnNumber(1));
//! let args = json!({"path": "plan.md", "content": "mine now"});
//! let inv = ToolInvocation { accesses: WriteFile.accesses(&args, &turn).unwrap(),
//!     call: loopward_core::ToolCall::new("c1", "write_file", args), tool: Arc::new(WriteFile), turn };
//! let err = stack.oneshot(inv).await.unwrap_err();
//! assert!(err.to_string().contains("plan.md belongs to planner (territory:planner)"), "{err}");
//! assert!(!dir.path().join("plan.md").exists());
//! # });
//! ```

mod config;
mod control;
mod engine;
mod exec;
mod glob_flaw;
mod hooks;
mod host;
mod layer;
mod overlap;
mod overrides;
pub(crate) mod plan_cache;
mod policy;
pub mod refusals;
mod review;
mod snapshot;
mod source;
mod sprawl;
mod targets;
mod territory;
mod territory_index;
mod unchecked;
mod watch;

pub(crate) use config::glob as workspace_glob;
pub use config::{
    ConfigError, GatesConfig, OverridesConfig, PolicyConfig, ReviewConfig, ShellWatchConfig,
    SprawlConfig, TerritoryConfig, DEFAULT_MAX_TTL, MAX_SPRAWL_THRESHOLD, TTL_CEILING,
};
pub use control::{ControlFiles, CONTROL_GATE};
pub use engine::{Ask, ChangedPath, Judgement, ShellAsk, ShellJudgement, ShellOutcome};
pub use glob_flaw::GlobFlaw;
pub use hooks::{AllowedTool, AllowedTools, HooksConfig};
pub use host::{Host, Passing};
pub(crate) use layer::seed_noted_version;
pub use layer::{PolicyLayer, PolicyService};
pub use overlap::{redundant_claims, RedundantClaim};
pub use overrides::{
    Listed, OverrideError, OverrideStore, Rejection, Sentinel, MAX_REASON_BYTES, MAX_SENTINEL_BYTES,
};
pub use policy::{
    GateInfo, GateSpec, Policy, PolicyError, MAX_AFFECTED_PATHS, POLICY_GATE, SANDBOX_GATE,
    SHELL_GATE,
};
pub use refusals::unwatchable;
pub use review::{check_deadlocks, judge_handoff, ReviewGate, ReviewVerdict, APPEAL};
pub use snapshot::{
    Change, ContentStore, DirStore, MemoryStore, Snapshot, SnapshotError, MAX_SNAPSHOT_PATHS,
};
pub use source::{located_hooks, located_territories, RuleSource};
pub use sprawl::{human_message, SprawlGate, SprawlTracker, Work};
pub(crate) use territory::literal_prefix as territory_literal_prefix;
pub use territory::Territory;
pub use unchecked::Unchecked;
pub use watch::{Contained, Judged, Record, ShellWatch};

/// The gate name of the one-handoff-per-turn refusal.
pub const ONE_HANDOFF_GATE: &str = loopward_core::GateKind::OneHandoff.as_str();
