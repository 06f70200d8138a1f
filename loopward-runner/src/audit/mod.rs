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

mod figures;
mod index;
mod ledger;
mod memory;
mod record;
mod render;
mod report;
mod verify;

pub use figures::{
    AdvisoryCompliance, GateFigures, OverrideUse, RunFigures, UnauthorisedWrite, TERRITORY_GATE,
};
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
