//! `verify` catches every way of tampering with a finished run's ledger or its anchors, and
//! names the first bad sequence number; unanchored, keyless and foreign-key ledgers are not
//! verified unless the verifier says to accept them.

mod audit_support;

use audit_support::{plan_and_build_script, run_to_ledger, team, Rule, SteppingClock};
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
                "territory",
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
    let (report, fin) = run_to_ledger(
        &runner,
        runs.path(),
        "r1",
        Person::at_the_keyboard().says("say hello"),
        "planner",
        opts,
    )
    .await;
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

fn parse(line: &str) -> Record {
    Record::parse_line(line.as_bytes()).unwrap().0
}

#[tokio::test]
async fn an_intact_finished_ledger_verifies_against_its_anchor_and_names_its_key() {
    let (_ws, _runs, dir) = finished().await;
    let ok = verify(&dir, &keyed()).unwrap();
    assert!(ok.anchored);
    assert_eq!(ok.anchors, 1);
    assert_eq!(ok.final_seq, lines(&dir).len() as u64);
    assert_eq!(ok.mac, "hmac-sha256");
    assert_eq!(ok.schema, 3);
    assert_eq!(ok.verified_by(), format!("key {}", the_key().id()));
    // The first record names the schema and the key, under its MAC.
    let first = parse(&lines(&dir)[0]);
    let header = first.ledger.unwrap();
    assert_eq!(
        (header.schema, header.key.as_ref()),
        (3, Some(the_key().id()))
    );
    assert!(parse(&lines(&dir)[1]).ledger.is_none());
}

#[tokio::test]
async fn a_flipped_byte_is_caught_as_edited_at_its_seq() {
    let (_ws, _runs, dir) = finished().await;
    let mut l = lines(&dir);
    l[4] = l[4].replacen("\"time\":\"2026", "\"time\":\"2027", 1);
    write_lines(&dir, &l);
    assert_eq!(breach(&dir), (5, Breach::Edited));
    let msg = verify(&dir, &keyed()).unwrap_err().to_string();
    assert!(msg.contains("seq 5: edited"), "{msg}");
}

#[tokio::test]
async fn a_deleted_line_is_caught_as_missing() {
    let (_ws, _runs, dir) = finished().await;
    let mut l = lines(&dir);
    l.remove(6);
    write_lines(&dir, &l);
    assert_eq!(breach(&dir), (7, Breach::Missing { found: 8 }));
}

#[tokio::test]
async fn swapped_lines_are_caught_as_reordered() {
    let (_ws, _runs, dir) = finished().await;
    let mut l = lines(&dir);
    l.swap(3, 4);
    write_lines(&dir, &l);
    assert_eq!(breach(&dir), (4, Breach::Reordered { found: 5 }));
}

#[tokio::test]
async fn a_truncated_ledger_is_caught_against_its_anchor() {
    let (_ws, _runs, dir) = finished().await;
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
async fn a_truncated_and_rechained_keyless_ledger_is_caught_as_anchor_mismatch() {
    let (_ws, _runs, dir) = finished_run(None).await;
    let mut l = lines(&dir);
    let n = l.len();
    // Drop the last three records and forge three new ones, correctly chained.
    let tail: Vec<Record> = l.split_off(n - 3).iter().map(|s| parse(s)).collect();
    let mut prev = parse(&l[n - 4]).hash;
    for r in &tail {
        let forged = match r.event().unwrap() {
            AuditEvent::TurnEnded {
                finish,
                mut usage,
                ends_run,
            } => {
                usage.output_tokens = 0;
                AuditEvent::TurnEnded {
                    finish,
                    usage,
                    ends_run,
                }
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
    assert_eq!(
        breach_with(&dir, &VerifyOptions::keyless()),
        (n as u64, Breach::AnchorMismatch { line: 1 })
    );
}

#[tokio::test]
async fn an_edited_and_rehashed_record_breaks_the_next_link() {
    // Keyless, so the forger can re-hash the record; the next link still breaks.
    let (_ws, _runs, dir) = finished_run(None).await;
    let mut l = lines(&dir);
    let victim = parse(&l[2]);
    let event = AuditEvent::HumanMessage {
        content: (&loopward_core::Person::at_the_keyboard().says("forged")).into(),
    };
    let (_, line) = reseal(&victim, &event, &victim.prev);
    l[2] = line;
    write_lines(&dir, &l);
    assert_eq!(
        breach_with(&dir, &VerifyOptions::keyless()),
        (4, Breach::BadLink)
    );
    // Keyed, the re-hashed record itself is caught.
    let (_ws, _runs, dir) = finished().await;
    let mut l = lines(&dir);
    let (_, line) = reseal(&parse(&l[2]), &event, &parse(&l[2]).prev);
    l[2] = line;
    write_lines(&dir, &l);
    assert_eq!(breach(&dir), (3, Breach::Edited));
}

#[tokio::test]
async fn an_unparseable_line_is_named() {
    let (_ws, _runs, dir) = finished().await;
    let mut l = lines(&dir);
    l[1] = "{not json".into();
    write_lines(&dir, &l);
    let (seq, b) = breach(&dir);
    assert_eq!(seq, 2);
    assert!(matches!(b, Breach::Unparseable(_)), "{b:?}");
}

#[tokio::test]
async fn an_hmac_chain_needs_its_key_and_cannot_be_rechained_without_it() {
    let (_ws, _runs, dir) = finished().await;
    assert!(matches!(
        verify(&dir, &VerifyOptions::default()),
        Err(VerifyError::KeyNotHeld { ref key, .. }) if key == the_key().id()
    ));
    // A ring without the ledger's key: named, with the way out.
    let other = VerifyOptions::keyed(KeyRing::single(
        LedgerKey::from_bytes(vec![9u8; 32]).unwrap(),
    ));
    let msg = verify(&dir, &other).unwrap_err().to_string();
    assert!(
        msg.contains("does not hold") && msg.contains("--key"),
        "{msg}"
    );
    // A forger re-chains the last record with plain SHA-256: the key catches it.
    let mut l = lines(&dir);
    let last = parse(l.last().unwrap());
    let (_, forged) = reseal(&last, &last.event().unwrap(), &last.prev);
    *l.last_mut().unwrap() = forged;
    write_lines(&dir, &l);
    let err = verify(&dir, &keyed()).unwrap_err();
    assert_eq!(err.breach(), Some(&Breach::Edited));
    assert_eq!(err.first_bad_seq(), Some(l.len() as u64));
}

/// Re-chains a whole ledger with `chain` (a forger's: keyless, or their own key).
fn rechain_all(dir: &Path, keep: usize, chain: &Chain) -> (u64, String) {
    let l = lines(dir);
    let mut prev = loopward_runner::audit::GENESIS.to_string();
    let mut out = vec![];
    for (i, line) in l.iter().take(keep).enumerate() {
        let r = parse(line);
        let (rec, bytes) = Record::seal(
            chain,
            i as u64 + 1,
            &r.time,
            &r.scope(),
            &r.event().unwrap(),
            &prev,
        )
        .unwrap();
        prev = rec.hash;
        out.push(String::from_utf8(bytes).unwrap().trim_end().to_string());
    }
    write_lines(dir, &out);
    (out.len() as u64, prev)
}

#[tokio::test]
async fn a_rechained_ledger_with_a_fresh_anchor_is_caught() {
    let (_ws, runs, dir) = finished().await;
    let n = lines(&dir).len();
    // Drop the last two records, re-chain keyless and append a fresh keyless anchor.
    let (seq, hash) = rechain_all(&dir, n - 2, &Chain::Sha256);
    append_anchor(
        runs.path(),
        &Anchor::new("r1", seq, hash, "T"),
        &Chain::Sha256,
        None,
        None,
    )
    .unwrap();
    // The header says keyless now: refused outright by a keyed verifier.
    assert!(matches!(
        verify(&dir, &keyed()),
        Err(VerifyError::Keyless { .. })
    ));
    // Even a verifier that accepts keyless chains sees the original anchor contradict it.
    let lax = VerifyOptions {
        allow_keyless: true,
        ..keyed()
    };
    assert!(
        matches!(
            verify(&dir, &lax),
            Err(VerifyError::Breach {
                breach: Breach::AnchorKey { line: 1, .. },
                ..
            })
        ),
        "{:?}",
        verify(&dir, &lax)
    );
    // Re-chained under the forger's own key, with an anchor under it: the key is not held.
    let forger = LedgerKey::from_bytes(vec![6u8; 32]).unwrap();
    let (seq, hash) = rechain_all(&dir, n - 2, &Chain::Hmac(forger.clone()));
    append_anchor(
        runs.path(),
        &Anchor::new("r1", seq, hash, "T"),
        &Chain::Hmac(forger),
        None,
        None,
    )
    .unwrap();
    assert!(matches!(
        verify(&dir, &keyed()),
        Err(VerifyError::KeyNotHeld { .. })
    ));
}

#[tokio::test]
async fn every_anchor_is_checked_not_only_the_latest() {
    // Keyless (the opt-out): a forger can append anchors, but not remove the earlier one.
    let (_ws, runs, dir) = finished_run(None).await;
    let mut l = lines(&dir);
    let victim = parse(&l[2]);
    let (_, line) = reseal(
        &victim,
        &AuditEvent::HumanMessage {
            content: (&loopward_core::Person::at_the_keyboard().says("forged")).into(),
        },
        &victim.prev,
    );
    l[2] = line;
    write_lines(&dir, &l);
    let (seq, hash) = rechain_all(&dir, l.len(), &Chain::Sha256);
    append_anchor(
        runs.path(),
        &Anchor::new("r1", seq, hash, "T"),
        &Chain::Sha256,
        None,
        None,
    )
    .unwrap();
    let (at, b) = breach_with(&dir, &VerifyOptions::keyless());
    assert_eq!((at, b), (seq, Breach::AnchorMismatch { line: 1 }));
}

fn unfinished_ledger(runs: &Path, run: &str) -> PathBuf {
    let ledger = Ledger::create(
        runs,
        &RunId::new(run).unwrap(),
        LedgerOptions::keyed(the_key()),
    )
    .unwrap();
    let scope = Scope {
        run: RunId::new(run).unwrap(),
        turn: None,
        agent: None,
    };
    ledger
        .record(
            &scope,
            &AuditEvent::HumanMessage {
                content: (&loopward_core::Person::at_the_keyboard().says("start")).into(),
            },
        )
        .unwrap();
    runs.join(run)
}

#[test]
fn an_unanchored_ledger_is_not_verified_unless_accepted_as_unfinished() {
    let runs = tempfile::tempdir().unwrap();
    let dir = unfinished_ledger(runs.path(), "r1");
    let err = verify(&dir, &keyed()).unwrap_err();
    assert!(matches!(err, VerifyError::Unanchored { .. }), "{err}");
    assert!(err.to_string().contains("--unfinished"), "{err}");
    let ok = verify(&dir, &keyed().unfinished(true)).unwrap();
    assert!(!ok.anchored);
    assert_eq!(ok.anchors, 0);
}

#[tokio::test]
async fn an_emptied_ledger_is_not_verified_with_or_without_its_index() {
    let (_ws, runs, dir) = finished().await;
    let n = lines(&dir).len() as u64;
    std::fs::write(dir.join("events.jsonl"), "").unwrap();
    assert_eq!(
        breach(&dir),
        (
            1,
            Breach::Truncated {
                last: 0,
                anchored: n
            }
        )
    );
    std::fs::remove_file(runs.path().join(INDEX_FILE)).unwrap();
    assert!(matches!(
        verify(&dir, &keyed()),
        Err(VerifyError::Unanchored { .. })
    ));
}

#[tokio::test]
async fn records_appended_after_the_anchor_are_not_verified() {
    let (_ws, runs, dir) = finished().await;
    let (ledger, _) = Ledger::open_existing(
        runs.path(),
        &RunId::new("r1").unwrap(),
        LedgerOptions::keyed(the_key()),
    )
    .unwrap();
    let scope = Scope {
        run: RunId::new("r1").unwrap(),
        turn: None,
        agent: None,
    };
    ledger
        .record(
            &scope,
            &AuditEvent::HumanMessage {
                content: (&loopward_core::Person::at_the_keyboard().says("more")).into(),
            },
        )
        .unwrap();
    let n = lines(&dir).len() as u64;
    assert_eq!(breach(&dir), (n, Breach::AfterAnchor { anchored: n - 1 }));
    assert!(!verify(&dir, &keyed().unfinished(true)).unwrap().anchored);
    // Finishing again anchors the new end; both anchors are checked.
    ledger.finish().unwrap();
    assert_eq!(verify(&dir, &keyed()).unwrap().anchors, 2);
}

#[tokio::test]
async fn an_edited_index_line_fails_every_run() {
    let (_ws, runs, dir) = finished().await;
    let index = runs.path().join(INDEX_FILE);
    let text = std::fs::read_to_string(&index).unwrap();
    std::fs::write(
        &index,
        text.replacen("\"final_seq\":", "\"final_seq\":1", 1),
    )
    .unwrap();
    let err = verify(&dir, &keyed()).unwrap_err();
    assert!(
        matches!(err, VerifyError::Index(IndexError::Line { line: 1, .. })),
        "{err}"
    );
}

#[tokio::test]
async fn anchors_dropped_from_the_end_of_the_index_are_caught_by_the_state_head() {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let head = state.path().join("index-head.json");
    let opts = LedgerOptions {
        index_head: Some(head.clone()),
        ..LedgerOptions::keyed(the_key())
    };
    let runner = team(
        ws.path(),
        &["planner", "builder"],
        plan_and_build_script(),
        SteppingClock::new(),
        Some((GateMode::Enforce, territory())),
    );
    run_to_ledger(
        &runner,
        runs.path(),
        "r1",
        Person::at_the_keyboard().says("say hello"),
        "planner",
        opts.clone(),
    )
    .await
    .1
    .unwrap();
    // A second segment of r1: resumed and finished again.
    let (ledger, _) = Ledger::open_existing(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap();
    let scope = Scope {
        run: RunId::new("r1").unwrap(),
        turn: None,
        agent: None,
    };
    ledger
        .record(
            &scope,
            &AuditEvent::HumanMessage {
                content: (&loopward_core::Person::at_the_keyboard().says("second segment")).into(),
            },
        )
        .unwrap();
    ledger.finish().unwrap();
    let dir = runs.path().join("r1");
    let check = keyed().head(&head);
    assert!(verify(&dir, &check).unwrap().head_checked);
    // Drop the second segment and its anchor: a valid prefix of both files.
    let mut l = lines(&dir);
    l.pop();
    write_lines(&dir, &l);
    let index = runs.path().join(INDEX_FILE);
    let text = std::fs::read_to_string(&index).unwrap();
    std::fs::write(&index, format!("{}\n", text.lines().next().unwrap())).unwrap();
    // Without the head this looks whole; the head kept in the state directory says otherwise.
    verify(&dir, &keyed()).unwrap();
    let err = verify(&dir, &check).unwrap_err();
    assert!(
        matches!(
            err,
            VerifyError::Index(IndexError::Head {
                seq: 2,
                found_seq: 1,
                ..
            })
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_witness_catches_a_rewrite_by_whoever_holds_the_key() {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let witness = elsewhere.path().join("anchors.jsonl");
    let opts = LedgerOptions {
        witness: Some(witness.clone()),
        ..LedgerOptions::keyed(the_key())
    };
    let runner = team(
        ws.path(),
        &["planner", "builder"],
        plan_and_build_script(),
        SteppingClock::new(),
        Some((GateMode::Enforce, territory())),
    );
    run_to_ledger(
        &runner,
        runs.path(),
        "r1",
        Person::at_the_keyboard().says("say hello"),
        "planner",
        opts,
    )
    .await
    .1
    .unwrap();
    let dir = runs.path().join("r1");
    assert!(verify(&dir, &keyed().witness(&witness)).unwrap().witnessed);
    // The key holder drops two records, re-chains, and rewrites the index from scratch.
    let n = lines(&dir).len();
    let (seq, hash) = rechain_all(&dir, n - 2, &Chain::Hmac(the_key()));
    std::fs::remove_file(runs.path().join(INDEX_FILE)).unwrap();
    append_anchor(
        runs.path(),
        &Anchor::new("r1", seq, hash, "T"),
        &Chain::Hmac(the_key()),
        None,
        None,
    )
    .unwrap();
    // With the key alone that is undetectable (the threat model says so); the witness is not.
    verify(&dir, &keyed()).unwrap();
    let err = verify(&dir, &keyed().witness(&witness)).unwrap_err();
    assert!(matches!(err, VerifyError::Witness { .. }), "{err}");
    assert!(err.to_string().contains("never witnessed"), "{err}");
}

#[tokio::test]
async fn a_run_whose_folder_is_gone_is_reported_not_skipped() {
    let (_ws, runs, dir) = finished().await;
    let _still = unfinished_ledger(runs.path(), "r2");
    std::fs::remove_dir_all(&dir).unwrap();
    let all = verify_all(runs.path(), &keyed()).unwrap();
    let names: Vec<&str> = all.iter().map(|v| v.run.as_str()).collect();
    assert_eq!(names, ["r1", "r2"]);
    assert!(matches!(
        all[0].result,
        Err(VerifyError::FolderGone { line: 1, .. })
    ));
    assert!(matches!(all[1].result, Err(VerifyError::Unanchored { .. })));
}

#[tokio::test]
async fn a_keyless_ledger_is_refused_unless_accepted_and_then_labelled() {
    let (_ws, _runs, dir) = finished_run(None).await;
    let err = verify(&dir, &keyed()).unwrap_err();
    assert!(matches!(err, VerifyError::Keyless { .. }), "{err}");
    assert!(err.to_string().contains("--allow-keyless"), "{err}");
    let ok = verify(&dir, &VerifyOptions::keyless()).unwrap();
    assert_eq!(ok.verified_by(), "keyless (sha256)");
}

#[tokio::test]
async fn a_second_header_spliced_into_a_ledger_is_caught() {
    let (_ws, _runs, dir) = finished().await;
    let mut l = lines(&dir);
    let first = parse(&l[0]);
    let third = parse(&l[2]);
    // Seal record 1's content as if it were record 3, so it carries no header... then the
    // reverse: a header-bearing first record moved to position 3 breaks the sequence anyway.
    let (rec, bytes) = Record::seal(
        &Chain::Hmac(the_key()),
        1,
        &third.time,
        &third.scope(),
        &third.event().unwrap(),
        &first.prev,
    )
    .unwrap();
    assert!(rec.ledger.is_some());
    l[0] = String::from_utf8(bytes).unwrap().trim_end().to_string();
    write_lines(&dir, &l);
    // The new first record is well-formed and keyed; the chain from record 2 on breaks.
    assert_eq!(breach(&dir), (2, Breach::BadLink));
}

#[test]
fn a_key_inside_the_workspace_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    let inside = ws.path().join("ledger.key");
    std::fs::write(&inside, [5u8; 32]).unwrap();
    std::fs::set_permissions(&inside, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let err = LedgerKey::from_file(&inside, Some(ws.path())).unwrap_err();
    assert!(err.to_string().contains("inside the workspace"), "{err}");
    let outside = tempfile::tempdir().unwrap();
    let short = outside.path().join("short.key");
    std::fs::write(&short, b"tiny\n").unwrap();
    std::fs::set_permissions(&short, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let err = LedgerKey::from_file(&short, Some(ws.path())).unwrap_err();
    assert!(err.to_string().contains("has 5 bytes"), "{err}");
}

// ---- property: no change to a keyed ledger or to the index verifies without the key ----

mod tamper {
    use super::*;
    use loopward_runner::audit::{Durability, GENESIS};
    use proptest::prelude::*;

    const RUNS: [(&str, usize); 3] = [("r1", 5), ("r2", 3), ("r3", 4)];

    /// Three finished keyed runs; returns (runs dir, state dir holding the index head).
    fn three_runs() -> (tempfile::TempDir, tempfile::TempDir) {
        let runs = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        for (run, n) in RUNS {
            let opts = LedgerOptions {
                durability: Durability::NoSync,
                index_head: Some(state.path().join("head.json")),
                ..LedgerOptions::keyed(the_key())
            };
            let id = RunId::new(run).unwrap();
            let ledger = Ledger::create(runs.path(), &id, opts).unwrap();
            let scope = Scope {
                run: id,
                turn: None,
                agent: None,
            };
            for i in 0..n {
                let content = (&loopward_core::Person::at_the_keyboard()
                    .says(format!("{run} message {i}")))
                    .into();
                ledger
                    .record(&scope, &AuditEvent::HumanMessage { content })
                    .unwrap();
            }
            ledger.finish().unwrap();
        }
        (runs, state)
    }

    #[derive(Clone, Debug)]
    enum Edit {
        Flip { line: usize, at: usize, xor: u8 },
        Delete { line: usize },
        Duplicate { from: usize, to: usize },
        Swap { a: usize, b: usize },
        Truncate { keep: usize },
    }

    #[derive(Clone, Debug)]
    enum Rechain {
        No,
        Keyless,
        OwnKey,
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            (any::<usize>(), any::<usize>(), 1u8..=255).prop_map(|(line, at, xor)| Edit::Flip {
                line,
                at,
                xor
            }),
            any::<usize>().prop_map(|line| Edit::Delete { line }),
            (any::<usize>(), any::<usize>()).prop_map(|(from, to)| Edit::Duplicate { from, to }),
            (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap { a, b }),
            any::<usize>().prop_map(|keep| Edit::Truncate { keep }),
        ]
    }

    fn rechain() -> impl Strategy<Value = Rechain> {
        prop_oneof![
            Just(Rechain::No),
            Just(Rechain::Keyless),
            Just(Rechain::OwnKey)
        ]
    }

    /// Applies `e` to a file's bytes; the result always differs from the input.
    fn apply(bytes: &[u8], e: &Edit) -> Vec<u8> {
        let mut lines: Vec<Vec<u8>> = bytes
            .split_inclusive(|b| *b == b'\n')
            .map(<[u8]>::to_vec)
            .collect();
        let n = lines.len();
        match *e {
            Edit::Flip { line, at, xor } => {
                let l = &mut lines[line % n];
                let i = at % (l.len() - 1); // not the newline: a torn line is Truncate's job
                l[i] ^= xor;
            }
            Edit::Delete { line } => {
                lines.remove(line % n);
            }
            Edit::Duplicate { from, to } => {
                let l = lines[from % n].clone();
                lines.insert(to % (n + 1), l);
            }
            Edit::Swap { a, b } => {
                let (a, mut b) = (a % n, b % n);
                if a == b {
                    b = (a + 1) % n;
                }
                lines.swap(a, b);
            }
            Edit::Truncate { keep } => {
                let mut all = lines.concat();
                all.truncate(keep % bytes.len());
                return all;
            }
        }
        lines.concat()
    }

    fn forger_chain(r: &Rechain) -> Option<Chain> {
        match r {
            Rechain::No => None,
            Rechain::Keyless => Some(Chain::Sha256),
            Rechain::OwnKey => Some(Chain::Hmac(
                LedgerKey::from_bytes(vec![0xEEu8; 32]).unwrap(),
            )),
        }
    }

    /// Re-chains a ledger's parseable records with `chain` and anchors the new end under it.
    fn rechain_ledger(runs: &Path, run: &str, chain: &Chain) {
        let path = runs.join(run).join("events.jsonl");
        let bytes = std::fs::read(&path).unwrap();
        let mut prev = GENESIS.to_string();
        let mut out = Vec::new();
        let mut seq = 0;
        for line in bytes.split(|b| *b == b'\n') {
            let Ok((r, _)) = Record::parse_line(line) else {
                continue;
            };
            let Ok(event) = r.event() else { continue };
            seq += 1;
            let (rec, l) = Record::seal(chain, seq, &r.time, &r.scope(), &event, &prev).unwrap();
            prev = rec.hash;
            out.extend_from_slice(&l);
        }
        std::fs::write(&path, out).unwrap();
        append_anchor(runs, &Anchor::new(run, seq, prev, "T"), chain, None, None).unwrap();
    }

    /// Re-chains the index lines that still parse as JSON objects with `chain`.
    fn rechain_index(runs: &Path, chain: &Chain) {
        let path = runs.join(INDEX_FILE);
        let text = std::fs::read(&path).unwrap_or_default();
        let anchors: Vec<Anchor> = text
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
            .filter_map(|v| {
                Some(Anchor::new(
                    v["run"].as_str()?,
                    v["final_seq"].as_u64()?,
                    v["final_hash"].as_str()?,
                    "T",
                ))
            })
            .collect();
        std::fs::remove_file(&path).ok();
        for a in &anchors {
            append_anchor(runs, a, chain, None, None).unwrap();
        }
    }

    fn check(runs: &Path, state: &Path) -> Vec<String> {
        let opts = keyed().head(state.join("head.json"));
        verify_all(runs, &opts)
            .unwrap()
            .into_iter()
            .filter(|v| v.result.is_ok())
            .map(|v| v.run)
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        #[test]
        fn any_change_to_a_keyed_ledger_fails_verify_without_the_key(
            run in 0usize..3, e in edit(), r in rechain()
        ) {
            let (runs, state) = three_runs();
            prop_assert_eq!(check(runs.path(), state.path()).len(), 3);
            let (name, _) = RUNS[run];
            let path = runs.path().join(name).join("events.jsonl");
            let before = std::fs::read(&path).unwrap();
            std::fs::write(&path, apply(&before, &e)).unwrap();
            if let Some(chain) = forger_chain(&r) {
                rechain_ledger(runs.path(), name, &chain);
            }
            let ok = check(runs.path(), state.path());
            prop_assert!(!ok.contains(&name.to_string()), "{name} still verifies after {e:?} / {r:?}");
        }

        #[test]
        fn any_change_to_the_index_fails_verify_without_the_key(
            e in edit(), r in rechain()
        ) {
            let (runs, state) = three_runs();
            let path = runs.path().join(INDEX_FILE);
            let before = std::fs::read(&path).unwrap();
            std::fs::write(&path, apply(&before, &e)).unwrap();
            if let Some(chain) = forger_chain(&r) {
                rechain_index(runs.path(), &chain);
            }
            let ok = check(runs.path(), state.path());
            prop_assert!(ok.len() < 3, "every run still verifies after {e:?} / {r:?}: {ok:?}");
        }
    }
}

/// A ledger whose header names another schema is refused as such (which loopward wrote it),
/// not reported as a tampered header, and never as verified.
#[tokio::test]
async fn a_ledger_of_another_schema_is_named_as_such() {
    let (_ws, _runs, dir) = finished().await;
    let mut all = lines(&dir);
    all[0] = all[0].replacen("\"schema\":3", "\"schema\":2", 1);
    write_lines(&dir, &all);
    let err = verify(&dir, &keyed()).unwrap_err();
    assert!(
        matches!(
            err,
            loopward_runner::audit::VerifyError::OtherSchema { schema: 2, .. }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("written by an older loopward"),
        "{err}"
    );
}
