//! Class-jump through the runner, driven by a scripted agent calling `report_attempt`.

use super::support::{self, scripted, Agents};
use loopward_core::{AgentId, AuditEvent, RunId, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::layers::classjump::{ClassJump, ClassJumpConfig};
use loopward_runner::model::{
    fake::{FakeModel, Script},
    BoxModelService,
};
use loopward_runner::tool::ToolSet;
use loopward_runner::{BoxTurnService, LlmAgent, RunReport, Runner, Workspace};
use serde_json::json;
use std::sync::Arc;
use tower::Layer;

/// Class-jump over `strategies`, allowing `failures` failures to each, counting no failed tool.
fn config(strategies: &[&str], failures: u32) -> ClassJumpConfig {
    ClassJumpConfig {
        strategies: strategies.iter().map(|s| s.to_string()).collect(),
        failures_per_strategy: failures,
        count_failed_tools: vec![],
    }
}

fn tracker() -> ClassJump {
    ClassJump::new(config(&["patch", "rewrite"], 3)).unwrap()
}

async fn play(strategies: &[&str], then_say: &str) -> (RunReport, Arc<MemorySink>) {
    let builder = AgentId::new("builder").unwrap();
    let mut script = Script::default();
    for s in strategies {
        script.call(
            &builder,
            "report_attempt",
            json!({"subtask": "fix-flaky-test", "strategy": s, "outcome": "failed"}),
        );
    }
    script.say(&builder, then_say);
    let cj = tracker();
    let agent = LlmAgent::builder(
        builder.clone(),
        BoxModelService::new(FakeModel::new(script)),
    )
    .tools(ToolSet::new().with(cj.tool()))
    .max_steps(50)
    .build();
    let dir = tempfile::tempdir().unwrap();
    let runner = support::one_agent(
        dir.path(),
        &builder,
        BoxTurnService::new(cj.layer().layer(agent)),
    );
    let (report, sink) = support::run(&runner, &builder, "fix the flaky test").await;
    (report, sink)
}

/// The verdicts of two strategies of three failures each, run out.
const RAN_OUT: [&str; 6] = [
    "retry",
    "retry",
    "class_jump",
    "retry",
    "retry",
    "exhausted",
];

fn verdicts(sink: &MemorySink) -> Vec<String> {
    crate::verdicts(sink, loopward_core::LayerId::ClassJump)
}

#[tokio::test]
async fn three_failures_force_the_next_strategy_and_running_out_ends_the_run_exhausted() {
    let (report, sink) = play(
        &["patch", "patch", "patch", "rewrite", "rewrite", "rewrite"],
        "I tried everything.",
    )
    .await;
    assert_eq!(report.status, RunStatus::Exhausted);
    assert_eq!(verdicts(&sink), RAN_OUT);
    assert_eq!(tracker().max_failures(), 6, "the known bound");
    let texts: Vec<String> = sink
        .events()
        .into_iter()
        .filter_map(|(_, e)| match e {
            AuditEvent::ToolFinished { summary, .. } => Some(summary),
            _ => None,
        })
        .collect();
    assert!(texts[2].starts_with("class-jump: the previous strategy failed 3 times"));
    assert!(texts[2].ends_with("Use strategy rewrite next"));
}

#[tokio::test]
async fn retrying_a_spent_strategy_is_refused_and_does_not_count() {
    let (report, sink) = play(
        &["patch", "patch", "patch", "patch", "rewrite"],
        "Switched to rewrite.",
    )
    .await;
    assert_eq!(report.status, RunStatus::Completed);
    assert_eq!(
        verdicts(&sink),
        ["retry", "retry", "class_jump", "refused", "retry"]
    );
    crate::assert_tool_failed(
        &sink,
        "strategy patch may not be used for fix-flaky-test now; the current strategy is rewrite",
    );
}

#[test]
fn bad_strategy_lists_are_refused_naming_the_field() {
    let err = ClassJump::new(config(&[], 3)).unwrap_err();
    assert_eq!(err.field, "class_jump.strategies");
    let err = ClassJump::new(config(&["a", "a"], 3)).unwrap_err();
    assert_eq!(err.field, "class_jump.strategies");
    let err = ClassJump::new(config(&["a"], 0)).unwrap_err();
    assert_eq!(err.field, "class_jump.failures_per_strategy");
    let parsed: ClassJumpConfig = toml::from_str("strategies = [\"a\", \"b\"]").unwrap();
    assert_eq!(parsed.failures_per_strategy, 3);
}

#[tokio::test]
async fn exhaustion_ends_the_reply_that_caused_it_no_later_call_runs_and_no_handoff_stands() {
    use loopward_runner::model::fake::ScriptedReply;
    let builder = AgentId::new("builder").unwrap();
    let auditor = AgentId::new("auditor").unwrap();
    let team = vec![builder.clone(), auditor.clone()];
    let failed = |s: &str| {
        scripted(
            "report_attempt",
            json!({"subtask": "fix", "strategy": s, "outcome": "failed"}),
        )
    };
    let mut script = Script::default();
    for s in ["patch", "patch", "rewrite"] {
        script.push(
            &builder,
            ScriptedReply {
                text: String::new(),
                tool_calls: vec![failed(s)],
                ..Default::default()
            },
        );
    }
    // The reply that exhausts the subtask also writes a file and hands off.
    script.push(
        &builder,
        ScriptedReply {
            text: String::new(),
            tool_calls: vec![
                failed("rewrite"),
                scripted("write_file", json!({"path": "after.txt", "content": "x"})),
                scripted(
                    "handoff",
                    json!({"to": "auditor", "message": "over to you"}),
                ),
            ],
            ..Default::default()
        },
    );
    script.say(&builder, "I tried patch and rewrite.");
    let cj = ClassJump::new(config(&["patch", "rewrite"], 2)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let model = BoxModelService::new(FakeModel::new(script));
    let runner = Runner::builder(Workspace::new(dir.path()).unwrap()).agents(&team, |a| {
        let agent = LlmAgent::builder(a.clone(), model.clone())
            .tools(loopward_runner::tools::builtin(&team).with(cj.tool()))
            .max_steps(50)
            .build();
        BoxTurnService::new(cj.layer().layer(agent))
    });
    let (report, sink) = support::run(&runner.build().unwrap(), &builder, "fix it").await;
    assert_eq!(report.status, RunStatus::Exhausted);
    assert!(
        !dir.path().join("after.txt").exists(),
        "a call after the exhausting one ran"
    );
    assert!(report.handoffs.is_empty());
    assert!(!sink
        .events()
        .iter()
        .any(|(_, e)| matches!(e, AuditEvent::HandoffRegistered(_))));
    // The agent's last words are kept, under its name, and the turn is recorded.
    assert_eq!(report.final_text, "I tried patch and rewrite.");
    assert_eq!(
        report.last_agent.as_ref().map(AgentId::as_str),
        Some("builder")
    );
    let not_run = sink
        .events()
        .into_iter()
        .filter(|(_, e)| {
            matches!(e, AuditEvent::ToolFinished { is_error: true, summary, .. }
            if summary.starts_with("not run: the run ends after this reply (exhausted)"))
        })
        .count();
    assert_eq!(not_run, 2);
}

/// A builder whose shell checks fail, through the recommended stack with `[class_jump]`.
async fn failing_shell(
    reports: &[serde_json::Value],
    checks: usize,
) -> (RunReport, Arc<MemorySink>, String) {
    use loopward_runner::layers::stack::{LayersConfig, Stack};
    use loopward_runner::tool::{BoxToolService, ToolExecutor};
    let builder = AgentId::new("builder").unwrap();
    let mut script = Script::default();
    for i in 0..checks {
        script.call(
            &builder,
            "shell",
            json!({"command": format!("exit {}", 1 + i % 5)}),
        );
        if let Some(r) = reports.get(i) {
            script.call(&builder, "report_attempt", r.clone());
        }
    }
    script.say(&builder, "stopping");
    let config: LayersConfig = toml::from_str(
        "[class_jump]\nstrategies = [\"patch\", \"rewrite\"]\nfailures_per_strategy = 3\n[repeat]\nmax_identical = 3\n[limits]\nsteps_per_turn = 100\n",
    )
    .unwrap();
    let stack = Stack::new(&config).unwrap();
    let cj = stack.class_jump().unwrap().clone();
    let agent = LlmAgent::builder(
        builder.clone(),
        stack.model(BoxModelService::new(FakeModel::new(script))),
    )
    .tools(loopward_runner::tools::builtin(std::slice::from_ref(&builder)).with(cj.tool()))
    .tool_stack(stack.tools(BoxToolService::new(ToolExecutor)))
    .max_steps(100)
    .build();
    let dir = tempfile::tempdir().unwrap();
    let runner = support::one_agent(dir.path(), &builder, stack.turn(BoxTurnService::new(agent)));
    let (report, sink) = support::run(&runner, &builder, "make the check pass").await;
    let results: Vec<String> = sink
        .events()
        .into_iter()
        .filter_map(|(_, e)| match e {
            AuditEvent::ToolFinished { tool, output, .. } if tool == "shell" => output,
            _ => None,
        })
        .collect();
    (report, sink, results.join("\n---\n"))
}

#[tokio::test]
async fn failed_shell_results_count_toward_class_jump_without_any_report() {
    let (report, sink, results) = failing_shell(&[], 12).await;
    assert_eq!(report.status, RunStatus::Exhausted);
    let decided = crate::decided(&sink, loopward_core::LayerId::ClassJump);
    let evidence: Vec<String> = decided
        .into_iter()
        .map(|(decision, detail)| {
            assert_eq!(detail["source"], "evidence");
            decision
        })
        .collect();
    // The bound: 2 strategies × 3 failures; the 6th failed check ends the reply and the run.
    assert_eq!(evidence, RAN_OUT);
    assert!(
        results.contains("[class-jump, counted from this failed result] class-jump"),
        "{results}"
    );
    let shells = sink
        .events()
        .iter()
        .filter(|(_, e)| matches!(e, AuditEvent::ToolStarted { tool, .. } if tool == "shell"))
        .count();
    assert_eq!(shells, 6, "no shell call ran after exhaustion");
}

#[tokio::test]
async fn renaming_the_subtask_does_not_escape_the_bound() {
    let reports: Vec<_> = (0..12)
        .map(|i| json!({"subtask": format!("fix-{i}"), "strategy": "patch", "outcome": "failed"}))
        .collect();
    let (report, _, _) = failing_shell(&reports, 12).await;
    assert_eq!(report.status, RunStatus::Exhausted);
}

/// A run that moved to another process (an engine that journals each tool call: the calls fed
/// back never reach the tool stack) goes on counting its failure evidence from the ledger once
/// `journal::seed_tool_stack` seeded it, not from zero.
#[tokio::test]
async fn failure_evidence_seeded_from_the_ledger_goes_on_counting_in_another_process() {
    use loopward_runner::{journal, RunContext, SystemClock, TurnContext};
    let (report, sink, _) = failing_shell(&[], 2).await;
    assert_eq!(report.status, RunStatus::Completed);
    let records = sink.events();
    let builder = AgentId::new("builder").unwrap();
    let go_on = |seeded: bool| {
        let dir = tempfile::tempdir().unwrap();
        let run = RunContext::new(
            RunId::new("r1").unwrap(),
            vec![builder.clone()],
            Workspace::new(dir.path()).unwrap(),
            Arc::new(MemorySink::default()),
            Arc::new(SystemClock),
        );
        if seeded {
            journal::seed_tool_stack(&run, &records).unwrap();
        }
        let turn = TurnContext::new(run, builder.clone(), loopward_core::TurnNumber(2));
        let cj = ClassJump::new(ClassJumpConfig {
            count_failed_tools: vec!["shell".into()],
            ..config(&["patch", "rewrite"], 3)
        })
        .unwrap();
        (0..4)
            .map(|_| {
                format!(
                    "{:?}",
                    cj.observe_failure(&turn, &"shell".into()).unwrap().kind()
                )
            })
            .collect::<Vec<_>>()
    };
    // Two failures were counted before the move: the third jumps, and the sixth exhausts.
    assert_eq!(go_on(true), ["Jump", "Retry", "Retry", "Exhausted"]);
    // Unseeded (the defect it fixes), the count restarts.
    assert_eq!(go_on(false), ["Retry", "Retry", "Jump", "Retry"]);
}
