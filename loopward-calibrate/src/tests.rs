//! Calibration on real ledgers (written by the ledger writer, verified by the verifier) and on
//! transcripts: every gate family re-judged, firings assessed, keyed ledgers verified.

use super::*;
use loopward_runner::audit::{KeyRing, Ledger, LedgerKey, LedgerOptions};
use loopward_runner::layers::stack::LayersConfig;

use loopward_core::{
    AgentId, AuditEvent, AuditSink, Decision, Effect, EffectKind, Refusal, RunId, RunStatus, Scope,
    Usage,
};
use serde_json::json;

/// Writes one run's ledger: `events` as (agent, event), then the run's end, and anchors it.
fn ledger(
    runs: &Path,
    run: &str,
    opts: LedgerOptions,
    events: Vec<(Option<&str>, AuditEvent)>,
    status: RunStatus,
) {
    let id = RunId::new(run).unwrap();
    let l = Ledger::create(runs, &id, opts).unwrap();
    let scope = |agent: Option<&str>| Scope {
        run: id.clone(),
        turn: None,
        agent: agent.map(|a| AgentId::new(a).unwrap()),
    };
    l.record(
        &scope(None),
        &AuditEvent::RunStarted {
            task: "t".into(),
            agent: AgentId::new("builder").unwrap(),
        },
    )
    .unwrap();
    for (agent, e) in events {
        l.record(&scope(agent), &e).unwrap();
    }
    l.record(
        &scope(None),
        &AuditEvent::RunEnded {
            status,
            usage: Usage::default(),
            cost_micros: None,
        },
    )
    .unwrap();
    l.finish().unwrap();
}

fn turn(agent: &str) -> (Option<&str>, AuditEvent) {
    (
        Some(agent),
        AuditEvent::TurnStarted {
            agent: AgentId::new(agent).unwrap(),
        },
    )
}

/// A tool call and its result (`effects` stood; `error`: it failed).
fn call<'a>(
    agent: &'a str,
    id: &str,
    tool: &str,
    args: serde_json::Value,
    effects: &[&str],
    error: bool,
) -> Vec<(Option<&'a str>, AuditEvent)> {
    vec![
        (
            Some(agent),
            AuditEvent::ToolRequested {
                call_id: id.into(),
                tool: tool.into(),
                arguments: args,
            },
        ),
        (
            Some(agent),
            AuditEvent::ToolFinished {
                call_id: id.into(),
                tool: tool.into(),
                is_error: error,
                effects: effects
                    .iter()
                    .map(|p| Effect::ok(*p, EffectKind::Modify))
                    .collect(),
                summary: String::new(),
                output: None,
            },
        ),
    ]
}

fn write<'a>(agent: &'a str, id: &str, path: &str) -> Vec<(Option<&'a str>, AuditEvent)> {
    call(
        agent,
        id,
        "write_file",
        json!({"path": path, "content": "x"}),
        &[path],
        false,
    )
}

fn policy(text: &str) -> PolicyConfig {
    PolicyConfig::from_toml(text).unwrap()
}

fn layers(text: &str) -> LayersConfig {
    toml::from_str(text).unwrap()
}

/// A run where the builder writes src/ then hands to the tester (no review), runs the same
/// shell command three times with a write between the second and third, reports three failed
/// attempts, and takes four turns; it completes.
fn busy_run(runs: &Path, opts: LedgerOptions) {
    let mut ev = vec![turn("builder")];
    ev.extend(write("builder", "c1", "src/a.rs"));
    let test = json!({"command": "cargo test"});
    ev.extend(call("builder", "c2", "shell", test.clone(), &[], true));
    ev.extend(call("builder", "c3", "shell", test.clone(), &[], true));
    ev.extend(write("builder", "c4", "src/b.rs"));
    ev.extend(call("builder", "c5", "shell", test, &[], false));
    for (i, n) in ["r1", "r2", "r3"].iter().enumerate() {
        ev.extend(call(
            "builder",
            n,
            "report_attempt",
            json!({"subtask": "parser", "strategy": "patch", "outcome": "failed", "note": i}),
            &[],
            false,
        ));
    }
    ev.extend(call(
        "builder",
        "h1",
        "handoff",
        json!({"to": "tester", "message": "done"}),
        &[],
        false,
    ));
    ev.extend(call(
        "builder",
        "h2",
        "handoff",
        json!({"to": "auditor", "message": "also"}),
        &[],
        true,
    ));
    ev.push(turn("tester"));
    ev.push(turn("builder"));
    ev.push(turn("tester"));
    ledger(runs, "busy", opts, ev, RunStatus::Completed);
}

#[test]
fn every_gate_family_is_rejudged_from_a_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    busy_run(&runs, LedgerOptions::default());
    let candidate =
        policy("[[gates.review]]\nfrom = \"builder\"\nvia = \"auditor\"\nwhen = [\"src/**\"]\n");
    let strict = layers(
        r#"
        [limits]
        turns_per_run = 3
        steps_per_turn = 8
        [repeat]
        max_identical = 2
        [[stopgate]]
        point = "tool"
        tool = "shell"
        mode = "interactive"
        [[stopgate]]
        point = "turn"
        agent = "tester"
        mode = "auto"
        [class_jump]
        strategies = ["patch", "rewrite"]
        failures_per_strategy = 1
        count_failed_tools = []
        "#,
    );
    let mut cal = Calibrator::new(&candidate, Some(&PolicyConfig::default()), "root")
        .unwrap()
        .with_layers(&strict, Some(&LayersConfig::default()))
        .unwrap();
    cal.add_path(&runs).unwrap();
    let r = cal.finish();
    assert_eq!(r.sessions, 1);
    assert_eq!(r.verified_by.get("keyless (sha256)"), Some(&1));
    let g = |name: &str| {
        r.gates
            .get(name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", r.gates.keys()))
    };
    // The review gate refuses the handoff to the tester after src/ changed.
    assert_eq!(g("review:builder->auditor").denied, 1);
    // The second handoff of the turn meets the one-handoff rule.
    assert_eq!(g(loopward_runner::gates::ONE_HANDOFF_GATE).denied, 1);
    // Ten tool calls in one turn: the steps cap stops the run at the ninth.
    let steps = g("caps:steps_per_turn");
    assert_eq!(steps.denied, 1);
    assert_eq!(steps.aftermath.likely_false, 1, "the run completed anyway");
    // The turns cap is not reached after the steps cap stopped the run.
    assert!(!r.gates.contains_key("caps:turns_per_run"));
    // The third identical shell call is over the repeat limit; a write came between, so it
    // may have had a new result: a likely false positive.
    let repeat = g("repeat");
    assert_eq!(repeat.denied, 1);
    assert_eq!(repeat.aftermath.likely_false, 1);
    assert!(repeat.examples[0].text.contains("already made 2 times"));
    // Every shell call meets the interactive stop-gate; the auto one on the tester's turns
    // approves and never fires.
    assert_eq!(g("stopgate:tool:shell").denied, 3);
    assert!(g("stopgate:tool:shell").examples[0]
        .text
        .contains("would have stopped here for a person (interactive)"));
    assert_eq!(g("stopgate:turn:tester").denied, 0);
    // Class-jump at one failure a strategy: jump after the first report, exhausted at the second.
    let cj = g("class_jump");
    assert_eq!((cj.warned, cj.denied), (1, 1));
    // Against the defaults, what changes is listed.
    assert!(r.changed.unwrap() >= 5, "{:?}", r.changed);
    assert_eq!(g("repeat").current_turns_fired, Some(0));
}

/// Every file under `dir` with its bytes.
fn tree(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Shadow mode re-judges recorded writes, commands and handoffs: none of them happens again,
/// and nothing on disk changes (the report is returned, not written).
#[test]
fn shadow_mode_executes_nothing_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    busy_run(&runs, LedgerOptions::default());
    let before = tree(dir.path());
    let strict = policy(
        "[[territory]]\npaths = [\"src/**\"]\nowner = \"tester\"\n[gates.sprawl]\nthreshold = 2\n",
    );
    let mut cal = Calibrator::new(&strict, Some(&PolicyConfig::default()), "root")
        .unwrap()
        .with_layers(&LayersConfig::default(), None)
        .unwrap();
    cal.add_path(&runs).unwrap();
    let r = cal.finish();
    assert_eq!(r.sessions, 1);
    assert!(r.writes > 0, "the recorded writes were judged");
    assert_eq!(tree(dir.path()), before, "calibration changed a file");
    assert!(
        !dir.path().join("src").exists(),
        "a recorded write was executed"
    );
}

#[test]
fn the_recorded_config_is_reproduced_refusal_for_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let mut ev = vec![turn("builder")];
    ev.extend(call(
        "builder",
        "w1",
        "write_file",
        json!({"path": "plan.md", "content": "x"}),
        &[],
        true,
    ));
    let planners =
        loopward_core::GateId::new(loopward_core::GateKind::Territory, "territory:planner");
    ev.insert(
        2,
        (
            Some("builder"),
            AuditEvent::GateDecision {
                call_id: Some("w1".into()),
                gate: planners.clone(),
                mode: loopward_core::GateMode::Enforce,
                action: loopward_core::Action::tool("write_file"),
                path_raw: None,
                source: None,
                path: Some("plan.md".into()),
                decision: Decision::Deny(Refusal::new(&planners, "no", "ask")),
            },
        ),
    );
    ledger(
        &runs,
        "r1",
        LedgerOptions::default(),
        ev,
        RunStatus::Completed,
    );
    let recorded = policy("[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"\n");
    let mut cal = Calibrator::new(&recorded, None, "root").unwrap();
    cal.add_path(&runs).unwrap();
    let r = cal.finish();
    let t = &r.gates["territory:planner"];
    assert_eq!((t.denied, t.recorded_refusals), (1, 1));
    assert_eq!(t.aftermath.agreed, 1);
    assert_eq!(t.false_positive_estimate, Some(0.0));
}

#[test]
fn keyed_ledgers_verify_with_their_key_and_are_left_out_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let key = LedgerKey::generate().unwrap();
    ledger(
        &runs,
        "k1",
        LedgerOptions::keyed(key.clone()),
        write("builder", "c1", "src/a.rs"),
        RunStatus::Completed,
    );
    let cfg = PolicyConfig::default();
    let mut without = Calibrator::new(&cfg, None, "root").unwrap();
    without.add_path(&runs).unwrap();
    let r = without.finish();
    assert_eq!(r.sessions, 0);
    assert_eq!(r.left_out.len(), 1);
    assert!(
        r.left_out[0].1.contains(key.id().as_str()),
        "{:?}",
        r.left_out
    );

    let opts = VerifyOptions {
        allow_keyless: true,
        allow_unfinished: true,
        ..VerifyOptions::keyed(KeyRing::single(key.clone()))
    };
    let mut with = Calibrator::new(&cfg, None, "root")
        .unwrap()
        .with_verify(opts);
    with.add_path(&runs).unwrap();
    let r = with.finish();
    assert_eq!((r.sessions, r.writes), (1, 1));
    assert_eq!(
        r.verified_by.get(&format!("key {}", key.id())),
        Some(&1),
        "{:?}",
        r.verified_by
    );
}

#[test]
fn a_tampered_ledger_is_left_out_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    ledger(
        &runs,
        "t1",
        LedgerOptions::default(),
        write("builder", "c1", "src/a.rs"),
        RunStatus::Completed,
    );
    let events = runs.join("t1").join(EVENTS_FILE);
    let text = std::fs::read_to_string(&events).unwrap();
    std::fs::write(&events, text.replace("src/a.rs", "src/b.rs")).unwrap();
    let mut cal = Calibrator::new(&PolicyConfig::default(), None, "root").unwrap();
    cal.add_path(&runs).unwrap();
    let r = cal.finish();
    assert_eq!(r.sessions, 0);
    assert_eq!(r.left_out[0].0, "t1");
}

/// A transcript line.
fn line(kind: &str, content: serde_json::Value) -> String {
    json!({"type": kind, "sessionId": "s1", "cwd": "/p", "message": {"role": kind, "content": content}})
        .to_string()
}

fn tool_use(id: &str, path: &str) -> String {
    line(
        "assistant",
        json!([{"type": "tool_use", "id": id, "name": "Write", "input": {"file_path": path, "content": "x"}}]),
    )
}

fn result(id: &str) -> String {
    line(
        "user",
        json!([{"type": "tool_result", "tool_use_id": id, "content": "ok"}]),
    )
}

#[test]
fn each_firing_on_a_transcript_is_assessed_from_what_came_next() {
    let dir = tempfile::tempdir().unwrap();
    // Turn 1: a write to the planner's plan.md stands, and the person moves on (likely false).
    // Turn 2: a write to docs/x.md stands, and turn 3 writes it again (reworked: right).
    // Turn 3: a write to docs/y.md stands, and the transcript ends (unclear).
    let lines = [
        line("user", json!("one")),
        tool_use("t1", "/p/plan.md"),
        result("t1"),
        line("user", json!("two")),
        tool_use("t2", "/p/docs/x.md"),
        result("t2"),
        line("user", json!("three")),
        tool_use("t3", "/p/docs/x.md"),
        result("t3"),
        tool_use("t4", "/p/docs/y.md"),
        result("t4"),
    ];
    std::fs::write(dir.path().join("s1.jsonl"), lines.join("\n") + "\n").unwrap();
    let cfg = policy("[[territory]]\npaths = [\"plan.md\", \"docs/**\"]\nowner = \"planner\"\n");
    let mut cal = Calibrator::new(&cfg, None, "root").unwrap();
    cal.add_path(dir.path()).unwrap();
    let r = cal.finish();
    assert_eq!((r.sessions, r.turns, r.writes), (1, 3, 4));
    let t = &r.gates["territory:planner"];
    assert_eq!(t.denied, 4);
    let a = t.aftermath;
    assert_eq!((a.likely_false, a.reworked, a.unclear), (1, 1, 2), "{a:?}");
    // One likely false over two clear firings; the two unclear ones could go either way.
    assert_eq!(t.false_positive_estimate, Some(0.5));
    assert_eq!(t.false_positive_range, Some((0.25, 0.75)));
    assert_eq!(t.examples[0].assessment, Assessment::LikelyFalse);
    // The layers stand in the runner only: a transcript meets none of them.
    assert!(r
        .gates
        .keys()
        .all(|g| !g.starts_with("caps") && g != "repeat"));
}
