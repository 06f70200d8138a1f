//! Shared helpers for the Claude Code hook tests: a scratch project, recorded hook inputs with
//! `$ROOT` standing for the project root, and a readable view of the session ledger.

#![allow(dead_code)]

use loopward_core::{AuditError, AuditSink, RunId};
use loopward_hooks::{handle, HookAnswer, HookContext, HookContextBuilder, LedgerOpener};
use loopward_runner::gates::Host;
use loopward_runner::ManualClock;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The hook's own file ledgers ([`loopward_hooks::FileLedgers`]), each sink wrapped by the
/// function: a test's view of what the hook records and commits.
pub(crate) struct WrappedLedgers<F>(pub(crate) F);

impl<F> LedgerOpener for WrappedLedgers<F>
where
    F: Fn(Arc<dyn AuditSink>) -> Arc<dyn AuditSink> + Send + Sync,
{
    fn open(
        &self,
        runs_dir: &Path,
        run: &RunId,
        clock: Arc<dyn loopward_runner::Clock>,
    ) -> Result<Arc<dyn AuditSink>, AuditError> {
        let file = loopward_hooks::FileLedgers::default().open(runs_dir, run, clock)?;
        Ok((self.0)(file))
    }
}

/// The session id of the recorded fixtures (`sprawl_sequence.jsonl` uses another).
pub(crate) const SESSION: &str = "8f0c2d4e-5a1b-4c3d-9e7f-0a1b2c3d4e5f";

/// The hooks' clock: every session starts at this instant (milliseconds).
pub(crate) const NOW: u64 = 1_700_000_000_000;

/// The gate sections the host adapters' tests share: the planner owns `plan.md`, the shell is
/// watched (no kernel sandbox).
pub(crate) const HOST_POLICY: &str = include_str!("policies/plan-watched.toml");

/// [`HOST_POLICY`] with the kernel sandbox (the default) instead of the watch alone.
pub(crate) fn host_policy_sandboxed() -> String {
    HOST_POLICY.replace("sandbox = \"watch-only\"", "")
}

pub(crate) struct Project {
    _dir: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) ctx: HookContext,
    /// loopward's state directory, when the hook was given one.
    pub(crate) state: Option<(tempfile::TempDir, loopward_runner::StateDir)>,
}

impl Project {
    /// A scratch project governed by `policy` (the gate sections of a loopward.toml).
    pub(crate) fn new(policy: &str) -> Self {
        Self::with_sandbox(policy, None)
    }

    /// Like [`Project::new`], wrapping `Bash` commands with `exe` (a `loopward` binary path).
    pub(crate) fn with_sandbox(policy: &str, exe: Option<&str>) -> Self {
        Self::build(policy, exe, |b| b)
    }

    fn build(
        policy: &str,
        exe: Option<&str>,
        more: impl FnOnce(HookContextBuilder) -> HookContextBuilder,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("loopward.toml"), policy).unwrap();
        let policy = loopward_runner::gates::PolicyConfig::from_toml(policy).unwrap();
        let mut b = HookContext::builder(&policy)
            .root(&root)
            .clock(Arc::new(ManualClock::new(NOW)));
        if let Some(exe) = exe {
            b = b.sandbox_exec(loopward_hooks::SandboxExec {
                exe: exe.into(),
                config: root.join("loopward.toml"),
                unreadable: vec![],
            });
        }
        let ctx = more(b).build().unwrap();
        Self {
            _dir: dir,
            root,
            ctx,
            state: None,
        }
    }

    /// Like [`Project::new`], with the sessions kept in a state directory outside the project.
    pub(crate) fn with_state_dir(policy: &str) -> Self {
        let mut p = Self::new(policy);
        let base = tempfile::tempdir().unwrap();
        let state = loopward_runner::StateDir::for_workspace(base.path(), &p.root).unwrap();
        let cfg = loopward_runner::gates::PolicyConfig::from_toml(policy).unwrap();
        p.ctx = HookContext::builder(&cfg)
            .root(&p.root)
            .clock(Arc::new(ManualClock::new(NOW)))
            .state_dir(&state)
            .build()
            .unwrap();
        p.state = Some((base, state));
        p
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub(crate) fn write(&self, rel: &str, content: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub(crate) fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.path(rel)).ok()
    }

    /// A person grants `agent` a one-shot override on `path` (for ten minutes).
    pub(crate) fn grant(&self, agent: &str, path: &str, reason: &str) {
        let ws = loopward_runner::Workspace::new(&self.root).unwrap();
        loopward_runner::gates::OverrideStore::for_workspace(&ws)
            .grant(
                &loopward_core::AgentId::new(agent).unwrap(),
                &ws.resolve(path).unwrap(),
                reason,
                std::time::Duration::from_secs(600),
                &ManualClock::new(NOW),
            )
            .unwrap();
    }

    /// The raw ledger of the run `run` (`codex-<session>`, …); empty when there is none.
    pub(crate) fn ledger_text(&self, run: &str) -> String {
        std::fs::read_to_string(self.root.join("runs").join(run).join("events.jsonl"))
            .unwrap_or_default()
    }

    /// A Claude Code `Write` event of `file` as call `id` in the recorded session; after the
    /// call (`PostToolUse`), the client's answer says whether the write `created` the file.
    pub(crate) fn write_event(
        &self,
        name: &str,
        id: &str,
        file: &str,
        content: &str,
        created: bool,
    ) -> String {
        let mut v = serde_json::json!({
            "session_id": SESSION, "transcript_path": "/t.jsonl", "cwd": self.root,
            "hook_event_name": name, "tool_name": "Write", "tool_use_id": id,
            "tool_input": {"file_path": self.path(file), "content": content},
        });
        if name == "PostToolUse" {
            let kind = if created { "create" } else { "update" };
            v["tool_response"] = serde_json::json!({"type": kind, "filePath": self.path(file)});
        }
        v.to_string()
    }

    /// A recorded hook input with `$ROOT` replaced by this project's root.
    pub(crate) fn fixture(&self, name: &str) -> String {
        fixture_text(name).replace("$ROOT", self.root.to_str().unwrap())
    }

    /// Sends one hook event. For a `PostToolUse` of `Write`, first does what Claude Code would
    /// have done: writes the content.
    pub(crate) fn send(&self, event: &str) -> HookAnswer {
        if let Ok(v) = serde_json::from_str::<Value>(event) {
            if v["hook_event_name"] == "PostToolUse" && v["tool_name"] == "Write" {
                let path = v["tool_input"]["file_path"].as_str().unwrap();
                let content = v["tool_input"]["content"].as_str().unwrap();
                std::fs::create_dir_all(Path::new(path).parent().unwrap()).unwrap();
                std::fs::write(path, content).unwrap();
            }
        }
        handle(event, &self.ctx)
    }

    pub(crate) fn send_fixture(&self, name: &str) -> HookAnswer {
        self.send(&self.fixture(name))
    }

    /// The session ledger, one summary line per event.
    pub(crate) fn ledger(&self, session: &str) -> Vec<String> {
        let path = self
            .root
            .join("runs")
            .join(format!("claude-code-{session}"))
            .join("events.jsonl");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        text.lines()
            .map(|l| summarise(&serde_json::from_str::<Value>(l).unwrap()))
            .collect()
    }
}

/// A scratch project whose hook answers as `host` (Codex or Gemini CLI) in one session of it,
/// wrapping shell commands with `exe`; `handoff`: the loop served the session loopward's
/// `handoff` over MCP.
pub(crate) struct HostSession {
    pub(crate) project: Project,
    /// The session's run, named as the hook names it (`codex-<session>`, `gemini-<session>`).
    run: String,
}

impl std::ops::Deref for HostSession {
    type Target = Project;
    fn deref(&self) -> &Project {
        &self.project
    }
}

impl HostSession {
    pub(crate) fn new(
        host: Host,
        session: &str,
        policy: &str,
        exe: Option<&str>,
        handoff: bool,
    ) -> Self {
        let name = match host {
            Host::Codex => "codex",
            Host::GeminiCli => "gemini",
            other => panic!("{other:?} has no session runs of its own"),
        };
        Self {
            project: Project::build(policy, exe, |b| b.host(host).handoff(handoff)),
            run: format!("{name}-{session}"),
        }
    }

    /// The session's raw ledger; empty before the hook's first call.
    pub(crate) fn ledger(&self) -> String {
        self.project.ledger_text(&self.run)
    }
}

pub(crate) fn fixture_text(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The call was blocked (exit 2, what Claude Code reads as "stop") and stderr says `why`.
#[track_caller]
pub(crate) fn assert_blocks(a: &HookAnswer, why: &str) {
    assert_eq!(a.exit_code, 2, "{a:?}");
    assert!(
        a.stderr.contains(why),
        "{why:?} not in stderr: {}",
        a.stderr
    );
}

/// Some line of a ledger summary (`Project::ledger`) contains `needle`.
#[track_caller]
pub(crate) fn assert_recorded(ledger: &[String], needle: &str) {
    assert!(
        ledger.iter().any(|l| l.contains(needle)),
        "{needle:?} in no line of {ledger:#?}"
    );
}

/// The hook told the client (on stdout) `needle`.
#[track_caller]
pub(crate) fn assert_tells(a: &HookAnswer, needle: &str) {
    assert!(a.stdout.contains(needle), "{needle:?} not in stdout: {a:?}");
}

/// The host is told nothing: exit status 0, an empty stdout (the call goes its own way).
#[track_caller]
pub(crate) fn assert_silent(a: &HookAnswer) {
    assert_eq!((a.exit_code, a.stdout.as_str()), (0, ""), "{}", a.stderr);
}

/// No line of a ledger summary contains `needle`.
#[track_caller]
pub(crate) fn assert_not_recorded(ledger: &[String], needle: &str) {
    assert!(
        !ledger.iter().any(|l| l.contains(needle)),
        "{needle:?} in a line of {ledger:#?}"
    );
}

/// What the hook command would show: exit status, stdout and stderr.
pub(crate) fn shown(a: &HookAnswer) -> String {
    format!(
        "exit {}\nstdout: {}stderr: {}",
        a.exit_code,
        if a.stdout.is_empty() { "\n" } else { &a.stdout },
        if a.stderr.is_empty() { "\n" } else { &a.stderr }
    )
}

/// One ledger record as a line: agent, turn, kind and the fields that matter.
fn summarise(line: &Value) -> String {
    let event = if line.get("event").is_some() {
        &line["event"]
    } else {
        &line["data"]
    };
    let scope = if line.get("scope").is_some() {
        line["scope"].clone()
    } else {
        line.clone()
    };
    let kind = line["kind"]
        .as_str()
        .or_else(|| event["kind"].as_str())
        .unwrap_or("?");
    let who = format!(
        "[{} t{}]",
        scope["agent"].as_str().unwrap_or("-"),
        scope["turn"].as_u64().unwrap_or(0)
    );
    let rest = match kind {
        "gate_decision" => format!(
            "{} {} {}{}",
            event["gate"].as_str().unwrap_or(""),
            event["decision"]["decision"].as_str().unwrap_or(""),
            event["path"]
                .as_str()
                .or_else(|| event["path_raw"].as_str())
                .unwrap_or("-"),
            event["call_id"]
                .as_str()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default()
        ),
        "tool_requested" => format!(
            "{} {}",
            event["tool"].as_str().unwrap_or(""),
            event["call_id"].as_str().unwrap_or("")
        ),
        "tool_finished" => format!(
            "{} {} error={} effects=[{}]",
            event["tool"].as_str().unwrap_or(""),
            event["call_id"].as_str().unwrap_or(""),
            event["is_error"],
            event["effects"]
                .as_array()
                .map(|a| a
                    .iter()
                    .map(|e| format!(
                        "{} {} {}",
                        e["path"].as_str().unwrap_or(""),
                        e["kind"].as_str().unwrap_or(""),
                        e["status"].as_str().unwrap_or("")
                    ))
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        ),
        "violation" => format!(
            "{} {}: {}",
            event["path"].as_str().unwrap_or(""),
            serde_json::from_value::<loopward_core::Remedy>(event["remedy"].clone())
                .map(|r| r.to_string())
                .unwrap_or_default(),
            event["reason"].as_str().unwrap_or("")
        ),
        "override_consumed" => format!(
            "{} {} {}",
            event["id"].as_str().unwrap_or(""),
            event["path"].as_str().unwrap_or(""),
            event["reason"].as_str().unwrap_or("")
        ),
        "human_message" => event["content"].as_str().unwrap_or("").to_string(),
        "layer_decision" => format!(
            "{} {} {}",
            event["layer"].as_str().unwrap_or(""),
            event["decision"].as_str().unwrap_or(""),
            event["detail"]
        ),
        _ => String::new(),
    };
    format!("{who} {kind} {rest}").trim_end().to_string()
}
