//! `loopward loop` over the real Claude Code client, headless, against the scripted Messages API
//! on 127.0.0.1: what the "model" tries is the script's; what happens is decided by the client,
//! the hook, the verifier and the loop. Asserted in the loop's ledger (the sessions' hook
//! decisions among its records), on disk and in what the model read back.
//!
//! Needs the client (`scripts/claude-code-install.sh`, run by `.ci/run`, or `LOOPWARD_CLAUDE`);
//! without one each test says so loudly and passes.

#[path = "../support/mod.rs"]
mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::anthropic_server::{self, Reply};
use support::clients::{self, Client, ROADMAP};
use support::loop_ledger;
use support::loop_ledger::{
    assert_replays_the_same, decisions, kill_mid_command, kind, loopward_in, project, records,
    running, task, verify_run, VERIFY,
};

macro_rules! need_claude {
    () => {
        match Client::ClaudeCode.find() {
            Some(c) => c,
            None => return,
        }
    };
}

/// The client and a fresh [`project`]: `(claude, dir, root, home)`. Without the client the test
/// returns, saying so loudly.
macro_rules! claude_and_project {
    () => {{
        let claude = need_claude!();
        let (dir, root, home) = project();
        (claude, dir, root, home)
    }};
}

/// `loopward loop …` in `root`, with the client's environment pointed at the server.
fn loop_command(claude: &Path, root: &Path, home: &Path, port: u16, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loopward"));
    c.current_dir(root)
        .arg("loop")
        .args(args)
        .arg("--claude")
        .arg(claude)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("SHELL", "/bin/bash")
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", "test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null());
    c
}

fn run_loop(claude: &Path, root: &Path, home: &Path, port: u16, args: &[&str]) -> Output {
    loop_ledger::shown(&mut loop_command(claude, root, home, port, args))
}

fn sessions(rs: &[Value]) -> usize {
    loop_ledger::sessions(rs, "claude_code")
}

/// A first session that runs `command` (one that stalls), then [`finishing_session`].
fn stalled_then_finishing(command: &str, description: &str) -> Vec<Reply> {
    let mut script = vec![Reply::bash(command, description)];
    script.extend(finishing_session());
    script
}

/// The second session writes the file the verifier looks for, and says so.
fn finishing_session() -> Vec<Reply> {
    vec![
        Reply::bash("echo yes > notes/done.txt", "finish"),
        Reply::text("Done, really."),
    ]
}

#[test]
fn a_claim_of_done_that_the_verifier_refuses_gets_another_session_and_the_loop_ends_verified() {
    let (claude, _dir, root, home) = claude_and_project!();
    let p = |rel: &str| root.join(rel).to_str().unwrap().to_string();
    let mut script = vec![
        // Session 1: a write into the planner's territory, refused by the hook inside the
        // session; the agent corrects course (writes its own notes) and claims it is done.
        Reply::write(p("plans/roadmap.md"), "# mine now\n"),
        Reply::write(p("notes/a.md"), "note\n"),
        Reply::text("All done."),
    ];
    script.extend(finishing_session());
    let (port, server) = anthropic_server::start(script);
    let out = run_loop(&claude, &root, &home, port, &task(VERIFY, "loop1", &[]));
    assert_eq!(out.status.code(), Some(0), "the loop ends verified");
    let rs = records(&root, "loop1");
    // The timeline names the file each Write gave, inside the workspace relative to it.
    let shown = String::from_utf8_lossy(&out.stdout);
    for line in ["· Write plans/roadmap.md", "· Write notes/a.md"] {
        assert!(shown.lines().any(|l| l.trim() == line), "{line}: {shown}");
    }

    // Two sessions: the first one's claim refused by the verifier, the second verified.
    loop_ledger::assert_verified_in_two_sessions(&rs, "claude_code");
    assert_eq!(decisions(&rs, "verify")[0]["turn"], 1);
    // The sessions' hooks kept no ledgers of their own: each asked the loop, which recorded
    // its decisions in the run's one ledger. Each session's prompt was the loop's (the task and
    // the verifier's output), an observed notice under the session's turn, not a person's words.
    let own: Vec<_> = std::fs::read_dir(root.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("claude-code-"))
        .collect();
    assert!(own.is_empty(), "{own:?}");
    let prompts: Vec<&Value> = decisions(&rs, "claude_code")
        .into_iter()
        .filter(|r| r["data"]["detail"]["event"] == "UserPromptSubmit:loop-prompt")
        .map(|r| &r["turn"])
        .collect();
    assert_eq!(prompts, [&json!(1), &json!(2)]);
    assert_eq!(kind(&rs, "human_message").count(), 1, "the task only");
    assert!(!decisions(&rs, "hook").is_empty());
    assert!(decisions(&rs, "session_ledger").is_empty());
    // The second session was told why it runs.
    let second = kind(&rs, "tool_requested")
        .filter(|r| r["data"]["tool"] == "claude_code")
        .nth(1)
        .unwrap();
    let prompt = second["data"]["arguments"]["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("session 2") && prompt.contains(VERIFY),
        "{prompt}"
    );
    // Each model call inside the sessions is in the loop's ledger, with its usage.
    assert_eq!(kind(&rs, "model_call").count(), 5);

    // Inside session 1: the refusal the model read, the territory untouched, the correction.
    let results = server.tool_results();
    let (_, denied, text) = &results[0];
    assert!(
        *denied && text.contains("plans/roadmap.md belongs to planner"),
        "{text}"
    );
    crate::support::assert_file(&root, "plans/roadmap.md", ROADMAP);
    crate::support::assert_file(&root, "notes/a.md", "note\n");

    // The refusal is a record of the run's ledger, under session 1's turn, after the hook
    // decision that says how many records are the hook's; the ledger verifies.
    let at = rs
        .iter()
        .position(|r| {
            r["kind"] == "gate_decision"
                && r["data"]["gate"] == "territory:planner"
                && r["data"]["decision"]["decision"] == "deny"
        })
        .expect("the territory refusal is in the run's ledger");
    assert_eq!(rs[at]["turn"], 1);
    let frame = rs[..at]
        .iter()
        .rev()
        .find(|r| r["kind"] == "layer_decision" && r["data"]["layer"] == "hook")
        .unwrap();
    assert_eq!(frame["turn"], 1);
    assert_eq!(frame["data"]["detail"]["host"], "claude-code");
    let v = verify_run(&root, &home, "loop1");
    assert!(v.status.success(), "verify loop1: {v:?}");
    // Its id is not reused, and its settings stay as they were; `run --resume` sends it here.
    let kept = std::fs::read(root.join("runs/loop1/loop.json")).unwrap();
    let again = run_loop(&claude, &root, &home, port, &task("true", "loop1", &[]));
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("loopward loop --resume loop1"));
    assert_eq!(
        std::fs::read(root.join("runs/loop1/loop.json")).unwrap(),
        kept
    );
    let run = loopward_in(&root, &home, &["run", "--resume", "loop1"]);
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("loopward loop --resume loop1"),
        "{run:?}"
    );
    // Replayed from the ledger, the loop's decisions come out the same.
    assert_replays_the_same(&root, &home, "loop1");
}

#[test]
fn a_session_past_its_timeout_is_ended_by_its_recorded_pid_and_the_loop_goes_on() {
    let (claude, _dir, root, home) = claude_and_project!();
    let script = stalled_then_finishing("sh notes/stall.sh 47.25", "stall");
    let (port, _server) = anthropic_server::start(script);
    let started = Instant::now();
    let out = run_loop(
        &claude,
        &root,
        &home,
        port,
        &task(VERIFY, "slow", &["--session-timeout", "8s"]),
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );
    assert!(
        !running(&["sleep", "47.25"]),
        "the stalled command outlived its session"
    );
    let rs = records(&root, "slow");
    let first = kind(&rs, "tool_finished")
        .find(|r| r["data"]["tool"] == "claude_code")
        .unwrap();
    let text = first["data"]["output"].as_str().unwrap();
    let pid = decisions(&rs, "session")[0]["data"]["detail"]["pid"].clone();
    assert!(
        text.contains("ran past its timeout of 8s") && text.contains(&format!("(PID {pid})")),
        "{text}"
    );
    assert_eq!(sessions(&rs), 2);
}

#[test]
fn a_budget_stops_the_loop_on_the_cost_the_sessions_report() {
    let (claude, _dir, root, home) = claude_and_project!();
    let (port, _server) = anthropic_server::start(vec![Reply::text("All done.")]);
    let out = run_loop(
        &claude,
        &root,
        &home,
        port,
        &task(VERIFY, "spent", &["--max-cost-usd", "0.000001", "--json"]),
    );
    assert_eq!(out.status.code(), Some(5), "exit 5: budget spent");
    // `--json` as `loopward run --json`: the last line says how the loop ended.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "end");
    assert_eq!(last["exit_code"], 5);
    let rs = records(&root, "spent");
    assert_eq!(sessions(&rs), 1, "no session after the budget was spent");
    let reported = decisions(&rs, "budget");
    assert!(reported
        .iter()
        .any(|d| d["data"]["detail"]["reported_cost_micros"].as_u64() > Some(0)));
    assert!(reported
        .iter()
        .any(|d| d["data"]["decision"] == "budget_exceeded"));
    let end = kind(&rs, "run_ended").next().unwrap();
    assert_eq!(end["data"]["status"]["status"], "budget_exceeded");
    // `report` counts the cost the session reported, folded from the ledger.
    let spent: u64 = reported
        .iter()
        .filter_map(|d| d["data"]["detail"]["reported_cost_micros"].as_u64())
        .sum();
    let out = loopward_in(&root, &home, &["report", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = report["per_run"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run"] == "spent")
        .unwrap();
    assert_eq!(run["cost_micros"], spent);
}

#[test]
fn a_loop_killed_mid_session_resumes_with_that_session_interrupted_and_none_repeated() {
    let (claude, _dir, root, home) = claude_and_project!();
    let script = stalled_then_finishing("sh notes/stall.sh 48.75", "long work");
    let (port, server) = anthropic_server::start(script);
    let args = task(VERIFY, "killed", &[]);
    let mut child: Child = loop_command(&claude, &root, &home, port, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed (SIGKILL, by its PID) while the session's command runs.
    kill_mid_command(&mut child, &["sleep", "48.75"]);
    assert_eq!(server.served(), 1);

    // A person speaks into the stopped loop; the next session hears it.
    let said = loopward_in(
        &root,
        &home,
        &["say", "killed", "Keep your notes under notes/."],
    );
    assert!(said.status.success(), "{said:?}");

    let out = run_loop(&claude, &root, &home, port, &["--resume", "killed"]);
    assert_eq!(out.status.code(), Some(0), "the resumed loop ends verified");
    assert!(
        !running(&["sleep", "48.75"]),
        "the resumed loop ended the session left behind"
    );
    let rs = records(&root, "killed");
    assert_eq!(kind(&rs, "run_resumed").count(), 1);
    assert_eq!(
        sessions(&rs),
        2,
        "the interrupted session was not run again"
    );
    assert!(decisions(&rs, "resume")
        .iter()
        .any(|d| d["data"]["decision"] == "interrupted"));
    assert!(decisions(&rs, "session")
        .iter()
        .any(|d| d["data"]["detail"]["ended"] == true));
    assert_eq!(
        kind(&rs, "human_message").count(),
        2,
        "the task, then the person"
    );
    let second = kind(&rs, "tool_requested")
        .filter(|r| r["data"]["tool"] == "claude_code")
        .nth(1)
        .unwrap();
    let prompt = second["data"]["arguments"]["prompt"].as_str().unwrap();
    assert!(prompt.contains("Keep your notes under notes/."), "{prompt}");
    let v = verify_run(&root, &home, "killed");
    assert!(v.status.success(), "{v:?}");
    // Both parts replay to the same decisions.
    assert_replays_the_same(&root, &home, "killed");
}

#[test]
fn bad_input_is_refused_before_the_first_session_and_records_nothing() {
    let (claude, _dir, root, home) = claude_and_project!();
    let (port, server) = anthropic_server::start(vec![]);
    let cases: [(&[&str], &str); 3] = [
        (
            &["--prompt", "MISSING.md", "--verify", VERIFY],
            "MISSING.md",
        ),
        (
            &[
                "--prompt",
                "PROMPT.md",
                "--verify",
                "no-such-verifier --all",
            ],
            "no-such-verifier",
        ),
        (
            &[
                "--prompt",
                "PROMPT.md",
                "--verify",
                VERIFY,
                "--claude",
                "/bin/echo",
            ],
            "2.1.332",
        ),
    ];
    for (args, named) in cases {
        let mut c = loop_command(&claude, &root, &home, port, args);
        if args.contains(&"--claude") {
            // The later --claude wins: an untested client.
            c = Command::new(env!("CARGO_BIN_EXE_loopward"));
            c.current_dir(&root)
                .arg("loop")
                .args(args)
                .env("HOME", &home);
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
    }
    // A loopward hook the project installed for another agent would judge every call twice.
    let install = Command::new(env!("CARGO_BIN_EXE_loopward"))
        .args(["hook", "install", "--main-agent", "planner", "--config"])
        .arg(root.join("loopward.toml"))
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(install.status.success(), "{install:?}");
    let out = loop_command(
        &claude,
        &root,
        &home,
        port,
        &["--prompt", "PROMPT.md", "--verify", VERIFY],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("settings.json installs loopward's hook")
            && err.contains("--main-agent planner"),
        "{err}"
    );
    assert!(!root.join("runs").exists(), "nothing was recorded");
    assert!(server.requests().is_empty());
}

mod hooks;
mod readme_and_teams;
