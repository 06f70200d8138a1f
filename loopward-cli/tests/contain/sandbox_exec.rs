//! `loopward sandbox exec`, as the hooks wrap `Bash` in it: the runner's sandbox, network and
//! process rules included. The servers are the test's own, on the loopback range: the allowed
//! one on 127.0.0.2, the attacker's on 127.0.0.1 (another port).

use crate::support::{http_server, text};

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::Ordering;

const CONFIG: &str = r#"
[run]
first = "builder"

[[agent]]
name = "builder"
tools = ["shell"]
net = ["127.0.0.2"]
"#;

/// A project with `config`, and a state folder of its own beside it.
fn project(config: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("p");
    std::fs::create_dir_all(root.join("notes")).unwrap();
    let root = root.canonicalize().unwrap();
    std::fs::write(root.join("loopward.toml"), config).unwrap();
    (dir, root)
}

fn loopward(root: &Path, args: &[&str], stdin: &[u8]) -> Output {
    crate::support::with_stdin(
        Command::new(env!("CARGO_BIN_EXE_loopward"))
            .args(args)
            .current_dir(root)
            .env("XDG_STATE_HOME", root.with_file_name("state"))
            .env("NO_COLOR", "1"),
        stdin,
    )
}

fn bash_event(root: &Path, event: &str, command: &str) -> String {
    serde_json::json!({
        "session_id": "net-1", "transcript_path": "/t.jsonl", "cwd": root,
        "hook_event_name": event, "tool_name": "Bash", "tool_use_id": "toolu_net",
        "tool_input": {"command": command, "description": "d", "run_in_background": false},
        "tool_response": {"stdout": "", "stderr": "", "interrupted": false},
    })
    .to_string()
}

/// The hook's `PreToolUse` for `command`; the command as rewritten.
fn wrapped(root: &Path, command: &str) -> String {
    let pre = loopward(
        root,
        &[
            "hook",
            "claude-code",
            "--config",
            "loopward.toml",
            "--main-agent",
            "builder",
        ],
        bash_event(root, "PreToolUse", command).as_bytes(),
    );
    assert_eq!(pre.status.code(), Some(0), "{}", text(&pre));
    let v: serde_json::Value = serde_json::from_slice(&pre.stdout).unwrap();
    v["hookSpecificOutput"]["updatedInput"]["command"]
        .as_str()
        .unwrap_or_else(|| panic!("not rewritten: {v}"))
        .to_string()
}

/// Runs `command` as Claude Code runs a `Bash` call: in a shell, in the project.
fn bash(root: &Path, command: &str) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(command)
        .current_dir(root)
        .env("XDG_STATE_HOME", root.with_file_name("state"))
        .env("SECRET_IN_CALLER", "must-stay-out")
        .output()
        .unwrap()
}

#[test]
fn a_wrapped_bash_reaches_only_its_agents_hosts_through_the_proxy_and_the_session_ledger_has_each_decision(
) {
    let (good, _) = http_server("127.0.0.2", "hello-from-allowed");
    let (evil, evil_hits) = http_server("127.0.0.1", "attacker-got-it");
    let (_dir, root) = project(CONFIG);
    let command = format!(
        "curl -s -m 5 http://127.0.0.2:{good}/; echo; \
         curl -s -m 5 http://127.0.0.1:{evil}/; echo; \
         curl -s -m 5 --noproxy '*' http://127.0.0.1:{evil}/ || echo 1=curl-direct-failed; \
         (exec 3<>/dev/tcp/127.0.0.1/{evil}) 2>/dev/null && echo 2=opened || echo 2=devtcp-failed; \
         python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {evil}), 3)' 2>/dev/null && echo 3=opened || echo 3=py-failed; \
         echo caller=${{SECRET_IN_CALLER:-unset}}"
    );
    let ran = bash(&root, &wrapped(&root, &command));
    let out = text(&ran);
    assert_eq!(ran.status.code(), Some(0), "{out}");
    assert!(out.contains("hello-from-allowed"), "{out}");
    crate::support::assert_says(&out, "127.0.0.1 is not in this agent's net allow-list");
    crate::support::assert_says_all(
        &out,
        &[
            "1=curl-direct-failed",
            "2=devtcp-failed",
            "3=py-failed",
            "caller=unset",
        ],
    );
    assert!(!out.contains("attacker-got-it"), "{out}");
    assert_eq!(evil_hits.load(Ordering::SeqCst), 0);
    // Every decision is in the session's ledger, which verifies, and the report counts them.
    let ledger = std::fs::read_to_string(root.join("runs/claude-code-net-1/events.jsonl")).unwrap();
    assert_eq!(ledger.matches("\"egress_decided\"").count(), 2, "{ledger}");
    assert!(ledger.contains("\"egress_closed\""), "{ledger}");
    let verify = loopward(
        &root,
        &["verify", "--unfinished", "runs/claude-code-net-1"],
        b"",
    );
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
    let report = loopward(&root, &["report", "--unfinished"], b"");
    crate::support::assert_prints(&report, "egress: 1 connections allowed, 1 refused");
}

#[test]
fn opting_out_of_network_isolation_is_in_the_session_ledger_of_every_wrapped_bash() {
    let (_dir, root) = project(&format!("{CONFIG}\n[net]\nisolate = false\n"));
    let ran = bash(&root, &wrapped(&root, "true"));
    assert_eq!(ran.status.code(), Some(0), "{}", text(&ran));
    let ledger = std::fs::read_to_string(root.join("runs/claude-code-net-1/events.jsonl")).unwrap();
    crate::support::assert_says(&ledger, "network: this command reaches any host");
}

/// The command has a PID namespace of its own with the sandbox's init: it is PID 2 there
/// (the init is 1), sees no parent, cannot signal the process that started it, and what it
/// leaves in the background ends with it.
#[test]
fn a_sandboxed_command_leaves_no_process_behind_and_cannot_signal_outside() {
    let (_dir, root) = project(CONFIG);
    let me = std::process::id();
    let command = format!(
        "echo pid=$$ ppid=$PPID; kill -0 {me} 2>/dev/null && echo signalled || echo kill-failed; \
         (sleep 1; echo late > notes/late.txt) & \
         setsid sh -c 'sleep 1; echo late > notes/setsid.txt' & \
         echo started"
    );
    let ran = loopward(
        &root,
        &[
            "sandbox", "exec", "--agent", "builder", "--", "bash", "-c", &command,
        ],
        b"",
    );
    let out = text(&ran);
    assert_eq!(ran.status.code(), Some(0), "{out}");
    crate::support::assert_says_all(&out, &["pid=2 ppid=0", "kill-failed", "started"]);
    std::thread::sleep(std::time::Duration::from_millis(1800));
    assert!(!root.join("notes/late.txt").exists());
    assert!(!root.join("notes/setsid.txt").exists());
}

/// `SIGTERM` to loopward reaches the command, whose handler runs; loopward exits with the
/// command's status. `/proc` in the sandbox shows its own processes only.
#[test]
fn sigterm_to_loopward_reaches_the_command_and_its_status_is_loopwards() {
    use std::io::BufRead;
    let (_dir, root) = project(CONFIG);
    let me = std::process::id();
    let command = format!(
        "trap 'echo got-term > notes/term.txt; exit 3' TERM; \
         ls /proc | grep -qx {me} && echo host-visible; echo ready; sleep 30 & wait"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopward"))
        .args([
            "sandbox", "exec", "--agent", "builder", "--", "bash", "-c", &command,
        ])
        .current_dir(&root)
        .env("XDG_STATE_HOME", root.with_file_name("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(
        line, "ready\n",
        "the command did not start (or saw the host's /proc)"
    );
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    let noted = std::fs::read_to_string(root.join("notes/term.txt")).unwrap();
    assert_eq!(noted, "got-term\n");
}

/// Inside `loopward contain` no namespace can be made (the contained program holds no
/// privilege to): a wrapped command keeps the contained program's, loopback only, and goes
/// out through the supervisor's proxy, which records it in the session's ledger.
#[test]
fn a_sandbox_made_inside_contain_keeps_the_outer_network_and_proxy() {
    let (good, _) = http_server("127.0.0.2", "hello-from-allowed");
    let (evil, evil_hits) = http_server("127.0.0.1", "attacker-got-it");
    let (_dir, root) = project(CONFIG);
    let inner = format!(
        "curl -s -m 5 http://127.0.0.2:{good}/; echo; \
         curl -s -m 3 --noproxy '*' http://127.0.0.1:{evil}/ || echo direct-failed"
    );
    let exe = env!("CARGO_BIN_EXE_loopward");
    let outer =
        format!("'{exe}' sandbox exec --agent builder -- bash -c \"{inner}\"; echo inner-rc=$?");
    let ran = loopward(
        &root,
        &[
            "contain", "--agent", "builder", "--id", "s1", "--", "bash", "-c", &outer,
        ],
        b"",
    );
    let out = text(&ran);
    assert_eq!(ran.status.code(), Some(0), "{out}");
    crate::support::assert_says_all(&out, &["hello-from-allowed", "direct-failed", "inner-rc=0"]);
    assert_eq!(evil_hits.load(Ordering::SeqCst), 0);
    let ledger = std::fs::read_to_string(root.join("runs/s1/events.jsonl")).unwrap();
    assert!(ledger.contains("\"egress_decided\""), "{ledger}");
}

/// The command's `HOME` is a scratch folder seeded from the user's config without credentials:
/// git knows who the user is but not how they log in; Claude Code's settings come without
/// their `env`; keys and tokens stay out.
#[test]
fn the_scratch_home_has_the_users_config_and_no_credentials() {
    let (dir, root) = project(CONFIG);
    let home = dir.path().join("home");
    for (rel, body) in [
        (
            ".gitconfig",
            "[user]\n\tname = Ada Tester\n[credential]\n\thelper = store\n[url \"https://tok-git-1@github.com/\"]\n\tinsteadOf = https://github.com/\n",
        ),
        (
            ".claude/settings.json",
            r#"{"model": "opus", "env": {"ANTHROPIC_API_KEY": "sk-claude-2"}}"#,
        ),
        (".ssh/id_ed25519", "PRIVATE-KEY-3"),
        (".aws/credentials", "[default]\naws_secret_access_key = aws-4\n"),
        (".netrc", "machine x login y password netrc-5\n"),
        (".git-credentials", "https://u:tok-6@github.com\n"),
    ] {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    let ran = Command::new(env!("CARGO_BIN_EXE_loopward"))
        .args(["sandbox", "exec", "--agent", "builder", "--", "bash", "-c"])
        .arg("git config user.name; cat ~/.gitconfig ~/.claude/settings.json; ls -A ~; cat ~/.ssh/* ~/.aws/* ~/.netrc 2>&1 | head -3")
        .current_dir(&root)
        .env("HOME", &home)
        .env("XDG_STATE_HOME", root.with_file_name("state"))
        .output()
        .unwrap();
    let out = text(&ran);
    assert_eq!(ran.status.code(), Some(0), "{out}");
    assert!(out.starts_with("Ada Tester\n"), "{out}");
    assert!(out.contains("\"model\": \"opus\""), "{out}");
    for secret in [
        "helper",
        "tok-git-1",
        "sk-claude-2",
        "PRIVATE-KEY-3",
        "aws-4",
        "netrc-5",
        "tok-6",
    ] {
        assert!(!out.contains(secret), "{secret}: {out}");
    }
    for absent in [".ssh", ".aws", ".netrc", ".git-credentials"] {
        assert!(!out.lines().any(|l| l == absent), "{absent}: {out}");
    }
}
