//! When the ledger syncs, and what else a run writes and syncs.

use super::*;

#[test]
fn decisions_share_one_sync_at_the_commit_and_the_rest_are_synced_at_finish() {
    let runs = tempfile::tempdir().unwrap();
    let log = Arc::new(Mutex::new(vec![]));
    let opts = LedgerOptions {
        fault: Some(logging_hook(log.clone())),
        ..LedgerOptions::default()
    };
    let ledger = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap();
    ledger.record(&run_scope("r1"), &note("a")).unwrap();
    ledger.commit().unwrap(); // no decision yet: nothing to sync
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    ledger.commit().unwrap(); // both decisions, one sync
    ledger.record(&run_scope("r1"), &note("b")).unwrap();
    ledger.commit().unwrap(); // synced already: nothing new to sync
    ledger.finish().unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        [
            "write 1 human_message",
            "write 2 gate_decision",
            "write 3 gate_decision",
            "sync 3 commit",
            "write 4 human_message",
            "sync 4 finish"
        ]
    );
    // After finish a commit is refused like a record: nothing may act on a closed ledger.
    assert!(ledger.commit().unwrap_err().0.contains("finished"));
}

#[test]
fn group_commit_syncs_every_n_events_and_no_sync_never() {
    for (durability, expected_syncs) in [
        (
            Durability::GroupCommit(2.try_into().unwrap()),
            vec![
                "sync 2 human_message",
                "sync 4 gate_decision",
                "sync 5 finish",
            ],
        ),
        (Durability::NoSync, vec![]),
        (
            Durability::EveryEvent,
            vec![
                "sync 1 human_message",
                "sync 2 human_message",
                "sync 3 human_message",
                "sync 4 gate_decision",
                "sync 5 human_message",
                "sync 5 finish",
            ],
        ),
    ] {
        let runs = tempfile::tempdir().unwrap();
        let log = Arc::new(Mutex::new(vec![]));
        let opts = LedgerOptions {
            durability,
            fault: Some(logging_hook(log.clone())),
            ..LedgerOptions::default()
        };
        let ledger = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap();
        for e in [note("1"), note("2"), note("3"), decision(), note("5")] {
            ledger.record(&run_scope("r1"), &e).unwrap();
        }
        ledger.finish().unwrap();
        let syncs: Vec<String> = log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("sync"))
            .cloned()
            .collect();
        assert_eq!(syncs, expected_syncs, "{durability:?}");
    }
}

/// A hook that logs each new file and each sync, its path relative to `runs` or `state`.
fn files_hook(runs: &Path, state: &Path, log: Arc<Mutex<Vec<String>>>) -> Arc<dyn FaultHook> {
    let (runs, state) = (runs.to_path_buf(), state.to_path_buf());
    Arc::new(move |op: LedgerOp<'_>| {
        let name = |p: &Path| {
            let (base, rest) = match p.strip_prefix(&runs) {
                Ok(rest) => ("runs", rest),
                Err(_) => ("state", p.strip_prefix(&state).unwrap()),
            };
            match rest.to_str().unwrap() {
                "" => base.to_string(),
                rest => format!("{base}/{rest}"),
            }
        };
        let line = match op {
            LedgerOp::Write { .. } => return Ok(()),
            LedgerOp::Sync { kind, .. } => format!("sync ledger at {kind}"),
            LedgerOp::Create { path } => format!("create {}", name(path)),
            LedgerOp::SyncFile { path } => format!("sync {}", name(path)),
            LedgerOp::SyncDir { path } => format!("sync folder {}", name(path)),
            _ => "unknown".into(),
        };
        log.lock().unwrap().push(line);
        Ok(())
    })
}

/// Records `run` (a decision, a commit, a note, its finish) under `opts` with stub pages; the
/// file operations it made, as [`files_hook`] names them.
fn logged_run(runs: &Path, state: &Path, run: &str, opts: LedgerOptions) -> Vec<String> {
    let log = Arc::new(Mutex::new(vec![]));
    let opts = LedgerOptions {
        fault: Some(files_hook(runs, state, log.clone())),
        pages: stub_pages(),
        ..opts
    };
    let ledger = Ledger::create(runs, &RunId::new(run).unwrap(), opts).unwrap();
    ledger.record(&run_scope(run), &decision()).unwrap();
    ledger.commit().unwrap();
    ledger.record(&run_scope(run), &note("done")).unwrap();
    ledger.finish().unwrap();
    let log = log.lock().unwrap().clone();
    log
}

#[test]
fn a_run_syncs_its_ledger_folders_and_anchor_and_writes_its_pages_unsynced() {
    let (runs, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut logs = vec![];
    for run in ["r1", "r2"] {
        let opts = LedgerOptions {
            index_head: Some(state.path().join("index-head.json")),
            ..LedgerOptions::keyed(crash_key())
        };
        logs.push(logged_run(runs.path(), state.path(), run, opts));
    }
    let run = |r: &str, first: bool| {
        let mut ops = vec![
            format!("create runs/{r}"),
            format!("create runs/{r}/events.jsonl"),
            // The new names are synced with the ledger's first sync, not at create.
            format!("sync folder runs/{r}"),
            "sync folder runs".into(),
            "sync ledger at commit".into(),
            "sync ledger at finish".into(),
        ];
        if first {
            // The first run makes the index, whose name is synced into its folder.
            ops.push("create runs/index.jsonl".into());
        }
        ops.push("sync runs/index.jsonl".into());
        if first {
            ops.push("sync folder runs".into());
            // The head's log is made whole by rename; later anchors append one synced line.
            ops.extend(
                [
                    "create state/index-head.json",
                    "sync state/index-head.json",
                    "sync folder state",
                ]
                .map(String::from),
            );
        } else {
            ops.push("sync state/index-head.json".into());
        }
        // The pages: whole by rename, never synced.
        ops.extend(["json", "md", "html"].map(|ext| format!("create runs/{r}/audit.{ext}")));
        ops
    };
    assert_eq!(logs, [run("r1", true), run("r2", false)]);
    let syncs = |log: &[String]| log.iter().filter(|l| l.starts_with("sync")).count();
    assert_eq!((syncs(&logs[0]), syncs(&logs[1])), (8, 6));
    let mut left: Vec<String> = std::fs::read_dir(runs.path().join("r2"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["audit.html", "audit.json", "audit.md", "events.jsonl"]
    );
    let check = VerifyOptions::keyed(KeyRing::single(crash_key()))
        .head(state.path().join("index-head.json"));
    assert!(
        verify(&runs.path().join("r2"), &check)
            .unwrap()
            .head_checked
    );
}

#[test]
fn without_fsync_a_run_syncs_nothing_and_still_verifies() {
    let (runs, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let head = state.path().join("index-head.json");
    for run in ["r1", "r2", "r3"] {
        let opts = LedgerOptions {
            durability: Durability::NoSync,
            index_head: Some(head.clone()),
            witness: Some(state.path().join("witness.jsonl")),
            ..LedgerOptions::keyed(crash_key())
        };
        let log = logged_run(runs.path(), state.path(), run, opts);
        assert!(
            log.iter().all(|l| l.starts_with("create")),
            "{run}: {log:?}"
        );
        // Its folder, ledger and three pages; the index and the head's log once, by the first.
        let expected = if run == "r1" { 7 } else { 5 };
        assert_eq!(log.len(), expected, "{run}: {log:?}");
        let check = VerifyOptions::keyed(KeyRing::single(crash_key())).head(&head);
        assert!(verify(&runs.path().join(run), &check).unwrap().head_checked);
    }
}

/// A hook that logs the ledger's folder syncs and its own syncs, nothing else.
fn folder_hook(log: Arc<Mutex<Vec<String>>>) -> Arc<dyn FaultHook> {
    Arc::new(move |op: LedgerOp<'_>| {
        let line = match op {
            LedgerOp::SyncDir { .. } => "sync folder".to_string(),
            LedgerOp::Sync { kind, .. } => format!("sync ledger at {kind}"),
            LedgerOp::Write { seq, .. } => format!("write {seq}"),
            _ => return Ok(()),
        };
        log.lock().unwrap().push(line);
        Ok(())
    })
}

#[test]
fn a_new_ledgers_folders_are_synced_with_its_first_sync_or_when_it_ends_without_one() {
    let runs = tempfile::tempdir().unwrap();
    let opened = |durability, log: &Arc<Mutex<Vec<String>>>| LedgerOptions {
        durability,
        fault: Some(folder_hook(log.clone())),
        ..LedgerOptions::default()
    };
    // Synced with the first commit that syncs, before the ledger itself; not again.
    let log = Arc::new(Mutex::new(vec![]));
    let r1 = RunId::new("r1").unwrap();
    let ledger = Ledger::create(runs.path(), &r1, opened(Durability::Decisions, &log)).unwrap();
    ledger.record(&run_scope("r1"), &note("a")).unwrap();
    ledger.commit().unwrap();
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    ledger.commit().unwrap();
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    ledger.commit().unwrap();
    drop(ledger);
    assert_eq!(
        *log.lock().unwrap(),
        [
            "write 1",
            "write 2",
            "sync folder",
            "sync folder",
            "sync ledger at commit",
            "write 3",
            "sync ledger at commit"
        ]
    );
    // A writer that ends without a sync (a hook call that only denied) syncs them as it goes;
    // one without fsync does not.
    for (run, durability, folders) in [
        ("r2", Durability::Decisions, 2),
        ("r3", Durability::NoSync, 0),
    ] {
        let log = Arc::new(Mutex::new(vec![]));
        let id = RunId::new(run).unwrap();
        let ledger = Ledger::create(runs.path(), &id, opened(durability, &log)).unwrap();
        ledger.record(&run_scope(run), &decision()).unwrap();
        assert!(log.lock().unwrap().iter().all(|l| l.starts_with("write")));
        drop(ledger);
        let synced = log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| *l == "sync folder")
            .count();
        assert_eq!(synced, folders, "{durability:?}");
    }
    // Reopened at its head (a hook call per tool call): its maker synced them, so no folder
    // sync. Reopened whole (a resume after a crash): its maker may have been killed before its
    // first sync, so they are synced again with the first.
    let log = Arc::new(Mutex::new(vec![]));
    let (ledger, _) =
        Ledger::open_at_head(runs.path(), &r1, opened(Durability::Decisions, &log)).unwrap();
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    ledger.commit().unwrap();
    drop(ledger);
    let (ledger, _) =
        Ledger::open_existing(runs.path(), &r1, opened(Durability::Decisions, &log)).unwrap();
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    ledger.commit().unwrap();
    ledger.finish().unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        [
            "write 4",
            "sync ledger at commit",
            "write 5",
            "sync folder",
            "sync folder",
            "sync ledger at commit",
            "sync ledger at finish",
            // The runs folder again, for the index this first anchor made.
            "sync folder"
        ]
    );
}
