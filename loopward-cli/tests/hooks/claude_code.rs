//! `loopward hook claude-code` as Claude Code runs it: one process per event, the event on stdin.

use super::CONFIG;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn hook(config: &Path, stdin: &[u8]) -> Output {
    crate::support::with_stdin(
        Command::new(env!("CARGO_BIN_EXE_loopward"))
            .args(["hook", "claude-code", "--config"])
            .arg(config),
        stdin,
    )
}

/// The hook's answer (stdout, exit status 0) to `event` under `config`: `decision` (`deny`,
/// `allow`).
fn assert_decides(config: &Path, event: &str, decision: &str) -> String {
    let out = hook(config, event.as_bytes());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let said = format!(r#""permissionDecision":"{decision}""#);
    assert!(stdout.contains(&said), "{said} not in {stdout}");
    stdout
}

/// `e` as the hook reads it, from the subagent `agent` when given.
fn from_agent(mut e: serde_json::Value, agent: Option<&str>) -> String {
    if let Some(a) = agent {
        e["agent_type"] = a.into();
    }
    e.to_string()
}

/// A scratch project (its canonical root) governed by [`CONFIG`].
fn configured() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("loopward.toml"), CONFIG).unwrap();
    (dir, root)
}

fn write_event(root: &Path, agent: Option<&str>) -> String {
    let e = serde_json::json!({
        "session_id": "cli-1", "transcript_path": "/t.jsonl", "cwd": root,
        "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_use_id": "toolu_1",
        "tool_input": {"file_path": root.join("plan.md"), "content": "# Plan"},
    });
    from_agent(e, agent)
}

#[test]
fn a_foreign_write_is_denied_and_the_owners_allowed() {
    let (_dir, root) = configured();
    let config = root.join("loopward.toml");
    assert_decides(&config, &write_event(&root, None), "deny");
    assert_decides(&config, &write_event(&root, Some("planner")), "allow");
    assert!(root.join("runs/claude-code-cli-1/events.jsonl").exists());
}

#[test]
fn a_missing_config_blocks_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let out = hook(&root.join("nope.toml"), write_event(&root, None).as_bytes());
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("nope.toml"), "{stderr}");
}

#[test]
fn an_invalid_config_blocks_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(
        root.join("loopward.toml"),
        "[[territory]]\npaths = [\"src/[\"]\nowner = \"x\"\n",
    )
    .unwrap();
    let out = hook(
        &root.join("loopward.toml"),
        write_event(&root, None).as_bytes(),
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("loopward.toml"), "{stderr}");
}

#[test]
fn stdin_that_is_not_utf8_blocks_with_exit_2() {
    let (_dir, root) = configured();
    let out = hook(
        &root.join("loopward.toml"),
        b"{\"session_id\": \"\xff\xfe\"}",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr).unwrap().contains("stdin"));
}

#[test]
fn the_walkthrough_script_runs_and_shows_each_gate() {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/claude-code-walkthrough.sh");
    let out = Command::new("bash")
        .arg(&script)
        .env("LOOPWARD", env!("CARGO_BIN_EXE_loopward"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        r#""permissionDecision":"deny""#,
        r#""permissionDecision":"allow""#,
        r#""decision":"block""#,
        "refused by sprawl",
        "exit 2",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
}

#[test]
fn defer_allows_answers_nothing_on_allow_and_still_denies() {
    let (_dir, root) = configured();
    let run = |agent| {
        crate::support::with_stdin(
            Command::new(env!("CARGO_BIN_EXE_loopward"))
                .args(["hook", "claude-code", "--defer-allows", "--config"])
                .arg(root.join("loopward.toml")),
            write_event(&root, agent).as_bytes(),
        )
    };
    let allowed = run(Some("planner"));
    assert_eq!((allowed.status.code(), allowed.stdout.len()), (Some(0), 0));
    let denied = String::from_utf8(run(None).stdout).unwrap();
    assert!(
        denied.contains(r#""permissionDecision":"deny""#),
        "{denied}"
    );
}

/// The territory refusal tells an unlisted subagent to ask for `loopward override grant --agent
/// <it> --subagent …`; that exact command must work, and the same call must then go through once.
#[test]
fn a_subagents_refusal_names_an_override_command_that_works() {
    let (_dir, root) = configured();
    let config = root.join("loopward.toml");
    let event = write_event(&root, Some("code-reviewer"));
    let stdout = assert_decides(&config, &event, "deny");
    let hint = "loopward override grant --agent code-reviewer --subagent --path plan.md";
    assert!(stdout.contains(hint), "{stdout}");

    let grant = Command::new(env!("CARGO_BIN_EXE_loopward"))
        .args([
            "override",
            "grant",
            "--agent",
            "code-reviewer",
            "--subagent",
            "--path",
            "plan.md",
        ])
        .args([
            "--reason",
            "the reviewer fixes a typo",
            "--ttl",
            "10m",
            "--config",
        ])
        .arg(&config)
        .output()
        .unwrap();
    let said = crate::support::succeeded(&grant);
    assert!(said.contains("granted"), "{said}");

    assert_decides(&config, &event, "allow");
    // The override is one-shot.
    assert_decides(&config, &event, "deny");
}

fn bash_event(root: &Path, event: &str, command: &str, agent: Option<&str>) -> String {
    let e = serde_json::json!({
        "session_id": "cli-sb", "transcript_path": "/t.jsonl", "cwd": root,
        "hook_event_name": event, "tool_name": "Bash", "tool_use_id": "toolu_sb",
        "tool_input": {"command": command, "description": "d", "run_in_background": false},
        "tool_response": {"stdout": "", "stderr": "", "interrupted": false},
    });
    from_agent(e, agent)
}

/// The first half of the hook's `Bash` call `command` in `root`, as Claude Code makes it:
/// `PreToolUse`, which must rewrite the command, then the rewritten command run in the project in
/// a shell: the rewritten command and what it did.
fn bash_rewritten_and_run(config: &Path, root: &Path, command: &str) -> (String, Output) {
    let pre = hook(
        config,
        bash_event(root, "PreToolUse", command, None).as_bytes(),
    );
    assert_eq!(pre.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&pre.stdout).unwrap();
    let wrapped = v["hookSpecificOutput"]["updatedInput"]["command"]
        .as_str()
        .unwrap_or_else(|| panic!("not rewritten: {v}"))
        .to_string();
    let ran = Command::new("bash")
        .arg("-c")
        .arg(&wrapped)
        .current_dir(root)
        .output()
        .unwrap();
    (wrapped, ran)
}

/// The second half: `PostToolUse` of `command` (exit status 0).
fn bash_post(config: &Path, root: &Path, command: &str) -> Output {
    let post = hook(
        config,
        bash_event(root, "PostToolUse", command, None).as_bytes(),
    );
    assert_eq!(post.status.code(), Some(0));
    post
}

/// Claude Code's `Bash` through the hook: the command is rewritten to run inside the calling
/// agent's sandbox, and run as rewritten, the kernel refuses its writes to another agent's
/// territory, the config and `.claude/`, also from a background process that outlives it.
#[test]
fn a_bash_command_runs_rewritten_in_the_sandbox_and_cannot_write_elsewhere() {
    let (_dir, root) = configured();
    let config = root.join("loopward.toml");
    std::fs::write(root.join("plan.md"), "# Plan\n").unwrap();
    std::fs::create_dir_all(root.join(".claude")).unwrap();
    std::fs::write(root.join(".claude/settings.json"), "{}").unwrap();
    std::fs::create_dir_all(root.join("notes")).unwrap();
    let command = "echo mine > notes/a.txt; echo x > plan.md; echo '{}' > .claude/settings.json; \
                   echo y >> loopward.toml; (setsid sh -c 'sleep 0.3; echo late > plan.md' &); true";
    let (wrapped, ran) = bash_rewritten_and_run(&config, &root, command);
    assert!(wrapped.starts_with(&format!(
        "'{}' sandbox exec",
        env!("CARGO_BIN_EXE_loopward")
    )));
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(stderr.contains("Permission denied"), "{stderr}");
    std::thread::sleep(std::time::Duration::from_millis(800));
    crate::support::assert_file(&root, "notes/a.txt", "mine\n");
    crate::support::assert_file(&root, "plan.md", "# Plan\n");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), CONFIG);
    crate::support::assert_file(&root, ".claude/settings.json", "{}");
    bash_post(&config, &root, command);
    let ledger =
        std::fs::read_to_string(root.join("runs/claude-code-cli-sb/events.jsonl")).unwrap();
    assert!(!ledger.contains("\"violation\""), "{ledger}");
    assert!(ledger.contains("\"sandbox\""), "{ledger}");
}

fn loopward(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopward"))
        .args(args)
        .current_dir(root)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap()
}

/// `hook install` writes the absolute binary path (checked to run); `hook doctor` says a bare
/// `loopward` that is not on Claude Code's PATH would fail open (exit 127 = go ahead).
#[test]
fn hook_install_writes_an_absolute_command_and_doctor_catches_one_that_fails_open() {
    let (_dir, root) = configured();
    std::fs::create_dir(root.join(".claude")).unwrap();
    let bare = serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "Write|Edit|MultiEdit|NotebookEdit|Bash",
        "hooks": [{"type": "command", "command": "loopward hook claude-code --config loopward.toml"}]}]}});
    std::fs::write(root.join(".claude/settings.json"), bare.to_string()).unwrap();
    let doctor = loopward(&root, &["hook", "doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(1), "{text}");
    assert!(text.contains("exits 127"), "{text}");
    let install = loopward(&root, &["hook", "install"]);
    crate::support::succeeded(&install);
    let settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".claude/settings.json")).unwrap())
            .unwrap();
    let pre = settings["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 1, "the bare entry was replaced: {settings}");
    // Exec form: the client starts the hook binary beside loopward without a shell, and a hook
    // that fails blocks.
    let hook = &pre[0]["hooks"][0];
    assert_eq!(
        hook["command"],
        env!("CARGO_BIN_EXE_loopward-hook"),
        "{hook}"
    );
    assert_eq!(hook["args"][0], "hook", "{hook}");
    assert_eq!(hook["args"][1], "claude-code", "{hook}");
    assert_eq!(hook["onFailure"], "block", "{hook}");
    // Started as Claude Code starts it, it judges: a `Bash` call comes back wrapped in the
    // sandbox of the whole `loopward` binary (which the hook binary does not hold).
    let args: Vec<&str> = hook["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let out = crate::support::with_stdin(
        Command::new(hook["command"].as_str().unwrap())
            .args(&args)
            .current_dir(&root),
        bash_event(&root, "PreToolUse", "true", None).as_bytes(),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    let wrapped = v["hookSpecificOutput"]["updatedInput"]["command"]
        .as_str()
        .unwrap_or_else(|| panic!("not wrapped: {v}"));
    assert!(
        wrapped.starts_with(&format!(
            "'{}' sandbox exec",
            env!("CARGO_BIN_EXE_loopward")
        )),
        "{wrapped}"
    );
    let doctor = loopward(&root, &["hook", "doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(0), "{text}");
    assert!(text.contains("would not fail open"), "{text}");
    // Without `onFailure: block`, a hook that times out lets the call go ahead: doctor says so.
    let mut lax = settings.clone();
    for event in lax["hooks"].as_object_mut().unwrap().values_mut() {
        for entry in event.as_array_mut().unwrap() {
            entry["hooks"][0]
                .as_object_mut()
                .unwrap()
                .remove("onFailure");
        }
    }
    std::fs::write(root.join(".claude/settings.json"), lax.to_string()).unwrap();
    let doctor = loopward(&root, &["hook", "doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(1), "{text}");
    assert!(text.contains("onFailure"), "{text}");
}

/// A command that makes a file bigger than the snapshot budget next to a territory write: the
/// kernel refused the write; the hook, not blinded by a file it need not read, compares the rest
/// and leaves nothing unchecked.
#[test]
fn a_huge_file_next_to_a_territory_write_is_refused_and_blinds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let config = root.join("loopward.toml");
    let cfg = format!("{CONFIG}\n[gates.shell]\nmax_snapshot_bytes = 4096\n");
    std::fs::write(&config, &cfg).unwrap();
    std::fs::write(root.join("plan.md"), "# Plan\n").unwrap();
    std::fs::create_dir_all(root.join("notes")).unwrap();
    let command = "head -c 100000 /dev/zero > notes/huge.bin; echo x > plan.md; true";
    let (_, ran) = bash_rewritten_and_run(&config, &root, command);
    assert!(String::from_utf8_lossy(&ran.stderr).contains("Permission denied"));
    crate::support::assert_file(&root, "plan.md", "# Plan\n");
    let post = bash_post(&config, &root, command);
    let stdout = String::from_utf8_lossy(&post.stdout);
    assert!(!stdout.contains("could not be compared"), "{stdout}");
    let ledger =
        std::fs::read_to_string(root.join("runs/claude-code-cli-sb/events.jsonl")).unwrap();
    assert!(ledger.contains("notes/huge.bin"), "{ledger}");
    assert!(!ledger.contains("unremedied"), "{ledger}");
}

/// The folder `project` in `dir`, holding [`CONFIG`]: `(root, config)`.
fn project_in(dir: &Path) -> (PathBuf, PathBuf) {
    let root = dir.join("project");
    std::fs::create_dir(&root).unwrap();
    let config = root.join("loopward.toml");
    std::fs::write(&config, CONFIG).unwrap();
    (root, config)
}

/// `loopward sandbox exec --config <config>`, its other arguments to add.
fn sandbox_exec(config: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loopward"));
    c.args(["sandbox", "exec", "--config"]).arg(config);
    c
}

/// `loopward sandbox exec --unreadable DIR`: the command cannot read what is in DIR (a ledger
/// key), though it reads everything else it did before.
#[test]
fn a_key_is_unreadable_inside_sandbox_exec() {
    let dir = tempfile::tempdir().unwrap();
    let (root, config) = project_in(dir.path());
    std::fs::write(root.join("notes.md"), "readable\n").unwrap();
    let keys = dir.path().join("state/keys");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::write(keys.join("k1.key"), "secret").unwrap();
    let out = sandbox_exec(&config)
        .args(["--agent", "root", "--unreadable"])
        .arg(&keys)
        .args(["--", "bash", "-c"])
        .arg(format!(
            "cat notes.md; cat '{}'",
            keys.join("k1.key").display()
        ))
        .current_dir(&root)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(stdout, "readable\n", "{stderr}");
    assert!(stderr.contains("k1.key: Permission denied"), "{stderr}");
    assert_eq!(out.status.code(), Some(1));
}

/// A command's scratch `$TMPDIR` (outside the workspace) is there while it runs and gone when
/// it ends; its exit status is passed on.
#[test]
fn sandbox_exec_leaves_no_scratch_folder_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (root, config) = project_in(dir.path());
    let out = sandbox_exec(&config)
        .args(["--agent", "root", "--", "bash", "-c"])
        .arg("echo x > \"$TMPDIR/t\" && echo \"$TMPDIR\" && exit 3")
        .current_dir(&root)
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let scratch = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(scratch.contains("loopward-sh-"), "{scratch}");
    assert!(
        !std::path::Path::new(&scratch).exists(),
        "{scratch} left behind"
    );
}

/// The hook binary, with loopward's state under `state_home` (`$XDG_STATE_HOME`), started with
/// `stdin`; the caller waits for it.
fn hook_started(config: &Path, stdin: &[u8], state_home: &Path) -> std::process::Child {
    crate::support::started_with_stdin(
        Command::new(env!("CARGO_BIN_EXE_loopward"))
            .args(["hook", "claude-code", "--config"])
            .arg(config)
            .env("XDG_STATE_HOME", state_home),
        stdin,
    )
}

/// A session lock held by another process (a stuck hook, an operator's tool) does not make the
/// hook wait past Claude Code's hook timeout, which would let the call go ahead: it answers
/// exit status 2 (blocking), with the holder named, within its bound.
#[test]
fn a_session_lock_held_by_another_process_blocks_instead_of_waiting_forever() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let config = root.join("loopward.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let state_home = dir.path().join("state");
    let state = loopward_runner::StateDir::for_workspace(&state_home, &root).unwrap();
    let session = state.root().join("sessions/cli-1");
    std::fs::create_dir_all(&session).unwrap();
    let mut holder = super::lock_holder::hold(&session.join("lock"));
    let mut child = hook_started(&config, write_event(&root, None).as_bytes(), &state_home);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let answered = loop {
        if child.try_wait().unwrap().is_some() {
            break true;
        }
        if std::time::Instant::now() > deadline {
            // Ended by its recorded PID.
            child.kill().unwrap();
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(
        answered,
        "the hook was still waiting for the lock after 60 s"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(stderr.contains("still held by another process"), "{stderr}");
    assert!(
        stderr.contains(session.join("lock").to_str().unwrap()),
        "{stderr}"
    );
}

/// `hook install` hooks every tool, the client's own read tools too (they read outside the sandbox), and gives
/// each entry a timeout far above the hook's own bound; `hook doctor` states the bound, and says
/// an install that leaves the reads out, or times the hook out too soon, would fail open.
#[test]
fn hook_install_covers_the_read_tools_and_a_timeout_above_the_bound() {
    let (_dir, root) = configured();
    let install = loopward(&root, &["hook", "install"]);
    assert_eq!(install.status.code(), Some(0), "{install:?}");
    let path = root.join(".claude/settings.json");
    let mut settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    // Every tool, the read tools among them.
    assert_eq!(settings["hooks"]["PreToolUse"][0]["matcher"], "*");
    for event in [
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
    ] {
        let timeout = settings["hooks"][event][0]["hooks"][0]["timeout"]
            .as_u64()
            .unwrap();
        assert!(timeout >= 20, "{event}: {timeout}");
    }
    let doctor = loopward(&root, &["hook", "doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(0), "{text}");
    crate::support::assert_says(&text, "waited on for at most 5 s, then the call is blocked");
    // An older install's matcher (no read tools) and a timeout inside the bound.
    settings["hooks"]["PreToolUse"][0]["matcher"] = "Write|Edit|MultiEdit|NotebookEdit|Bash".into();
    settings["hooks"]["PostToolUse"][0]["hooks"][0]["timeout"] = 3.into();
    std::fs::write(&path, settings.to_string()).unwrap();
    let doctor = loopward(&root, &["hook", "doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(1), "{text}");
    crate::support::assert_says(&text, "would fail open: PreToolUse matches only \"Write|Edit|MultiEdit|NotebookEdit|Bash\": every other tool");
    assert!(text.contains("PostToolUse: timeout 3 s"), "{text}");
}
