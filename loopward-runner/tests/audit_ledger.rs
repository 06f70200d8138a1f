//! The ledger writer: one writer per run, sync policy, fail-closed writes, crash recovery.

mod audit_support;

use audit_support::{id, run_to_ledger, team, SteppingClock};
use loopward_core::{AuditEvent, AuditSink, Decision, GateMode, Person, RunId, RunStatus, Scope};
use loopward_runner::audit::{
    verify, Chain, Durability, KeyRing, Ledger, LedgerError, LedgerKey, LedgerOp, LedgerOptions,
    Record, VerifyOptions,
};
use loopward_runner::model::fake::Script;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

fn scope(run: &str) -> Scope {
    Scope {
        run: RunId::new(run).unwrap(),
        turn: None,
        agent: None,
    }
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

#[test]
fn each_record_is_stamped_with_the_clock_s_millisecond_at_its_append() {
    let runs = tempfile::tempdir().unwrap();
    let clock = Arc::new(loopward_runner::ManualClock::new(1_700_000_000_123));
    let opts = LedgerOptions {
        clock: clock.clone(),
        ..LedgerOptions::default()
    };
    let ledger = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap();
    for step in [0, 0, 1, 0, 999, 1_000, 0] {
        clock.advance_millis(step);
        ledger.record(&scope("r1"), &note("n")).unwrap();
    }
    let times: Vec<String> = std::fs::read_to_string(runs.path().join("r1/events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| Record::parse_line(l.as_bytes()).unwrap().0.time)
        .collect();
    assert_eq!(
        times,
        [
            "2023-11-14T22:13:20.123Z",
            "2023-11-14T22:13:20.123Z",
            "2023-11-14T22:13:20.124Z",
            "2023-11-14T22:13:20.124Z",
            "2023-11-14T22:13:21.123Z",
            "2023-11-14T22:13:22.123Z",
            "2023-11-14T22:13:22.123Z",
        ]
    );
}

#[test]
fn a_second_writer_for_the_same_run_is_refused() {
    let runs = tempfile::tempdir().unwrap();
    let run = RunId::new("r1").unwrap();
    let ledger = Ledger::create(runs.path(), &run, LedgerOptions::default()).unwrap();
    let again = Ledger::create(runs.path(), &run, LedgerOptions::default()).unwrap_err();
    assert!(matches!(again, LedgerError::AlreadyExists(_)), "{again}");
    assert!(again.to_string().contains("run ids are not reused"));
    let reopen = Ledger::open_existing(runs.path(), &run, LedgerOptions::default()).unwrap_err();
    assert!(matches!(reopen, LedgerError::Locked(_)), "{reopen}");
    ledger.record(&scope("r1"), &note("hi")).unwrap();
    ledger.finish().unwrap();
    // Finishing releases the lock; the run can be reopened (to resume it).
    let (_, rec) = Ledger::open_existing(runs.path(), &run, LedgerOptions::default()).unwrap();
    assert_eq!((rec.kept, rec.truncated_bytes), (1, 0));
}

#[test]
fn nothing_is_recorded_after_finish_or_for_another_run() {
    let runs = tempfile::tempdir().unwrap();
    let ledger = Ledger::create(
        runs.path(),
        &RunId::new("r1").unwrap(),
        LedgerOptions::default(),
    )
    .unwrap();
    let err = ledger.record(&scope("r2"), &note("x")).unwrap_err();
    assert!(err.0.contains("run r2"), "{err}");
    ledger.finish().unwrap();
    let err = ledger.record(&scope("r1"), &note("late")).unwrap_err();
    assert!(err.0.contains("finished"), "{err}");
}

fn logging_hook(log: Arc<Mutex<Vec<String>>>) -> Arc<dyn loopward_runner::audit::FaultHook> {
    Arc::new(move |op: LedgerOp<'_>| {
        let line = match op {
            LedgerOp::Write { seq, kind } => format!("write {seq} {kind}"),
            LedgerOp::Sync { seq, kind } => format!("sync {seq} {kind}"),
            _ => "other".into(),
        };
        log.lock().unwrap().push(line);
        Ok(())
    })
}

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

/// Ledger options whose write of record `seq` fails with `why`.
fn failing_write(seq: u64, why: &'static str) -> LedgerOptions {
    let hook = Arc::new(move |op: LedgerOp<'_>| match op {
        LedgerOp::Write { seq: s, .. } if s == seq => Err(std::io::Error::other(why)),
        _ => Ok(()),
    });
    LedgerOptions {
        fault: Some(hook),
        ..LedgerOptions::default()
    }
}

#[test]
fn a_failed_write_poisons_the_ledger() {
    let runs = tempfile::tempdir().unwrap();
    let opts = failing_write(2, "disk full");
    let ledger = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap();
    ledger.record(&scope("r1"), &note("a")).unwrap();
    let err = ledger.record(&scope("r1"), &note("b")).unwrap_err();
    assert!(
        err.0.contains("writing seq 2 (human_message): disk full"),
        "{err}"
    );
    let later = ledger.record(&scope("r1"), &note("c")).unwrap_err();
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
    ledger.record(&scope("r1"), &decision()).unwrap();
    assert_eq!(lines_on_file(&dir), 0, "an allow is held until the commit");
    ledger.record(&scope("r1"), &note("a")).unwrap();
    assert_eq!(
        lines_on_file(&dir),
        2,
        "a record written at once takes the held one along"
    );
    ledger.record(&scope("r1"), &decision()).unwrap();
    ledger.record(&scope("r1"), &decision()).unwrap();
    assert_eq!(lines_on_file(&dir), 2);
    ledger.commit().unwrap();
    assert_eq!(lines_on_file(&dir), 4, "the commit writes what is held");
    // A refusal is evidence of an attempt: written at once.
    let mut deny = decision();
    if let AuditEvent::GateDecision { decision, .. } = &mut deny {
        *decision = Decision::Deny(loopward_core::Refusal::new("territory", "no", "leave it"));
    }
    assert!(!deny.may_wait_for_commit());
    ledger.record(&scope("r1"), &deny).unwrap();
    assert_eq!(lines_on_file(&dir), 5);
    // A tool's start is on file when `record` returns: the shell tool releases its command right
    // after recording it, and a resumed run must find the start of a command that may have run.
    ledger.record(&scope("r1"), &decision()).unwrap();
    let started = AuditEvent::ToolStarted {
        call_id: "c1".into(),
        tool: "shell".into(),
    };
    ledger.record(&scope("r1"), &started).unwrap();
    assert_eq!(
        lines_on_file(&dir),
        7,
        "the start takes the held allow along"
    );
    // A ledger dropped without a last commit (the process ends) still writes what it held.
    ledger.record(&scope("r1"), &decision()).unwrap();
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
    ledger.record(&scope("r1"), &decision()).unwrap();
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
    ledger.record(&scope("r1"), &note("a")).unwrap();
    ledger.record(&scope("r1"), &decision()).unwrap();
    ledger.record(&scope("r1"), &decision()).unwrap();
    let err = ledger.record(&scope("r1"), &decision()).unwrap_err();
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

fn builder_writes_hello() -> Script {
    let mut s = Script::default();
    s.call(
        &id("builder"),
        "write_file",
        json!({"path": "hello.txt", "content": "hello"}),
    )
    .say(&id("builder"), "Done.");
    s
}

#[tokio::test]
async fn an_injected_write_failure_stops_the_run_before_the_action() {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let runner = team(
        ws.path(),
        &["builder"],
        builder_writes_hello(),
        SteppingClock::new(),
        None,
    );
    let hook = Arc::new(|op: LedgerOp<'_>| match op {
        LedgerOp::Write {
            kind: "tool_requested",
            ..
        } => Err(std::io::Error::other("injected: no space left on device")),
        _ => Ok(()),
    });
    let opts = LedgerOptions {
        fault: Some(hook),
        ..LedgerOptions::default()
    };
    let (report, finished) = run_to_ledger(
        &runner,
        runs.path(),
        "r1",
        Person::at_the_keyboard().says("say hello"),
        "builder",
        opts,
    )
    .await;
    match &report.status {
        RunStatus::AuditFailed { error } => {
            assert!(error.contains("no space left on device"), "{error}")
        }
        other => panic!("expected audit_failed, got {other:?}"),
    }
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

#[tokio::test]
async fn no_action_runs_before_the_sync_covering_its_decisions_returned() {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let log = Arc::new(Mutex::new(vec![]));
    let allow: audit_support::Rule =
        Arc::new(|_, tool, _| (tool == "note").then_some(Decision::Allow));
    let mut script = Script::default();
    script
        .call(&id("builder"), "note", json!({"path": "a.txt"}))
        .call(&id("builder"), "note", json!({"path": "b.txt"}))
        .say(&id("builder"), "Done.");
    let runner = audit_support::team_with_tool(
        ws.path(),
        "builder",
        script,
        noting_tool(log.clone()),
        (GateMode::Enforce, allow),
    );
    let opts = LedgerOptions {
        fault: Some(logging_hook(log.clone())),
        ..LedgerOptions::default()
    };
    let (report, finished) = run_to_ledger(
        &runner,
        runs.path(),
        "r1",
        Person::at_the_keyboard().says("note twice"),
        "builder",
        opts,
    )
    .await;
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
    let allow: audit_support::Rule =
        Arc::new(|_, tool, _| (tool == "note").then_some(Decision::Allow));
    let mut script = Script::default();
    script
        .call(&id("builder"), "note", json!({"path": "a.txt"}))
        .say(&id("builder"), "Done.");
    let runner = audit_support::team_with_tool(
        ws.path(),
        "builder",
        script,
        noting_tool(log.clone()),
        (GateMode::Enforce, allow),
    );
    let hook = Arc::new(|op: LedgerOp<'_>| match op {
        LedgerOp::Sync { kind: "commit", .. } => Err(std::io::Error::other("injected: fsync EIO")),
        _ => Ok(()),
    });
    let opts = LedgerOptions {
        fault: Some(hook),
        ..LedgerOptions::default()
    };
    let (report, finished) = run_to_ledger(
        &runner,
        runs.path(),
        "r1",
        Person::at_the_keyboard().says("note"),
        "builder",
        opts,
    )
    .await;
    match &report.status {
        RunStatus::AuditFailed { error } => assert!(
            error.contains("before the action they authorise") && error.contains("fsync EIO"),
            "{error}"
        ),
        other => panic!("expected audit_failed, got {other:?}"),
    }
    assert!(log.lock().unwrap().is_empty(), "the tool ran: {log:?}");
    assert!(matches!(finished, Err(LedgerError::Poisoned { .. })));
}

#[tokio::test]
async fn a_failed_fsync_of_the_gate_decision_stops_the_action() {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let allow: audit_support::Rule =
        Arc::new(|_, tool, _| (tool == "write_file").then_some(Decision::Allow));
    let runner = team(
        ws.path(),
        &["builder"],
        builder_writes_hello(),
        SteppingClock::new(),
        Some((GateMode::Enforce, allow)),
    );
    let hook = Arc::new(|op: LedgerOp<'_>| match op {
        LedgerOp::Sync { kind: "commit", .. } => Err(std::io::Error::other("injected: fsync EIO")),
        _ => Ok(()),
    });
    let opts = LedgerOptions {
        fault: Some(hook),
        ..LedgerOptions::default()
    };
    let (report, _) = run_to_ledger(
        &runner,
        runs.path(),
        "r1",
        Person::at_the_keyboard().says("say hello"),
        "builder",
        opts,
    )
    .await;
    assert!(
        matches!(&report.status, RunStatus::AuditFailed { error } if error.contains("fsync EIO")),
        "{:?}",
        report.status
    );
    assert!(!ws.path().join("hello.txt").exists());
}

#[test]
fn a_torn_last_line_is_cut_and_recorded_on_reopen() {
    let runs = tempfile::tempdir().unwrap();
    let run = RunId::new("r1").unwrap();
    let ledger = Ledger::create(runs.path(), &run, LedgerOptions::default()).unwrap();
    for t in ["a", "b", "c"] {
        ledger.record(&scope("r1"), &note(t)).unwrap();
    }
    drop(ledger); // a crash: no finish
    let path = runs.path().join("r1/events.jsonl");
    let torn = br#"{"seq":4,"time":"2026-"#;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(torn)
        .unwrap();
    let (ledger, rec) = Ledger::open_existing(runs.path(), &run, LedgerOptions::default()).unwrap();
    assert_eq!((rec.kept, rec.truncated_bytes), (3, torn.len() as u64));
    ledger.finish().unwrap();
    let ok = verify(&runs.path().join("r1"), &keyless()).unwrap();
    assert_eq!(ok.final_seq, 4);
    let text = std::fs::read_to_string(&path).unwrap();
    let last = Record::parse_line(text.lines().last().unwrap().as_bytes())
        .unwrap()
        .0;
    assert_eq!(
        last.event().unwrap(),
        AuditEvent::LedgerRecovered {
            truncated_bytes: torn.len() as u64
        }
    );
}

#[test]
fn damage_before_the_last_line_or_a_wrong_key_is_refused_not_cut() {
    let runs = tempfile::tempdir().unwrap();
    let run = RunId::new("r1").unwrap();
    let key = LedgerKey::from_bytes(vec![3u8; 32]).unwrap();
    let opts = LedgerOptions {
        key: Some(key),
        ..LedgerOptions::default()
    };
    let ledger = Ledger::create(runs.path(), &run, opts).unwrap();
    ledger.record(&scope("r1"), &note("only")).unwrap();
    drop(ledger);
    let path = runs.path().join("r1/events.jsonl");
    let before = std::fs::read(&path).unwrap();
    let wrong = LedgerOptions {
        key: LedgerKey::from_bytes(vec![4u8; 32]),
        ..LedgerOptions::default()
    };
    let err = Ledger::open_existing(runs.path(), &run, wrong).unwrap_err();
    assert!(matches!(err, LedgerError::Corrupt { seq: 1, .. }), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "a whole record was cut"
    );
}

// ---- killed at random points ----

const CHILD_ENV: &str = "LOOPWARD_LEDGER_CRASH_CHILD";

/// Runs only as the child of `the_ledger_survives_being_killed_at_random_points`: appends events
/// to a ledger forever, printing `ack N` once record N is acknowledged: when `record` returned
/// for an event written at once, when a later one or a commit returned for one that may wait
/// for the commit.
#[test]
#[ignore = "child process of the_ledger_survives_being_killed_at_random_points"]
fn crash_child_appends_until_killed() {
    let Ok(runs) = std::env::var(CHILD_ENV) else {
        return;
    };
    let run = std::env::var("LOOPWARD_CRASH_RUN").unwrap();
    let ledger = Ledger::create(
        Path::new(&runs),
        &RunId::new(run.clone()).unwrap(),
        LedgerOptions::keyed(crash_key()),
    )
    .unwrap();
    let mut out = std::io::stdout().lock();
    for i in 1u64.. {
        // Big, varied lines make a kill mid-write (a torn line) likely.
        let size = usize::try_from((i * 7919) % 300_000).unwrap();
        let event = match i % 3 {
            0 => decision(),
            1 => AuditEvent::ToolRequested {
                call_id: format!("c{i}"),
                tool: "write_file".into(),
                arguments: json!({"path": "x.txt", "content": "x".repeat(size)}),
            },
            _ => note(&"y".repeat(size / 3)),
        };
        ledger.record(&scope(&run), &event).unwrap();
        if event.may_wait_for_commit() {
            if i % 5 != 0 {
                continue;
            }
            ledger.commit().unwrap();
        }
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn the_ledger_survives_being_killed_at_random_points() {
    let runs = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut torn = 0;
    const KILLS: u32 = 30;
    for i in 0..KILLS {
        let run = format!("k{i}");
        let mut child = std::process::Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "crash_child_appends_until_killed",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, runs.path())
            .env("LOOPWARD_CRASH_RUN", &run)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Wait for the first acknowledged record, then let it run a random while and kill it.
        let mut acked = 0u64;
        for line in lines.by_ref() {
            if let Some(n) = line.unwrap().strip_prefix("ack ") {
                acked = n.parse().unwrap();
                break;
            }
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(std::time::Duration::from_micros(rng % 40_000));
        child.kill().unwrap(); // SIGKILL, by this child's own PID
        child.wait().unwrap();
        for line in lines {
            if let Some(n) = line.unwrap().strip_prefix("ack ") {
                acked = n.parse().unwrap();
            }
        }
        // A kill rarely lands inside the write syscall itself, so every other time also leave
        // what a torn write looks like: a random prefix of the next record's line.
        let mut cut = 0;
        if i % 2 == 1 {
            cut = tear_next_record(&runs.path().join(&run), &run, rng);
        }
        let (ledger, rec) = Ledger::open_existing(
            runs.path(),
            &RunId::new(run.clone()).unwrap(),
            LedgerOptions::keyed(crash_key()),
        )
        .unwrap();
        if cut > 0 {
            assert_eq!(rec.truncated_bytes, cut as u64, "kill {i}");
        }
        assert!(
            rec.kept >= acked,
            "kill {i}: {acked} records were acknowledged but only {} kept",
            rec.kept
        );
        if rec.truncated_bytes > 0 {
            torn += 1;
        }
        let fin = ledger.finish().unwrap();
        let ok = verify(
            &runs.path().join(&run),
            &VerifyOptions::keyed(KeyRing::single(crash_key())),
        )
        .unwrap();
        assert_eq!(ok.final_seq, fin.final_seq);
        let recovered = kinds(&runs.path().join(&run))
            .iter()
            .any(|k| k == "ledger_recovered");
        assert_eq!(recovered, rec.truncated_bytes > 0, "kill {i}");
    }
    // Not asserted (it depends on timing), but shown: how many kills tore a line.
    eprintln!("{torn} of {KILLS} reopenings cut a torn last line");
    assert!(torn >= KILLS / 2);
}

/// Appends a prefix (1 byte up to all but the newline) of a correctly chained next record.
fn tear_next_record(run_dir: &Path, run: &str, rng: u64) -> usize {
    let path = run_dir.join("events.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let (seq, prev) = match text.lines().last() {
        Some(l) if text.ends_with('\n') => {
            let r = Record::parse_line(l.as_bytes()).unwrap().0;
            (r.seq + 1, r.hash)
        }
        // The kill itself tore the line; leave it as it is.
        _ => return 0,
    };
    let (_, line) = Record::seal(
        &Chain::Hmac(crash_key()),
        seq,
        "2026-01-01T00:00:00.000Z",
        &scope(run),
        &note("torn"),
        &prev,
    )
    .unwrap();
    let cut = 1 + usize::try_from(rng % (line.len() as u64 - 1)).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(&line[..cut]).unwrap();
    cut
}

#[test]
fn finish_anchors_only_what_it_wrote_and_refuses_a_file_that_lost_records() {
    let runs = tempfile::tempdir().unwrap();
    let run = RunId::new("r1").unwrap();
    let ledger = Ledger::create(runs.path(), &run, LedgerOptions::keyed(crash_key())).unwrap();
    for t in ["a", "b", "c"] {
        ledger.record(&scope("r1"), &note(t)).unwrap();
    }
    // Someone drops the last record behind the writer's back (the lock is advisory).
    let path = runs.path().join("r1/events.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text.lines().take(2).collect();
    std::fs::write(&path, format!("{}\n", kept.join("\n"))).unwrap();
    let err = ledger.finish().unwrap_err();
    assert!(
        matches!(
            err,
            LedgerError::Disagrees {
                wrote_seq: 3,
                file_seq: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("not anchored"), "{err}");
    assert!(!runs.path().join("index.jsonl").exists());
}
