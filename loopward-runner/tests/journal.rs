//! The ledger as the run's journal: a run stopped at any record resumes from its last committed
//! step, repeating no recorded model reply and no effect; the rule for an interrupted effect; a
//! finished run is not resumed; a durable turn gate on an agent with two turns completes.
#![allow(clippy::unwrap_used)]

use loopward_core::{AgentId, AuditEvent, Person, RunId, RunStatus, Scope};
use loopward_runner::audit::{verify, Ledger, LedgerOp, LedgerOptions, Record};
use loopward_runner::journal::{Journal, JournalError, ResumePolicy};
use loopward_runner::layers::stack::{LayersConfig, Stack};
use loopward_runner::layers::stopgate::{
    approve, pending_dir, StopGateConfig, StopGates, StopMode,
};
use loopward_runner::model::fake::{FakeModel, Script};
use loopward_runner::model::BoxModelService;
use loopward_runner::tool::{BoxToolService, ToolExecutor};
use loopward_runner::{tools, BoxTurnService, LlmAgent, ResumeError, RunReport, Runner, Workspace};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use tower::Layer;

fn id(s: &str) -> AgentId {
    AgentId::new(s).unwrap()
}

fn shell(line: &str) -> serde_json::Value {
    json!({ "command": format!("echo {line} >> out/effects.log") })
}

/// planner: shell p1, write notes, hand off · builder: shell b1 and b2 in one reply, hand back
/// · planner: done.
fn script() -> Script {
    let (planner, builder) = (id("planner"), id("builder"));
    let mut s = Script::default();
    s.call(&planner, "shell", shell("p1"))
        .call(
            &planner,
            "write_file",
            json!({"path": "out/notes.md", "content": "# notes"}),
        )
        .call(
            &planner,
            "handoff",
            json!({"to": "builder", "message": "build it"}),
        );
    s.push(
        &builder,
        loopward_runner::model::fake::ScriptedReply {
            text: "two effects".into(),
            tool_calls: vec![
                loopward_runner::model::fake::ScriptedCall {
                    id: None,
                    name: "shell".into(),
                    arguments: shell("b1"),
                },
                loopward_runner::model::fake::ScriptedCall {
                    id: None,
                    name: "shell".into(),
                    arguments: shell("b2"),
                },
            ],
            ..Default::default()
        },
    );
    s.call(
        &builder,
        "handoff",
        json!({"to": "planner", "message": "built"}),
    );
    s.say(&planner, "All done.");
    s
}

/// A fresh runner (a new process, as far as the run can tell) whose model logs each call.
fn runner(ws: &Path, log: &Path, turn_gate: Option<&str>) -> Runner {
    let model = FakeModel::new(script()).with_call_log(log);
    let team = [id("planner"), id("builder")];
    let mut b = Runner::builder(Workspace::new(ws).unwrap());
    for name in &team {
        let agent = LlmAgent::builder(name.clone(), BoxModelService::new(model.clone()))
            .tools(tools::builtin(&team))
            .build();
        let service = match turn_gate {
            Some(gated) if gated == name.as_str() => {
                let gates =
                    StopGates::new(&[StopGateConfig::turn(gated, StopMode::Durable)]).unwrap();
                BoxTurnService::new(gates.turn_layer().layer(agent))
            }
            _ => BoxTurnService::new(agent),
        };
        b = b.agent(name.clone(), service).unwrap();
    }
    b.build().unwrap()
}

fn records(run_dir: &Path) -> Vec<(Scope, AuditEvent)> {
    std::fs::read(run_dir.join("events.jsonl"))
        .unwrap()
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (r, _) = Record::parse_line(l).unwrap();
            (r.scope(), r.event().unwrap())
        })
        .collect()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Starts run `r1`, or resumes it from its ledger when it has one with records.
async fn start_or_resume(
    ws: &Path,
    runs: &Path,
    log: &Path,
    opts: LedgerOptions,
    gate: Option<&str>,
) -> RunReport {
    let run = RunId::new("r1").unwrap();
    // Shell commands may write into folders of the workspace, not next to its control files.
    std::fs::create_dir_all(ws.join("out")).unwrap();
    let runner = runner(ws, log, gate);
    if !runs.join("r1/events.jsonl").exists() {
        let ledger = Ledger::create(runs, &run, opts).unwrap();
        let report = runner
            .run(ledger.run_spec(Person::at_the_keyboard().says("ship it"), id("planner")))
            .await;
        let _ = ledger.finish();
        return report;
    }
    let (ledger, _) = Ledger::open_existing(runs, &run, opts).unwrap();
    let report = match Journal::from_records(&records(&runs.join("r1"))) {
        // Stopped before its first record: it starts again under its id.
        Err(JournalError::NotStarted { .. }) => {
            runner
                .run(ledger.run_spec(Person::at_the_keyboard().says("ship it"), id("planner")))
                .await
        }
        Err(e) => panic!("{e}"),
        Ok(journal) => runner
            .resume(
                ledger.run_spec(Person::at_the_keyboard().says(""), id("planner")),
                &journal,
            )
            .await
            .unwrap(),
    };
    let _ = ledger.finish();
    report
}

#[tokio::test]
async fn a_run_stopped_at_any_record_resumes_repeating_no_reply_and_no_effect() {
    // The uninterrupted run: its records and its model calls.
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    let whole = start_or_resume(ws.path(), runs.path(), &log, LedgerOptions::default(), None).await;
    assert_eq!(whole.status, RunStatus::Completed);
    let kinds: Vec<&'static str> = records(&runs.path().join("r1"))
        .iter()
        .map(|(_, e)| e.kind())
        .collect();
    let replies = lines(&log).len();
    assert_eq!(replies, 6);

    for (k, kind) in kinds.iter().enumerate() {
        let seq = k as u64 + 1;
        let (ws, runs, tmp) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let log = tmp.path().join("calls.log");
        // The process "dies" at record `seq`: that write fails and nothing after it happens.
        let opts = LedgerOptions {
            fault: Some(Arc::new(move |op: LedgerOp<'_>| match op {
                LedgerOp::Write { seq: s, .. } if s == seq => Err(std::io::Error::other("killed")),
                _ => Ok(()),
            })),
            ..LedgerOptions::default()
        };
        let first = start_or_resume(ws.path(), runs.path(), &log, opts, None).await;
        assert!(
            matches!(first.status, RunStatus::AuditFailed { .. }),
            "stopped at #{seq} {kind}: {:?}",
            first.status
        );
        let resumed =
            start_or_resume(ws.path(), runs.path(), &log, LedgerOptions::default(), None).await;
        assert_eq!(
            resumed.status,
            RunStatus::Completed,
            "stopped at #{seq} {kind}"
        );
        assert_eq!(resumed.final_text, "All done.");

        // Each effect once.
        let mut effects = lines(&ws.path().join("out/effects.log"));
        effects.sort();
        assert_eq!(effects, ["b1", "b2", "p1"], "stopped at #{seq} {kind}");
        assert_eq!(
            std::fs::read_to_string(ws.path().join("out/notes.md")).unwrap(),
            "# notes"
        );
        // Each reply asked once; only a reply whose record was lost is asked again.
        let repeated = usize::from(matches!(*kind, "model_call" | "model_reply"));
        assert_eq!(
            lines(&log).len(),
            replies + repeated,
            "stopped at #{seq} {kind}: {:?}",
            lines(&log)
        );
        let recs = records(&runs.path().join("r1"));
        let replies_recorded = recs
            .iter()
            .filter(|(_, e)| matches!(e, AuditEvent::ModelReply { .. }))
            .count();
        assert_eq!(replies_recorded, replies, "stopped at #{seq} {kind}");
        verify(
            &runs.path().join("r1"),
            &loopward_runner::audit::VerifyOptions::keyless(),
        )
        .unwrap();
        // An effect stopped between its start and its end is interrupted, told, not rerun.
        if *kind == "tool_finished" {
            let interrupted = recs.iter().any(|(_, e)| {
                matches!(e, AuditEvent::LayerDecision { layer, decision, .. }
                    if *layer == loopward_core::LayerId::Resume && (decision.as_str() == "interrupted" || decision.as_str() == "retried"))
            });
            let resumed_mid_effect = recs.iter().any(|(_, e)| {
                matches!(e, AuditEvent::RunResumed { interrupted, .. } if !interrupted.is_empty())
            });
            assert_eq!(interrupted, resumed_mid_effect, "stopped at #{seq}");
        }
    }
}

#[tokio::test]
async fn an_interrupted_shell_call_is_reported_to_the_agent_and_not_run_again() {
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    // Stopped right after the first shell command ran, before its end was recorded.
    let opts = LedgerOptions {
        fault: Some(Arc::new(|op: LedgerOp<'_>| match op {
            LedgerOp::Write {
                kind: "tool_finished",
                ..
            } => Err(std::io::Error::other("killed")),
            _ => Ok(()),
        })),
        ..LedgerOptions::default()
    };
    start_or_resume(ws.path(), runs.path(), &log, opts, None).await;
    assert_eq!(lines(&ws.path().join("out/effects.log")), ["p1"]);
    let journal = Journal::from_records(&records(&runs.path().join("r1"))).unwrap();
    assert_eq!(journal.interrupted(), ["call-planner-1-1"]);
    let done = start_or_resume(ws.path(), runs.path(), &log, LedgerOptions::default(), None).await;
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(
        lines(&ws.path().join("out/effects.log")),
        ["p1", "b1", "b2"]
    );
    let told = records(&runs.path().join("r1"))
        .into_iter()
        .find_map(|(_, e)| match e {
            AuditEvent::ToolFinished {
                call_id,
                is_error: true,
                output: Some(o),
                ..
            } if call_id == "call-planner-1-1" => Some(o),
            _ => None,
        });
    assert!(
        told.unwrap()
            .starts_with("interrupted: this shell call started"),
        "the agent reads that the call was interrupted"
    );
}

#[tokio::test]
async fn the_policy_decides_which_interrupted_tools_run_again() {
    let policy = ResumePolicy::default();
    assert!(policy.retries("write_file") && policy.retries("read_file"));
    assert!(!policy.retries("shell") && !policy.retries("edit_file"));
    let custom = ResumePolicy::retrying(["shell"]);
    assert!(custom.retries("shell") && !custom.retries("write_file"));
}

#[tokio::test]
async fn a_finished_run_is_not_resumed_and_says_how_it_finished() {
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    start_or_resume(ws.path(), runs.path(), &log, LedgerOptions::default(), None).await;
    let before = records(&runs.path().join("r1")).len();
    let journal = Journal::from_records(&records(&runs.path().join("r1"))).unwrap();
    assert_eq!(journal.finished(), Some(&RunStatus::Completed));
    let (ledger, _) = Ledger::open_existing(
        runs.path(),
        &RunId::new("r1").unwrap(),
        LedgerOptions::default(),
    )
    .unwrap();
    let err = runner(ws.path(), &log, None)
        .resume(
            ledger.run_spec(Person::at_the_keyboard().says(""), id("planner")),
            &journal,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ResumeError::Finished { .. }));
    assert!(
        err.to_string()
            .starts_with("run r1 finished (completed); a finished run is not resumed"),
        "{err}"
    );
    drop(ledger);
    assert_eq!(
        records(&runs.path().join("r1")).len(),
        before,
        "nothing appended"
    );
    assert_eq!(
        lines(&ws.path().join("out/effects.log")),
        ["p1", "b1", "b2"]
    );
}

#[tokio::test]
async fn a_run_stopped_before_its_first_record_starts_again_under_its_id() {
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    let opts = LedgerOptions {
        fault: Some(Arc::new(|op: LedgerOp<'_>| match op {
            LedgerOp::Write { seq: 1, .. } => Err(std::io::Error::other("killed")),
            _ => Ok(()),
        })),
        ..LedgerOptions::default()
    };
    start_or_resume(ws.path(), runs.path(), &log, opts, None).await;
    assert!(records(&runs.path().join("r1")).is_empty());
    assert!(matches!(
        Journal::from_records(&[]),
        Err(JournalError::NotStarted { .. })
    ));
    let done = start_or_resume(ws.path(), runs.path(), &log, LedgerOptions::default(), None).await;
    assert_eq!(done.status, RunStatus::Completed);
    verify(
        &runs.path().join("r1"),
        &loopward_runner::audit::VerifyOptions::keyless(),
    )
    .unwrap();
}

#[tokio::test]
async fn a_durable_turn_gate_on_an_agent_with_two_turns_completes_on_resume() {
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    let pdir = pending_dir(ws.path());
    // planner turn 1 · builder turn 2 (gated) · planner turn 3: builder has one turn here, so
    // gate the planner, which has two.
    let mut pauses = 0;
    let mut report = start_or_resume(
        ws.path(),
        runs.path(),
        &log,
        LedgerOptions::default(),
        Some("planner"),
    )
    .await;
    while let RunStatus::AwaitingApproval { pending } = &report.status {
        pauses += 1;
        assert!(pauses <= 2, "each turn of the planner is approved once");
        approve(&pdir, pending).unwrap();
        report = start_or_resume(
            ws.path(),
            runs.path(),
            &log,
            LedgerOptions::default(),
            Some("planner"),
        )
        .await;
    }
    assert_eq!(report.status, RunStatus::Completed);
    assert_eq!(pauses, 2);
    assert_eq!(
        lines(&ws.path().join("out/effects.log")),
        ["p1", "b1", "b2"]
    );
    assert_eq!(lines(&log).len(), 6, "no reply asked twice");
    verify(
        &runs.path().join("r1"),
        &loopward_runner::audit::VerifyOptions::keyless(),
    )
    .unwrap();
}

/// A team (`a`, `b`) behind the recommended layer stack made from `layers` (TOML), scripted
/// by `script`, with `b` handing work back and forth as scripted.
fn bounded_runner(ws: &Path, log: &Path, layers: &str, script: Script) -> Runner {
    let config: LayersConfig = toml::from_str(layers).unwrap();
    let stack = Stack::new(&config).unwrap();
    let model = FakeModel::new(script).with_call_log(log);
    let team = [id("a"), id("b")];
    let mut b = Runner::builder(Workspace::new(ws).unwrap());
    for name in &team {
        let agent = LlmAgent::builder(
            name.clone(),
            stack.model(BoxModelService::new(model.clone())),
        )
        .tools(match stack.class_jump() {
            Some(cj) => tools::builtin(&team).with(cj.tool()),
            None => tools::builtin(&team),
        })
        .tool_stack(stack.tools(BoxToolService::new(ToolExecutor)))
        .max_steps(stack.steps_per_turn())
        .build();
        b = b
            .agent(name.clone(), stack.turn(BoxTurnService::new(agent)))
            .unwrap();
    }
    b.build().unwrap()
}

/// Runs `r1` with `runner` (agent `a` first), or resumes it when its ledger is there, the ledger
/// written through `opts`.
async fn run_or_resume_r1(runner: &Runner, runs: &Path, opts: LedgerOptions) -> RunReport {
    let run = RunId::new("r1").unwrap();
    if runs.join("r1/events.jsonl").exists() {
        let (ledger, _) = Ledger::open_existing(runs, &run, opts).unwrap();
        let journal = Journal::from_records(&records(&runs.join("r1"))).unwrap();
        let report = runner
            .resume(
                ledger.run_spec(Person::at_the_keyboard().says(""), id("a")),
                &journal,
            )
            .await
            .unwrap();
        let _ = ledger.finish();
        report
    } else {
        let ledger = Ledger::create(runs, &run, opts).unwrap();
        let report = runner
            .run(ledger.run_spec(Person::at_the_keyboard().says("go"), id("a")))
            .await;
        let _ = ledger.finish();
        report
    }
}

/// Runs (or resumes) run `r1` of `bounded_runner`, the ledger written through `opts`.
async fn bounded(
    ws: &Path,
    runs: &Path,
    log: &Path,
    opts: LedgerOptions,
    layers: &str,
    script: Script,
) -> RunReport {
    std::fs::create_dir_all(ws.join("out")).unwrap();
    let runner = bounded_runner(ws, log, layers, script);
    let report = run_or_resume_r1(&runner, runs, opts).await;
    if !matches!(report.status, RunStatus::AuditFailed { .. }) {
        verify(
            &runs.join("r1"),
            &loopward_runner::audit::VerifyOptions::keyless(),
        )
        .unwrap();
    }
    report
}

/// Ledger options whose `n`th write of a `kind` record fails: the process "dies" there.
fn killed_at(kind: &'static str, n: usize) -> LedgerOptions {
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    LedgerOptions {
        fault: Some(Arc::new(move |op: LedgerOp<'_>| match op {
            LedgerOp::Write { kind: k, .. } if k == kind => {
                let count = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                if count == n {
                    Err(std::io::Error::other("killed"))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        })),
        ..LedgerOptions::default()
    }
}

fn decided(run_dir: &Path, layer: &str, decision: &str) -> usize {
    records(run_dir)
        .iter()
        .filter(|(_, e)| {
            matches!(e, AuditEvent::LayerDecision { layer: l, decision: d, .. }
                if l.as_str() == layer && d.as_str() == decision)
        })
        .count()
}

/// `a` runs the same shell command three times, one reply each, then says it is done.
fn same_call_three_times() -> Script {
    let mut s = Script::default();
    for _ in 0..3 {
        s.call(&id("a"), "shell", shell("x"));
    }
    s.say(&id("a"), "done");
    s
}

#[tokio::test]
async fn a_resumed_run_is_held_to_the_repeat_cap_it_had_counted() {
    const LAYERS: &str = "[repeat]\nmax_identical = 2\n";
    // Killed after the second identical call finished (at the third model call's record).
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    let (w, r) = (ws.path(), runs.path());
    let first = bounded(
        w,
        r,
        &log,
        killed_at("model_call", 3),
        LAYERS,
        same_call_three_times(),
    )
    .await;
    assert!(
        matches!(first.status, RunStatus::AuditFailed { .. }),
        "{:?}",
        first.status
    );
    assert_eq!(lines(&w.join("out/effects.log")), ["x", "x"]);
    assert_eq!(decided(&r.join("r1"), "repeat", "refused"), 0);
    let resumed = bounded(
        w,
        r,
        &log,
        LedgerOptions::default(),
        LAYERS,
        same_call_three_times(),
    )
    .await;
    assert_eq!(resumed.status, RunStatus::Completed);
    // The third identical call is the cap's third: refused, as in a run never stopped.
    assert_eq!(
        lines(&w.join("out/effects.log")),
        ["x", "x"],
        "the cap held across the resume"
    );
    assert_eq!(decided(&r.join("r1"), "repeat", "refused"), 1);
}

/// `a` and `b` hand the work to each other four times, then `a` says it is done.
fn ping_pong() -> Script {
    let mut s = Script::default();
    for (from, to) in [("a", "b"), ("b", "a"), ("a", "b"), ("b", "a")] {
        s.call(&id(from), "handoff", json!({"to": to, "message": "yours"}));
    }
    s.say(&id("a"), "done");
    s
}

#[tokio::test]
async fn a_resumed_run_is_held_to_the_turn_cap_it_had_counted() {
    const LAYERS: &str = "[limits]\nturns_per_run = 3\n";
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    let (w, r) = (ws.path(), runs.path());
    // Never stopped: the fourth turn is refused.
    let whole = bounded(w, r, &log, LedgerOptions::default(), LAYERS, ping_pong()).await;
    assert!(
        matches!(whole.status, RunStatus::CapReached { .. }),
        "{:?}",
        whole.status
    );
    assert_eq!(whole.turns, 4);
    // Killed after two turns ended (at the third turn's start), then resumed.
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    let (w, r) = (ws.path(), runs.path());
    let first = bounded(
        w,
        r,
        &log,
        killed_at("turn_started", 3),
        LAYERS,
        ping_pong(),
    )
    .await;
    assert!(
        matches!(first.status, RunStatus::AuditFailed { .. }),
        "{:?}",
        first.status
    );
    let resumed = bounded(w, r, &log, LedgerOptions::default(), LAYERS, ping_pong()).await;
    assert_eq!(
        resumed.status, whole.status,
        "the cap held across the resume"
    );
    assert_eq!(resumed.turns, 4);
}

#[tokio::test]
async fn a_resumed_run_is_held_to_the_budget_it_had_spent() {
    // What the first two model calls of the run cost, in tokens: the budget.
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    bounded(
        ws.path(),
        runs.path(),
        &log,
        LedgerOptions::default(),
        "",
        same_call_three_times(),
    )
    .await;
    let spent: u64 = records(&runs.path().join("r1"))
        .iter()
        .filter_map(|(_, e)| match e {
            AuditEvent::ModelCall { usage, .. } => Some(usage.total()),
            _ => None,
        })
        .take(2)
        .sum();
    let layers = format!("[budget]\nmax_tokens = {spent}\n");
    // Never stopped: the third call is refused.
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    let whole = bounded(
        ws.path(),
        runs.path(),
        &log,
        LedgerOptions::default(),
        &layers,
        same_call_three_times(),
    )
    .await;
    assert!(
        matches!(whole.status, RunStatus::BudgetExceeded { .. }),
        "{:?}",
        whole.status
    );
    assert_eq!(lines(&log).len(), 2);
    // Killed after the second call's reply was recorded, then resumed: the same.
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    let (w, r) = (ws.path(), runs.path());
    let first = bounded(
        w,
        r,
        &log,
        killed_at("tool_requested", 2),
        &layers,
        same_call_three_times(),
    )
    .await;
    assert!(
        matches!(first.status, RunStatus::AuditFailed { .. }),
        "{:?}",
        first.status
    );
    let resumed = bounded(
        w,
        r,
        &log,
        LedgerOptions::default(),
        &layers,
        same_call_three_times(),
    )
    .await;
    assert_eq!(
        resumed.status, whole.status,
        "the budget held across the resume"
    );
    assert_eq!(lines(&log).len(), 2, "no third model call was paid for");
}

#[tokio::test]
async fn a_run_killed_after_the_turn_that_ended_it_resumes_to_the_same_end() {
    // A stop-gate that denies every shell call ends the run after the turn (`stopped`).
    const LAYERS: &str = "[[stopgate]]\npoint = \"tool\"\ntool = \"shell\"\nmode = \"deny\"\n";
    let script = || {
        let mut s = Script::default();
        s.call(&id("a"), "shell", shell("x"));
        s.say(&id("a"), "I was not allowed to.");
        s
    };
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    let (w, r) = (ws.path(), runs.path());
    // Killed between the turn's end and the run's end.
    let first = bounded(w, r, &log, killed_at("run_ended", 1), LAYERS, script()).await;
    assert!(
        matches!(first.status, RunStatus::AuditFailed { .. }),
        "{:?}",
        first.status
    );
    let resumed = bounded(w, r, &log, LedgerOptions::default(), LAYERS, script()).await;
    assert!(
        matches!(&resumed.status, RunStatus::Stopped { reason } if reason.contains("stop-gate")),
        "a stopped run resumed as {:?}",
        resumed.status
    );
    assert_eq!(resumed.final_text, "I was not allowed to.");
    assert!(lines(&w.join("out/effects.log")).is_empty());
    // Now it is finished: resuming again is refused, saying how.
    let journal = Journal::from_records(&records(&r.join("r1"))).unwrap();
    assert!(matches!(
        journal.finished(),
        Some(RunStatus::Stopped { .. })
    ));
}

#[tokio::test]
async fn a_resumed_run_is_held_to_the_strategies_it_had_spent() {
    const LAYERS: &str =
        "[class_jump]\nstrategies = [\"one\", \"two\"]\nfailures_per_strategy = 1\n";
    let script = || {
        let mut s = Script::default();
        for strategy in ["one", "two"] {
            s.call(
                &id("a"),
                "report_attempt",
                json!({"subtask": "s", "strategy": strategy, "outcome": "failed"}),
            );
        }
        s.say(&id("a"), "I ran out of strategies.");
        s
    };
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    let whole = bounded(
        ws.path(),
        runs.path(),
        &log,
        LedgerOptions::default(),
        LAYERS,
        script(),
    )
    .await;
    assert_eq!(whole.status, RunStatus::Exhausted);
    // Killed after strategy `one` failed (the tracker said: jump to `two`), then resumed.
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    let (w, r) = (ws.path(), runs.path());
    let first = bounded(w, r, &log, killed_at("model_call", 2), LAYERS, script()).await;
    assert!(
        matches!(first.status, RunStatus::AuditFailed { .. }),
        "{:?}",
        first.status
    );
    let resumed = bounded(w, r, &log, LedgerOptions::default(), LAYERS, script()).await;
    assert_eq!(
        resumed.status,
        RunStatus::Exhausted,
        "the tracker went on from `two`"
    );
    assert_eq!(decided(&r.join("r1"), "class_jump", "refused"), 0);
}

/// `a` writes `src/a.rs`, `src/b.rs` and `src/c.rs` (three units of work, no plan), one reply
/// each, then says it is done.
fn three_units() -> Script {
    let mut s = Script::default();
    for f in ["src/a.rs", "src/b.rs", "src/c.rs"] {
        s.call(
            &id("a"),
            "write_file",
            json!({"path": f, "content": "fn x() {}\n"}),
        );
    }
    s.say(&id("a"), "done");
    s
}

/// Runs (or resumes) run `r1` of agent `a` behind the default gates (the sprawl gate refuses a
/// third unit of work with no plan), the ledger written through `opts`.
async fn gated(ws: &Path, runs: &Path, log: &Path, opts: LedgerOptions) -> RunReport {
    use loopward_runner::gates::{Policy, PolicyConfig, PolicyLayer};
    let workspace = Workspace::new(ws).unwrap();
    let policy = Policy::from_config(&PolicyConfig::default(), workspace.clone()).unwrap();
    let model = FakeModel::new(three_units()).with_call_log(log);
    let agent = LlmAgent::builder(id("a"), BoxModelService::new(model))
        .tools(tools::builtin(&[id("a")]))
        .tool_stack(PolicyLayer::new(policy).wrap(BoxToolService::new(ToolExecutor)))
        .build();
    let runner = Runner::builder(workspace)
        .agent(id("a"), BoxTurnService::new(agent))
        .unwrap()
        .build()
        .unwrap();
    let run = RunId::new("r1").unwrap();
    let report = if runs.join("r1/events.jsonl").exists() {
        let (ledger, _) = Ledger::open_existing(runs, &run, opts).unwrap();
        let journal = Journal::from_records(&records(&runs.join("r1"))).unwrap();
        let report = runner
            .resume(
                ledger.run_spec(Person::at_the_keyboard().says(""), id("a")),
                &journal,
            )
            .await
            .unwrap();
        let _ = ledger.finish();
        report
    } else {
        let ledger = Ledger::create(runs, &run, opts).unwrap();
        let report = runner
            .run(ledger.run_spec(Person::at_the_keyboard().says("go"), id("a")))
            .await;
        let _ = ledger.finish();
        report
    };
    report
}

fn sprawl_refusals(run_dir: &Path) -> usize {
    records(run_dir)
        .iter()
        .filter(
            |(_, e)| matches!(e, AuditEvent::GateDecision { gate, .. } if &*gate.name == "sprawl"),
        )
        .count()
}

#[tokio::test]
async fn a_resumed_run_is_held_to_the_units_of_work_it_had_started() {
    let (ws, runs, tmp) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let log = tmp.path().join("calls.log");
    let (w, r) = (ws.path(), runs.path());
    // Killed after the second unit of work was written (at the third model call's record).
    let first = gated(w, r, &log, killed_at("model_call", 3)).await;
    assert!(
        matches!(first.status, RunStatus::AuditFailed { .. }),
        "{:?}",
        first.status
    );
    assert!(w.join("src/b.rs").exists() && !w.join("src/c.rs").exists());
    assert_eq!(sprawl_refusals(&r.join("r1")), 0);
    let resumed = gated(w, r, &log, LedgerOptions::default()).await;
    assert_eq!(resumed.status, RunStatus::Completed);
    // The third unit is refused, as in a run never stopped: the gate counted the first two.
    assert_eq!(
        sprawl_refusals(&r.join("r1")),
        1,
        "the sprawl gate counted across the resume"
    );
    assert!(!w.join("src/c.rs").exists());
    verify(
        &r.join("r1"),
        &loopward_runner::audit::VerifyOptions::keyless(),
    )
    .unwrap();
}

/// A custom turn layer (`from_fn`) that lets each agent take `limit` turns, recording each
/// decision under its own name, and rebuilding its counts on resume from its settled decisions
/// when `rebuild` (as a layer of the embedding application should).
fn turns_per_agent(
    limit: u32,
    rebuild: bool,
) -> loopward_runner::layers::from_fn::FromFnLayer<
    impl Fn(
            loopward_runner::TurnRequest,
            loopward_runner::layers::from_fn::NextTurn,
        ) -> futures::future::BoxFuture<
            'static,
            Result<loopward_runner::TurnOutcome, loopward_runner::TurnError>,
        > + Clone,
> {
    use loopward_core::{LayerId, LayerVerdict};
    struct Taken(std::sync::Mutex<std::collections::HashMap<AgentId, u32>>);
    type Fut = futures::future::BoxFuture<
        'static,
        Result<loopward_runner::TurnOutcome, loopward_runner::TurnError>,
    >;
    loopward_runner::layers::from_fn::from_fn(
        move |req: loopward_runner::TurnRequest,
              next: loopward_runner::layers::from_fn::NextTurn|
              -> Fut {
            let run = req.turn.run();
            let taken = run.extensions().get_or_insert_with(|| {
                let mut map = std::collections::HashMap::new();
                if rebuild {
                    for d in loopward_runner::journal::settled_decisions(
                        run,
                        &LayerId::from("per_agent"),
                    ) {
                        if d.verdict == LayerVerdict::Allow {
                            *map.entry(d.agent).or_insert(0) += 1;
                        }
                    }
                }
                Taken(std::sync::Mutex::new(map))
            });
            let n = {
                let mut map = taken.0.lock().unwrap();
                let n = map.entry(req.turn.agent().clone()).or_insert(0);
                *n += 1;
                *n
            };
            Box::pin(async move {
                let stop = n > limit;
                req.turn.record(&AuditEvent::LayerDecision {
                    layer: "per_agent".into(),
                    decision: if stop {
                        LayerVerdict::Stopped
                    } else {
                        LayerVerdict::Allow
                    },
                    detail: json!({"turn": n}).into(),
                })?;
                if stop {
                    return Err(loopward_runner::TurnError::Stop(RunStatus::Stopped {
                        reason: "turns spent".into(),
                    }));
                }
                next.run(req).await
            })
        },
    )
}

/// Runs (or resumes) `r1`: `a` and `b` playing ping-pong behind `turns_per_agent(1, rebuild)`.
async fn per_agent(ws: &Path, runs: &Path, opts: LedgerOptions, rebuild: bool) -> RunReport {
    let team = [id("a"), id("b")];
    let model = BoxModelService::new(FakeModel::new(ping_pong()));
    let layer = turns_per_agent(1, rebuild);
    let mut b = Runner::builder(Workspace::new(ws).unwrap());
    for name in &team {
        let agent = LlmAgent::builder(name.clone(), model.clone())
            .tools(tools::builtin(&team))
            .build();
        b = b
            .agent(name.clone(), BoxTurnService::new(layer.layer(agent)))
            .unwrap();
    }
    let runner = b.build().unwrap();
    run_or_resume_r1(&runner, runs, opts).await
}

#[tokio::test]
async fn a_custom_layer_resumes_from_the_decisions_it_had_settled() {
    // Never stopped: a's second turn (the run's third) is refused.
    let (ws, runs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let whole = per_agent(ws.path(), runs.path(), LedgerOptions::default(), true).await;
    assert!(
        matches!(whole.status, RunStatus::Stopped { .. }),
        "{:?}",
        whole.status
    );
    assert_eq!(whole.turns, 3);
    for rebuild in [true, false] {
        // Killed as the third turn starts, then resumed.
        let (ws, runs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let first = per_agent(
            ws.path(),
            runs.path(),
            killed_at("turn_started", 3),
            rebuild,
        )
        .await;
        assert!(
            matches!(first.status, RunStatus::AuditFailed { .. }),
            "{:?}",
            first.status
        );
        let resumed = per_agent(ws.path(), runs.path(), LedgerOptions::default(), rebuild).await;
        if rebuild {
            assert_eq!(
                resumed.status, whole.status,
                "the layer counted on across the resume"
            );
            assert_eq!(resumed.turns, 3);
        } else {
            // The way it used to be for every custom layer: it forgets and lets two more turns by.
            assert_eq!(resumed.turns, 5, "{:?}", resumed.status);
        }
    }
}
