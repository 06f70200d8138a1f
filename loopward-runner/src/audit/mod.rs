//! The audit trail: the hash-chained, append-only ledger of each run, its verification, the
//! `audit.json` / `audit.md` rendered from it, and the governance report over many runs.
//!
//! | file | what |
//! |---|---|
//! | `runs/<run-id>/events.jsonl` | the ledger: one [`Record`] a line, written by [`Ledger`] |
//! | `runs/<run-id>/audit.json`, `audit.md` | rendered from the ledger by [`Ledger::finish`] |
//! | `runs/index.jsonl` | one [`Anchor`] per finished run: its final sequence number and hash |
//!
//! [`verify`] checks a run's ledger and names the first bad sequence number; [`report`]
//! recomputes the governance figures ([`RunFigures`]) over all runs from their ledgers alone.
//! [`MemorySink`] keeps events in memory, for tests and embedding.
//!
//! Wiring a run to a ledger: create it, hand the runner its [`RunSpec`](crate::RunSpec), then
//! [`finish`](Ledger::finish) it (which writes `audit.json`, `audit.md` and the anchor).
//!
//! ```
//! use loopward_core::{AgentId, RunId, RunStatus};
//! use loopward_runner::audit::{report, verify, Ledger, LedgerOptions};
//! use loopward_runner::model::{fake::{FakeModel, Script}, BoxModelService};
//! use loopward_runner::{tools, BoxTurnService, LlmAgent, Runner, Workspace};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let (ws, runs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
//! let builder = AgentId::new("builder").unwrap();
//! let mut script = Script::default();
//! script.say(&builder, "Nothing to do.");
//! let agent = LlmAgent::builder(builder.clone(), BoxModelService::new(FakeModel::new(script)))
//!     .tools(tools::builtin(&[builder.clone()])).build();
//! let runner = Runner::builder(Workspace::new(ws.path()).unwrap())
//!     .agent(builder.clone(), BoxTurnService::new(agent)).unwrap().build().unwrap();
//!
//! let ledger = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), LedgerOptions::default()).unwrap();
//! let run = runner.run(ledger.run_spec("check the repo", builder)).await;
//! assert_eq!(run.status, RunStatus::Completed);
//! let done = ledger.finish().unwrap();
//!
//! assert_eq!(verify(&runs.path().join("r1"), None).unwrap().final_hash, done.final_hash);
//! assert!(std::fs::read_to_string(done.audit_md).unwrap().contains("human: check the repo"));
//! assert_eq!(report(runs.path()).unwrap().turns, 1);
//! # });
//! ```

mod figures;
pub(crate) mod html;
mod index;
mod ledger;
mod memory;
mod record;
pub(crate) mod render;
pub(crate) mod report;
pub(crate) mod verify;

pub use figures::{
    AdvisoryCompliance, GateFigures, OverrideUse, RunFigures, UnauthorisedWrite, TERRITORY_GATE,
};
pub use html::{render_html, render_index, LedgerState};
pub use index::{append_anchor, latest_anchor, read_anchors, Anchor, INDEX_FILE};
pub use ledger::{
    Durability, FaultHook, Finished, Ledger, LedgerError, LedgerOp, LedgerOptions, Recovery,
};
pub use memory::MemorySink;
pub use record::{Chain, KeyError, LedgerKey, ParseError, Record, DOMAIN, GENESIS, MIN_KEY_BYTES};
pub use render::{render_json, render_markdown};
pub use report::{
    report, report_with, InvalidRun, Report, ReportError, RunRow, UnauthorisedWrites,
};
pub use verify::{verify, Breach, VerifyError, VerifyOk, EVENTS_FILE};
