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
    ledger.record(&scope("r1"), &note("a")).unwrap();
    ledger.commit().unwrap(); // no decision yet: nothing to sync
    ledger.record(&scope("r1"), &decision()).unwrap();
    ledger.record(&scope("r1"), &decision()).unwrap();
    ledger.commit().unwrap(); // both decisions, one sync
    ledger.record(&scope("r1"), &note("b")).unwrap();
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
fn group_commit_syncs_every_n_events_and_no_sync_never_until_finish() {
    for (durability, expected_syncs) in [
        (
            Durability::GroupCommit(2.try_into().unwrap()),
            vec![
                "sync 2 human_message",
                "sync 4 gate_decision",
                "sync 5 finish",
            ],
        ),
        (Durability::NoSync, vec!["sync 5 finish"]),
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
            ledger.record(&scope("r1"), &e).unwrap();
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

#[test]
fn a_run_syncs_its_ledger_folders_and_anchor_and_writes_its_pages_unsynced() {
    let (runs, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut logs = vec![];
    for run in ["r1", "r2"] {
        let log = Arc::new(Mutex::new(vec![]));
        let opts = LedgerOptions {
            index_head: Some(state.path().join("index-head.json")),
            fault: Some(files_hook(runs.path(), state.path(), log.clone())),
            pages: stub_pages(),
            ..LedgerOptions::keyed(crash_key())
        };
        let ledger = Ledger::create(runs.path(), &RunId::new(run).unwrap(), opts).unwrap();
        ledger.record(&scope(run), &decision()).unwrap();
        ledger.commit().unwrap();
        ledger.record(&scope(run), &note("done")).unwrap();
        ledger.finish().unwrap();
        logs.push(log.lock().unwrap().clone());
    }
    let run = |r: &str, first: bool| {
        let mut ops = vec![
            format!("create runs/{r}"),
            format!("create runs/{r}/events.jsonl"),
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
        }
        ops.extend(
            [
                "create state/index-head.json",
                "sync state/index-head.json",
                "sync folder state",
            ]
            .map(String::from),
        );
        // The pages: whole by rename, never synced.
        ops.extend(["json", "md", "html"].map(|ext| format!("create runs/{r}/audit.{ext}")));
        ops
    };
    assert_eq!(logs, [run("r1", true), run("r2", false)]);
    let syncs = |log: &[String]| log.iter().filter(|l| l.starts_with("sync")).count();
    assert_eq!((syncs(&logs[0]), syncs(&logs[1])), (8, 7));
    let mut left: Vec<String> = std::fs::read_dir(runs.path().join("r2"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["audit.html", "audit.json", "audit.md", "events.jsonl"]
    );
}
