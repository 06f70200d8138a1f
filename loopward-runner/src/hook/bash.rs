//! A Claude Code `Bash` call around the hook engine: the workspace recorded at `PreToolUse`, and
//! compared at `PostToolUse` (or `PostToolUseFailure`), each changed path judged like a write.

use super::claude_code::{Reply, ToolUse};
use super::decide::{call_id, Engine};
use super::rules::WriteAsk;
use super::shell::{self, Snapshot};
use super::HookError;
use crate::gates::SHELL_GATE;
use loopward_core::{AuditEvent, Decision, Effect, EffectKind, EffectStatus, GateMode, Refusal};
use std::collections::BTreeSet;

impl Engine<'_> {
    /// Records the workspace before a shell command; a workspace that cannot be recorded
    /// cannot be checked afterwards, so the command is denied.
    pub(super) fn pre_bash(&mut self, call: &ToolUse) -> Result<Reply, HookError> {
        let id = call_id(call)?;
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
        Ok(match decision {
            Decision::Deny(r) => Reply::Deny {
                reason: r.to_string(),
            },
            _ => Reply::Silent,
        })
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
