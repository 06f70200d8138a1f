//! Every anchor a run has is checked: re-chained ledgers, unanchored or emptied runs, records
//! after the anchor, the index, its head and the witness, keys and where they live.

use super::*;

/// Re-chains the first `keep` records under `chain` and anchors them afresh, as a forger who
/// holds `chain` would; returns the new last sequence number.
fn rechain_and_anchor(runs: &Path, dir: &Path, keep: usize, chain: Chain) -> u64 {
    let l = lines(dir);
    let mut prev = loopward_runner::audit::GENESIS.to_string();
    let mut out = vec![];
    for (i, line) in l.iter().take(keep).enumerate() {
        let r = parse(line);
        let (rec, bytes) = Record::seal(
            &chain,
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
    let seq = out.len() as u64;
    append_anchor(runs, &Anchor::new("r1", seq, prev, "T"), &chain, None, None).unwrap();
    seq
}

/// Records a person saying `words` in `ledger`, at the scope of `run`.
fn say(ledger: &Ledger, run: &str, words: &str) {
    ledger.record(&run_scope(run), &said(words)).unwrap();
}

#[tokio::test]
async fn a_rechained_ledger_with_a_fresh_anchor_is_caught() {
    let (_ws, runs, dir) = finished().await;
    let n = lines(&dir).len();
    // Drop the last two records, re-chain keyless and append a fresh keyless anchor.
    rechain_and_anchor(runs.path(), &dir, n - 2, Chain::Sha256);
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
    rechain_and_anchor(runs.path(), &dir, n - 2, Chain::Hmac(forger));
    assert!(matches!(
        verify(&dir, &keyed()),
        Err(VerifyError::KeyNotHeld { .. })
    ));
}

#[tokio::test]
async fn every_anchor_is_checked_not_only_the_latest() {
    // Keyless (the opt-out): a forger can append anchors, but not remove the earlier one.
    let (_ws, runs, dir) = finished_run(None).await;
    forge_third_record(&dir);
    let seq = rechain_and_anchor(runs.path(), &dir, lines(&dir).len(), Chain::Sha256);
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
    say(&ledger, run, "start");
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
    say(&ledger, "r1", "more");
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
    let state = tempfile::tempdir().unwrap();
    let head = state.path().join("index-head.json");
    let opts = LedgerOptions {
        index_head: Some(head.clone()),
        ..LedgerOptions::keyed(the_key())
    };
    let (_ws, runs, dir) = finished_with(opts.clone()).await;
    // A second segment of r1: resumed and finished again.
    let (ledger, _) = Ledger::open_existing(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap();
    say(&ledger, "r1", "second segment");
    ledger.finish().unwrap();
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
    let elsewhere = tempfile::tempdir().unwrap();
    let witness = elsewhere.path().join("anchors.jsonl");
    let (_ws, runs, dir) = finished_with(LedgerOptions {
        witness: Some(witness.clone()),
        ..LedgerOptions::keyed(the_key())
    })
    .await;
    assert!(verify(&dir, &keyed().witness(&witness)).unwrap().witnessed);
    // The key holder drops two records, re-chains, and rewrites the index from scratch.
    let n = lines(&dir).len();
    std::fs::remove_file(runs.path().join(INDEX_FILE)).unwrap();
    rechain_and_anchor(runs.path(), &dir, n - 2, Chain::Hmac(the_key()));
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
