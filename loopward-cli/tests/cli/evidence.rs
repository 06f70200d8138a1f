//! Evidence through the binary, as a user (and an attacker with a shell) meets it: keyed
//! ledgers from `init`, strict `verify`, key rotation, sealed approvals and overrides in the
//! state directory, and one decision among racing `approve` and `deny` processes.

use super::assert_says;
use super::text;
use crate::support::scratch::Scratch;
use loopward_core::{AuditEvent, AuditSink, RunId, Scope};
use loopward_runner::audit::{KeyRing, Ledger, LedgerKey, LedgerOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch workspace after `init`: keyed ledgers, its own state base.
struct Team(Scratch);

impl Team {
    fn new() -> Self {
        let t = Self(Scratch::new());
        let o = t.run(&["init"]);
        assert!(o.status.success(), "{}", text(&o));
        crate::support::assert_prints(&o, "ledger key k");
        t
    }

    fn d(&self) -> &Path {
        self.0.dir()
    }

    fn command(&self, args: &[&str]) -> Command {
        self.0.loopward(args)
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn state(&self) -> PathBuf {
        self.0.state()
    }

    /// `loopward verify runs/<run>` passes, naming `key`.
    #[track_caller]
    fn assert_verified_by(&self, run: &str, key: &str) {
        let o = self.run(&["verify", &format!("runs/{run}")]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        crate::support::assert_prints(&o, &format!("{run}: verified by key {key}"));
    }

    fn keys(&self) -> KeyRing {
        KeyRing::load(&self.state().join("keys")).unwrap()
    }

    fn with_gate(self) -> Self {
        super::append(
            self.d(),
            "loopward.toml",
            &super::durable_gate("build", "builder"),
        );
        self
    }
}

fn say(ledger: &Ledger, run: &str, what: &str) {
    let scope = Scope {
        run: RunId::new(run).unwrap(),
        turn: None,
        agent: None,
    };
    ledger
        .record(
            &scope,
            &AuditEvent::HumanMessage {
                content: (&loopward_core::Person::at_the_keyboard().says(what)).into(),
            },
        )
        .unwrap();
}

#[test]
fn init_run_verify_is_keyed_and_a_rotated_key_still_verifies_old_runs() {
    let t = Team::new();
    assert_eq!(t.run(&["run", "--id", "r1"]).status.code(), Some(0));
    let first = t.keys().current().unwrap().id().to_string();
    t.assert_verified_by("r1", &first);
    let o = t.run(&["key", "rotate"]);
    assert!(o.status.success(), "{}", text(&o));
    let second = t.keys().current().unwrap().id().to_string();
    assert_ne!(first, second);
    crate::support::assert_prints(&o, "kept for verifying");
    assert_eq!(t.run(&["run", "--id", "r2"]).status.code(), Some(0));
    let o = t.run(&["verify", "runs"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    crate::support::assert_says(&out, &format!("r1: verified by key {first}"));
    crate::support::assert_says(&out, &format!("r2: verified by key {second}"));
    let o = t.run(&["report"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_rechained_ledger_with_a_fresh_anchor_is_not_verified() {
    let t = Team::new();
    assert_eq!(t.run(&["run", "--id", "r1"]).status.code(), Some(0));
    let runs = t.d().join("runs");
    // The attacker drops the ledger and writes its own, keyless and under a key of its own,
    // each with a fresh anchor appended to runs/index.jsonl.
    for (name, opts) in [
        ("r1", LedgerOptions::default()),
        ("r1", LedgerOptions::keyed(LedgerKey::generate().unwrap())),
    ] {
        std::fs::remove_dir_all(runs.join(name)).unwrap();
        let ledger = Ledger::create(&runs, &RunId::new(name).unwrap(), opts).unwrap();
        say(&ledger, name, "nothing to see");
        ledger.finish().unwrap();
        let o = t.run(&["verify", "runs/r1"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        crate::support::assert_prints(&o, "NOT verified");
        let o = t.run(&["verify", "runs/r1", "--unfinished"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    }
}

#[test]
fn unanchored_emptied_and_gone_runs_are_not_verified() {
    let t = Team::new();
    assert_eq!(t.run(&["run", "--id", "r1"]).status.code(), Some(0));
    // A run still going (never finished): not verified, unless accepted as unfinished.
    let key = t.keys().current().unwrap().clone();
    let runs = t.d().join("runs");
    let ledger =
        Ledger::create(&runs, &RunId::new("r2").unwrap(), LedgerOptions::keyed(key)).unwrap();
    say(&ledger, "r2", "working");
    let o = t.run(&["verify", "runs/r2"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "no anchor");
    let o = t.run(&["verify", "runs/r2", "--unfinished"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    crate::support::assert_prints(&o, "NOT anchored");
    drop(ledger);
    // Emptied: not verified, even as unfinished (its anchor says more).
    std::fs::write(runs.join("r1/events.jsonl"), "").unwrap();
    for extra in [&[][..], &["--unfinished"][..]] {
        let o = t.run(&[&["verify", "runs/r1"][..], extra].concat());
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    }
    // Gone: the index still anchors it.
    std::fs::remove_dir_all(runs.join("r1")).unwrap();
    let o = t.run(&["verify", "runs/r1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "folder");
    let o = t.run(&["verify", "runs"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "r1: NOT verified");
    // No run folder at all: said as such, not as tampering.
    let o = t.run(&["verify", "nowhere/r9"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "no run folder at nowhere/r9");
}

#[test]
fn a_forged_approval_in_the_state_dir_is_refused_by_approve_and_resume() {
    let t = Team::new().with_gate();
    assert_eq!(t.run(&["run", "--id", "r7"]).status.code(), Some(7));
    // Nothing of it in the workspace: the pending record is in the state directory.
    assert!(!t.d().join(".loopward/pending").exists());
    let pending = t.state().join("pending");
    let file = std::fs::read_dir(&pending)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap();
    // An agent's process flips it to approved.
    let forged = std::fs::read_to_string(&file)
        .unwrap()
        .replace("\"pending\"", "\"approved\"");
    std::fs::write(&file, forged).unwrap();
    let o = t.run(&["approve", "r7", "build"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "forged or edited");
    let o = t.run(&["run", "--resume", "r7"]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!t.d().join("src/hello.txt").exists(), "{}", text(&o));
}

#[test]
fn racing_approve_and_deny_processes_make_one_decision() {
    let t = Team::new().with_gate();
    assert_eq!(t.run(&["run", "--id", "r7"]).status.code(), Some(7));
    let spawn = |args: &[&str]| {
        t.command(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn(&["approve", "r7", "build"]);
    let d = spawn(&["deny", "r7", "build"]);
    let (a, d) = (a.wait_with_output().unwrap(), d.wait_with_output().unwrap());
    let won: Vec<bool> = [&a, &d].iter().map(|o| o.status.success()).collect();
    assert_eq!(
        won.iter().filter(|w| **w).count(),
        1,
        "{}\n{}",
        text(&a),
        text(&d)
    );
    let lost = if won[0] { &d } else { &a };
    assert!(text(lost).contains("already decided: "), "{}", text(lost));
    assert!(text(lost).contains(" by "), "{}", text(lost));
}

#[test]
fn overrides_are_checked_when_granted_and_kept_in_the_state_dir() {
    let t = Team::new();
    let long = "x".repeat(2000);
    let grant = |agent: &str, reason: &str, ttl: &str| {
        t.run(&[
            "override", "grant", "--agent", agent, "--path", "plan.md", "--reason", reason,
            "--ttl", ttl,
        ])
    };
    let o = grant("builder", &long, "10m");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "at most 1000 bytes");
    let o = grant("buidler", "typo fix", "10m");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "root, planner, builder, auditor");
    let o = grant("builder", "typo fix", "5d");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "[overrides] max_ttl");
    let o = t.run(&["override", "revoke", "ov-1-0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "there is no override ov-1-0");
    let o = grant("builder", "typo fix", "10m");
    assert!(o.status.success(), "{}", text(&o));
    assert!(!t.d().join(".loopward/overrides").exists());
    // A grant written by hand into the store is listed as not usable.
    let store = t.state().join("overrides");
    std::fs::write(
        store.join("ov-9-0.json"),
        r#"{"id":"ov-9-0","agent":"builder","path":"src/x","reason":"r","not_before":0,"expires":99999999999999}"#,
    )
    .unwrap();
    let list = text(&t.run(&["override", "list"]));
    assert_says(&list, "usable  (typo fix)");
    assert_says(&list, "ov-9-0  builder → src/x  not usable");
}

/// `loopward hook claude-code` on one Write of `plan.md` by `agent`, in the team's workspace.
fn hook_write(t: &Team, agent: &str) -> String {
    let root = t.d().canonicalize().unwrap();
    let event = serde_json::json!({
        "session_id": "ev-1", "transcript_path": "/t.jsonl", "cwd": root,
        "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_use_id": "toolu_1",
        "tool_input": {"file_path": root.join("plan.md"), "content": "# Plan"},
        "agent_type": agent,
    });
    text(&crate::support::with_stdin(
        &mut t.command(&["hook", "claude-code", "--config", "loopward.toml"]),
        event.to_string().as_bytes(),
    ))
}

#[test]
fn a_used_override_is_listed_as_used() {
    let t = Team::new();
    let o = t.run(&[
        "override", "grant", "--agent", "builder", "--path", "plan.md", "--reason", "typo fix",
        "--ttl", "10m",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let list = text(&t.run(&["override", "list"]));
    assert_says(&list, "builder → plan.md  usable  (typo fix)");
    let said = hook_write(&t, "builder");
    assert!(said.contains(r#""permissionDecision":"allow""#), "{said}");
    let list = text(&t.run(&["override", "list"]));
    assert_says(&list, "builder → plan.md  used  (typo fix)");
    assert!(!list.contains("usable"), "{list}");
    // Used: it cannot be revoked, and the next write is refused.
    let id = list.split_whitespace().next().unwrap();
    let o = t.run(&["override", "revoke", id]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "already used");
    let said = hook_write(&t, "builder");
    assert!(said.contains(r#""permissionDecision":"deny""#), "{said}");
}

#[test]
fn a_run_started_before_a_key_rotation_resumes_under_its_own_key() {
    let t = Team::new().with_gate();
    assert_eq!(t.run(&["run", "--id", "r7"]).status.code(), Some(7));
    let first = t.keys().current().unwrap().id().to_string();
    let o = t.run(&["key", "rotate"]);
    assert!(o.status.success(), "{}", text(&o));
    let second = t.keys().current().unwrap().id().to_string();
    assert_ne!(first, second);
    let o = t.run(&["approve", "r7", "build"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = t.run(&["run", "--resume", "r7"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(t.d().join("src/hello.txt").exists(), "{}", text(&o));
    t.assert_verified_by("r7", &first);
    // A run started after the rotation is chained under the new key.
    assert_eq!(t.run(&["run", "--id", "r8"]).status.code(), Some(7));
    let head = std::fs::read_to_string(t.d().join("runs/r8/events.jsonl")).unwrap();
    assert!(head.lines().next().unwrap().contains(&second), "{head}");
}

/// The override command a refusal tells the agent to ask a person for, run as written (the
/// `"<why>"` placeholder filled in).
fn follow_hint(t: &Team, said: &str) -> Output {
    let answer: serde_json::Value = serde_json::from_str(said.trim()).unwrap();
    let reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    let start = reason.find("(loopward override grant ").expect(reason) + 1;
    let hint = &reason[start..start + reason[start..].find(')').unwrap()];
    let args: Vec<&str> = hint
        .split_whitespace()
        .skip(1)
        .map(|a| {
            if a == "\"<why>\"" {
                "a person said so"
            } else {
                a
            }
        })
        .collect();
    t.run(&args)
}

#[test]
fn the_override_a_refusal_suggests_can_be_granted_as_printed() {
    let t = Team::new();
    // A team agent (builder) and a Claude Code subagent outside the team, each refused.
    for (agent, subagent) in [("builder", false), ("code-reviewer", true)] {
        let said = hook_write(&t, agent);
        assert!(said.contains(r#""permissionDecision":"deny""#), "{said}");
        assert_eq!(said.contains("--subagent"), subagent, "{said}");
        let o = follow_hint(&t, &said);
        assert!(o.status.success(), "{agent}: {}", text(&o));
        crate::support::assert_prints(&o, "granted");
        let said = hook_write(&t, agent);
        assert!(said.contains(r#""permissionDecision":"allow""#), "{said}");
    }
}

/// Two projects of one user under one state base: the shell of a run in one project, and a
/// command the Claude Code hook wraps there, cannot read the other project's ledger key (nor
/// their own); the key's bytes reach neither the ledger nor the command's output.
#[test]
fn another_projects_key_is_unreadable_to_a_runs_shell_and_to_sandbox_exec() {
    let xdg = tempfile::tempdir().unwrap();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let loopward = |dir: &Path, args: &[&str]| {
        super::loopward_cmd(dir, args)
            .env("XDG_STATE_HOME", xdg.path())
            .output()
            .unwrap()
    };
    for d in [a.path(), b.path()] {
        let o = loopward(d, &["init"]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let states: Vec<PathBuf> = std::fs::read_dir(xdg.path().join("loopward"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(states.len(), 2, "{states:?}");
    let keys: Vec<(PathBuf, Vec<u8>)> = states
        .iter()
        .flat_map(|s| std::fs::read_dir(s.join("keys")).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "key"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    let cats: String = keys
        .iter()
        .map(|(p, _)| format!("cat '{}'; ", p.display()))
        .collect();

    // A run's shell in project b.
    let d = b.path();
    let shell = format!(
        "[[agents.builder]]\ntool_calls = [{{ name = \"shell\", arguments = {{ command = {:?} }} }}]\n\n",
        format!("{cats}echo tried")
    );
    super::workspace::builder_first(d, &shell, 1);
    let run = loopward(d, &["run", "--id", "r1"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let ledger = std::fs::read(d.join("runs/r1/events.jsonl")).unwrap();
    let ledger_text = String::from_utf8_lossy(&ledger);
    assert!(
        ledger_text.contains("tried"),
        "the shell call ran: {ledger_text}"
    );
    assert_eq!(
        ledger_text.matches("Permission denied").count(),
        2,
        "both keys refused: {ledger_text}"
    );

    // The command the hook wraps (`sandbox exec`, no --unreadable given) in project a.
    let out = Command::new(env!("CARGO_BIN_EXE_loopward"))
        .args([
            "sandbox",
            "exec",
            "--config",
            "loopward.toml",
            "--agent",
            "root",
        ])
        .args(["--", "bash", "-c", &cats])
        .current_dir(a.path())
        .env("XDG_STATE_HOME", xdg.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("Permission denied").count(), 2, "{stderr}");
    // The ledger is JSON (a key's bytes would be escaped there): both cats were refused above.
    for (path, bytes) in &keys {
        assert!(
            !out.stdout
                .windows(bytes.len())
                .any(|w| w == bytes.as_slice()),
            "{} leaked",
            path.display()
        );
    }
}
