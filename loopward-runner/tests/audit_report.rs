//! `report` recomputes the governance figures over a fixed set of runs from their ledgers alone.

mod audit_support;

use audit_support::{id, plan_and_build, run_to_ledger, team, Rule, SteppingClock, Steps};
use loopward_core::{
    AuditEvent, AuditSink, Decision, GateMode, Person, Refusal, Remedy, RunId, Scope,
};
use loopward_runner::audit::{
    report, Finished, KeyRing, Ledger, LedgerError, LedgerKey, LedgerOptions, VerifyOptions,
};
use loopward_runner::model::fake::Script;
use loopward_runner::{RunReport, Runner};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

/// The fixed key every run here is chained under (fixed, so the snapshots are stable).
fn key() -> LedgerKey {
    LedgerKey::from_bytes(vec![11u8; 32]).unwrap()
}

fn opts() -> LedgerOptions {
    LedgerOptions::keyed(key())
}

/// Runs `runner` as `run`, builder first, on a person saying `said`, into a new ledger under
/// `runs` written through [`opts`].
async fn builder_run(
    runner: &Runner,
    runs: &Path,
    run: &str,
    said: &str,
) -> (RunReport, Result<Finished, LedgerError>) {
    let task = Person::at_the_keyboard().says(said);
    run_to_ledger(runner, runs, run, task, "builder", opts()).await
}

/// planner owns plan.md; in `mode`, builder's writes there are denied (or warned, advisory),
/// except an edit covered by a consumed override under enforcement.
fn territory(mode: GateMode) -> Rule {
    Arc::new(move |agent, tool, path| {
        if tool != "write_file" && tool != "edit_file" {
            return None;
        }
        if path != Some("plan.md") || agent == "planner" {
            return Some(Decision::Allow);
        }
        let refusal = Refusal::new(
            loopward_core::GateKind::Territory,
            "plan.md belongs to planner",
            "hand off to planner",
        );
        Some(match (mode, tool) {
            (GateMode::Advisory, _) => Decision::Warn(refusal),
            (_, "edit_file") => Decision::Override {
                id: "ov-7".into(),
                reason: "typo fix approved by Ana".into(),
            },
            _ => Decision::Deny(refusal),
        })
    })
}

/// builder, warned twice: goes ahead with the overwrite, and its edit fails (nothing changed).
fn advisory_script() -> Script {
    let mut s = Script::default();
    s.write(&id("builder"), "plan.md", "mine now")
        .call(
            &id("builder"),
            "edit_file",
            json!({"path": "plan.md", "old": "absent text", "new": "x"}),
        )
        .say(&id("builder"), "Done.");
    s
}

async fn build_runs(runs: &Path) {
    // a: enforced; one denial, one override.
    let ws = tempfile::tempdir().unwrap();
    plan_and_build(
        ws.path(),
        runs,
        "a-enforced",
        SteppingClock::new(),
        Some((GateMode::Enforce, territory(GateMode::Enforce))),
        opts(),
    )
    .await
    .1
    .unwrap();
    // b: advisory; the agent goes ahead once and its other warned call fails.
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("plan.md"), "# Plan").unwrap();
    let runner = team(
        ws.path(),
        &["builder"],
        advisory_script(),
        SteppingClock::new(),
        Some((GateMode::Advisory, territory(GateMode::Advisory))),
    );
    builder_run(&runner, runs, "b-advisory", "tidy the plan")
        .await
        .1
        .unwrap();
    // c: a shell write caught after the fact, one reverted and one not (recorded directly).
    let run = RunId::new("c-violations").unwrap();
    let ledger = Ledger::create(runs, &run, opts()).unwrap();
    let scope = Scope {
        run,
        turn: None,
        agent: Some(id("builder")),
    };
    for (path, remedy) in [
        ("src/a.rs", Remedy::Reverted),
        (
            "src/b.rs",
            Remedy::NotReverted {
                why: "revert failed".into(),
            },
        ),
    ] {
        ledger
            .record(
                &scope,
                &AuditEvent::Violation {
                    path: path.into(),
                    remedy,
                    reason: "src/ belongs to planner".into(),
                },
            )
            .unwrap();
    }
    let ended = AuditEvent::RunEnded {
        status: loopward_core::RunStatus::Completed,
        usage: loopward_core::Usage::default(),
        cost_micros: Some(1_250),
    };
    ledger
        .record(
            &Scope {
                agent: None,
                ..scope
            },
            &ended,
        )
        .unwrap();
    ledger.finish().unwrap();
    // d: crashed (never finished): counted, marked unfinished.
    let ledger = started(runs, "d-crashed", "start");
    drop(ledger);
    // e: tampered after finishing: left out, with the reason.
    let ledger = started(runs, "e-tampered", "honest");
    ledger.finish().unwrap();
    let p = runs.join("e-tampered/events.jsonl");
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("honest", "h0nest");
    std::fs::write(&p, text).unwrap();
}

/// A new ledger for `run` under `runs`, opened by a person saying `words`.
fn started(runs: &Path, run: &str, words: &str) -> Arc<Ledger> {
    let run = RunId::new(run).unwrap();
    let ledger = Ledger::create(runs, &run, opts()).unwrap();
    let scope = Scope {
        run,
        turn: None,
        agent: None,
    };
    let said = AuditEvent::HumanMessage {
        content: (&Person::at_the_keyboard().says(words)).into(),
    };
    ledger.record(&scope, &said).unwrap();
    ledger
}

#[tokio::test]
async fn report_json_figures_for_a_fixed_set_of_runs() {
    let runs = tempfile::tempdir().unwrap();
    build_runs(runs.path()).await;
    // Strict: the crashed run has no anchor, so it is left out.
    let strict = report(runs.path(), &VerifyOptions::keyed(KeyRing::single(key()))).unwrap();
    assert_eq!(strict.runs, 3);
    assert!(
        strict
            .invalid
            .iter()
            .any(|i| i.run == "d-crashed" && i.error.contains("no anchor")),
        "{:?}",
        strict.invalid
    );
    // Accepting unfinished runs, it is counted and marked.
    let r = report(
        runs.path(),
        &VerifyOptions::keyed(KeyRing::single(key())).unfinished(true),
    )
    .unwrap();
    assert_eq!(r.runs, 4);
    let t = &r.gates["territory"];
    assert_eq!((t.allowed, t.denied, t.overridden, t.warned), (2, 1, 1, 2));
    assert_eq!(
        (
            r.advisory.warned_calls,
            r.advisory.heeded,
            r.advisory.ignored
        ),
        (2, 1, 1)
    );
    assert_eq!(r.unauthorised_writes.total, 2);
    assert_eq!(r.unauthorised_writes.advisory_warned, 1);
    assert_eq!(r.unauthorised_writes.unreverted_violations, 1);
    assert_eq!(r.overrides.len(), 1);
    assert_eq!(r.overrides[0].reason, "typo fix approved by Ana");
    assert_eq!(r.invalid.len(), 1);
    assert!(
        r.invalid[0].error.contains("seq 1: edited"),
        "{}",
        r.invalid[0].error
    );
    assert_eq!(r.statuses.get("unfinished"), Some(&1));
    // Under enforcement alone, nothing unauthorised stands.
    let a = r.per_run.iter().find(|p| p.run == "a-enforced").unwrap();
    assert_eq!((a.turns, a.handoffs), (2, 1));
    insta::assert_snapshot!("report_json", r.to_json());
    insta::assert_snapshot!("report_table", r.to_table());
}

/// A run a stop-gate stopped: its census counts the stop-gate's decision beside the gates'
/// (none here), so the report never says there were no decisions.
#[tokio::test]
async fn the_census_counts_layer_decisions_of_a_run_a_stop_gate_stopped() {
    use loopward_runner::layers::stack::{LayersConfig, Stack};
    use loopward_runner::model::{fake::FakeModel, BoxModelService};
    use loopward_runner::tool::{BoxToolService, ToolExecutor};
    use loopward_runner::{tools, BoxTurnService, LlmAgent, Workspace};
    let config: LayersConfig =
        toml::from_str("[[stopgate]]\npoint = \"tool\"\ntool = \"shell\"\nmode = \"deny\"\n")
            .unwrap();
    let stack = Stack::new(&config).unwrap();
    let a = id("builder");
    let mut script = Script::default();
    script.call(&a, "shell", json!({"command": "rm -rf build"}));
    script.say(&a, "I was not allowed to.");
    let model = stack.model(BoxModelService::new(FakeModel::new(script)));
    let agent = LlmAgent::builder(a.clone(), model)
        .tools(tools::builtin(std::slice::from_ref(&a)))
        .tool_stack(stack.tools(BoxToolService::new(ToolExecutor)))
        .max_steps(stack.steps_per_turn())
        .build();
    let ws = tempfile::tempdir().unwrap();
    let runner = Runner::builder(Workspace::new(ws.path()).unwrap())
        .agent(a, stack.turn(BoxTurnService::new(agent)))
        .unwrap()
        .build()
        .unwrap();
    let runs = tempfile::tempdir().unwrap();
    let (run, finished) = builder_run(&runner, runs.path(), "stopped", "clean").await;
    finished.unwrap();
    assert!(matches!(
        run.status,
        loopward_core::RunStatus::Stopped { .. }
    ));
    let r = report(runs.path(), &VerifyOptions::keyed(KeyRing::single(key()))).unwrap();
    let sg = r.layers["stopgate"];
    assert_eq!((sg.allowed, sg.refused, sg.stopped), (0, 0, 1));
    let table = r.to_table();
    assert!(!table.contains("no gate"), "{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with("stopgate"))
        .unwrap_or_else(|| panic!("no stopgate row in\n{table}"));
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["stopgate", "0", "0", "1", "0"]
    );
}
