//! `CliAgent` in a runner, over a scripted stand-in for the Claude Code client: a shell script
//! that answers `--version` as the tested client and, per session, runs that session's plan
//! (`<plans>/<n>.sh`: the files it changes) and prints its stream (`<plans>/<n>.jsonl`). The
//! real client is driven in `loopward-cli/tests/loop_claude_code/`. A session's hook answered
//! by the loop over its socket: `hooks.rs`.

mod hooks;

use loopward_core::{AgentId, AuditEvent, FinishReason, LayerVerdict, Person, RunId, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::cli_agent::{
    ClaudeCode, CliAgent, HookJudge, SessionLedgers, SessionLink, Verifier, CLAUDE_CODE_VERSION,
};
use loopward_runner::gates::ControlFiles;
use loopward_runner::journal::Journal;
use loopward_runner::layers::budget::{BudgetConfig, BudgetLayer};
use loopward_runner::layers::classjump::{ClassJump, ClassJumpConfig};
use loopward_runner::sandbox::Protected;
use loopward_runner::{BoxTurnService, RunReport, RunSpec, Runner, Workspace};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tower::Layer;

/// The stand-in client.
const FAKE: &str = r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "VERSION (Claude Code)"; exit 0; fi
n=$(cat "$PLANS/count" 2>/dev/null || echo 0)
echo $((n + 1)) > "$PLANS/count"
printf '%s' "$2" > "$PLANS/prompt-$n"
[ -f "$PLANS/$n.sh" ] && sh "$PLANS/$n.sh"
cat "$PLANS/$n.jsonl"
"#;

/// Writes the stand-in. A child process writes it: a process another test's thread forks while
/// this one holds the file open for writing keeps that descriptor until it execs, and the
/// script cannot be started meanwhile ("Text file busy").
fn write_script(path: &Path, text: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("sh")
        .args(["-c", "cat > \"$0\" && chmod 755 \"$0\""])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "writing {}",
        path.display()
    );
}

/// A session's stream: the client's init, one model call saying `text`, the result.
fn stream(text: &str, cost_usd: f64) -> String {
    [
        serde_json::json!({"type":"system","subtype":"init","session_id":"s","model":"claude-test"}),
        serde_json::json!({"type":"assistant","message":{"id":"msg_1","model":"claude-test",
            "content":[{"type":"text","text":text}],"usage":{"input_tokens":10,"output_tokens":2}}}),
        serde_json::json!({"type":"result","subtype":"success","is_error":false,"result":text,
            "num_turns":1,"total_cost_usd":cost_usd,"usage":{"input_tokens":10,"output_tokens":2}}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect()
}

struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    plans: PathBuf,
    runner: Runner,
}

fn agent() -> AgentId {
    AgentId::new("coder").unwrap()
}

/// A workspace, the stand-in with `sessions` (each: shell to run, stream to print), and a
/// runner whose one agent loops it against `test -f done.txt`.
fn setup(sessions: &[(&str, String)], no_progress: u32) -> Setup {
    setup_with(sessions, no_progress, Hooks::Unchecked, None, None)
}

/// How a test's sessions' hooks are governed.
enum Hooks {
    /// Not at all (the stand-in runs no hook).
    Unchecked,
    /// Each session's hook ledger closed by these.
    Ledgers(Arc<dyn SessionLedgers>),
    /// Each session's hook answered by this judge, over the session's socket.
    Judge(Arc<dyn HookJudge>),
}

/// [`setup`], with the sessions' hooks governed by `hooks`.
fn setup_with(
    sessions: &[(&str, String)],
    no_progress: u32,
    hooks: Hooks,
    class_jump: Option<ClassJump>,
    budget_usd: Option<f64>,
) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    let plans = dir.path().join("plans");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&plans).unwrap();
    for (i, (sh, jsonl)) in sessions.iter().enumerate() {
        std::fs::write(plans.join(format!("{i}.sh")), sh).unwrap();
        std::fs::write(plans.join(format!("{i}.jsonl")), jsonl).unwrap();
    }
    let program = dir.path().join("claude");
    write_script(&program, &FAKE.replace("VERSION", CLAUDE_CODE_VERSION));
    let root = root.canonicalize().unwrap();
    let ws = Workspace::new(&root).unwrap();
    let host = ClaudeCode {
        program,
        hook: loopward_runner::cli_agent::HookCommand::new("true", [""; 0]),
        args: vec![],
        env: vec![("PLANS".into(), plans.clone().into())],
    };
    host.check_version().unwrap();
    let protected = Protected::new(ControlFiles::default().resolved(&ws), vec![]);
    let verifier = Verifier::new("test -f done.txt", Duration::from_secs(30), protected);
    let mut cli = CliAgent::builder(agent(), host, verifier, dir.path().join("scratch"))
        .no_progress(no_progress);
    match hooks {
        Hooks::Unchecked => {}
        Hooks::Ledgers(l) => cli = cli.ledgers(l),
        Hooks::Judge(j) => cli = cli.hook_judge(j),
    }
    let mut service = match class_jump {
        Some(cj) => BoxTurnService::new(cj.layer().layer(cli.class_jump(cj).build())),
        None => BoxTurnService::new(cli.build()),
    };
    if let Some(usd) = budget_usd {
        let budget = BudgetLayer::reported(BudgetConfig {
            max_cost_usd: Some(usd),
            ..BudgetConfig::default()
        })
        .unwrap();
        service = BoxTurnService::new(budget.layer(service));
    }
    let runner = Runner::builder(ws)
        .max_turns(6)
        .agent(agent(), service)
        .unwrap()
        .build()
        .unwrap();
    Setup {
        _dir: dir,
        root,
        plans,
        runner,
    }
}

fn spec(sink: Arc<MemorySink>) -> RunSpec {
    RunSpec::new(
        RunId::new("loop").unwrap(),
        Person::at_the_keyboard().says("write done.txt"),
        agent(),
        sink,
    )
}

fn sessions_started(plans: &Path) -> u32 {
    std::fs::read_to_string(plans.join("count")).map_or(0, |c| c.trim().parse().unwrap())
}

fn verdicts(events: &[AuditEvent], layer: &str) -> Vec<LayerVerdict> {
    events
        .iter()
        .filter_map(|e| match e {
            AuditEvent::LayerDecision {
                layer: l, decision, ..
            } if l.as_str() == layer => Some(*decision),
            _ => None,
        })
        .collect()
}

/// How each turn in `events` ended, in order.
fn finishes(events: &[AuditEvent]) -> Vec<&FinishReason> {
    events
        .iter()
        .filter_map(|e| match e {
            AuditEvent::TurnEnded { finish, .. } => Some(finish),
            _ => None,
        })
        .collect()
}

fn events(sink: &MemorySink) -> Vec<AuditEvent> {
    sink.events().into_iter().map(|(_, e)| e).collect()
}

impl Setup {
    /// Runs the loop from the start, recording into a fresh memory sink.
    async fn run(&self) -> (RunReport, Arc<MemorySink>) {
        let sink = Arc::new(MemorySink::default());
        (self.runner.run(spec(sink.clone())).await, sink)
    }

    /// Resumes the loop as if killed right after its `sessions`-th session's turn was recorded
    /// in `sink`: the journal up to there, the stand-in's session count put back to match.
    async fn resume_after(
        &self,
        sink: &MemorySink,
        sessions: usize,
    ) -> (RunReport, Arc<MemorySink>) {
        let records = sink.events();
        let (cut, _) = records
            .iter()
            .enumerate()
            .filter(|(_, (_, e))| matches!(e, AuditEvent::TurnEnded { .. }))
            .nth(sessions - 1)
            .unwrap();
        let journal = Journal::from_records(&records[..=cut]).unwrap();
        std::fs::write(self.plans.join("count"), sessions.to_string()).unwrap();
        let resumed = Arc::new(MemorySink::default());
        let report = self
            .runner
            .resume(spec(resumed.clone()), &journal)
            .await
            .unwrap();
        (report, resumed)
    }
}

/// Two sessions costing `cost_usd` each: the first claims done without doing it, the second
/// does it.
fn done_on_second_try(cost_usd: f64) -> [(&'static str, String); 2] {
    [
        ("", stream("All done.", cost_usd)),
        ("echo yes > done.txt", stream("Now done.", cost_usd)),
    ]
}

#[tokio::test]
async fn a_session_that_claims_done_while_the_verifier_fails_is_refused_and_the_agent_goes_again() {
    let s = setup(&done_on_second_try(0.01), 3);
    let (report, sink) = s.run().await;
    assert_eq!(report.status, RunStatus::Completed);
    assert_eq!(report.turns, 2);
    assert_eq!(report.final_text, "Now done.");
    assert!(s.root.join("done.txt").is_file());
    let ev = events(&sink);
    assert_eq!(
        verdicts(&ev, "verify"),
        [LayerVerdict::Refused, LayerVerdict::Allow]
    );
    assert_eq!(
        finishes(&ev),
        [&FinishReason::Unverified, &FinishReason::Done]
    );
    // Both sessions' model calls, and what they reported they cost.
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, AuditEvent::ModelCall { .. }))
            .count(),
        2
    );
    assert_eq!(verdicts(&ev, "budget"), [LayerVerdict::Observed; 2]);
}

#[tokio::test]
async fn a_resumed_loop_runs_no_finished_session_again() {
    let s = setup(&done_on_second_try(0.0), 3);
    let (first, sink) = s.run().await;
    assert_eq!(first.status, RunStatus::Completed);
    // Killed right after its first session's turn was recorded.
    std::fs::remove_file(s.root.join("done.txt")).unwrap();
    let (report, resumed) = s.resume_after(&sink, 1).await;
    assert_eq!(report.status, RunStatus::Completed);
    assert_eq!(report.turns, 2);
    assert_eq!(sessions_started(&s.plans), 2, "one session ran on resume");
    let ev = events(&resumed);
    let sessions = ev
        .iter()
        .filter(|e| matches!(e, AuditEvent::ToolRequested { tool, .. } if tool == "claude_code"))
        .count();
    assert_eq!(sessions, 1);
}

#[tokio::test]
async fn a_stream_the_parser_does_not_know_fails_the_run_naming_the_line() {
    let odd = format!(
        "{}{}\n",
        stream("x", 0.0).lines().next().unwrap(),
        "\n{\"type\":\"telepathy\"}"
    );
    let s = setup(&[("", odd)], 3);
    let (report, sink) = s.run().await;
    let RunStatus::Failed { error } = &report.status else {
        panic!("{:?}", report.status)
    };
    assert!(
        error.contains("line 2") && error.contains("telepathy"),
        "{error}"
    );
    // What was recorded before stays: the session's start and end.
    let ev = events(&sink);
    assert!(ev
        .iter()
        .any(|e| matches!(e, AuditEvent::ToolFinished { tool, is_error: true, .. } if tool == "claude_code")));
}

#[tokio::test]
async fn sessions_that_change_nothing_and_leave_the_verifier_failing_stop_the_loop() {
    let idle = || ("", stream("All done.", 0.0));
    let s = setup(&[idle(), idle(), idle(), idle()], 2);
    let (report, sink) = s.run().await;
    let RunStatus::CapReached { cap } = &report.status else {
        panic!("{:?}", report.status)
    };
    assert!(cap.contains("no progress"), "{cap}");
    // The first failure sets the baseline; the next two are repeats by evidence.
    assert_eq!(sessions_started(&s.plans), 3);
    assert_eq!(
        verdicts(&events(&sink), "repeat"),
        [LayerVerdict::Refused, LayerVerdict::Refused]
    );
}

#[tokio::test]
async fn a_session_that_changes_files_is_progress_even_when_the_verifier_still_fails() {
    let s = setup(
        &[
            ("", stream("All done.", 0.0)),
            ("echo 1 > a.txt", stream("All done.", 0.0)),
            ("echo 2 > a.txt", stream("All done.", 0.0)),
            ("echo yes > done.txt", stream("Done.", 0.0)),
        ],
        1,
    );
    let (report, sink) = s.run().await;
    assert_eq!(report.status, RunStatus::Completed);
    assert_eq!(report.turns, 4, "completed only once verified");
    // Only the first failure had no earlier verdict; the rest changed a.txt or done.txt.
    assert!(verdicts(&events(&sink), "repeat").is_empty());
}

/// Hook ledgers as a client that never ran the hook leaves them: none.
struct NoHookRan;

impl SessionLedgers for NoHookRan {
    fn close(&self, _run: &RunId) -> Result<Option<SessionLink>, String> {
        Ok(None)
    }
}

#[tokio::test]
async fn a_session_whose_hook_never_ran_fails_the_run_as_ungoverned() {
    let s = setup_with(
        &[("echo yes > done.txt", stream("Done.", 0.0))],
        3,
        Hooks::Ledgers(Arc::new(NoHookRan)),
        None,
        None,
    );
    let (report, sink) = s.run().await;
    let RunStatus::Failed { error } = &report.status else {
        panic!("{:?}", report.status)
    };
    assert!(error.contains("not governed"), "{error}");
    // Not verified, so not completed, although the verifier would pass.
    assert!(verdicts(&events(&sink), "verify").is_empty());
}

#[tokio::test]
async fn failed_verifications_class_jump_and_exhaust_the_strategies() {
    let cj = ClassJump::new(ClassJumpConfig {
        strategies: vec!["patch".into(), "rewrite".into()],
        failures_per_strategy: 1,
        count_failed_tools: vec![],
    })
    .unwrap();
    let s = setup_with(
        &[
            ("echo 1 > a.txt", stream("All done.", 0.0)),
            ("echo 2 > a.txt", stream("All done.", 0.0)),
            ("echo yes > done.txt", stream("Done.", 0.0)),
        ],
        3,
        Hooks::Unchecked,
        Some(cj),
        None,
    );
    let (report, sink) = s.run().await;
    assert_eq!(report.status, RunStatus::Exhausted);
    assert_eq!(sessions_started(&s.plans), 2);
    assert_eq!(
        verdicts(&events(&sink), "class_jump"),
        [LayerVerdict::ClassJump, LayerVerdict::Exhausted]
    );
    // The second session was told to change strategy.
    let prompt = std::fs::read_to_string(s.plans.join("prompt-1")).unwrap();
    assert!(prompt.contains("Use strategy rewrite"), "{prompt}");
}

#[tokio::test]
async fn a_resumed_loop_keeps_counting_the_sessions_that_changed_nothing() {
    let idle = || ("", stream("All done.", 0.0));
    let s = setup(&[idle(), idle(), idle(), idle()], 2);
    let (first, sink) = s.run().await;
    assert!(matches!(first.status, RunStatus::CapReached { .. }));
    // Killed after the second session, whose repeat was the first in a row.
    let (report, _) = s.resume_after(&sink, 2).await;
    let RunStatus::CapReached { cap } = &report.status else {
        panic!("{:?}", report.status)
    };
    assert!(cap.contains("2 session(s) in a row"), "{cap}");
    assert_eq!(sessions_started(&s.plans), 3, "one more session, not two");
}

#[tokio::test]
async fn a_resumed_loop_is_held_to_the_cost_its_sessions_reported() {
    let costly = |sh| (sh, stream("All done.", 0.01));
    let s = setup_with(
        &[
            costly("echo 1 > a.txt"),
            costly("echo 2 > a.txt"),
            costly("echo 3 > a.txt"),
        ],
        3,
        Hooks::Unchecked,
        None,
        Some(0.015),
    );
    let (first, sink) = s.run().await;
    assert!(
        matches!(first.status, RunStatus::BudgetExceeded { .. }),
        "{:?}",
        first.status
    );
    assert_eq!(sessions_started(&s.plans), 2);
    // Killed after the first session ($0.01 of $0.015 spent): one more session spends it.
    let (report, resumed) = s.resume_after(&sink, 1).await;
    assert!(
        matches!(report.status, RunStatus::BudgetExceeded { .. }),
        "{:?}",
        report.status
    );
    assert_eq!(
        sessions_started(&s.plans),
        2,
        "one more session, not two: {:#?}",
        events(&resumed)
    );
}
