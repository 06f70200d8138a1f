//! The ledger as the run's journal: a run stopped at any record resumes from its last committed
//! step, repeating no recorded model reply and no effect; the rule for an interrupted effect; a
//! finished run is not resumed; a durable turn gate on an agent with two turns completes.
#![allow(clippy::unwrap_used)]

mod bounds;
mod custom_layer;
#[path = "../one_agent/mod.rs"]
mod one_agent;
mod resume;

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
use one_agent::{scripted, Agents, Steps};
use serde_json::json;
use std::path::{Path, PathBuf};
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
        .write(&planner, "out/notes.md", "# notes")
        .handoff(&planner, "builder", "build it");
    s.push(
        &builder,
        loopward_runner::model::fake::ScriptedReply {
            text: "two effects".into(),
            tool_calls: vec![
                scripted("shell", shell("b1")),
                scripted("shell", shell("b2")),
            ],
            ..Default::default()
        },
    );
    s.handoff(&builder, "planner", "built");
    s.say(&planner, "All done.");
    s
}

/// A fresh runner (a new process, as far as the run can tell) whose model logs each call.
fn runner(ws: &Path, log: &Path, turn_gate: Option<&str>) -> Runner {
    let model = FakeModel::new(script()).with_call_log(log);
    let team = [id("planner"), id("builder")];
    let b = Runner::builder(Workspace::new(ws).unwrap()).agents(&team, |name| {
        let agent = LlmAgent::builder(name.clone(), BoxModelService::new(model.clone()))
            .tools(tools::builtin(&team))
            .build();
        match turn_gate {
            Some(gated) if gated == name.as_str() => {
                let gates =
                    StopGates::new(&[StopGateConfig::turn(gated, StopMode::Durable)]).unwrap();
                BoxTurnService::new(gates.turn_layer().layer(agent))
            }
            _ => BoxTurnService::new(agent),
        }
    });
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
async fn start_or_resume(s: &Scratch, opts: LedgerOptions, gate: Option<&str>) -> RunReport {
    let (ws, runs, log) = (s.ws(), s.runs(), &s.log());
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

/// One run's scratch folders: its workspace, its runs folder, and a folder for the fake
/// model's call log.
struct Scratch {
    ws: tempfile::TempDir,
    runs: tempfile::TempDir,
    tmp: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        let dir = || tempfile::tempdir().unwrap();
        Self {
            ws: dir(),
            runs: dir(),
            tmp: dir(),
        }
    }

    fn ws(&self) -> &Path {
        self.ws.path()
    }

    fn runs(&self) -> &Path {
        self.runs.path()
    }

    /// The fake model's call log: one line a model call.
    fn log(&self) -> PathBuf {
        self.tmp.path().join("calls.log")
    }

    /// The folder of run `r1`.
    fn run_dir(&self) -> PathBuf {
        self.runs().join("r1")
    }
}

/// The run stopped because its ledger could not be written: the process "died" there.
#[track_caller]
fn assert_killed(report: &RunReport) {
    assert!(
        matches!(report.status, RunStatus::AuditFailed { .. }),
        "{:?}",
        report.status
    );
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

/// `a` and `b` hand the work to each other four times, then `a` says it is done.
fn ping_pong() -> Script {
    let mut s = Script::default();
    for (from, to) in [("a", "b"), ("b", "a"), ("a", "b"), ("b", "a")] {
        s.handoff(&id(from), to, "yours");
    }
    s.say(&id("a"), "done");
    s
}
