//! A failed write or sync poisons the ledger, and no action runs that it was to record.

use super::*;

/// Default ledger options, with `hook` injecting faults.
fn faulty(hook: impl FaultHook + 'static) -> LedgerOptions {
    LedgerOptions {
        fault: Some(Arc::new(hook)),
        ..LedgerOptions::default()
    }
}

/// Ledger options whose write of record `seq` fails with `why`.
fn failing_write(seq: u64, why: &'static str) -> LedgerOptions {
    faulty(move |op: LedgerOp<'_>| match op {
        LedgerOp::Write { seq: s, .. } if s == seq => Err(std::io::Error::other(why)),
        _ => Ok(()),
    })
}

#[test]
fn a_failed_write_poisons_the_ledger() {
    let runs = tempfile::tempdir().unwrap();
    let opts = failing_write(2, "disk full");
    let ledger = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap();
    ledger.record(&run_scope("r1"), &note("a")).unwrap();
    let err = ledger.record(&run_scope("r1"), &note("b")).unwrap_err();
    assert!(
        err.0.contains("writing seq 2 (human_message): disk full"),
        "{err}"
    );
    let later = ledger.record(&run_scope("r1"), &note("c")).unwrap_err();
    assert!(
        later.0.contains("unusable after an earlier failure"),
        "{later}"
    );
    assert!(matches!(ledger.finish(), Err(LedgerError::Poisoned { .. })));
    assert_eq!(kinds(&runs.path().join("r1")), ["human_message"]);
}

fn lines_on_file(run_dir: &Path) -> usize {
    std::fs::read_to_string(run_dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .count()
}

#[test]
fn events_on_the_way_to_an_action_wait_for_the_commit_and_go_out_together() {
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().join("r1");
    let ledger = Ledger::create(
        runs.path(),
        &RunId::new("r1").unwrap(),
        LedgerOptions::default(),
    )
    .unwrap();
    assert!(decision().may_wait_for_commit() && !note("x").may_wait_for_commit());
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    assert_eq!(lines_on_file(&dir), 0, "an allow is held until the commit");
    ledger.record(&run_scope("r1"), &note("a")).unwrap();
    assert_eq!(
        lines_on_file(&dir),
        2,
        "a record written at once takes the held one along"
    );
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    assert_eq!(lines_on_file(&dir), 2);
    ledger.commit().unwrap();
    assert_eq!(lines_on_file(&dir), 4, "the commit writes what is held");
    // A refusal is evidence of an attempt: written at once.
    let mut deny = decision();
    if let AuditEvent::GateDecision { decision, .. } = &mut deny {
        *decision = Decision::Deny(loopward_core::Refusal::new(
            loopward_core::GateKind::Territory,
            "no",
            "leave it",
        ));
    }
    assert!(!deny.may_wait_for_commit());
    ledger.record(&run_scope("r1"), &deny).unwrap();
    assert_eq!(lines_on_file(&dir), 5);
    // A tool's start is on file when `record` returns: the shell tool releases its command right
    // after recording it, and a resumed run must find the start of a command that may have run.
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    let started = AuditEvent::ToolStarted {
        call_id: "c1".into(),
        tool: "shell".into(),
    };
    ledger.record(&run_scope("r1"), &started).unwrap();
    assert_eq!(
        lines_on_file(&dir),
        7,
        "the start takes the held allow along"
    );
    // A ledger dropped without a last commit (the process ends) still writes what it held.
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    assert_eq!(lines_on_file(&dir), 7);
    drop(ledger);
    assert_eq!(lines_on_file(&dir), 8);
    let (ledger, rec) = Ledger::open_existing(
        runs.path(),
        &RunId::new("r1").unwrap(),
        LedgerOptions::default(),
    )
    .unwrap();
    assert_eq!((rec.kept, rec.truncated_bytes), (8, 0));
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    let done = ledger.finish().unwrap();
    assert_eq!(done.final_seq, 9, "finish writes what is held");
    let ok = verify(&dir, &VerifyOptions::keyless()).unwrap();
    assert_eq!(ok.final_seq, 9);
}

#[test]
fn a_failure_loses_the_held_records_as_a_kill_would_and_nothing_acts_on_them() {
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().join("r1");
    let opts = failing_write(4, "killed");
    let ledger = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap();
    ledger.record(&run_scope("r1"), &note("a")).unwrap();
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    let err = ledger.record(&run_scope("r1"), &decision()).unwrap_err();
    assert!(
        err.0.contains("writing seq 4 (gate_decision): killed"),
        "{err}"
    );
    // The commit before the action fails: the action they would have let through never runs.
    assert!(ledger
        .commit()
        .unwrap_err()
        .0
        .contains("unusable after an earlier failure"));
    drop(ledger);
    assert_eq!(kinds(&dir), ["human_message"], "the held allows were lost");
}

/// `builder` writes hello.txt, its write judged by `gate`, then says it is done.
fn hello_writer(
    ws: &Path,
    gate: Option<(GateMode, audit_support::Rule)>,
) -> loopward_runner::Runner {
    let mut s = Script::default();
    s.write(&id("builder"), "hello.txt", "hello")
        .say(&id("builder"), "Done.");
    team(ws, &["builder"], s, SteppingClock::new(), gate)
}

/// Runs `runner` as run `r1`, `builder` first, on a person saying `task`, into a new ledger
/// under `runs` written through `opts`.
async fn builder_run(
    runner: &loopward_runner::Runner,
    runs: &Path,
    task: &str,
    opts: LedgerOptions,
) -> (
    loopward_runner::RunReport,
    Result<loopward_runner::audit::Finished, LedgerError>,
) {
    let task = Person::at_the_keyboard().says(task);
    run_to_ledger(runner, runs, "r1", task, "builder", opts).await
}

/// The error of a run that ended because its ledger failed.
#[track_caller]
fn audit_failure(status: &RunStatus) -> &str {
    match status {
        RunStatus::AuditFailed { error } => error,
        other => panic!("expected audit_failed, got {other:?}"),
    }
}

#[tokio::test]
async fn an_injected_write_failure_stops_the_run_before_the_action() {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let runner = hello_writer(ws.path(), None);
    let opts = faulty(|op: LedgerOp<'_>| match op {
        LedgerOp::Write {
            kind: "tool_requested",
            ..
        } => Err(std::io::Error::other("injected: no space left on device")),
        _ => Ok(()),
    });
    let (report, finished) = builder_run(&runner, runs.path(), "say hello", opts).await;
    let error = audit_failure(&report.status);
    assert!(error.contains("no space left on device"), "{error}");
    assert!(
        !ws.path().join("hello.txt").exists(),
        "the write ran although it could not be recorded"
    );
    assert!(matches!(finished, Err(LedgerError::Poisoned { .. })));
    // What was acknowledged before the failure is intact and reopens cleanly.
    let (ledger, rec) = Ledger::open_existing(
        runs.path(),
        &RunId::new("r1").unwrap(),
        LedgerOptions::default(),
    )
    .unwrap();
    assert_eq!(rec.truncated_bytes, 0);
    assert_eq!(
        kinds(&runs.path().join("r1")),
        [
            "run_started",
            "human_message",
            "turn_started",
            "model_call",
            "model_reply"
        ]
    );
    ledger.finish().unwrap();
    verify(&runs.path().join("r1"), &keyless()).unwrap();
}

/// A tool that notes in the shared log when its effect runs.
fn noting_tool(log: Arc<Mutex<Vec<String>>>) -> Arc<dyn loopward_runner::tool::Tool> {
    Arc::new(audit_support::NotingTool { log })
}

/// `builder` notes each of `paths` with [`noting_tool`] (allowed by the gate), then says it is
/// done.
fn noting_builder(
    ws: &Path,
    paths: &[&str],
    log: &Arc<Mutex<Vec<String>>>,
) -> loopward_runner::Runner {
    let allow: audit_support::Rule =
        Arc::new(|_, tool, _| (tool == "note").then_some(Decision::Allow));
    let mut script = Script::default();
    for path in paths {
        script.call(&id("builder"), "note", json!({ "path": path }));
    }
    script.say(&id("builder"), "Done.");
    audit_support::team_with_tool(
        ws,
        "builder",
        script,
        noting_tool(log.clone()),
        (GateMode::Enforce, allow),
    )
}

/// Ledger options whose every commit sync fails, as a disk returning EIO would.
fn failing_commit_sync() -> LedgerOptions {
    faulty(|op: LedgerOp<'_>| match op {
        LedgerOp::Sync { kind: "commit", .. } => Err(std::io::Error::other("injected: fsync EIO")),
        _ => Ok(()),
    })
}

#[tokio::test]
async fn no_action_runs_before_the_sync_covering_its_decisions_returned() {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let log = Arc::new(Mutex::new(vec![]));
    let runner = noting_builder(ws.path(), &["a.txt", "b.txt"], &log);
    let opts = LedgerOptions {
        fault: Some(logging_hook(log.clone())),
        ..LedgerOptions::default()
    };
    let (report, finished) = builder_run(&runner, runs.path(), "note twice", opts).await;
    assert_eq!(report.status, RunStatus::Completed);
    finished.unwrap();
    let log = log.lock().unwrap().clone();
    // Each effect is preceded by a sync covering the decision that let it through, and no
    // decision is synced on its own: one sync per authorised action, one at the end.
    let mut synced_up_to = 0;
    let mut decided = vec![];
    for line in &log {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["write", seq, "gate_decision"] => decided.push(seq.parse::<u64>().unwrap()),
            ["sync", seq, _] => synced_up_to = seq.parse().unwrap(),
            ["ran", _] => {
                let last = *decided.last().expect("a decision before the effect");
                assert!(
                    last <= synced_up_to,
                    "ran before seq {last} was synced: {log:?}"
                );
            }
            _ => {}
        }
    }
    let syncs: Vec<&String> = log.iter().filter(|l| l.starts_with("sync")).collect();
    assert_eq!(decided.len(), 2, "{log:?}");
    assert_eq!(log.iter().filter(|l| l.starts_with("ran")).count(), 2);
    assert_eq!(syncs.len(), 3, "two actions and the finish: {log:?}");
    assert!(syncs[..2].iter().all(|l| l.ends_with(" commit")), "{log:?}");
}

#[tokio::test]
async fn a_failed_sync_before_the_action_stops_it_and_the_run() {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let log = Arc::new(Mutex::new(vec![]));
    let runner = noting_builder(ws.path(), &["a.txt"], &log);
    let (report, finished) = builder_run(&runner, runs.path(), "note", failing_commit_sync()).await;
    let error = audit_failure(&report.status);
    assert!(
        error.contains("before the action they authorise") && error.contains("fsync EIO"),
        "{error}"
    );
    assert!(log.lock().unwrap().is_empty(), "the tool ran: {log:?}");
    assert!(matches!(finished, Err(LedgerError::Poisoned { .. })));
}

#[tokio::test]
async fn a_failed_fsync_of_the_gate_decision_stops_the_action() {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let allow: audit_support::Rule =
        Arc::new(|_, tool, _| (tool == "write_file").then_some(Decision::Allow));
    let runner = hello_writer(ws.path(), Some((GateMode::Enforce, allow)));
    let (report, _) = builder_run(&runner, runs.path(), "say hello", failing_commit_sync()).await;
    let error = audit_failure(&report.status);
    assert!(error.contains("fsync EIO"), "{error}");
    assert!(!ws.path().join("hello.txt").exists());
}
