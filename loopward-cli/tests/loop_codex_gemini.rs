//! `loopward loop --agent codex|gemini` over the real clients, headless, each against a
//! scripted API server of this test's own on 127.0.0.1 (the OpenAI Responses API as Codex's
//! custom provider, `--base-url …/v1`; the Gemini API through `GOOGLE_GEMINI_BASE_URL`): what
//! the "model" tries is the script's; what happens is decided by the client, the hook the loop
//! installs in the session's own config, the verifier and the loop. Asserted in the loop's
//! ledger, the sessions' hook ledgers, on disk and in what the model read back.
//!
//! Needs the clients (`scripts/codex-install.sh`, `scripts/gemini-install.sh`, run by
//! `.ci/run`, or `LOOPWARD_CODEX`/`LOOPWARD_GEMINI`); without one its test says so loudly and
//! passes.

mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::clients::{self, Client, ROADMAP};
use support::gemini_server::{self, Call};
use support::loop_ledger::{
    assert_replays_the_same, decisions, kill_mid_command, kind, project, records, running,
    sessions, shown, task, verify_run, VERIFY,
};
use support::responses_server::{self, Step};

/// `loopward loop --agent <agent> …` in `root`, the client pointed at the server on `port`;
/// the environment holds only what the client needs (its key, `PATH`, `HOME`).
fn loop_command(client: Client, program: &Path, root: &Path, home: &Path, port: u16) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loopward"));
    c.current_dir(root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("SHELL", "/bin/bash")
        .stdin(Stdio::null())
        .arg("loop");
    match client {
        Client::Codex => c
            .args(["--agent", "codex", "--model", "gpt-5.5", "--codex"])
            .arg(program)
            .arg("--base-url")
            .arg(format!("http://127.0.0.1:{port}/v1"))
            .env("OPENAI_API_KEY", "test"),
        _ => c
            .args([
                "--agent",
                "gemini",
                "--model",
                "gemini-2.5-flash",
                "--gemini",
            ])
            .arg(program)
            .arg("--base-url")
            .arg(format!("http://127.0.0.1:{port}"))
            .env("GEMINI_API_KEY", "test"),
    };
    c
}

/// The loop `loop1` on the task in `PROMPT.md`, its verifier [`VERIFY`].
fn run_loop(client: Client, program: &Path, root: &Path, home: &Path, port: u16) -> Output {
    shown(loop_command(client, program, root, home, port).args(task(VERIFY, "loop1", &[])))
}

/// A loop project ([`project`]) with the real Codex, which the scripted Responses API server
/// on `port` answers.
struct CodexProject {
    codex: PathBuf,
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    port: u16,
    server: responses_server::Server,
}

impl CodexProject {
    /// The project, its server answering with `script`; `None` (the test passes, having said
    /// why) where Codex is not installed.
    fn start(script: Vec<Step>) -> Option<Self> {
        let codex = Client::Codex.find()?;
        let (_dir, root, home) = project();
        let (port, server) = responses_server::start(script);
        Some(Self {
            codex,
            _dir,
            root,
            home,
            port,
            server,
        })
    }

    /// `loopward loop --agent codex …` in the project ([`loop_command`]).
    fn loop_command(&self) -> Command {
        loop_command(
            Client::Codex,
            &self.codex,
            &self.root,
            &self.home,
            self.port,
        )
    }
}

/// A first session whose `command` stalls (Codex hands a command's output back after its wait;
/// 30 s keeps a killed session from asking the server again before a resumed loop ends it),
/// then one that writes the file [`VERIFY`] looks for and says so.
fn stalled_then_finishing(command: &str) -> Vec<Step> {
    vec![
        Step::ExecWaiting(command.into(), 30_000),
        Step::Exec("echo yes > notes/done.txt".into()),
        Step::Text("Done, really.".into()),
    ]
}

/// What both clients' loops show: two sessions, the first one's claim of done refused by the
/// verifier, the second verified; what each session's hook decided in the loop's ledger under
/// the session's turn (the first one the territory refusal); the
/// roadmap untouched and the agent's correction on disk; the user's own client config
/// untouched.
fn assert_claim_refused_then_verified(client: Client, tool: &str, root: &Path, home: &Path) {
    let rs = records(root, "loop1");
    support::loop_ledger::assert_verified_in_two_sessions(&rs, tool);
    // Each session's stream is in the loop's ledger: its model call with the usage the client
    // reported, its tool calls, its answer.
    let calls: Vec<&Value> = kind(&rs, "model_call").collect();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert!(calls.iter().all(|c| c["data"]["usage"]["input_tokens"]
        .as_u64()
        .is_some_and(|n| n > 0)));
    let finished: Vec<&Value> = kind(&rs, "tool_finished")
        .filter(|r| r["data"]["tool"] == tool)
        .collect();
    assert!(
        finished[1]["data"]["output"]
            .as_str()
            .unwrap()
            .contains("answer: Done, really."),
        "{finished:#?}"
    );

    crate::support::assert_file(root, "plans/roadmap.md", ROADMAP);
    crate::support::assert_file(root, "notes/a.md", "note\n");
    // The hooks' decisions are in the loop's ledger, under each session's turn (the first one
    // the territory refusal); no session kept a ledger of its own.
    let turns: Vec<&Value> = decisions(&rs, "hook").iter().map(|r| &r["turn"]).collect();
    assert!(
        turns.contains(&&json!(1)) && turns.contains(&&json!(2)),
        "{turns:?}"
    );
    let refusal = kind(&rs, "gate_decision")
        .find(|r| {
            r["data"]["gate"] == "territory:planner" && r["data"]["decision"]["decision"] == "deny"
        })
        .expect("the territory refusal is in the loop's ledger");
    assert_eq!(refusal["turn"], 1);
    // The loop's prompt is never recorded as a person's words: the task is the only one.
    assert_eq!(kind(&rs, "human_message").count(), 1);
    let prefix = match client {
        Client::Codex => "codex-",
        _ => "gemini-",
    };
    let own: Vec<_> = std::fs::read_dir(root.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    assert!(own.is_empty(), "{own:?}");
    let v = verify_run(root, home, "loop1");
    assert!(v.status.success(), "verify loop1: {v:?}");
    // The hook was the session's only: nothing in the project's or the person's config
    // (Gemini CLI 0.61.0 leaves a `projects.json.*.tmp` in `~/.gemini` whatever its home is:
    // no settings).
    let (theirs, project) = match client {
        Client::Codex => (home.join(".codex"), root.join(".codex")),
        _ => (home.join(".gemini/settings.json"), root.join(".gemini")),
    };
    assert!(!theirs.exists(), "{} was written", theirs.display());
    assert!(!project.exists(), "{} was written", project.display());
    // Replayed from the ledger, the loop's decisions come out the same.
    assert_replays_the_same(root, home, "loop1");
}

#[test]
fn codex_a_claim_of_done_the_verifier_refuses_gets_another_session_and_the_loop_ends_verified() {
    let Some(p) = CodexProject::start(vec![
        // Session 1: an edit of the planner's roadmap, refused by the hook inside the session;
        // the agent corrects course (its own notes) and claims it is done.
        Step::update("plans/roadmap.md", "1. greeting", "1. mine now"),
        Step::Patch("*** Begin Patch\n*** Add File: notes/a.md\n+note\n*** End Patch\n".into()),
        Step::Text("All done.".into()),
        // Session 2: the file the verifier looks for.
        Step::Exec("echo yes > notes/done.txt".into()),
        Step::Text("Done, really.".into()),
    ]) else {
        return;
    };
    let out = run_loop(Client::Codex, &p.codex, &p.root, &p.home, p.port);
    assert_eq!(out.status.code(), Some(0), "the loop ends verified");
    // The refusal the model read, naming the owner.
    let outputs = p.server.outputs();
    assert!(
        outputs[0].1.contains("plans/roadmap.md belongs to planner"),
        "{outputs:#?}"
    );
    assert_claim_refused_then_verified(Client::Codex, "codex", &p.root, &p.home);
    // Codex asked the configured API base, with the configured model.
    assert_eq!(p.server.requests()[0]["model"], "gpt-5.5");
}

#[test]
fn gemini_a_claim_of_done_the_verifier_refuses_gets_another_session_and_the_loop_ends_verified() {
    let Some(gemini) = Client::Gemini.find() else {
        return;
    };
    let (_dir, root, home) = project();
    let (port, server) = gemini_server::start(vec![
        Call::write("plans/roadmap.md", "# mine now\n"),
        Call::write("notes/a.md", "note\n"),
        Call::Text("All done.".into()),
        Call::shell("echo yes > notes/done.txt"),
        Call::Text("Done, really.".into()),
    ]);
    let out = run_loop(Client::Gemini, &gemini, &root, &home, port);
    assert_eq!(out.status.code(), Some(0), "the loop ends verified");
    let refusal = server.answer_to("write_file").unwrap();
    assert!(
        refusal
            .to_string()
            .contains("plans/roadmap.md belongs to planner"),
        "{refusal}"
    );
    assert_claim_refused_then_verified(Client::Gemini, "gemini", &root, &home);
    // Each session's hook saw its prompt as the loop's: the session id was the loop's.
    let rs = records(&root, "loop1");
    let prompts: Vec<&Value> = kind(&rs, "layer_decision")
        .filter(|r| r.to_string().contains("loop-prompt"))
        .map(|r| &r["turn"])
        .collect();
    assert_eq!(prompts, [&json!(1), &json!(2)]);
}

/// A stand-in for a client: answers `--version` with `version`, and prints `stream` as a
/// session would.
fn stand_in(root: &Path, name: &str, version: &str, stream: &str) -> PathBuf {
    let path = root.parent().unwrap().join(name);
    support::write_script(
        &path,
        &format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{version}'; exit 0; fi\ncat <<'EOF'\n{stream}\nEOF\n"
        ),
    );
    path
}

#[test]
fn another_version_of_either_client_is_refused_before_the_first_record_naming_the_tested_one() {
    for (client, name, found, says) in [
        (
            Client::Codex,
            "codex",
            "codex-cli 0.170.0",
            "npm install -g @openai/codex@0.171.0",
        ),
        (
            Client::Gemini,
            "gemini",
            "0.60.1",
            "npm install -g @google/gemini-cli@0.61.0",
        ),
    ] {
        let (_dir, root, home) = project();
        let program = stand_in(&root, name, found, "");
        let out = run_loop(client, &program, &root, &home, 9);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("tested with") && err.contains(says), "{err}");
        assert!(!root.join("runs/loop1/events.jsonl").exists(), "{name}");
    }
}

#[test]
fn a_stream_line_the_parser_does_not_know_ends_the_loop_failed_naming_it() {
    for (client, name, version, stream) in [
        (
            Client::Codex,
            "codex",
            "codex-cli 0.171.0",
            "{\"type\":\"thread.started\",\"thread_id\":\"t-1\"}\n{\"type\":\"telepathy\"}",
        ),
        (
            Client::Gemini,
            "gemini",
            "0.61.0",
            "{\"type\":\"init\",\"session_id\":\"s\",\"model\":\"m\"}\n{\"type\":\"telepathy\"}",
        ),
    ] {
        let (_dir, root, home) = project();
        let program = stand_in(&root, name, version, stream);
        let out = run_loop(client, &program, &root, &home, 9);
        assert_eq!(out.status.code(), Some(9), "{name}");
        let rs = records(&root, "loop1");
        let end = kind(&rs, "run_ended").next().unwrap();
        let text = end.to_string();
        assert!(
            text.contains("line 2")
                && text.contains("telepathy")
                && text.contains(version.split(' ').next_back().unwrap()),
            "{text}"
        );
        // What was recorded before it stays: the session, started and finished.
        assert_eq!(sessions(&rs, name), 1);
    }
}

/// A mixed team in `loopward.toml`: a model agent plans and hands off to a `codex` agent
/// pointed at the server by its `base_url` and `model`, whose turns are sessions until its
/// verifier passes; `loopward run` runs it.
#[test]
fn a_model_agent_hands_off_to_a_codex_agent_that_works_until_verified() {
    let Some(p) = CodexProject::start(vec![
        Step::Text("All done.".into()),
        Step::Exec("echo yes > src/done.txt".into()),
        Step::Text("Done, really.".into()),
    ]) else {
        return;
    };
    support::loop_ledger::write_team(&p.root, &format!(
        "kind = \"codex\"\nverify = \"test -f src/done.txt\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"gpt-5.5-team\"",
        p.port
    ));
    let (_bin, path) = clients::path_with(&p.codex, "codex");
    let out = shown(
        Command::new(env!("CARGO_BIN_EXE_loopward"))
            .current_dir(&p.root)
            .args(["run", "--id", "team"])
            .env_clear()
            .env("PATH", path)
            .env("HOME", &p.home)
            .env("OPENAI_API_KEY", "test"),
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(p.server.requests()[0]["model"], "gpt-5.5-team");
    support::loop_ledger::assert_team_built(&p.root, &p.home, "codex");
}

/// A loop killed (SIGKILL, by its PID) while its Codex session runs a command: resumed, the
/// session it left is ended (Codex's command line does not name the session: it is known by
/// its mark), recorded as interrupted and not run again, and the next session finishes.
#[test]
fn codex_a_loop_killed_mid_session_resumes_with_that_session_interrupted_and_none_repeated() {
    let Some(p) = CodexProject::start(stalled_then_finishing("sh notes/stall.sh 46.5")) else {
        return;
    };
    let (root, home) = (&p.root, &p.home);
    let mut child = p
        .loop_command()
        .args(task(VERIFY, "killed", &[]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    kill_mid_command(&mut child, &["sleep", "46.5"]);

    let out = shown(p.loop_command().args(["--resume", "killed"]));
    assert_eq!(out.status.code(), Some(0), "the resumed loop ends verified");
    assert!(
        !running(&["sleep", "46.5"]),
        "the resumed loop ended the session left behind"
    );
    assert_eq!(p.server.requests().len(), 3, "no step of the script twice");
    let rs = records(root, "killed");
    assert_eq!(kind(&rs, "run_resumed").count(), 1);
    assert_eq!(
        sessions(&rs, "codex"),
        2,
        "the interrupted session was not run again"
    );
    assert!(decisions(&rs, "resume")
        .iter()
        .any(|d| d["data"]["decision"] == "interrupted"));
    // Whoever ended it: Codex itself, which ends its commands once it finds its reader gone,
    // or the resumed loop, by the marks (which comes first is a race; ending by Codex's mark is
    // shown by the timeout test), the resumed loop's record says which.
    let left = decisions(&rs, "session")
        .into_iter()
        .find(|d| d["data"]["detail"]["left_running"].is_boolean())
        .expect("the resumed loop looked for the session left behind");
    let detail = &left["data"]["detail"];
    assert!(
        detail["left_running"] == false || detail["ended"] == true,
        "{detail}"
    );
    let v = verify_run(root, home, "killed");
    assert!(v.status.success(), "{v:?}");
    assert_replays_the_same(root, home, "killed");
}

/// A Codex session past its timeout is ended with what the hook wrapped for it (in a process
/// session of its own, marked with Codex's session id), and the loop goes on.
#[test]
fn codex_a_session_past_its_timeout_is_ended_with_its_commands_and_the_loop_goes_on() {
    let Some(p) = CodexProject::start(stalled_then_finishing("sh notes/stall.sh 44.5")) else {
        return;
    };
    let out = shown(
        p.loop_command()
            .args(task(VERIFY, "slow", &["--session-timeout", "4s"])),
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(
        !running(&["sleep", "44.5"]),
        "the stalled command outlived its session"
    );
    let rs = records(&p.root, "slow");
    let first = kind(&rs, "tool_finished")
        .find(|r| r["data"]["tool"] == "codex")
        .unwrap();
    let text = first["data"]["output"].as_str().unwrap();
    assert!(text.contains("ran past its timeout of 4s"), "{text}");
    assert_eq!(sessions(&rs, "codex"), 2);
}
