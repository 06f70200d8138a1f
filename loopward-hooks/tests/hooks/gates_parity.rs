//! One policy, many enforcement points: the same script of writes, edits, shell changes, links
//! and overrides, played through the runner's tool stack and through the Claude Code, Codex and
//! Gemini CLI hooks under the same config (each host's own tools and events: `apply_patch` on
//! Codex, `write_file`/`replace`/`run_shell_command` on Gemini CLI), leaves the same decisions,
//! override consumptions and violations in their ledgers, and each ledger verifies.

use crate::gates_support::{self, Room, NOW};
use crate::support::WrappedLedgers;
use loopward_core::{AuditError, AuditEvent, AuditSink, Decision, GateMode};
use loopward_hooks::{handle, HookContext};
use loopward_runner::audit::MemorySink;
use loopward_runner::gates::{self, Host, PolicyConfig};
use loopward_runner::{ManualClock, TurnContext};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const CONFIG: &str = include_str!("policies/parity.toml");

/// One step of the script, as an agent would attempt it.
#[derive(Clone, Debug)]
enum Step {
    /// A file on disk before the session (no agent wrote it).
    Seed(&'static str, &'static str),
    /// A person speaks: a new turn.
    Human(&'static str),
    /// A person grants `agent` a one-shot override on `path`.
    Grant(&'static str, &'static str),
    /// Write a whole file.
    Write(&'static str, &'static str),
    /// Replace `old` with `new` in a file.
    Edit(&'static str, &'static str, &'static str),
    /// A shell command (`sh -c`).
    Shell(&'static str),
}

use Step::*;

/// The script: each rule's allow and deny, its way out, and the divergences the two engines
/// used to have (a hard link made by a command into a territory; an override covering where a
/// symbolic link lands; unit keys of a repeated replacement; the plan clearing the sprawl gate).
fn script() -> Vec<Step> {
    vec![
        Seed("src/util.rs", "use crate::lex;\n"),
        Seed("plans/roadmap.md", "the planner's\n"),
        Human("build the parser"),
        Write("src/lexer.rs", "fn lex() {}\n"),
        Edit("src/lexer.rs", "lex", "tokens"),
        Write("tests/lexer.rs", "#[test] fn t() {}\n"),
        Write("src/parser.rs", "fn parse() { lex() }\n"),
        // The same replacement in another file is the same unit of work (a mechanical rename).
        Edit("src/util.rs", "lex", "tokens"),
        Write("plans/roadmap.md", "mine now"),
        Write(".loopward/overrides/forged.json", "{}"),
        // A third unit with no plan: refused once; the plan clears it.
        Write("src/eval.rs", "fn eval() {}\n"),
        Write("plan.md", "# Plan\n1. lexer\n2. parser\n3. eval\n"),
        Write("src/eval.rs", "fn eval() {}\n"),
        // One override, one write.
        Grant("builder", "plans/roadmap.md"),
        Write("plans/roadmap.md", "typo fixed"),
        Write("plans/roadmap.md", "and again"),
        // Shell: a write into a territory is put back, the rest stands.
        Shell("echo hijack > plans/roadmap.md; echo ok > src/notes.txt"),
        // A hard link into a territory, and a symbolic one.
        Shell("ln plans/roadmap.md src/hard.md"),
        Shell("ln -s ../plans/roadmap.md src/soft.md"),
        // A symbolic link whose landing place an override covers: consumed, and it stands.
        Grant("builder", "plans/next.md"),
        Shell("ln -s ../plans/next.md src/next.md"),
        Human("now the docs"),
        Write("docs/lexer.md", "# Lexer\n"),
        Shell("echo '# Plan' > plans/readme.md"),
    ]
}

/// A decision record, without what only one adapter can know (call ids, the action's tool
/// name, the raw path as typed).
#[derive(Debug, PartialEq)]
enum Seen {
    Gate {
        gate: String,
        mode: GateMode,
        path: Option<String>,
        decision: Decision,
    },
    Override {
        id: String,
        path: String,
        reason: String,
    },
    Violation {
        path: String,
        remedy: String,
        reason: String,
    },
}

fn seen(events: Vec<AuditEvent>) -> Vec<Seen> {
    events
        .into_iter()
        .filter_map(|e| match e {
            // The kernel sandbox is the runner's containment of a command, not a decision of
            // the policy; the hook has none.
            AuditEvent::GateDecision { gate, .. }
                if gate.kind == loopward_core::GateKind::Sandbox =>
            {
                None
            }
            AuditEvent::GateDecision {
                gate,
                mode,
                path,
                decision,
                ..
            } => Some(Seen::Gate {
                gate: gate.name.to_string(),
                mode,
                path: path.as_deref().map(str::to_string),
                decision: same_host(decision),
            }),
            AuditEvent::OverrideConsumed {
                id, path, reason, ..
            } => Some(Seen::Override { id, path, reason }),
            AuditEvent::Violation {
                path,
                remedy,
                reason,
            } => Some(Seen::Violation {
                path,
                remedy: remedy.to_string(),
                reason,
            }),
            _ => None,
        })
        .collect()
}

/// A refusal's remedy names the move that exists on the host that shows it (the runner hands
/// off; Claude Code delegates to a subagent): read as the runner's, the decisions must agree.
fn same_host(decision: Decision) -> Decision {
    let as_runner = |mut r: loopward_core::Refusal| {
        for owner in ["planner", "builder", "root"] {
            for host in [Host::ClaudeCode, Host::Codex, Host::GeminiCli] {
                r.hint = r
                    .hint
                    .replace(&host.pass_to(owner), &Host::Runner.pass_to(owner));
            }
        }
        r
    };
    match decision {
        Decision::Deny(r) => Decision::Deny(as_runner(r)),
        Decision::Warn(r) => Decision::Warn(as_runner(r)),
        other => other,
    }
}

fn grant(store: &gates::OverrideStore, ws: &loopward_runner::Workspace, who: &str, path: &str) {
    let clock = ManualClock::new(NOW);
    store
        .grant(
            &gates_support::agent(who),
            &ws.resolve(path).unwrap(),
            "approved by Ana",
            Duration::from_secs(600),
            &clock,
        )
        .unwrap();
}

/// The script through the runner's tool stack, as agent `builder`.
async fn through_the_runner() -> Vec<Seen> {
    let room = Room::new(CONFIG);
    let mut turn: Option<TurnContext> = None;
    for step in script() {
        match step {
            Seed(path, content) => room.write(path, content),
            Human(text) => {
                gates::human_message(
                    &room.run,
                    &loopward_core::Person::at_the_keyboard().says(text.to_string()),
                )
                .unwrap();
                turn = Some(room.turn("builder"));
            }
            Grant(who, path) => grant(room.policy.overrides(), &room.ws, who, path),
            Write(path, content) => {
                let _ = room.write_file(turn.as_ref().unwrap(), path, content).await;
            }
            Edit(path, old, new) => {
                let _ = room.edit_file(turn.as_ref().unwrap(), path, old, new).await;
            }
            Shell(command) => {
                let _ = room.shell(turn.as_ref().unwrap(), command).await;
            }
        }
    }
    seen(room.events())
}

/// Every session's ledger both on file (the hook's own format, to verify) and in one memory
/// sink (to compare).
struct Tee(Arc<dyn AuditSink>, Arc<MemorySink>);

impl AuditSink for Tee {
    fn record(&self, scope: &loopward_core::Scope, event: &AuditEvent) -> Result<(), AuditError> {
        self.0.record(scope, event)?;
        self.1.record(scope, event)
    }

    fn commit(&self) -> Result<(), AuditError> {
        self.0.commit()
    }
}

/// A host, scripted: it asks the hook before each tool, does what the tool does when allowed,
/// and reports after, in that host's own events and tool names.
struct Session {
    host: Host,
    root: PathBuf,
    ctx: HookContext,
    calls: u32,
}

impl Session {
    fn send(&mut self, event: &str, tool: Option<(&str, Value)>, extra: Value) -> String {
        let (name, input) = tool.unwrap_or(("", Value::Null));
        let mut e = json!({
            "session_id": "parity", "transcript_path": "/t.jsonl", "cwd": self.root,
            "hook_event_name": event,
        });
        // Gemini CLI's events name no subagent (its context names the main agent `builder`)
        // and carry no call id.
        if self.host != Host::GeminiCli {
            e["agent_type"] = json!("builder");
        }
        if !name.is_empty() {
            e["tool_name"] = json!(name);
            e["tool_input"] = input;
            if self.host != Host::GeminiCli {
                e["tool_use_id"] = json!(format!("toolu_{}", self.calls));
            }
        }
        for (k, v) in extra.as_object().into_iter().flatten() {
            e[k] = v.clone();
        }
        let answer = handle(&e.to_string(), &self.ctx);
        assert_eq!(answer.exit_code, 0, "{}", answer.stderr);
        answer.stdout
    }

    /// Pre, then the tool itself when not denied, then Post.
    fn tool(&mut self, name: &str, input: Value, run: impl FnOnce(&Path)) {
        self.calls += 1;
        let (before, after) = match self.host {
            Host::GeminiCli => ("BeforeTool", "AfterTool"),
            _ => ("PreToolUse", "PostToolUse"),
        };
        let pre = self.send(before, Some((name, input.clone())), json!({}));
        if pre.contains(r#""permissionDecision":"deny""#) || pre.contains(r#""decision":"deny""#) {
            return;
        }
        run(&self.root);
        self.send(after, Some((name, input)), json!({"tool_response": {}}));
    }

    fn human(&mut self, text: &str) {
        let event = match self.host {
            Host::GeminiCli => "BeforeAgent",
            _ => "UserPromptSubmit",
        };
        self.send(event, None, json!({ "prompt": text }));
    }

    /// Writes `content` to `path` with the host's own file tool.
    fn write(&mut self, path: &str, content: &'static str) {
        let abs = self.root.join(path);
        let put = {
            let abs = abs.clone();
            move |_: &Path| {
                std::fs::create_dir_all(abs.parent().unwrap()).unwrap();
                std::fs::write(&abs, content).unwrap();
            }
        };
        match self.host {
            Host::Codex => {
                let patch = match std::fs::read_to_string(&abs) {
                    Ok(old) => format!(
                        "*** Begin Patch\n*** Update File: {path}\n@@\n{}{}*** End Patch\n",
                        lines('-', &old),
                        lines('+', content)
                    ),
                    Err(_) => format!(
                        "*** Begin Patch\n*** Add File: {path}\n{}*** End Patch\n",
                        lines('+', content)
                    ),
                };
                self.tool("apply_patch", json!({ "command": patch }), put);
            }
            Host::GeminiCli => {
                let input = json!({"file_path": abs, "content": content});
                self.tool("write_file", input, put);
            }
            _ => {
                let input = json!({"file_path": abs, "content": content});
                self.tool("Write", input, put);
            }
        }
    }

    /// Replaces `old` with `new` in `path` with the host's own edit tool.
    fn edit(&mut self, path: &str, old: &'static str, new: &'static str) {
        let abs = self.root.join(path);
        let text = std::fs::read_to_string(&abs).unwrap();
        let replace = {
            let abs = abs.clone();
            move |_: &Path| std::fs::write(&abs, text.replacen(old, new, 1)).unwrap()
        };
        match self.host {
            Host::Codex => {
                let line = std::fs::read_to_string(&abs)
                    .unwrap()
                    .lines()
                    .find(|l| l.contains(old))
                    .unwrap()
                    .to_string();
                let patch = format!(
                    "*** Begin Patch\n*** Update File: {path}\n@@\n-{line}\n+{}\n*** End Patch\n",
                    line.replacen(old, new, 1)
                );
                self.tool("apply_patch", json!({ "command": patch }), replace);
            }
            Host::GeminiCli => {
                let input = json!({"file_path": abs, "old_string": old, "new_string": new,
                    "instruction": "rename"});
                self.tool("replace", input, replace);
            }
            _ => {
                let input = json!({"file_path": abs, "old_string": old, "new_string": new});
                self.tool("Edit", input, replace);
            }
        }
    }

    fn shell(&mut self, command: &'static str) {
        let name = match self.host {
            Host::GeminiCli => "run_shell_command",
            _ => "Bash",
        };
        self.tool(name, json!({ "command": command }), |root| {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(command)
                .current_dir(root)
                .status()
                .unwrap();
        });
    }
}

/// `text`'s lines, each after `mark`, one a line.
fn lines(mark: char, text: &str) -> String {
    text.lines().map(|l| format!("{mark}{l}\n")).collect()
}

/// The script through `host`'s hook, as (sub)agent `builder`.
fn through_the_hook(host: Host) -> Vec<Seen> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let sink = Arc::new(MemorySink::default());
    let cfg = PolicyConfig::from_toml(CONFIG).unwrap();
    let memory = sink.clone();
    let ctx = HookContext::builder(&cfg)
        .root(&root)
        .host(host)
        .main_agent(gates_support::agent("builder"))
        .clock(Arc::new(ManualClock::new(NOW)))
        .ledgers(Arc::new(WrappedLedgers(move |file| {
            Arc::new(Tee(file, memory.clone())) as Arc<dyn AuditSink>
        })))
        .build()
        .unwrap();
    let ws = loopward_runner::Workspace::new(&root).unwrap();
    let store = gates::OverrideStore::for_workspace(&ws);
    let mut s = Session {
        host,
        root: root.clone(),
        ctx,
        calls: 0,
    };
    for step in script() {
        match step {
            Seed(path, content) => {
                std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
                std::fs::write(root.join(path), content).unwrap();
            }
            Human(text) => s.human(text),
            Grant(who, path) => grant(&store, &ws, who, path),
            Write(path, content) => s.write(path, content),
            Edit(path, old, new) => s.edit(path, old, new),
            Shell(command) => s.shell(command),
        }
    }
    // The session's ledger on file verifies (a session never finishes: unanchored).
    let prefix = match host {
        Host::Codex => "codex",
        Host::GeminiCli => "gemini",
        _ => "claude-code",
    };
    let opts = loopward_runner::audit::VerifyOptions::keyless().unfinished(true);
    loopward_runner::audit::verify(&root.join(format!("runs/{prefix}-parity")), &opts)
        .unwrap_or_else(|e| panic!("{host:?}: the session ledger does not verify: {e}"));
    seen(sink.events().into_iter().map(|(_, e)| e).collect())
}

#[tokio::test]
async fn the_runner_and_every_hosts_hook_decide_the_same_script_identically() {
    let runner = through_the_runner().await;
    // The script exercised every kind of record, so agreeing is not agreeing on nothing.
    let denials = runner
        .iter()
        .filter(|s| {
            matches!(
                s,
                Seen::Gate {
                    decision: Decision::Deny(_),
                    ..
                }
            )
        })
        .count();
    let overrides = runner
        .iter()
        .filter(|s| matches!(s, Seen::Override { .. }))
        .count();
    let violations = runner
        .iter()
        .filter(|s| matches!(s, Seen::Violation { .. }))
        .count();
    assert!(
        denials >= 5 && overrides == 2 && violations >= 3,
        "{runner:#?}"
    );
    for host in [Host::ClaudeCode, Host::Codex, Host::GeminiCli] {
        let hook = through_the_hook(host);
        for (i, (r, h)) in runner.iter().zip(&hook).enumerate() {
            assert_eq!(
                r, h,
                "{host:?}: record {i} differs\nrunner: {runner:#?}\nhook: {hook:#?}"
            );
        }
        assert_eq!(
            runner.len(),
            hook.len(),
            "{host:?}\nrunner: {runner:#?}\nhook: {hook:#?}"
        );
    }
}
