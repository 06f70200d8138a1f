//! `verify` catches every way of tampering with a finished run's ledger or its anchors, and
//! names the first bad sequence number; unanchored, keyless and foreign-key ledgers are not
//! verified unless the verifier says to accept them.

mod anchors;
#[path = "../audit_support/mod.rs"]
mod audit_support;
mod records;
mod tamper;

use audit_support::{plan_and_build, run_scope, Rule, SteppingClock};
use loopward_core::{AuditEvent, Decision, GateMode, Person, Refusal, RunStatus};
use loopward_core::{AuditSink, RunId, Scope};
use loopward_runner::audit::{
    append_anchor, verify, verify_all, Anchor, Breach, Chain, IndexError, KeyRing, Ledger,
    LedgerKey, LedgerOptions, Record, VerifyError, VerifyOptions, INDEX_FILE,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn territory() -> Rule {
    Arc::new(|agent, tool, path| {
        if tool != "write_file" {
            return None;
        }
        Some(if path == Some("plan.md") && agent != "planner" {
            Decision::Deny(Refusal::new(
                loopward_core::GateKind::Territory,
                "plan.md belongs to planner",
                "hand the change to planner",
            ))
        } else {
            Decision::Allow
        })
    })
}

fn the_key() -> LedgerKey {
    LedgerKey::from_bytes(b"0123456789abcdef0123456789abcdef".to_vec()).unwrap()
}

/// What the key holder verifies with.
fn keyed() -> VerifyOptions {
    VerifyOptions::keyed(KeyRing::single(the_key()))
}

/// A finished scripted run, keyed with [`the_key`]; returns (guards, run dir).
async fn finished() -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
    finished_run(Some(the_key())).await
}

/// A finished scripted run; returns (workspace, runs dir, run dir).
async fn finished_run(key: Option<LedgerKey>) -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
    finished_with(LedgerOptions {
        key,
        ..LedgerOptions::default()
    })
    .await
}

/// The standard scripted run `r1`, its ledger written through `opts`, finished; returns
/// (workspace, runs dir, run dir).
async fn finished_with(opts: LedgerOptions) -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let (report, fin) = plan_and_build(
        ws.path(),
        runs.path(),
        "r1",
        SteppingClock::new(),
        Some((GateMode::Enforce, territory())),
        opts,
    )
    .await;
    assert_eq!(report.status, RunStatus::Completed);
    fin.unwrap();
    let dir = runs.path().join("r1");
    (ws, runs, dir)
}

/// A [`finished`] run whose ledger lines `edit` changed; returns (guards, run dir).
async fn edited(
    edit: impl FnOnce(&mut Vec<String>),
) -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
    let (ws, runs, dir) = finished().await;
    let mut l = lines(&dir);
    edit(&mut l);
    write_lines(&dir, &l);
    (ws, runs, dir)
}

fn lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_lines(dir: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(dir.join("events.jsonl"), text).unwrap();
}

fn breach(dir: &Path) -> (u64, Breach) {
    breach_with(dir, &keyed())
}

fn breach_with(dir: &Path, opts: &VerifyOptions) -> (u64, Breach) {
    match verify(dir, opts) {
        Err(VerifyError::Breach { seq, breach, .. }) => (seq, breach),
        other => panic!("expected a breach, got {other:?}"),
    }
}

/// Re-seals `record` with plain SHA-256 after `prev`, as a forger without a key would.
fn reseal(record: &Record, event: &AuditEvent, prev: &str) -> (Record, String) {
    let (r, line) = Record::seal(
        &Chain::Sha256,
        record.seq,
        &record.time,
        &record.scope(),
        event,
        prev,
    )
    .unwrap();
    (r, String::from_utf8(line).unwrap().trim_end().to_string())
}

/// Replaces the third record with a person saying "forged", re-sealed keyless after the same
/// predecessor, as a forger without the key would.
fn forge_third_record(dir: &Path) {
    let mut l = lines(dir);
    let victim = parse(&l[2]);
    l[2] = reseal(&victim, &said("forged"), &victim.prev).1;
    write_lines(dir, &l);
}

/// The event of a person at the keyboard saying `words`.
fn said(words: &str) -> AuditEvent {
    AuditEvent::HumanMessage {
        content: (&Person::at_the_keyboard().says(words)).into(),
    }
}

fn parse(line: &str) -> Record {
    Record::parse_line(line.as_bytes()).unwrap().0
}
