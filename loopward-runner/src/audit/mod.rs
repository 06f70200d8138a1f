//! The audit trail: the keyed, hash-chained, append-only ledger of each run, its verification,
//! the `audit.json` / `audit.md` rendered from it, and the governance report over many runs.
//!
//! | file | what |
//! |---|---|
//! | `runs/<run-id>/events.jsonl` | the ledger: one [`Record`] a line, written by [`Ledger`]; the first names the schema and the key ([`LedgerHeader`]) |
//! | `runs/<run-id>/audit.json`, `audit.md` | rendered from the ledger by [`Ledger::finish`], with the [`Page`]s it is given (`loopward-pages`' `audit.html`) |
//! | `runs/index.jsonl` | a chain of anchors ([`IndexEntry`]): each finished run's final sequence number and hash, authenticated |
//! | `<state>/keys/` | the [`KeyRing`]: the secret keys (0600), outside the workspace |
//!
//! Every record and anchor is an HMAC-SHA256 under a [`LedgerKey`] (a keyless SHA-256 chain is
//! an explicit opt-out that [`verify`] refuses unless told to accept it). [`verify`] checks a
//! run's ledger, its header and every anchor it ever had, and names the first bad sequence
//! number; a run with no anchor is not verified unless it is accepted as unfinished.
//! [`report`] recomputes the governance figures ([`RunFigures`]) over all runs from their
//! verified ledgers alone. [`MemorySink`] keeps events in memory, for tests and embedding.
//! What each level of key custody protects against is in `docs/ledger.md`.
//!
//! Wiring a run to a ledger: create it, hand the runner its [`RunSpec`](crate::RunSpec), then
//! [`finish`](Ledger::finish) it (which writes the anchor, `audit.json`, `audit.md` and the
//! [`LedgerOptions::pages`]).
//!
//! ```
//! use loopward_core::{AgentId, Person, RunId, RunStatus};
//! use loopward_runner::audit::{report, verify, KeyRing, Ledger, LedgerOptions, VerifyOptions};
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
//! let keys = KeyRing::load_or_create(&tempfile::tempdir().unwrap().path().join("keys")).unwrap();
//! let opts = LedgerOptions::keyed(keys.current().unwrap().clone());
//! let ledger = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap();
//! let run = runner.run(ledger.run_spec(Person::at_the_keyboard().says("check the repo"), builder)).await;
//! assert_eq!(run.status, RunStatus::Completed);
//! let done = ledger.finish().unwrap();
//!
//! let check = VerifyOptions::keyed(keys.clone());
//! let ok = verify(&runs.path().join("r1"), &check).unwrap();
//! assert_eq!(ok.final_hash, done.final_hash);
//! assert_eq!(ok.key.as_ref(), done.key.as_ref());
//! assert!(std::fs::read_to_string(done.audit_md).unwrap().contains("human: check the repo"));
//! assert_eq!(report(runs.path(), &check).unwrap().turns, 1);
//! // Without the key, nothing verifies.
//! assert!(verify(&runs.path().join("r1"), &VerifyOptions::default()).is_err());
//! # });
//! ```

mod figures;
mod index;
mod index_head;
mod key;
mod ledger;
mod memory;
mod page;
mod record;
pub(crate) mod render;
pub(crate) mod report;
mod sayings;
pub(crate) mod verify;

pub use figures::{
    AdvisoryCompliance, EgressFigures, GateFigures, LayerFigures, OverrideUse, RunFigures,
    UnauthorisedWrite,
};
pub use index::{
    append_anchor, read_index, read_witness, Anchor, IndexEntry, IndexError, INDEX_DOMAIN,
    INDEX_FILE,
};
pub use index_head::{check_head, IndexHead};
pub(crate) use key::Sealed;
pub use key::{KeyError, KeyId, KeyRing, LedgerKey, Seal, MIN_KEY_BYTES};
pub use ledger::{
    write_pages, Durability, FaultHook, Finished, Ledger, LedgerError, LedgerOp, LedgerOptions,
    Recovery,
};
pub use memory::MemorySink;
pub use page::{LedgerState, Page};
pub(crate) use record::rfc3339;
pub use record::{Chain, LedgerHeader, ParseError, Record, DOMAIN, GENESIS, SCHEMA};
pub use render::{cost_text, render_json, render_markdown, status_text};
pub use report::{
    report, scan_runs, InvalidRun, Report, ReportError, RunRow, ScannedRun, UnauthorisedWrites,
};
pub use sayings::{AgentSaid, Sayings};
pub use verify::{
    verify, verify_all, verify_records, Breach, RunVerdict, VerifyError, VerifyOk, VerifyOptions,
    EVENTS_FILE,
};
