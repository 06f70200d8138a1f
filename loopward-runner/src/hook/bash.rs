//! A Claude Code `Bash` call around the hook engine: the workspace recorded at `PreToolUse`, and
//! compared at `PostToolUse` (or `PostToolUseFailure`), each changed path judged like a write.

use super::claude_code::{ClaudeTool, Reply, ToolUse};
use super::decide::{call_id, Engine};
use super::rules::WriteAsk;
use super::shell::{self, Snapshot};
use super::HookError;
use crate::gates::{SANDBOX_GATE, SHELL_GATE};
use crate::sandbox::{kernel_support, SandboxError, SandboxMode};
use loopward_core::{AuditEvent, Decision, Effect, EffectKind, EffectStatus, GateMode, Refusal};
use std::collections::BTreeSet;

impl Engine<'_> {
    /// Records the workspace before a shell command; a workspace that cannot be recorded
    /// cannot be checked afterwards, so the command is denied.
    pub(super) fn pre_bash(&mut self, call: &ToolUse) -> Result<Reply, HookError> {
        let id = call_id(call)?;
        // Contain first: a command that cannot be wrapped in the sandbox does not run.
        let wrapped = match self.sandbox_for(call) {
            Ok(w) => w,
            Err(refusal) => {
                self.record(&AuditEvent::GateDecision {
                    call_id: Some(id.to_string()),
                    gate: SANDBOX_GATE.into(),
                    mode: GateMode::Enforce,
                    action: "tool:Bash".into(),
                    path_raw: None,
                    path: None,
                    decision: Decision::Deny(refusal.clone()),
                })?;
                return Ok(Reply::Deny {
                    reason: refusal.to_string(),
                });
            }
        };
        self.record(&AuditEvent::GateDecision {
            call_id: Some(id.to_string()),
            gate: SANDBOX_GATE.into(),
            mode: if wrapped.is_some() {
                GateMode::Enforce
            } else {
                GateMode::Advisory
            },
            action: "tool:Bash".into(),
            path_raw: None,
            path: None,
            decision: if wrapped.is_some() {
                Decision::Allow
            } else {
                Decision::Warn(Refusal::new(
                    SANDBOX_GATE,
                    "watch-only: this command runs without a kernel sandbox; its changes are only compared and reverted afterwards",
                    "remove `sandbox = \"watch-only\"` from [gates.shell] to contain commands",
                ))
            },
        })?;
        let watch = self.ctx.rules.shell();
        let taken = shell::capture(
            self.ws,
            &self.blobs(),
            &|rel| self.ctx.rules.watched(rel),
            &self.ctx.rules.unwatched(),
            watch.max_snapshot_bytes,
        )
        .and_then(|snap| snap.save(&self.snapshot_path(id)));
        let decision = match taken {
            Ok(()) => Decision::Allow,
            Err(why) => Decision::Deny(Refusal::new(
                SHELL_GATE,
                format!("not run: the workspace could not be recorded before the command, so its changes could not be checked ({why})"),
                "use the file tools instead, or ask the person to list big generated folders under [gates.shell] skip",
            )),
        };
        self.record(&AuditEvent::GateDecision {
            call_id: Some(id.to_string()),
            gate: SHELL_GATE.into(),
            mode: GateMode::Enforce,
            action: "tool:Bash".into(),
            path_raw: None,
            path: None,
            decision: decision.clone(),
        })?;
        Ok(match (decision, wrapped) {
            (Decision::Deny(r), _) => Reply::Deny {
                reason: r.to_string(),
            },
            (_, Some(input)) => Reply::Rewrite {
                reason: format!("loopward: runs in the sandbox of {}", self.caller),
                input,
            },
            (_, None) => Reply::Silent,
        })
    }

    /// The call's input with its command wrapped in the sandbox (`None`: `watch-only`), or why
    /// it cannot be.
    fn sandbox_for(&self, call: &ToolUse) -> Result<Option<serde_json::Value>, Refusal> {
        if self.ctx.rules.shell().sandbox == SandboxMode::WatchOnly {
            return Ok(None);
        }
        let refuse = |why: String| {
            Refusal::new(
                SANDBOX_GATE,
                format!("not run: {why}"),
                "use the file tools (Write, Edit) instead; a person can fix the sandbox as the reason says",
            )
        };
        if let Some(why) = kernel_support().missing.clone() {
            return Err(refuse(SandboxError::Unsupported { why }.to_string()));
        }
        let Some(exec) = &self.ctx.sandbox_exec else {
            return Err(refuse("the hook does not know the loopward binary, so the command cannot be wrapped in its sandbox; install the hook with `loopward hook install`".into()));
        };
        let ClaudeTool::Bash { command } = &call.tool else {
            return Err(refuse("not a Bash call".into()));
        };
        let wrapped = exec
            .wrap(&self.input.session_id, self.caller.as_str(), command)
            .ok_or_else(|| refuse("the loopward binary or config path is not valid UTF-8, so it cannot be written into a command".into()))?;
        let mut input = match &call.input {
            serde_json::Value::Object(m) => m.clone(),
            _ => serde_json::Map::new(),
        };
        input.insert("command".into(), serde_json::Value::String(wrapped));
        Ok(Some(serde_json::Value::Object(input)))
    }

    pub(super) fn judge_bash(&mut self, call: &ToolUse, failed: bool) -> Result<Reply, HookError> {
        let id = call_id(call)?;
        let snap_path = self.snapshot_path(id);
        let before = Snapshot::load(&snap_path, id)?;
        let watch = self.ctx.rules.shell();
        let after = shell::capture(
            self.ws,
            &self.blobs(),
            &|_| false,
            &self.ctx.rules.unwatched(),
            watch.max_snapshot_bytes,
        )?;
        let mut effects = Vec::new();
        let mut reverted = Vec::new();
        let action = "tool:Bash";
        for change in shell::compare(&before, &after) {
            // A link the command made is judged where it points; anything else where it is.
            let target = match change.kind {
                EffectKind::Delete => None,
                _ => shell::link_target(self.ws, &after, &change.path),
            };
            let judged = target.as_deref().unwrap_or(&change.path);
            let keys = BTreeSet::new();
            let ask = WriteAsk {
                caller: &self.caller,
                call_id: Some(id),
                action,
                raw: None,
                rel: judged,
                keys: &keys,
            };
            let verdict = self
                .ctx
                .rules
                .judge_write(&ask, None, false, self.ws, &*self.ctx.clock);
            for event in &verdict.events {
                self.record(event)?;
            }
            match verdict.denial {
                Some(refusal) => {
                    let mut reason = refusal.reason;
                    if judged != change.path {
                        reason = format!("{} is a link to {judged}: {reason}", change.path);
                    }
                    // A revert that fails is recorded as such (it counts as unauthorised) and
                    // named to the model; the other changes are still judged.
                    let (remedy, effect) =
                        match shell::revert(self.ws, &self.blobs(), &before, &change.path) {
                            Ok(effect) => (crate::audit::REMEDY_REVERTED.to_string(), effect),
                            Err(e) => (
                                format!("not reverted: {e}"),
                                Effect {
                                    path: change.path.clone(),
                                    kind: change.kind.clone(),
                                    status: EffectStatus::Ok,
                                },
                            ),
                        };
                    self.record(&AuditEvent::Violation {
                        path: change.path.clone(),
                        remedy: remedy.clone(),
                        reason: reason.clone(),
                    })?;
                    if remedy == crate::audit::REMEDY_REVERTED {
                        reverted.push(format!("{} ({reason})", change.path));
                    } else {
                        reverted.push(format!(
                            "{} ({reason}; NOT put back: {remedy}; a person must restore it)",
                            change.path
                        ));
                    }
                    effects.push(effect);
                }
                None => {
                    self.note_plan(&change.path);
                    effects.push(Effect {
                        path: change.path,
                        kind: change.kind,
                        status: EffectStatus::Ok,
                    });
                }
            }
        }
        // Everything one command changed is one unit of work.
        let files: BTreeSet<String> = effects
            .iter()
            .filter(|e| e.status == EffectStatus::Ok)
            .map(|e| e.path.clone())
            .collect();
        let keys = files
            .iter()
            .flat_map(|f| self.ctx.rules.unit_keys(f, &[]))
            .collect();
        self.touch(keys, files);
        self.record(&AuditEvent::ToolFinished {
            call_id: id.to_string(),
            tool: "Bash".into(),
            is_error: failed || !reverted.is_empty(),
            effects,
            summary: format!(
                "Bash {}{}",
                if failed { "failed" } else { "finished" },
                if reverted.is_empty() {
                    String::new()
                } else {
                    format!("; {} change(s) reverted", reverted.len())
                }
            ),
            output: None,
        })?;
        // The snapshot is spent; a failure to remove it only leaves a file behind.
        let _ = std::fs::remove_file(&snap_path);
        if reverted.is_empty() {
            return Ok(Reply::Silent);
        }
        let reason = format!(
                "refused by loopward: the command changed files {} may not change, and loopward put them back: {}.\nWhat to do: leave these files to their owners and say in your reply what should change there; other changes the command made stand.",
                self.caller,
                reverted.join("; ")
            );
        Ok(if failed {
            Reply::FailureContext { context: reason }
        } else {
            Reply::Block { reason }
        })
    }
}
