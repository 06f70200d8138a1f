//! A team of CLI agents routes itself over MCP: each session's client starts `loopward mcp`
//! (this binary) from the MCP config its session is given and calls `handoff` there; the call
//! is relayed to the runner, which runs it through the team's gates and records it, and
//! follows the handoff. The client here is a scripted stand-in that speaks MCP on stdio
//! (`fixtures/mcp-stand-in.py`); the real clients (Claude Code, Codex, Gemini CLI) do the same
//! in `mcp_clients.rs`.

use loopward::config::Config;
use loopward::team::{self, CliAgents, Options};
use loopward_core::{AgentId, AuditEvent, FinishReason, Person, RunId, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::cli_agent::{
    ClaudeCode, CliAgent, CliAgentBuilder, McpServer, RecordedSessions, Verifier,
    CLAUDE_CODE_VERSION,
};
use loopward_runner::gates::ControlFiles;
use loopward_runner::model::fake::{FakeModel, Script};
use loopward_runner::model::BoxModelService;
use loopward_runner::sandbox::Protected;
use loopward_runner::{RunReport, RunSpec, Runner, Workspace};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A team of one: the planner, a CLI agent with the `say` tool.
const SAYER: &str = r#"
run = { first = "planner" }
agent = [{ name = "planner", kind = "claude-code", verify = "true", tools = ["say"] }]
"#;

const TEAM: &str = r#"
[run]
first = "planner"

[[agent]]
name = "planner"
kind = "claude-code"
verify = "test -f plan.md"
tools = ["handoff"]

[[agent]]
name = "builder"
kind = "claude-code"
verify = "test -f done.txt"
tools = ["handoff"]

[[agent]]
name = "reviewer"
kind = "claude-code"
verify = "true"
"#;

/// The team's CLI agents: sessions of the stand-in, served loopward's tools by this binary.
struct StandIns {
    plans: PathBuf,
    scratch: PathBuf,
    root: PathBuf,
    /// Replaying: the sessions as a ledger recorded them (no client runs).
    recorded: Option<Arc<RecordedSessions>>,
}

impl CliAgents for StandIns {
    fn agent(&self, a: &loopward::config::AgentConfig) -> anyhow::Result<CliAgentBuilder> {
        let host = ClaudeCode {
            program: Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp-stand-in.py"),
            hook: loopward_runner::cli_agent::HookCommand::new("true", [""; 0]),
            args: vec![],
            env: vec![
                ("PLANS".into(), self.plans.clone().into()),
                ("STAND_IN_VERSION".into(), CLAUDE_CODE_VERSION.into()),
            ],
        };
        host.check_version()?;
        let ws = Workspace::new(&self.root)?;
        let protected = Protected::new(ControlFiles::default().resolved(&ws), vec![]);
        let verifier = Verifier::new(
            a.verify.clone().unwrap_or_default(),
            Duration::from_secs(30),
            protected,
        );
        let b = CliAgent::builder(a.name.clone(), host, verifier, self.scratch.clone()).mcp_server(
            McpServer {
                program: env!("CARGO_BIN_EXE_loopward").into(),
                args: vec!["mcp".into()],
            },
        );
        Ok(match &self.recorded {
            Some(r) => b.recorded(r.clone()),
            None => b,
        })
    }
}

struct Setup {
    runner: Runner,
    root: PathBuf,
    plans: PathBuf,
    /// Last, so that it is removed after the runner working in it is dropped.
    _dir: tempfile::TempDir,
}

/// A workspace, the sessions' plans (in order), and the team of `config` over the stand-in.
fn setup(config: &str, sessions: &[Value]) -> Setup {
    setup_with(config, sessions, Script::default())
}

/// [`setup`], the model agents answering from `script`.
fn setup_with(config: &str, sessions: &[Value], script: Script) -> Setup {
    setup_full(config, sessions, script, None)
}

/// [`setup`], replaying the sessions `recorded` (in a workspace of their own, still empty).
fn setup_replay(config: &str, recorded: &MemorySink) -> Setup {
    let recorded = RecordedSessions::from_records(&recorded.events());
    setup_full(config, &[], Script::default(), Some(Arc::new(recorded)))
}

fn setup_full(
    config: &str,
    sessions: &[Value],
    script: Script,
    recorded: Option<Arc<RecordedSessions>>,
) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let plans = dir.path().join("plans");
    std::fs::create_dir_all(&plans).unwrap();
    for (i, s) in sessions.iter().enumerate() {
        std::fs::write(plans.join(format!("{i}.json")), s.to_string()).unwrap();
    }
    let root = dir.path().join("ws");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let cfg = Config::parse("loopward.toml", config).unwrap();
    let model = BoxModelService::new(FakeModel::new(script));
    let runner = team::build(
        &cfg,
        &root,
        model,
        Options {
            cli_agents: Some(Arc::new(StandIns {
                plans: plans.clone(),
                scratch: dir.path().join("scratch"),
                root: root.clone(),
                recorded,
            })),
            ..Options::default()
        },
    )
    .unwrap();
    Setup {
        runner,
        root,
        plans,
        _dir: dir,
    }
}

impl Setup {
    /// Runs the team from the planner on the task, into memory; the run must complete.
    async fn completed(&self) -> (RunReport, Arc<MemorySink>) {
        let sink = Arc::new(MemorySink::default());
        let report = self
            .runner
            .run(RunSpec::new(
                RunId::new("team").unwrap(),
                Person::at_the_keyboard().says("Plan it, then build it."),
                AgentId::new("planner").unwrap(),
                sink.clone(),
            ))
            .await;
        assert_eq!(report.status, RunStatus::Completed, "{report:?}");
        (report, sink)
    }
}

/// What session `n`'s client read from the MCP server.
fn seen(plans: &Path, n: u32) -> Value {
    serde_json::from_str(&std::fs::read_to_string(plans.join(format!("mcp-{n}.json"))).unwrap())
        .unwrap()
}

/// The text and error flag of each `tools/call` answer a session read.
fn calls(session: &Value) -> Vec<(String, bool)> {
    let answers = session["calls"].as_array().unwrap();
    let result = |answer: &Value| {
        let r = &answer["result"];
        let text = r["content"][0]["text"].as_str().unwrap_or_default();
        (text.to_string(), r["isError"] == true)
    };
    answers.iter().map(result).collect()
}

fn events(sink: &MemorySink) -> Vec<AuditEvent> {
    sink.events().into_iter().map(|(_, e)| e).collect()
}

fn handoff(to: &str, message: &str) -> Value {
    json!({"name": "handoff", "arguments": {"to": to, "message": message}})
}

#[tokio::test]
async fn a_cli_session_hands_off_over_mcp_once_and_the_builder_session_takes_over() {
    let s = setup(
        TEAM,
        &[
            json!({"write": {"plan.md": "# Plan\n1. done.txt\n"},
                   "calls": [handoff("builder", "Write done.txt."), handoff("reviewer", "And review.")],
                   "text": "Handed to the builder."}),
            json!({"write": {"done.txt": "yes\n"}, "text": "Built."}),
        ],
    );
    let (report, sink) = s.completed().await;
    assert_eq!(report.turns, 2);
    assert_eq!(report.final_text, "Built.");
    assert!(s.root.join("done.txt").is_file());

    // The planner's client was offered loopward's tools, the handoff's targets its team.
    let planner = seen(&s.plans, 0);
    assert_eq!(planner["server"], "loopward");
    // Its hooks are told so: a territory refusal there names the handoff.
    assert_eq!(planner["tools_env"], "handoff");
    let tools = &planner["tools"]["result"]["tools"];
    assert_eq!(tools[0]["name"], "handoff");
    assert_eq!(
        tools[0]["inputSchema"]["properties"]["to"]["enum"],
        json!(["builder", "reviewer"])
    );
    // The first handoff stands; the second is refused with what to do, as its tool result.
    let calls = calls(&planner);
    assert_eq!(calls.len(), 2);
    assert!(
        !calls[0].1 && calls[0].0.contains("handed off to builder"),
        "{calls:?}"
    );
    assert!(
        calls[1].1 && calls[1].0.contains("a handoff to builder already stands"),
        "{calls:?}"
    );
    // The builder's session was told who handed it what.
    let prompt = std::fs::read_to_string(s.plans.join("prompt-1")).unwrap();
    assert!(
        prompt.contains("planner handed the work to you: Write done.txt."),
        "{prompt}"
    );

    // In the run's ledger: both calls under the planner's turn, the handoff and the refusal,
    // no verification of the session that handed off, the builder's verified.
    let ev = events(&sink);
    let requested: Vec<&str> = ev
        .iter()
        .filter_map(|e| match e {
            AuditEvent::ToolRequested { call_id, tool, .. } if tool == "handoff" => {
                Some(call_id.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(requested, ["mcp-1", "mcp-2"]);
    let handoffs: Vec<&str> = ev
        .iter()
        .filter_map(|e| match e {
            AuditEvent::HandoffRegistered(h) => Some(h.to.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(handoffs, ["builder"]);
    assert!(ev.iter().any(
        |e| matches!(e, AuditEvent::HandoffRefused { to, standing } if to.as_str() == "reviewer" && standing.as_str() == "builder")
    ));
    let finishes: Vec<&FinishReason> = ev
        .iter()
        .filter_map(|e| match e {
            AuditEvent::TurnEnded { finish, .. } => Some(finish),
            _ => None,
        })
        .collect();
    assert_eq!(finishes, [&FinishReason::Handoff, &FinishReason::Done]);
    let verified = ev
        .iter()
        .filter(|e| matches!(e, AuditEvent::ToolRequested { tool, .. } if tool == "verify"))
        .count();
    assert_eq!(verified, 1);
    assert_eq!(report.handoffs.len(), 1);
}

#[tokio::test]
async fn a_review_gate_refuses_a_cli_sessions_handoff_and_the_corrected_one_stands() {
    let config =
        format!("{TEAM}\n[[gates.review]]\nfrom = \"planner\"\nvia = \"reviewer\"\nwhen = []\n");
    let s = setup(
        &config,
        &[
            json!({"calls": [handoff("builder", "Build it."), handoff("reviewer", "Review the plan.")],
                   "text": "Sent for review."}),
            json!({"text": "Reviewed."}),
        ],
    );
    let (report, sink) = s.completed().await;
    let calls = calls(&seen(&s.plans, 0));
    // Refused by the gate, correctably: the model reads where to hand off instead.
    assert!(
        calls[0].1 && calls[0].0.contains("hand off to reviewer instead"),
        "{calls:?}"
    );
    assert!(!calls[1].1, "{calls:?}");
    let turns: Vec<String> = events(&sink)
        .iter()
        .filter_map(|e| match e {
            AuditEvent::TurnStarted { agent } => Some(agent.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(turns, ["planner", "reviewer"]);
    assert_eq!(report.handoffs.len(), 1);
    assert_eq!(report.handoffs[0].to.as_str(), "reviewer");
}

/// The decisions of the review gate `gate` in `sink`, in order: (decision, reason).
fn gate_decisions(sink: &MemorySink, gate: &str) -> Vec<(String, String)> {
    events(sink)
        .iter()
        .filter_map(|e| match e {
            AuditEvent::GateDecision {
                gate: g, decision, ..
            } if &*g.name == gate => {
                let d = serde_json::to_value(decision).unwrap();
                Some((
                    d["decision"].as_str().unwrap_or_default().to_string(),
                    d["reason"].as_str().unwrap_or_default().to_string(),
                ))
            }
            _ => None,
        })
        .collect()
}

const REVIEW_SRC: &str =
    "\n[[gates.review]]\nname = \"src-review\"\nfrom = \"planner\"\nvia = \"reviewer\"\nwhen = [\"src/**\"]\n";

#[tokio::test]
async fn a_cli_session_that_wrote_a_reviewed_path_is_refused_a_handoff_past_the_reviewer() {
    let config = format!("{TEAM}{REVIEW_SRC}");
    let s = setup(
        &config,
        &[
            json!({"write": {"src/lib.rs": "fn a() {}\n", "plan.md": "# Plan\n"},
                   "calls": [handoff("builder", "Build it."), handoff("reviewer", "Review src/lib.rs.")],
                   "text": "Sent for review."}),
            json!({"text": "Reviewed."}),
        ],
    );
    let (report, sink) = s.completed().await;
    let calls = calls(&seen(&s.plans, 0));
    // The session wrote src/lib.rs with its client's own tools: the gate knows it from the
    // workspace, names it (not plan.md, which it does not review) and says where to go.
    assert!(
        calls[0].1
            && calls[0]
                .0
                .contains("this turn you changed src/lib.rs, which reviewer must review")
            && calls[0].0.contains("hand off to reviewer instead"),
        "{calls:?}"
    );
    assert!(!calls[0].0.contains("plan.md"), "{calls:?}");
    assert!(!calls[1].1, "{calls:?}");
    assert_eq!(report.handoffs.len(), 1);
    assert_eq!(report.handoffs[0].to.as_str(), "reviewer");
    // What the session had written is in the ledger, before the handoff it armed the gate for.
    let ev = events(&sink);
    let changed = ev
        .iter()
        .position(|e| matches!(e, AuditEvent::LayerDecision { detail, .. } if detail.to_json().get("changed").is_some()))
        .expect("the session's changes recorded");
    let AuditEvent::LayerDecision { detail, .. } = &ev[changed] else {
        unreachable!()
    };
    let paths: Vec<Value> = detail.to_json()["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| json!([c["path"], c["kind"]]))
        .collect();
    assert_eq!(
        paths,
        [
            json!(["plan.md", "create"]),
            json!(["src/lib.rs", "create"])
        ]
    );
    let first_call = ev
        .iter()
        .position(|e| matches!(e, AuditEvent::ToolRequested { call_id, .. } if call_id == "mcp-1"))
        .unwrap();
    assert!(changed < first_call);
    let decided = gate_decisions(&sink, "src-review");
    assert_eq!(decided[0].0, "deny", "{decided:?}");

    // Replayed offline, in an empty workspace, the handoff is judged by the recorded changes:
    // the same decisions.
    let r = setup_replay(&config, &sink);
    let (_, replayed) = r.completed().await;
    assert!(!r.root.join("src/lib.rs").exists());
    assert_eq!(gate_decisions(&replayed, "src-review"), decided);
}

#[tokio::test]
async fn a_cli_session_that_wrote_no_reviewed_path_hands_off_past_the_reviewer() {
    let s = setup(
        &format!("{TEAM}{REVIEW_SRC}"),
        &[
            json!({"write": {"plan.md": "# Plan\n"}, "calls": [handoff("builder", "Build it.")],
                   "text": "Handed on."}),
            json!({"write": {"done.txt": "yes\n"}, "text": "Built."}),
        ],
    );
    let (report, sink) = s.completed().await;
    assert_eq!(report.handoffs[0].to.as_str(), "builder");
    let decided = gate_decisions(&sink, "src-review");
    assert!(decided.iter().all(|(d, _)| d == "allow"), "{decided:?}");
}

/// A mixed team: a model agent hands off to a CLI agent with its own `handoff` tool, and the
/// CLI agent's session hands on to a model agent over MCP.
#[tokio::test]
async fn in_a_mixed_team_a_model_agent_and_a_cli_agent_hand_off_to_each_other() {
    let config = r#"
run = { first = "planner" }
agent = [
    { name = "planner", tools = ["handoff"] },
    { name = "builder", kind = "claude-code", verify = "test -f done.txt", tools = ["handoff"] },
    { name = "reviewer" },
]
"#;
    let script = Script::from_toml(
        r#"
[[agents.planner]]
tool_calls = [{ name = "handoff", arguments = { to = "builder", message = "Write done.txt." } }]

[[agents.reviewer]]
text = "Looks good."
"#,
    )
    .unwrap();
    let s = setup_with(
        config,
        &[json!({"write": {"done.txt": "yes\n"},
                 "calls": [handoff("reviewer", "Review done.txt.")],
                 "text": "Built; over to the reviewer."})],
        script,
    );
    let (report, _) = s.completed().await;
    assert_eq!(report.final_text, "Looks good.");
    let route: Vec<(String, String)> = report
        .handoffs
        .iter()
        .map(|h| (h.from.to_string(), h.to.to_string()))
        .collect();
    assert_eq!(
        route,
        [
            ("planner".to_string(), "builder".to_string()),
            ("builder".to_string(), "reviewer".to_string())
        ]
    );
    assert!(std::fs::read_to_string(s.plans.join("prompt-0"))
        .unwrap()
        .contains("planner handed the work to you: Write done.txt."),);
}

#[tokio::test]
async fn a_cli_session_says_something_over_mcp_and_it_is_recorded_under_its_turn() {
    let say = |text: &str| json!({"name": "say", "arguments": {"text": text}});
    let s = setup(
        SAYER,
        &[json!({"calls": [say("plan <b>half</b> done"), say(" ")], "text": "Planned."})],
    );
    let (_, sink) = s.completed().await;

    // The client was offered say; the first call is said and the run goes on, the empty one is
    // refused with what to write.
    let planner = seen(&s.plans, 0);
    assert_eq!(planner["tools_env"], "say");
    assert_eq!(planner["tools"]["result"]["tools"][0]["name"], "say");
    let calls = calls(&planner);
    assert_eq!(
        calls,
        [
            (loopward_runner::tools::SAID.to_string(), false),
            (
                "invalid arguments for say: `text` is empty: write what the people watching the run should read; call it again with arguments that match its schema".to_string(),
                true
            )
        ]
    );

    // In the ledger: each call requested and finished under the planner's turn, the words
    // said once, as the planner's, and no person's message but the task.
    let records = sink.events();
    let says: Vec<(Option<u32>, Option<&str>, &str)> = records
        .iter()
        .filter_map(|(scope, e)| match e {
            AuditEvent::ToolRequested { call_id, tool, .. }
            | AuditEvent::ToolFinished { call_id, tool, .. }
                if tool == "say" =>
            {
                Some((
                    scope.turn.map(|t| t.0),
                    scope.agent.as_ref().map(AgentId::as_str),
                    call_id.as_str(),
                ))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        says,
        [
            (Some(1), Some("planner"), "mcp-1"),
            (Some(1), Some("planner"), "mcp-1"),
            (Some(1), Some("planner"), "mcp-2"),
            (Some(1), Some("planner"), "mcp-2"),
        ]
    );
    let mut sayings = loopward_runner::audit::Sayings::default();
    let said: Vec<String> = records
        .iter()
        .filter_map(|(scope, e)| sayings.fold(scope.agent.as_ref(), e))
        .map(|s| s.to_string())
        .collect();
    assert_eq!(said, ["planner said: plan <b>half</b> done"]);
    let people = records
        .iter()
        .filter(|(_, e)| matches!(e, AuditEvent::HumanMessage { .. }))
        .count();
    assert_eq!(people, 1, "the task only: an agent's words are no person's");
}

#[tokio::test]
async fn a_command_that_finds_the_relay_socket_without_its_token_is_refused_and_nothing_recorded() {
    let forged = json!({"op": "call", "name": "say", "arguments": {"text": "the person approves"}});
    let s = setup(
        SAYER,
        &[
            json!({"forge": [{"request": forged}, {"request": forged, "token": "guessed"},
                            {"request": {"op": "list"}}],
                 "text": "Done."}),
        ],
    );
    let (_, sink) = s.completed().await;

    // Each forged connection is answered with a refusal (the tools are not even listed).
    let answers = seen(&s.plans, 0)["forged"].clone();
    let answers: Vec<Value> = answers
        .as_array()
        .unwrap()
        .iter()
        .map(|a| serde_json::from_str(a.as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(answers.len(), 3);
    for a in &answers {
        assert_eq!(
            (&a["reply"], &a["is_error"]),
            (&json!("result"), &json!(true)),
            "{a}"
        );
        assert!(
            a["content"]
                .as_str()
                .unwrap()
                .contains("LOOPWARD_MCP_TOKEN"),
            "{a}"
        );
    }
    // Nothing of them in the ledger: no call requested, no words said.
    let records = events(&sink);
    assert!(
        !records
            .iter()
            .any(|e| matches!(e, AuditEvent::ToolRequested { tool, .. } if tool == "say")),
        "{records:?}"
    );
}
