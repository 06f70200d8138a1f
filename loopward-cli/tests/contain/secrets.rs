//! Secrets: masked in every file and output, refused where a command could read them.

use super::*;

#[test]
fn a_secret_printed_by_a_tool_is_masked_in_every_file_under_runs_and_in_json_output() {
    // The command cannot see the variable (the environment is an allow-list), so it reads the
    // value from a file in the workspace, as an agent would find one in a stray .env; the
    // agent's answer repeats it.
    let dir = project(&format!(
        "[[agents.builder]]\ntool_calls = [{{ name = \"shell\", arguments = {{ command = \"echo token=$SECRET_TOKEN; cat stray.env\" }} }}]\n\n\
         [[agents.builder]]\ntext = \"the token is {SECRET}\"\n"
    ));
    let d = dir.path();
    std::fs::write(d.join("stray.env"), format!("SECRET_TOKEN={SECRET}\n")).unwrap();
    let run = loopward(
        d,
        &["run", "--id", "r1", "--json"],
        &[("SECRET_TOKEN", SECRET)],
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(!holds(&run.stdout, SECRET), "{stdout}");
    assert!(!holds(&run.stderr, SECRET), "{}", text(&run));
    crate::support::assert_says(&stdout, "SECRET_TOKEN=[secret:SECRET_TOKEN]");
    crate::support::assert_says(&stdout, "the token is [secret:SECRET_TOKEN]");
    // The variable never reached the command.
    assert!(stdout.contains("token=\\nSECRET_TOKEN="), "{stdout}");
    let all = files(&d.join("runs"));
    assert!(all.len() >= 5, "{all:?}");
    for (path, bytes) in &all {
        assert!(!holds(bytes, SECRET), "the secret is in {}", path.display());
    }
    let events = std::fs::read_to_string(d.join("runs/r1/events.jsonl")).unwrap();
    assert!(events.contains("[secret:SECRET_TOKEN]"), "{events}");
    // Masked before it was hashed: the ledger verifies as written.
    let verify = loopward(d, &["verify", "runs/r1"], &[]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
    let report = loopward(d, &["report", "--json"], &[]);
    assert!(
        String::from_utf8_lossy(&report.stdout).contains("\"runs\": 1"),
        "{}",
        text(&report)
    );
    assert!(!holds(&report.stdout, SECRET), "{}", text(&report));
}

#[test]
fn a_missing_secret_source_fails_before_anything_starts() {
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    let run = loopward(dir.path(), &["run", "--id", "r1"], &[]);
    let out = text(&run);
    assert_eq!(run.status.code(), Some(1), "{out}");
    assert!(out.contains("secrets.SECRET_TOKEN.env"), "{out}");
    assert!(out.contains("SECRET_TOKEN is not set"), "{out}");
    assert!(!dir.path().join("runs/r1").exists());
}

#[test]
fn a_secret_source_passed_to_commands_is_refused_at_load() {
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    let cfg = dir.path().join("loopward.toml");
    let mut text_cfg = std::fs::read_to_string(&cfg).unwrap();
    text_cfg.push_str("\n[env]\npass = [\"SECRET_TOKEN\"]\n");
    std::fs::write(&cfg, text_cfg).unwrap();
    assert_refused_at_load(
        dir.path(),
        &["env.pass[0]", "holds a secret (SECRET_TOKEN)"],
    );
}

#[test]
fn a_secret_in_a_claude_code_hook_event_is_masked_in_the_session_ledger() {
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    let root = dir.path().canonicalize().unwrap();
    let event = serde_json::json!({
        "session_id": "masked-1", "transcript_path": "/t.jsonl", "cwd": root,
        "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_use_id": "toolu_1",
        "tool_input": {"file_path": root.join(format!("notes-{SECRET}.md")), "content": format!("token {SECRET}")},
    });
    let out = crate::support::with_stdin(
        Command::new(env!("CARGO_BIN_EXE_loopward"))
            .args(["hook", "claude-code", "--config"])
            .arg(root.join("loopward.toml"))
            .env("XDG_STATE_HOME", state_of(&root))
            .env("SECRET_TOKEN", SECRET),
        event.to_string().as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!holds(&out.stdout, SECRET), "{}", text(&out));
    let all = files(&root.join("runs"));
    assert!(!all.is_empty());
    let mut masked = false;
    for (path, bytes) in &all {
        assert!(!holds(bytes, SECRET), "the secret is in {}", path.display());
        masked |= holds(bytes, "[secret:SECRET_TOKEN]");
    }
    assert!(masked, "no record names the masked secret: {all:?}");
}

#[test]
fn a_sandboxed_command_cannot_read_the_keys_in_loopwards_own_environment() {
    // The parent of a shell command is the `loopward run` that holds the API keys; as root, a
    // non-dumpable parent's /proc/<pid>/environ is still readable, so loopward holds none there.
    let dir = project(
        "[[agents.builder]]\ntool_calls = [{ name = \"shell\", arguments = { command = \"echo parent=$PPID; tr '\\\\0' '\\\\n' < /proc/$PPID/environ\" } }]\n\n\
         [[agents.builder]]\ntext = \"done\"\n",
    );
    let d = dir.path();
    let run = loopward(
        d,
        &["run", "--id", "r1", "--json"],
        &[
            ("SECRET_TOKEN", SECRET),
            ("OPENAI_API_KEY", "sk-user-key-in-loopwards-env"),
        ],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert!(stdout.contains("parent="), "{stdout}");
    assert!(!stdout.contains("sk-user-key-in-loopwards-env"), "{stdout}");
    assert!(!stdout.contains("XDG_STATE_HOME"), "{stdout}");
    // The same for a contained program and its supervisor.
    let home = tempfile::tempdir().unwrap();
    let out = contain(
        d,
        home.path(),
        &["bash", "-c", "tr '\\0' '\\n' < /proc/$PPID/environ; true"],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(!all.contains("sk-user-key-that-must-stay-out"), "{all}");
    assert!(!all.contains("XDG_STATE_HOME"), "{all}");
}
