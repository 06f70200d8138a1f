//! The engine's steps for a tool event: `PreToolUse`, `PostToolUse` and `PostToolUseFailure`
//! sent on by tool, and the file tools' own steps (shell, patch and read tools have theirs in
//! `bash.rs`, `patch.rs` and `read.rs`).

use super::claude_code::{ClaudeTool, Reply, ToolUse};
use super::decide::Engine;
use super::HookError;
use loopward_core::{
    Action, AuditEvent, Decision, Effect, EffectKind, GateId, GateKind, GateMode, Refusal, Remedy,
    ToolName,
};
use loopward_runner::gates::{refusals, Host};
use loopward_runner::tool::Access;
use loopward_runner::WorkPath;
use serde_json::Value;

/// The gate a tool accepted by `[hooks] allow_tools` is recorded under, with the entry that
/// accepted it (`allow_tools:mcp__github__*`).
const ALLOW_TOOLS_GATE: &str = "allow_tools";

impl Engine<'_> {
    pub(super) fn pre(&mut self, call: ToolUse) -> Result<Reply, HookError> {
        self.requested(&call)?;
        if let Some(raw) = call.tool.write_path() {
            return self.pre_write(&call, raw);
        }
        if let ClaudeTool::Bash { .. } = call.tool {
            return self.pre_bash(&call);
        }
        if let ClaudeTool::Reads(tool) = call.tool {
            return self.pre_read(&call, tool);
        }
        if let ClaudeTool::Patch { patch } = &call.tool {
            return self.pre_patch(&call, patch);
        }
        if let ClaudeTool::Unknown(name) = &call.tool {
            return self.pre_unknown(&call, name);
        }
        if let ClaudeTool::Foreign { name, host } = &call.tool {
            let (owner, install) = match host {
                Host::Codex => ("Codex", "codex"),
                Host::GeminiCli => ("Gemini CLI", "gemini"),
                _ => ("Claude Code", "claude-code"),
            };
            let refusal =
                refusals::other_hosts_tool(name.as_str(), owner, self.ctx.host_name(), install);
            return self.deny_tool(&call, name, refusal);
        }
        Ok(Reply::Silent)
    }

    /// A tool the hook does not know: allowed, unjudged, only where `[hooks] allow_tools`
    /// names it (recorded with the entry and its line); denied otherwise.
    fn pre_unknown(&mut self, call: &ToolUse, name: &ToolName) -> Result<Reply, HookError> {
        let Some(allowed) = self.policy.allowed_unjudged(name.as_str()) else {
            let refusal =
                refusals::unknown_tool(name.as_str(), self.ctx.host_name(), self.ctx.host());
            return self.deny_tool(call, name, refusal);
        };
        self.record(&AuditEvent::GateDecision {
            call_id: call.id.clone(),
            gate: GateId::new(
                GateKind::Policy,
                format!("{ALLOW_TOOLS_GATE}:{}", allowed.pattern),
            ),
            mode: GateMode::Enforce,
            action: Action::tool(name.clone()),
            path_raw: None,
            source: allowed.source,
            path: None,
            decision: Decision::Allow,
        })?;
        // No permission decision: the client's own rules and prompts still apply to it.
        Ok(Reply::Silent)
    }

    fn deny_tool(
        &mut self,
        call: &ToolUse,
        name: &ToolName,
        refusal: loopward_core::Refusal,
    ) -> Result<Reply, HookError> {
        let refusal = self.refuse(
            call.id.as_ref(),
            GateId::of(GateKind::Policy),
            Action::tool(name.clone()),
            None,
            refusal,
        )?;
        Ok(Reply::denied(&refusal))
    }

    fn pre_write(&mut self, call: &ToolUse, raw: &str) -> Result<Reply, HookError> {
        let action = Action::tool(call.tool.name());
        let path = match self.resolve(raw) {
            Ok(p) => p,
            Err(e) => {
                let refusal = self.refuse(
                    call.id.as_ref(),
                    GateId::of(GateKind::Workspace),
                    action,
                    Some(raw),
                    refusals::outside(&e.to_string()),
                )?;
                return Ok(Reply::denied(&refusal));
            }
        };
        let accesses = accesses(&call.tool, &path, &call.input);
        let judgement = match self.judge_accesses(call, &action, &accesses)? {
            Ok(j) => j,
            Err(refusal) => return Ok(Reply::denied(&refusal)),
        };
        if let Some(id) = call.id.as_ref().filter(|s| !s.as_str().is_empty()) {
            // The second line: where the write really lands is checked afterwards.
            if let Some(refusal) = self.watch_write(call, id, path.rel())? {
                return Ok(Reply::denied(&refusal));
            }
            self.state.allowed_calls.insert(id.clone());
        }
        let mut reason = format!(
            "loopward: {} may write {}",
            self.caller,
            if path.rel().is_empty() {
                "."
            } else {
                path.rel()
            }
        );
        for (id, why) in judgement.consumed() {
            reason.push_str(&format!(
                ", once, on one-shot override {id} (\"{why}\"), now used up"
            ));
        }
        for w in &judgement.warnings {
            reason.push_str(&format!("\nadvisory {w}"));
        }
        Ok(Reply::Allow { reason })
    }

    pub(super) fn post(&mut self, call: ToolUse) -> Result<Reply, HookError> {
        if let Some(raw) = call.tool.write_path() {
            return self.post_write(&call, raw);
        }
        if let ClaudeTool::Bash { .. } = call.tool {
            return self.judge_bash(&call, false);
        }
        if let ClaudeTool::Patch { patch } = &call.tool {
            return self.post_patch(&call, patch, false);
        }
        self.record(&AuditEvent::ToolFinished {
            call_id: call.id.clone().unwrap_or_default(),
            tool: call.tool.name().into(),
            is_error: false,
            effects: vec![],
            summary: format!("{} finished", call.tool.name()),
            output: None,
        })?;
        Ok(Reply::Silent)
    }

    /// A failed call: a failed shell command is judged like a finished one (it may have written
    /// before failing); anything else changed nothing.
    pub(super) fn failed(&mut self, call: ToolUse) -> Result<Reply, HookError> {
        if let ClaudeTool::Bash { .. } = call.tool {
            return self.judge_bash(&call, true);
        }
        if let ClaudeTool::Patch { patch } = &call.tool {
            return self.post_patch(&call, patch, true);
        }
        if let Some(id) = &call.id {
            self.state.allowed_calls.remove(id);
        }
        let (reverted, message) = if call.tool.write_path().is_some() {
            self.judge_write(&call)?
        } else {
            (vec![], None)
        };
        let error = self
            .input
            .error
            .as_deref()
            .unwrap_or("failed")
            .lines()
            .next()
            .unwrap_or("failed")
            .chars()
            .take(200)
            .collect::<String>();
        self.record(&AuditEvent::ToolFinished {
            call_id: call.id.clone().unwrap_or_default(),
            tool: call.tool.name().into(),
            is_error: true,
            effects: reverted,
            summary: format!("{} failed: {error}", call.tool.name()),
            output: None,
        })?;
        Ok(message.map_or(Reply::Silent, |context| Reply::FailureContext { context }))
    }

    fn post_write(&mut self, call: &ToolUse, raw: &str) -> Result<Reply, HookError> {
        let authorised = call
            .id
            .as_ref()
            .is_some_and(|id| self.state.allowed_calls.remove(id));
        let mut reply = Reply::Silent;
        let effects = match self.resolve(raw) {
            Ok(path) => {
                // Claude Code's Write answers `{"type": "create" | "update", …}`.
                let created = self
                    .input
                    .tool_response
                    .as_ref()
                    .and_then(|r| r.get("type"))
                    .and_then(Value::as_str)
                    == Some("create");
                let kind = if created {
                    EffectKind::Create
                } else {
                    EffectKind::Modify
                };
                // A write no PreToolUse allowed (the hook was not installed for this tool, or
                // its answer was ignored) that breaks a rule: counted, and the model told.
                let guarded = (!authorised)
                    .then(|| {
                        self.policy
                            .guarded(&self.caller, path.rel(), &*self.ctx.clock)
                    })
                    .flatten();
                if let Some(rule) = guarded {
                    reply = self.unasked(path.rel().to_string(), &rule)?;
                }
                // Where PreToolUse judged the write (a link swapped since may make the path
                // resolve elsewhere now; what landed there is judged by the watch).
                let judged = call
                    .id
                    .as_ref()
                    .and_then(|id| self.state.write_targets.get(id))
                    .map_or(path.rel(), String::as_str);
                let effects = vec![Effect::ok(judged, kind)];
                let work = self.policy.work(&accesses(&call.tool, &path, &call.input));
                self.state.sprawl.touch(&self.caller, work);
                self.policy.note_plan(&effects, &mut self.state.sprawl);
                effects
            }
            Err(_) => vec![],
        };
        self.finish_write(call, effects, false, reply)
    }

    /// A write that ran without a `PreToolUse` decision and breaks `rule` at `path`: recorded as
    /// a violation left for a person to undo, and the model told.
    pub(super) fn unasked(&mut self, path: String, rule: &Refusal) -> Result<Reply, HookError> {
        self.record(&AuditEvent::Violation {
            path,
            remedy: Remedy::Unremedied {
                why: "it ran without a PreToolUse decision; restore it from version control".into(),
            },
            reason: rule.reason.clone(),
        })?;
        Ok(Reply::Block {
            reason: refusals::written_unasked(rule),
        })
    }

    /// The end of a file tool's `PostToolUse` (`failed`: the tool reported an error): what the
    /// watch judged joins `effects`, its message replaces `reply`, and `tool_finished` is
    /// recorded.
    pub(super) fn finish_write(
        &mut self,
        call: &ToolUse,
        mut effects: Vec<Effect>,
        failed: bool,
        mut reply: Reply,
    ) -> Result<Reply, HookError> {
        let (judged, message) = self.judge_write(call)?;
        let is_error = failed || message.is_some();
        effects.extend(judged);
        if let Some(reason) = message {
            reply = Reply::Block { reason };
        }
        self.record(&AuditEvent::ToolFinished {
            call_id: call.id.clone().unwrap_or_default(),
            tool: call.tool.name().into(),
            is_error,
            effects,
            summary: format!(
                "{} {}",
                call.tool.name(),
                if failed { "failed" } else { "finished" }
            ),
            output: None,
        })?;
        Ok(reply)
    }
}

/// What a Claude Code file tool touches, as the engine's accesses: a write to `path`, and for
/// `Edit` and `MultiEdit` each (old, new) replacement.
fn accesses(tool: &ClaudeTool, path: &WorkPath, input: &Value) -> Vec<Access> {
    fn edit(path: &WorkPath, v: &Value) -> Option<Access> {
        Some(Access::Edit {
            path: path.clone(),
            old: v.get("old_string")?.as_str()?.to_string(),
            new: v.get("new_string")?.as_str()?.to_string(),
        })
    }
    let mut out: Vec<Access> = match tool {
        ClaudeTool::Edit { .. } => edit(path, input).into_iter().collect(),
        ClaudeTool::MultiEdit { .. } => input
            .get("edits")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| edit(path, e))
            .collect(),
        _ => vec![],
    };
    if out.is_empty() {
        out.push(Access::Write(path.clone()));
    }
    out
}
