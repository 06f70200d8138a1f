//! Shared set-up for the gate tests: a workspace, a policy from TOML, a memory ledger, and a
//! way to push one tool call through the policy-wrapped stack as the agent loop would.
#![allow(dead_code, unreachable_pub)]

use futures::future::BoxFuture;
use futures::FutureExt;
use loopward_core::{
    AgentId, AuditEvent, Decision, Effect, EffectKind, RunId, ToolCall, ToolSpec, TurnNumber,
};
use loopward_runner::audit::MemorySink;
use loopward_runner::gates::{Policy, PolicyConfig, PolicyLayer};
use loopward_runner::tool::{
    parse_args, Access, BoxToolService, Tool, ToolError, ToolExecutor, ToolInvocation, ToolOutput,
};
use loopward_runner::tools::{EditFile, HandoffTool, Shell, WriteFile};
use loopward_runner::{Clock, ManualClock, RunContext, TurnContext, Workspace};
use serde_json::{json, Value};
use std::sync::Arc;
use tower::ServiceExt;

pub const NOW: u64 = 1_800_000_000_000;

/// The builder's changes under `src/` arm a review by the auditor (sprawl off).
pub const REVIEWED_BY_AUDITOR: &str = include_str!("policies/reviewed-by-auditor.toml");

/// Every handoff of the builder arms a review by the auditor (no `when`; sprawl off).
pub const ALWAYS_REVIEWED_BY_AUDITOR: &str =
    include_str!("policies/always-reviewed-by-auditor.toml");

/// Two review gates on the builder's `src/` changes: the auditor's and the scribe's.
pub const TWO_REVIEWERS: &str = include_str!("policies/two-reviewers.toml");

/// The planner owns the plans; the shell watched alone, with no kernel sandbox (sprawl off).
/// `[gates.shell]` comes last, so a test may append keys to it.
pub const PLANS_WATCHED: &str = include_str!("policies/plans-watched.toml");

pub fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}

pub struct Room {
    pub dir: tempfile::TempDir,
    pub ws: Workspace,
    pub policy: Policy,
    pub sink: Arc<MemorySink>,
    pub clock: Arc<ManualClock>,
    pub run: RunContext,
    pub stack: BoxToolService,
    turns: std::sync::atomic::AtomicU32,
}

impl Room {
    pub fn new(toml: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let cfg = PolicyConfig::from_toml(toml).unwrap();
        let policy = Policy::from_config(&cfg, ws.clone()).unwrap();
        Self::with_policy(dir, ws, policy)
    }

    pub fn with_policy(dir: tempfile::TempDir, ws: Workspace, policy: Policy) -> Self {
        Self::with_sink(dir, ws, policy, None)
    }

    /// A room whose run records into `ledger` (its `events()` then stay empty) instead of
    /// memory.
    pub fn with_sink(
        dir: tempfile::TempDir,
        ws: Workspace,
        policy: Policy,
        ledger: Option<Arc<dyn loopward_core::AuditSink>>,
    ) -> Self {
        let sink = Arc::new(MemorySink::default());
        let clock = Arc::new(ManualClock::new(NOW));
        let team = ["planner", "builder", "auditor", "scribe"]
            .map(agent)
            .to_vec();
        let run = RunContext::new(
            RunId::new("r1").unwrap(),
            team,
            ws.clone(),
            ledger.unwrap_or_else(|| sink.clone()),
            clock.clone() as Arc<dyn Clock>,
        );
        let stack = PolicyLayer::new(policy.clone()).wrap(BoxToolService::new(ToolExecutor));
        Self {
            dir,
            ws,
            policy,
            sink,
            clock,
            run,
            stack,
            turns: 0.into(),
        }
    }

    /// A room under `toml` holding `files` (path, content), and the builder's first turn.
    pub fn builder_in(toml: &str, files: &[(&str, &str)]) -> (Self, TurnContext) {
        let room = Self::new(toml);
        for (rel, content) in files {
            room.write(rel, content);
        }
        let builder = room.turn("builder");
        (room, builder)
    }

    /// A room under `toml`, and the first turn of `who`.
    pub fn with_turn(toml: &str, who: &str) -> (Self, TurnContext) {
        let room = Self::new(toml);
        let turn = room.turn(who);
        (room, turn)
    }

    /// A room under `toml`, and the first turn of `who`, in which it wrote (`"x"` to) `path`.
    pub async fn having_written(toml: &str, who: &str, path: &str) -> (Self, TurnContext) {
        let (room, turn) = Self::with_turn(toml, who);
        room.write_ok(&turn, path, "x").await;
        (room, turn)
    }

    pub fn turn(&self, who: &str) -> TurnContext {
        let n = self.turns.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        TurnContext::new(self.run.clone(), agent(who), TurnNumber(n))
    }

    /// The person at the keyboard says `words` to the run: a human message, recorded.
    pub fn person_says(&self, words: &str) {
        let said = loopward_core::Person::at_the_keyboard().says(words);
        loopward_runner::gates::human_message(&self.run, &said).unwrap();
    }

    pub fn path(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    pub fn write(&self, rel: &str, content: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.path(rel)).ok()
    }

    /// Runs one call through the policy stack as the agent loop would (effects pushed to the
    /// turn on success).
    pub async fn call(
        &self,
        turn: &TurnContext,
        tool: Arc<dyn Tool>,
        args: Value,
    ) -> Result<ToolOutput, ToolError> {
        let name = tool.spec().name;
        let accesses = tool.accesses(&args, turn)?;
        let id = format!("c{}", self.sink.events().len());
        let inv = ToolInvocation {
            call: ToolCall::new(id, name, args),
            tool,
            accesses,
            turn: turn.clone(),
        };
        let out = self.stack.clone().oneshot(inv).await;
        if let Ok(o) = &out {
            turn.push_effects(o.effects.iter().cloned());
        }
        out
    }

    /// [`Room::call`] with `tool` put behind an `Arc`.
    async fn run_tool(
        &self,
        turn: &TurnContext,
        tool: impl Tool + 'static,
        args: Value,
    ) -> Result<ToolOutput, ToolError> {
        self.call(turn, Arc::new(tool), args).await
    }

    pub async fn write_file(
        &self,
        turn: &TurnContext,
        path: &str,
        content: &str,
    ) -> Result<ToolOutput, ToolError> {
        self.run_tool(turn, WriteFile, json!({"path": path, "content": content}))
            .await
    }

    pub async fn edit_file(
        &self,
        turn: &TurnContext,
        path: &str,
        old: &str,
        new: &str,
    ) -> Result<ToolOutput, ToolError> {
        self.run_tool(
            turn,
            EditFile,
            json!({"path": path, "old": old, "new": new}),
        )
        .await
    }

    pub async fn shell(&self, turn: &TurnContext, command: &str) -> Result<ToolOutput, ToolError> {
        self.run_tool(turn, Shell::default(), json!({"command": command}))
            .await
    }

    /// Runs `command` in the `shell` tool; the call must complete (its output may still be the
    /// refusal an agent reads).
    pub async fn sh(&self, turn: &TurnContext, command: &str) -> ToolOutput {
        self.shell(turn, command)
            .await
            .unwrap_or_else(|e| panic!("`{command}` did not complete: {e}"))
    }

    /// Writes `content` to `path` with the `write_file` tool; the write must succeed.
    pub async fn write_ok(&self, turn: &TurnContext, path: &str, content: &str) -> ToolOutput {
        self.write_file(turn, path, content)
            .await
            .unwrap_or_else(|e| panic!("writing {path} failed: {e}"))
    }

    /// A room under `toml` holding `files` (path, content), the builder's first turn, and what
    /// `command` run in the `shell` tool by the builder gave (it must complete).
    pub async fn builder_ran(
        toml: &str,
        files: &[(&str, &str)],
        command: &str,
    ) -> (Self, TurnContext, ToolOutput) {
        let (room, builder) = Self::builder_in(toml, files);
        let out = room.sh(&builder, command).await;
        (room, builder, out)
    }

    pub async fn handoff(&self, turn: &TurnContext, to: &str) -> Result<ToolOutput, ToolError> {
        let team = ["planner", "builder", "auditor", "scribe"]
            .map(agent)
            .to_vec();
        self.run_tool(
            turn,
            HandoffTool::new(team),
            json!({"to": to, "message": "over to you"}),
        )
        .await
    }

    /// Hands off from `turn` to `to`; the handoff must be refused. Returns what the agent reads.
    pub async fn handoff_refused(&self, turn: &TurnContext, to: &str) -> String {
        match self.handoff(turn, to).await {
            Ok(out) => panic!("the handoff to {to} was not refused: {}", out.content),
            Err(e) => e.to_string(),
        }
    }

    /// The events so far, but the policy's version, noted before the run's first judged call
    /// (`gates_policy::the_policy_version_is_noted_once_per_run_and_again_when_it_changes`).
    pub fn events(&self) -> Vec<AuditEvent> {
        self.sink
            .events()
            .into_iter()
            .map(|(_, e)| e)
            .filter(|e| {
                !matches!(e, AuditEvent::LayerDecision { layer, .. } if *layer == loopward_core::LayerId::Policy)
            })
            .collect()
    }

    /// (gate, decision label, path) of every gate decision so far.
    pub fn decisions(&self) -> Vec<(String, &'static str, Option<String>)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                AuditEvent::GateDecision {
                    gate,
                    decision,
                    path,
                    ..
                } => Some((
                    gate.name.to_string(),
                    decision.label(),
                    path.as_deref().map(str::to_string),
                )),
                _ => None,
            })
            .collect()
    }

    /// (path, remedy) of every violation recorded so far.
    pub fn violations(&self) -> Vec<(String, String)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                AuditEvent::Violation { path, remedy, .. } => Some((path, remedy.to_string())),
                _ => None,
            })
            .collect()
    }

    pub fn denials(&self) -> Vec<Decision> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                AuditEvent::GateDecision { decision, .. } if !decision.permits() => Some(decision),
                _ => None,
            })
            .collect()
    }
}

/// The names of what folder `dir` holds, as the file system lists them (bytes kept).
pub fn names_in(dir: &std::path::Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect()
}

/// Asserts that `out` is an error the agent reads and that it says each of `says`.
#[track_caller]
pub fn assert_refused(out: &ToolOutput, says: &[&str]) {
    assert!(out.is_error, "not refused: {}", out.content);
    assert_says(&out.content, says);
}

/// Asserts that the handoff standing in `turn` is to `to`.
#[track_caller]
pub fn assert_handed_to(turn: &TurnContext, to: &str) {
    let standing = turn.state().handoff.as_ref().map(|h| h.to.to_string());
    assert_eq!(standing.as_deref(), Some(to));
}

/// Asserts that `text` contains each of `says`, showing the whole text when one is missing.
#[track_caller]
pub fn assert_says(text: &str, says: &[&str]) {
    for s in says {
        assert!(text.contains(s), "{s:?} missing from:\n{text}");
    }
}

/// A tool that declares arbitrary accesses (delete, rename, link) and performs them, to test
/// gates on access kinds the built-in tools do not make.
#[derive(Clone, Copy, Debug, Default)]
pub struct FsOp;

impl Tool for FsOp {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "fs_op".into(),
            description: "delete | rename | symlink | hardlink".into(),
            parameters: json!({"type": "object"}),
        }
    }

    fn accesses(&self, args: &Value, turn: &TurnContext) -> Result<Vec<Access>, ToolError> {
        #[derive(serde::Deserialize)]
        struct A {
            op: String,
            a: String,
            #[serde(default)]
            b: String,
        }
        let a: A = parse_args("fs_op", args)?;
        let ws = turn.workspace();
        Ok(vec![match a.op.as_str() {
            "delete" => Access::Delete(ws.resolve(&a.a)?),
            "rename" => Access::Rename {
                from: ws.resolve(&a.a)?,
                to: ws.resolve(&a.b)?,
            },
            _ => Access::Link {
                path: ws.resolve(&a.a)?,
                target: ws.resolve(&a.b)?,
            },
        }])
    }

    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        async move {
            let op = inv.call.arguments["op"].as_str().unwrap_or("").to_string();
            let fail = |e: std::io::Error| ToolError::Failed(e.to_string());
            let effects = match &inv.accesses[0] {
                Access::Delete(p) => {
                    if p.abs().is_dir() {
                        std::fs::remove_dir_all(p.abs()).map_err(fail)?;
                    } else {
                        std::fs::remove_file(p.abs()).map_err(fail)?;
                    }
                    vec![Effect::ok(p.rel(), EffectKind::Delete)]
                }
                Access::Rename { from, to } => {
                    std::fs::rename(from.abs(), to.abs()).map_err(fail)?;
                    vec![Effect::ok(
                        to.rel(),
                        EffectKind::Rename {
                            from: from.rel().into(),
                        },
                    )]
                }
                Access::Link { path, target } => {
                    if op == "hardlink" {
                        std::fs::hard_link(target.abs(), path.abs()).map_err(fail)?;
                    } else {
                        std::os::unix::fs::symlink(target.abs(), path.abs()).map_err(fail)?;
                    }
                    vec![Effect::ok(path.rel(), EffectKind::Link)]
                }
                _ => vec![],
            };
            Ok(ToolOutput::with_effects("done", effects))
        }
        .boxed()
    }
}

pub async fn fs_op(
    room: &Room,
    turn: &TurnContext,
    op: &str,
    a: &str,
    b: &str,
) -> Result<ToolOutput, ToolError> {
    room.run_tool(turn, FsOp, json!({"op": op, "a": a, "b": b}))
        .await
}
