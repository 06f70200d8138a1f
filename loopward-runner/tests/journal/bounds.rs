//! A resumed run is held to the bounds it had counted: repeats, turns, budget, strategies,
//! units of work; a run killed after the turn that ended it resumes to the same end.

use super::*;

/// A team (`a`, `b`) behind the recommended layer stack made from `layers` (TOML), scripted
/// by `script`, with `b` handing work back and forth as scripted.
fn bounded_runner(ws: &Path, log: &Path, layers: &str, script: Script) -> Runner {
    let config: LayersConfig = toml::from_str(layers).unwrap();
    let stack = Stack::new(&config).unwrap();
    let model = FakeModel::new(script).with_call_log(log);
    let team = [id("a"), id("b")];
    let b = Runner::builder(Workspace::new(ws).unwrap()).agents(&team, |name| {
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
        stack.turn(BoxTurnService::new(agent))
    });
    b.build().unwrap()
}

/// Runs (or resumes) run `r1` of `bounded_runner` in `s`, the ledger written through `opts`;
/// a run that ended with its ledger whole is verified.
async fn bounded(s: &Scratch, opts: LedgerOptions, layers: &str, script: Script) -> RunReport {
    std::fs::create_dir_all(s.ws().join("out")).unwrap();
    let runner = bounded_runner(s.ws(), &s.log(), layers, script);
    let report = run_or_resume_r1(&runner, s.runs(), opts).await;
    if !matches!(report.status, RunStatus::AuditFailed { .. }) {
        verified(s);
    }
    report
}

/// Asserts the ledger of run `r1` verifies.
fn verified(s: &Scratch) {
    verify(
        &s.run_dir(),
        &loopward_runner::audit::VerifyOptions::keyless(),
    )
    .unwrap();
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

/// [`bounded`], `a` making the same call three times.
async fn bounded_repeats(s: &Scratch, opts: LedgerOptions, layers: &str) -> RunReport {
    bounded(s, opts, layers, same_call_three_times()).await
}

#[tokio::test]
async fn a_resumed_run_is_held_to_the_repeat_cap_it_had_counted() {
    const LAYERS: &str = "[repeat]\nmax_identical = 2\n";
    // Killed after the second identical call finished (at the third model call's record).
    let s = Scratch::new();
    let first = bounded_repeats(&s, killed_at("model_call", 3), LAYERS).await;
    assert_killed(&first);
    assert_eq!(lines(&s.ws().join("out/effects.log")), ["x", "x"]);
    assert_eq!(decided(&s.run_dir(), "repeat", "refused"), 0);
    let resumed = bounded_repeats(&s, LedgerOptions::default(), LAYERS).await;
    assert_eq!(resumed.status, RunStatus::Completed);
    // The third identical call is the cap's third: refused, as in a run never stopped.
    assert_eq!(
        lines(&s.ws().join("out/effects.log")),
        ["x", "x"],
        "the cap held across the resume"
    );
    assert_eq!(decided(&s.run_dir(), "repeat", "refused"), 1);
}

#[tokio::test]
async fn a_resumed_run_is_held_to_the_turn_cap_it_had_counted() {
    const LAYERS: &str = "[limits]\nturns_per_run = 3\n";
    let s = Scratch::new();
    // Never stopped: the fourth turn is refused.
    let whole = bounded(&s, LedgerOptions::default(), LAYERS, ping_pong()).await;
    assert!(
        matches!(whole.status, RunStatus::CapReached { .. }),
        "{:?}",
        whole.status
    );
    assert_eq!(whole.turns, 4);
    // Killed after two turns ended (at the third turn's start), then resumed.
    let s = Scratch::new();
    let first = bounded(&s, killed_at("turn_started", 3), LAYERS, ping_pong()).await;
    assert_killed(&first);
    let resumed = bounded(&s, LedgerOptions::default(), LAYERS, ping_pong()).await;
    assert_eq!(
        resumed.status, whole.status,
        "the cap held across the resume"
    );
    assert_eq!(resumed.turns, 4);
}

#[tokio::test]
async fn a_resumed_run_is_held_to_the_budget_it_had_spent() {
    // What the first two model calls of the run cost, in tokens: the budget.
    let s = Scratch::new();
    bounded_repeats(&s, LedgerOptions::default(), "").await;
    let spent: u64 = records(&s.run_dir())
        .iter()
        .filter_map(|(_, e)| match e {
            AuditEvent::ModelCall { usage, .. } => Some(usage.total()),
            _ => None,
        })
        .take(2)
        .sum();
    let layers = format!("[budget]\nmax_tokens = {spent}\n");
    // Never stopped: the third call is refused.
    let s = Scratch::new();
    let whole = bounded_repeats(&s, LedgerOptions::default(), &layers).await;
    assert!(
        matches!(whole.status, RunStatus::BudgetExceeded { .. }),
        "{:?}",
        whole.status
    );
    assert_eq!(lines(&s.log()).len(), 2);
    // Killed after the second call's reply was recorded, then resumed: the same.
    let s = Scratch::new();
    let first = bounded_repeats(&s, killed_at("tool_requested", 2), &layers).await;
    assert_killed(&first);
    let resumed = bounded_repeats(&s, LedgerOptions::default(), &layers).await;
    assert_eq!(
        resumed.status, whole.status,
        "the budget held across the resume"
    );
    assert_eq!(lines(&s.log()).len(), 2, "no third model call was paid for");
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
    let s = Scratch::new();
    // Killed between the turn's end and the run's end.
    let first = bounded(&s, killed_at("run_ended", 1), LAYERS, script()).await;
    assert_killed(&first);
    let resumed = bounded(&s, LedgerOptions::default(), LAYERS, script()).await;
    assert!(
        matches!(&resumed.status, RunStatus::Stopped { reason } if reason.contains("stop-gate")),
        "a stopped run resumed as {:?}",
        resumed.status
    );
    assert_eq!(resumed.final_text, "I was not allowed to.");
    assert!(lines(&s.ws().join("out/effects.log")).is_empty());
    // Now it is finished: resuming again is refused, saying how.
    let journal = Journal::from_records(&records(&s.run_dir())).unwrap();
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
    let s = Scratch::new();
    let whole = bounded(&s, LedgerOptions::default(), LAYERS, script()).await;
    assert_eq!(whole.status, RunStatus::Exhausted);
    // Killed after strategy `one` failed (the tracker said: jump to `two`), then resumed.
    let s = Scratch::new();
    let first = bounded(&s, killed_at("model_call", 2), LAYERS, script()).await;
    assert_killed(&first);
    let resumed = bounded(&s, LedgerOptions::default(), LAYERS, script()).await;
    assert_eq!(
        resumed.status,
        RunStatus::Exhausted,
        "the tracker went on from `two`"
    );
    assert_eq!(decided(&s.run_dir(), "class_jump", "refused"), 0);
}

/// `a` writes `src/a.rs`, `src/b.rs` and `src/c.rs` (three units of work, no plan), one reply
/// each, then says it is done.
fn three_units() -> Script {
    let mut s = Script::default();
    for f in ["src/a.rs", "src/b.rs", "src/c.rs"] {
        s.write(&id("a"), f, "fn x() {}\n");
    }
    s.say(&id("a"), "done");
    s
}

/// Runs (or resumes) run `r1` of agent `a` behind the default gates (the sprawl gate refuses a
/// third unit of work with no plan), the ledger written through `opts`.
async fn gated(s: &Scratch, opts: LedgerOptions) -> RunReport {
    use loopward_runner::gates::{Policy, PolicyConfig, PolicyLayer};
    let workspace = Workspace::new(s.ws()).unwrap();
    let policy = Policy::from_config(&PolicyConfig::default(), workspace.clone()).unwrap();
    let model = FakeModel::new(three_units()).with_call_log(s.log());
    let agent = LlmAgent::builder(id("a"), BoxModelService::new(model))
        .tools(tools::builtin(&[id("a")]))
        .tool_stack(PolicyLayer::new(policy).wrap(BoxToolService::new(ToolExecutor)))
        .build();
    let runner = Runner::builder(workspace)
        .agent(id("a"), BoxTurnService::new(agent))
        .unwrap()
        .build()
        .unwrap();
    run_or_resume_r1(&runner, s.runs(), opts).await
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
    let s = Scratch::new();
    // Killed after the second unit of work was written (at the third model call's record).
    let first = gated(&s, killed_at("model_call", 3)).await;
    assert_killed(&first);
    assert!(s.ws().join("src/b.rs").exists() && !s.ws().join("src/c.rs").exists());
    assert_eq!(sprawl_refusals(&s.run_dir()), 0);
    let resumed = gated(&s, LedgerOptions::default()).await;
    assert_eq!(resumed.status, RunStatus::Completed);
    // The third unit is refused, as in a run never stopped: the gate counted the first two.
    assert_eq!(
        sprawl_refusals(&s.run_dir()),
        1,
        "the sprawl gate counted across the resume"
    );
    assert!(!s.ws().join("src/c.rs").exists());
    verified(&s);
}
