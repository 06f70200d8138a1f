//! `verify` catches every way of tampering with a finished run's ledger, and names the first bad
//! sequence number.

mod audit_support;

use audit_support::{plan_and_build_script, run_to_ledger, team, Rule, SteppingClock};
use loopward_core::{AuditEvent, Decision, GateMode, Refusal, RunStatus};
use loopward_runner::audit::{
    verify, Breach, Chain, LedgerKey, LedgerOptions, Record, VerifyError,
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
                "territory",
                "plan.md belongs to planner",
                "hand the change to planner",
            ))
        } else {
            Decision::Allow
        })
    })
}

/// A finished scripted run; returns (runs dir guard, run dir, lines).
async fn finished_run(key: Option<LedgerKey>) -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let runner = team(
        ws.path(),
        &["planner", "builder"],
        plan_and_build_script(),
        SteppingClock::new(),
        Some((GateMode::Enforce, territory())),
    );
    let opts = LedgerOptions {
        key,
        ..LedgerOptions::default()
    };
    let (report, fin) =
        run_to_ledger(&runner, runs.path(), "r1", "say hello", "planner", opts).await;
    assert_eq!(report.status, RunStatus::Completed);
    fin.unwrap();
    let dir = runs.path().join("r1");
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
    match verify(dir, None) {
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

fn parse(line: &str) -> Record {
    Record::parse_line(line.as_bytes()).unwrap().0
}

#[tokio::test]
async fn an_intact_finished_ledger_verifies_against_its_anchor() {
    let (_ws, _runs, dir) = finished_run(None).await;
    let ok = verify(&dir, None).unwrap();
    assert!(ok.anchored);
    assert_eq!(ok.final_seq, lines(&dir).len() as u64);
    assert_eq!(ok.mac, "sha256");
}

#[tokio::test]
async fn a_flipped_byte_is_caught_as_edited_at_its_seq() {
    let (_ws, _runs, dir) = finished_run(None).await;
    let mut l = lines(&dir);
    l[4] = l[4].replacen("\"time\":\"2026", "\"time\":\"2027", 1);
    write_lines(&dir, &l);
    assert_eq!(breach(&dir), (5, Breach::Edited));
    let msg = verify(&dir, None).unwrap_err().to_string();
    assert!(msg.contains("seq 5: edited"), "{msg}");
}

#[tokio::test]
async fn a_deleted_line_is_caught_as_missing() {
    let (_ws, _runs, dir) = finished_run(None).await;
    let mut l = lines(&dir);
    l.remove(6);
    write_lines(&dir, &l);
    assert_eq!(breach(&dir), (7, Breach::Missing { found: 8 }));
}

#[tokio::test]
async fn swapped_lines_are_caught_as_reordered() {
    let (_ws, _runs, dir) = finished_run(None).await;
    let mut l = lines(&dir);
    l.swap(3, 4);
    write_lines(&dir, &l);
    assert_eq!(breach(&dir), (4, Breach::Reordered { found: 5 }));
}

#[tokio::test]
async fn a_truncated_ledger_is_caught_against_its_anchor() {
    let (_ws, _runs, dir) = finished_run(None).await;
    let mut l = lines(&dir);
    let n = l.len() as u64;
    l.truncate(l.len() - 2);
    write_lines(&dir, &l);
    assert_eq!(
        breach(&dir),
        (
            n - 1,
            Breach::Truncated {
                last: n - 2,
                anchored: n
            }
        )
    );
}

#[tokio::test]
async fn a_truncated_and_rechained_ledger_is_caught_as_anchor_mismatch() {
    let (_ws, _runs, dir) = finished_run(None).await;
    let mut l = lines(&dir);
    let n = l.len();
    // Drop the last three records and forge three new ones, correctly chained.
    let tail: Vec<Record> = l.split_off(n - 3).iter().map(|s| parse(s)).collect();
    let mut prev = parse(&l[n - 4]).hash;
    for r in &tail {
        let forged = match r.event().unwrap() {
            AuditEvent::TurnEnded { finish, mut usage } => {
                usage.output_tokens = 0;
                AuditEvent::TurnEnded { finish, usage }
            }
            AuditEvent::RunEnded {
                status,
                mut usage,
                cost_micros,
            } => {
                usage.input_tokens = 1;
                AuditEvent::RunEnded {
                    status,
                    usage,
                    cost_micros,
                }
            }
            e => e,
        };
        let (rec, line) = reseal(r, &forged, &prev);
        prev = rec.hash;
        l.push(line);
    }
    write_lines(&dir, &l);
    // Every record checks out on its own; only the anchor shows the rewrite.
    assert_eq!(breach(&dir), (n as u64, Breach::AnchorMismatch));
}

#[tokio::test]
async fn an_edited_and_rehashed_record_breaks_the_next_link() {
    let (_ws, _runs, dir) = finished_run(None).await;
    let mut l = lines(&dir);
    let victim = parse(&l[2]);
    let event = AuditEvent::HumanMessage {
        content: "forged".into(),
    };
    let (_, line) = reseal(&victim, &event, &victim.prev);
    l[2] = line;
    write_lines(&dir, &l);
    assert_eq!(breach(&dir), (4, Breach::BadLink));
}

#[tokio::test]
async fn an_unparseable_line_is_named() {
    let (_ws, _runs, dir) = finished_run(None).await;
    let mut l = lines(&dir);
    l[1] = "{not json".into();
    write_lines(&dir, &l);
    let (seq, b) = breach(&dir);
    assert_eq!(seq, 2);
    assert!(matches!(b, Breach::Unparseable(_)), "{b:?}");
}

#[tokio::test]
async fn an_hmac_chain_needs_its_key_and_cannot_be_rechained_without_it() {
    let key = LedgerKey::from_bytes(b"0123456789abcdef0123456789abcdef".to_vec()).unwrap();
    let (_ws, _runs, dir) = finished_run(Some(key.clone())).await;
    let ok = verify(&dir, Some(&key)).unwrap();
    assert_eq!(ok.mac, "hmac-sha256");
    assert!(matches!(
        verify(&dir, None),
        Err(VerifyError::KeyRequired { .. })
    ));
    let wrong = LedgerKey::from_bytes(vec![9u8; 32]).unwrap();
    assert_eq!(
        verify(&dir, Some(&wrong)).unwrap_err().first_bad_seq(),
        Some(1)
    );
    // A forger re-chains the last record with plain SHA-256: the key catches it.
    let mut l = lines(&dir);
    let last = parse(l.last().unwrap());
    let (_, forged) = reseal(&last, &last.event().unwrap(), &last.prev);
    *l.last_mut().unwrap() = forged;
    write_lines(&dir, &l);
    let err = verify(&dir, Some(&key)).unwrap_err();
    assert_eq!(err.breach(), Some(&Breach::Edited));
    assert_eq!(err.first_bad_seq(), Some(l.len() as u64));
}

#[test]
fn a_key_inside_the_workspace_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    let inside = ws.path().join("ledger.key");
    std::fs::write(&inside, [5u8; 32]).unwrap();
    let err = LedgerKey::from_file(&inside, Some(ws.path())).unwrap_err();
    assert!(err.to_string().contains("inside the workspace"), "{err}");
    let outside = tempfile::tempdir().unwrap();
    let short = outside.path().join("short.key");
    std::fs::write(&short, b"tiny\n").unwrap();
    let err = LedgerKey::from_file(&short, Some(ws.path())).unwrap_err();
    assert!(err.to_string().contains("has 4 bytes"), "{err}");
}
