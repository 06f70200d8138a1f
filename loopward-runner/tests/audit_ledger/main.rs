//! The ledger writer: one writer per run ([`writer`]), sync policy and the files of a run
//! ([`sync`]), fail-closed writes ([`fail_closed`]), crash recovery ([`recovery`]).

#[path = "../audit_support/mod.rs"]
mod audit_support;
mod fail_closed;
mod recovery;
mod sync;
mod writer;

use audit_support::{id, run_scope, run_to_ledger, team, SteppingClock, Steps};
use loopward_core::{AuditEvent, AuditSink, Decision, GateMode, Person, RunId, RunStatus};
use loopward_runner::audit::write_pages;
use loopward_runner::audit::{
    verify, Chain, Durability, FaultHook, KeyRing, Ledger, LedgerError, LedgerKey, LedgerOp,
    LedgerOptions, LedgerState, Page, Record, VerifyOptions,
};
use loopward_runner::model::fake::Script;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// An `audit.html` of the test's own (the real one is `loopward-pages`'): the chain's key and
/// how many records, enough to see it is rendered from the verified ledger.
struct StubHtml;

impl Page for StubHtml {
    fn file_name(&self) -> &str {
        "audit.html"
    }

    fn render(&self, records: &[Record], ledger: &LedgerState) -> String {
        format!("{} records, key {:?}\n", records.len(), ledger.key_id)
    }
}

fn stub_pages() -> Vec<Arc<dyn Page>> {
    vec![Arc::new(StubHtml)]
}

fn note(text: &str) -> AuditEvent {
    AuditEvent::HumanMessage {
        content: (&loopward_core::Person::at_the_keyboard().says(text)).into(),
    }
}

fn decision() -> AuditEvent {
    AuditEvent::GateDecision {
        call_id: Some("c1".into()),
        gate: loopward_core::GateId::of(loopward_core::GateKind::Territory),
        mode: GateMode::Enforce,
        action: loopward_core::Action::tool("write_file"),
        path_raw: None,
        source: None,
        path: Some("a.txt".into()),
        decision: Decision::Allow,
    }
}

/// The key the crash test's child and parent share.
fn crash_key() -> LedgerKey {
    LedgerKey::from_bytes(vec![42u8; 32]).unwrap()
}

fn keyless() -> VerifyOptions {
    VerifyOptions::keyless()
}

fn kinds(run_dir: &Path) -> Vec<String> {
    std::fs::read_to_string(run_dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| Record::parse_line(l.as_bytes()).unwrap().0.kind)
        .collect()
}

/// A hook that logs the ledger file's writes and syncs.
fn logging_hook(log: Arc<Mutex<Vec<String>>>) -> Arc<dyn FaultHook> {
    Arc::new(move |op: LedgerOp<'_>| {
        let line = match op {
            LedgerOp::Write { seq, kind } => format!("write {seq} {kind}"),
            LedgerOp::Sync { seq, kind } => format!("sync {seq} {kind}"),
            // The folders, pages and anchor: `a_run_syncs_its_ledger_folders_and_anchor_only`.
            _ => return Ok(()),
        };
        log.lock().unwrap().push(line);
        Ok(())
    })
}
