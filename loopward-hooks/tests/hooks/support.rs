//! Shared helpers for the Claude Code hook tests: a scratch project, recorded hook inputs with
//! `$ROOT` standing for the project root, and a readable view of the session ledger.

#![allow(dead_code)]

use loopward_hooks::{handle, HookAnswer, HookContext};
use loopward_runner::ManualClock;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The session id of the recorded fixtures (`sprawl_sequence.jsonl` uses another).
pub(crate) const SESSION: &str = "8f0c2d4e-5a1b-4c3d-9e7f-0a1b2c3d4e5f";

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
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("loopward.toml"), policy).unwrap();
        let policy = loopward_runner::gates::PolicyConfig::from_toml(policy).unwrap();
        let mut b = HookContext::builder(&policy)
            .root(&root)
            .clock(Arc::new(ManualClock::new(1_700_000_000_000)));
        if let Some(exe) = exe {
            b = b.sandbox_exec(loopward_hooks::SandboxExec {
                exe: exe.into(),
                config: root.join("loopward.toml"),
                unreadable: vec![],
            });
        }
        let ctx = b.build().unwrap();
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
            .clock(Arc::new(ManualClock::new(1_700_000_000_000)))
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

pub(crate) fn fixture_text(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
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
