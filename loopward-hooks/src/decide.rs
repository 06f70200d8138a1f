//! The hook engine: one event in, one reply out, with the session's state and ledger updated
//! under the session's lock. This file sets the [`Engine`] up for an event, records a person's
//! turns and holds what every step shares (scope, records, path resolution, judging); the steps
//! of a tool event are in `tool_call.rs` and the modules it names.

use super::claude_code::{Event, HookInput, Reply, ToolUse};
use super::session::{SessionDir, SessionKey, SessionState};
use super::{HookContext, HookError};
use loopward_core::{
    Action, AgentId, AuditEvent, AuditSink, CallId, Decision, GateId, GateMode, Refusal, RunId,
    Scope, TurnNumber,
};
use loopward_runner::gates::{Ask, Judgement, Policy};
use loopward_runner::tool::Access;
use loopward_runner::{WorkPath, Workspace};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

/// Strings in logged tool arguments longer than this are shortened (file contents, edits).
const MAX_LOGGED_STRING: usize = 256;

/// Handles one event; its records go to `kept` when given (the caller's ledger takes them),
/// else to the session's own ledger.
pub(super) fn handle(
    raw: &str,
    ctx: &HookContext,
    kept: Option<Arc<dyn AuditSink>>,
) -> Result<Reply, HookError> {
    let input = HookInput::parse(raw)?;
    let event = input.event_for(ctx.host)?;
    let ws = workspace(&input, ctx)?;
    let key = SessionKey::new(&input.session_id)?;
    let caller = caller(&input, ctx)?;
    let policy = ctx.policy(&ws)?;
    let dir = SessionDir::under(&ctx.sessions_dir(ws.root()), key).lock_wait(ctx.lock_wait);
    dir.locked(|state| {
        let run = dir.key().run_id_of(ctx.run_prefix());
        let runs_dir = ws.root().join(&ctx.runs_dir);
        let embedded = kept.is_some();
        let ledger = match &kept {
            Some(k) => k.clone(),
            None => ctx.ledgers.open(&runs_dir, &run, ctx.clock.clone())?,
        };
        let mut e = Engine {
            embedded,
            ctx,
            policy: &policy,
            ws: &ws,
            dir: &dir,
            input: &input,
            caller,
            run,
            ledger,
            state,
        };
        e.start()?;
        let reply = match event {
            // The client submits a background agent's completion as a prompt: a notice, not
            // the person, so it starts no turn.
            Event::UserPromptSubmit { prompt } if is_task_notification(&prompt) => {
                e.other("UserPromptSubmit:task-notification")
            }
            // A loop's session: its prompt is the loop's, not the person's.
            Event::UserPromptSubmit { .. }
                if ctx.loop_session.as_deref() == Some(e.input.session_id.as_str()) =>
            {
                e.loop_prompt()
            }
            Event::UserPromptSubmit { prompt } => e.human(prompt),
            Event::PreToolUse(call) => e.pre(call),
            Event::PostToolUse(call) => e.post(call),
            Event::PostToolUseFailure(call) => e.failed(call),
            Event::Other(name) => e.other(&name),
        }?;
        // The client acts on the reply: the decisions behind it are durable first. A denial
        // lets nothing happen: its records are written (a killed hook loses none) and synced
        // with the session's next commit, as the runner syncs a refusal with the next action.
        if !matches!(reply, Reply::Deny { .. }) {
            e.ledger.commit()?;
        }
        Ok(reply)
    })
}

/// The project root: the configured one, or the event's `cwd`.
fn workspace(input: &HookInput, ctx: &HookContext) -> Result<Workspace, HookError> {
    match (&ctx.root, input.cwd.as_deref()) {
        (Some(root), _) => Ok(Workspace::new(root)?),
        (None, Some(cwd)) if Path::new(cwd).is_absolute() => Ok(Workspace::new(cwd)?),
        _ => Err(HookError::NoRoot),
    }
}

/// The acting agent: the subagent's name, or the main agent. Subagent names are lowercased and
/// any other character outside `[a-z0-9_-]` becomes `-` (`Explore` → `explore`, a plugin's
/// `review:security` → `review-security`), so territories can name them.
fn caller(input: &HookInput, ctx: &HookContext) -> Result<AgentId, HookError> {
    match input.agent_type.as_deref() {
        None | Some("") => Ok(ctx.main_agent.clone()),
        Some(name) => {
            let mapped: String = name
                .chars()
                .map(|c| match c.to_ascii_lowercase() {
                    c @ ('a'..='z' | '0'..='9' | '_' | '-') => c,
                    _ => '-',
                })
                .collect();
            AgentId::new(mapped).map_err(|e| HookError::Caller(name.to_string(), e))
        }
    }
}

/// One event on its way through the hook: the adapter between Claude Code and the policy engine.
pub(super) struct Engine<'a> {
    pub(super) ctx: &'a HookContext,
    pub(super) policy: &'a Policy,
    pub(super) ws: &'a Workspace,
    pub(super) dir: &'a SessionDir,
    pub(super) input: &'a HookInput,
    pub(super) caller: AgentId,
    pub(super) run: RunId,
    pub(super) ledger: Arc<dyn AuditSink>,
    pub(super) state: &'a mut SessionState,
    /// Whether the records go to a caller's ledger, whose run and turn are the session's.
    pub(super) embedded: bool,
}

impl Engine<'_> {
    fn scope(&self, agent: Option<AgentId>) -> Scope {
        Scope {
            run: self.run.clone(),
            turn: (self.state.turn > 0).then_some(TurnNumber(self.state.turn)),
            agent,
        }
    }

    pub(super) fn record(&self, event: &AuditEvent) -> Result<(), HookError> {
        Ok(self
            .ledger
            .record(&self.scope(Some(self.caller.clone())), event)?)
    }

    /// Where a shell watch records the caller's events ([`loopward_runner::gates::Record`]).
    pub(super) fn sink(
        &self,
    ) -> impl FnMut(&AuditEvent) -> Result<(), loopward_core::AuditError> + '_ {
        let scope = self.scope(Some(self.caller.clone()));
        move |e| self.ledger.record(&scope, e)
    }

    /// The first event of a session opens its ledger with `run_started`; the policy's version
    /// is recorded then and whenever the config changes it, so every decision after it was made
    /// under that version.
    fn start(&mut self) -> Result<(), HookError> {
        if self.state.ledger_started && self.state.policy_version == self.ctx.version {
            return Ok(());
        }
        if self.state.ledger_started || self.embedded {
            self.state.ledger_started = true;
            return self.note_version();
        }
        self.ledger.record(
            &self.scope(None),
            &AuditEvent::RunStarted {
                task: format!("{} session {}", self.ctx.host_name(), self.input.session_id),
                agent: self.ctx.main_agent.clone(),
            },
        )?;
        self.state.ledger_started = true;
        self.note_version()
    }

    fn note_version(&mut self) -> Result<(), HookError> {
        self.ledger.record(
            &self.scope(None),
            &AuditEvent::LayerDecision {
                layer: loopward_core::LayerId::Policy,
                decision: loopward_core::LayerVerdict::Observed,
                detail: loopward_core::LayerDetail::PolicyVersion(
                    loopward_core::PolicyVersionDetail {
                        version: self.ctx.version.clone(),
                    },
                ),
            },
        )?;
        self.state.policy_version = self.ctx.version.clone();
        Ok(())
    }

    fn human(&mut self, prompt: String) -> Result<Reply, HookError> {
        self.state.human_prompt();
        self.ledger.record(
            &self.scope(None),
            // A prompt the person typed into the client (a background notice was told apart
            // above): the hook speaks for the person here, as the CLI does for `--task`.
            &AuditEvent::HumanMessage {
                content: (&loopward_core::Person::at_the_keyboard().says(prompt)).into(),
            },
        )?;
        self.start_turn()
    }

    /// A prompt `loopward loop` composed for its session: a new turn of the session, observed,
    /// with no person's words on record.
    fn loop_prompt(&mut self) -> Result<Reply, HookError> {
        self.state.human_prompt();
        self.other("UserPromptSubmit:loop-prompt")?;
        if self.embedded {
            return Ok(Reply::Silent);
        }
        self.start_turn()
    }

    /// The main agent's new turn of the session.
    fn start_turn(&self) -> Result<Reply, HookError> {
        self.ledger.record(
            &self.scope(Some(self.ctx.main_agent.clone())),
            &AuditEvent::TurnStarted {
                agent: self.ctx.main_agent.clone(),
            },
        )?;
        Ok(Reply::Silent)
    }

    fn other(&mut self, name: &str) -> Result<Reply, HookError> {
        self.record(&AuditEvent::LayerDecision {
            layer: match self.ctx.host() {
                loopward_runner::gates::Host::Codex => loopward_core::LayerId::Codex,
                loopward_runner::gates::Host::GeminiCli => loopward_core::LayerId::GeminiCli,
                _ => loopward_core::LayerId::ClaudeCode,
            },
            decision: loopward_core::LayerVerdict::Observed,
            detail: loopward_core::LayerDetail::HookEvent(loopward_core::HookEventDetail {
                event: name.to_string(),
            }),
        })?;
        Ok(Reply::Silent)
    }

    pub(super) fn requested(&self, call: &ToolUse) -> Result<(), HookError> {
        self.record(&AuditEvent::ToolRequested {
            call_id: call.id.clone().unwrap_or_default(),
            tool: call.tool.name().into(),
            arguments: shorten(&call.input),
        })
    }

    /// Resolves a path the model gave: relative paths against the event's `cwd` when it lies
    /// inside the project, otherwise against the root.
    pub(super) fn resolve(&self, raw: &str) -> Result<WorkPath, loopward_runner::PathError> {
        if Path::new(raw).is_absolute() {
            return self.ws.resolve(raw).or_else(|e| {
                // The project reached through a symlinked path (`/home/u/p` for `/data/u/p`):
                // judge the path where its existing part really is.
                physical(raw)
                    .filter(|p| p != raw)
                    .map_or(Err(e), |p| self.ws.resolve(&p))
            });
        }
        let base = self
            .input
            .cwd
            .as_deref()
            .and_then(|c| Path::new(c).canonicalize().ok())
            .and_then(|c| {
                c.strip_prefix(self.ws.root())
                    .ok()
                    .map(|p| p.to_string_lossy().into_owned())
            })
            .filter(|p| !p.is_empty());
        match base {
            Some(base) => self.ws.resolve(&format!("{base}/{raw}")),
            None => self.ws.resolve(raw),
        }
    }

    /// Records `refusal` as `gate`'s denial of call `call_id` — one the policy's judgement never
    /// saw (a path that does not resolve, a watch that cannot be set up) — and hands it back.
    pub(super) fn refuse(
        &self,
        call_id: Option<&CallId>,
        gate: GateId,
        action: Action,
        path_raw: Option<&str>,
        refusal: Refusal,
    ) -> Result<Refusal, HookError> {
        self.record(&AuditEvent::GateDecision {
            call_id: call_id.cloned(),
            gate,
            mode: GateMode::Enforce,
            action,
            path_raw: path_raw.map(Into::into),
            source: None,
            path: None,
            decision: Decision::Deny(refusal.clone()),
        })?;
        Ok(refusal)
    }

    /// Judges a file-tool call's `accesses` as the runner does, recording its decisions: the
    /// judgement, or the refusal to deny the call with.
    pub(super) fn judge_accesses(
        &mut self,
        call: &ToolUse,
        action: &Action,
        accesses: &[Access],
    ) -> Result<Result<Judgement, Refusal>, HookError> {
        let ask = Ask {
            agent: &self.caller,
            call_id: call.id.as_ref(),
            action,
            accesses,
            effects: &[],
            handoff_stands: false,
            team: &[],
            clock: &*self.ctx.clock,
        };
        let mut judgement = self.policy.judge(&ask, &mut self.state.sprawl);
        for event in &judgement.events {
            self.record(event)?;
        }
        Ok(match judgement.denial.take() {
            Some(refusal) => Err(refusal),
            None => Ok(judgement),
        })
    }

    pub(super) fn blobs(&self) -> std::path::PathBuf {
        self.dir.path().join("blobs")
    }

    pub(super) fn snapshot_path(&self, id: &CallId) -> std::path::PathBuf {
        let key = SessionKey::new(id.as_str())
            .map(|k| k.as_str().to_string())
            .unwrap_or_default();
        self.dir.path().join("shell").join(format!("{key}.json"))
    }
}

/// An absolute path with its longest existing ancestor canonicalised.
fn physical(raw: &str) -> Option<String> {
    let path = Path::new(raw);
    path.ancestors().skip(1).find_map(|anc| {
        let real = anc.canonicalize().ok()?;
        let rest = path.strip_prefix(anc).ok()?;
        Some(real.join(rest).to_string_lossy().into_owned())
    })
}

/// Whether a submitted prompt is Claude Code's notice that a background task (a subagent, a
/// background command) finished, which the client submits as if typed.
fn is_task_notification(prompt: &str) -> bool {
    prompt.trim_start().starts_with("<task-notification>")
}

pub(super) fn call_id(call: &ToolUse) -> Result<&CallId, HookError> {
    call.id
        .as_ref()
        .filter(|s| !s.as_str().is_empty())
        .ok_or_else(|| {
            HookError::Protocol(super::claude_code::ProtocolError::Field {
                event: "Bash".into(),
                field: "tool_use_id",
                why: "is missing (needed to pair the shell call's before and after)",
            })
        })
}

/// Tool arguments as logged: long strings (file contents, edits) shortened.
fn shorten(v: &Value) -> Value {
    match v {
        Value::String(s) if s.len() > MAX_LOGGED_STRING => {
            let mut end = MAX_LOGGED_STRING;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            json!(format!("{}… ({} bytes)", &s[..end], s.len()))
        }
        Value::Array(a) => Value::Array(a.iter().map(shorten).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), shorten(v))).collect()),
        other => other.clone(),
    }
}
