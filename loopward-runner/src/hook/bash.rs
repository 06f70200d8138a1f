//! A Claude Code `Bash` call around the hook engine: the command wrapped in loopward's sandbox
//! and the workspace recorded at `PreToolUse`, and compared at `PostToolUse` (or
//! `PostToolUseFailure`); the policy engine judges what changed
//! ([`Policy::judge_changes`](crate::gates::Policy::judge_changes)).

use super::claude_code::{ClaudeTool, Reply, ToolUse};
use super::decide::{call_id, Engine};
use super::shell::{self, ShellWatchError};
use super::HookError;
use crate::gates::{
    unwatchable, Change, ChangedPath, ShellAsk, ShellJudgement, ShellOutcome, Snapshot,
    SANDBOX_GATE,
};
use crate::sandbox::{kernel_support, SandboxError, SandboxMode};
use loopward_core::{Action, AuditEvent, Decision, GateId, GateKind, GateMode, Refusal, Remedy};

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
                    call_id: Some(id.into()),
                    gate: GateId::of(GateKind::Sandbox),
                    mode: GateMode::Enforce,
                    action: Action::tool("Bash"),
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
            call_id: Some(id.into()),
            gate: GateId::of(GateKind::Sandbox),
            mode: if wrapped.is_some() {
                GateMode::Enforce
            } else {
                GateMode::Advisory
            },
            action: Action::tool("Bash"),
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
        // A blinded call's changes are judged before this command can add to them.
        if let Some(refusal) = self.settle_unchecked(id, "Bash")? {
            return Ok(Reply::Deny {
                reason: refusal.to_string(),
            });
        }
        let watch = self.policy.shell();
        let taken = shell::capture(
            self.ws,
            &self.blobs(),
            &|rel| self.policy.watched(rel),
            &self.policy.unwatched(),
            watch.max_snapshot_bytes,
        )
        .and_then(|snap| shell::save(&snap, &self.snapshot_path(id)));
        let decision = match taken {
            Ok(()) => Decision::Allow,
            Err(why) => Decision::Deny(unwatchable(&why.to_string())),
        };
        self.record(&AuditEvent::GateDecision {
            call_id: Some(id.into()),
            gate: GateId::of(GateKind::ShellWatch),
            mode: GateMode::Enforce,
            action: Action::tool("Bash"),
            path_raw: None,
            path: None,
            decision: decision.clone(),
        })?;
        if decision == Decision::Allow {
            self.begin_watch(id, None, None);
        }
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
        if self.policy.shell().sandbox == SandboxMode::WatchOnly {
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
        let before = shell::load(&snap_path, id)?;
        let watch = self.policy.shell();
        let after = match shell::capture(
            self.ws,
            &self.blobs(),
            &|_| false,
            &self.policy.unwatched(),
            watch.max_snapshot_bytes,
        ) {
            Ok(after) => after,
            // Blinded (a folder that cannot be listed, too many paths): what the command changed
            // cannot be judged now. `before` stays the baseline until it can (`unchecked.rs`).
            Err(why) => {
                self.end_watch(id, vec![]);
                return self.unjudged(id, &snap_path, failed, before, &why);
            }
        };
        let action = Action::tool("Bash");
        let diff = self.own_changes(id, &action, before.diff(&after), &after)?;
        let (judgement, outcome) = self.judge_diff(id, &action, &before, &after, &diff)?;
        let own: Vec<String> = diff
            .iter()
            .zip(&judgement.refusals)
            .filter(|(_, r)| r.is_none())
            .map(|(c, _)| c.path.clone())
            .collect();
        self.end_watch(id, own);
        self.state
            .sprawl
            .touch(&self.caller, judgement.work.clone());
        self.policy
            .note_plan(&outcome.effects, &mut self.state.sprawl);
        let reverted = outcome.violations.len();
        self.record(&AuditEvent::ToolFinished {
            call_id: id.to_string(),
            tool: "Bash".into(),
            is_error: failed || reverted > 0,
            effects: outcome.effects,
            summary: format!(
                "Bash {}{}",
                if failed { "failed" } else { "finished" },
                if reverted == 0 {
                    String::new()
                } else {
                    format!("; {reverted} change(s) reverted")
                }
            ),
            output: None,
        })?;
        // The snapshot is spent; a failure to remove it only leaves a file behind.
        let _ = std::fs::remove_file(&snap_path);
        Ok(match (outcome.message, failed) {
            (None, _) => Reply::Silent,
            (Some(context), true) => Reply::FailureContext { context },
            (Some(reason), false) => Reply::Block { reason },
        })
    }

    /// The answer for a command whose changes could not be compared: recorded, and blocking.
    /// Judges what `diff` (the workspace from `before` to `after`) changed as the caller's
    /// `action` on call `id`, the one way both the `Bash` watch and the file-tool watch do:
    /// the engine's events recorded, each change that may not stand put back from `before`,
    /// and its violation recorded.
    pub(super) fn judge_diff(
        &mut self,
        id: &str,
        action: &Action,
        before: &Snapshot,
        after: &Snapshot,
        diff: &[Change],
    ) -> Result<(ShellJudgement, ShellOutcome), HookError> {
        let changes: Vec<ChangedPath> = diff
            .iter()
            .map(|c| ChangedPath {
                ends: self.policy.link_ends(&c.path),
                path: c.path.clone(),
                kind: c.kind.clone(),
                dir: after.is_dir(&c.path),
            })
            .collect();
        let judgement = self.policy.judge_changes(&ShellAsk {
            agent: &self.caller,
            call_id: Some(id),
            action,
            changes: &changes,
            clock: &*self.ctx.clock,
        });
        for event in &judgement.events {
            self.record(event)?;
        }
        let remedies: Vec<Option<Remedy>> = diff
            .iter()
            .zip(&judgement.refusals)
            .map(|(c, r)| {
                r.as_ref()
                    .map(|_| match shell::revert(self.ws, &self.blobs(), before, c) {
                        Ok(()) => Remedy::Reverted,
                        Err(e) => Remedy::NotReverted { why: e.to_string() },
                    })
            })
            .collect();
        let outcome = judgement.outcome(&changes, &remedies);
        for v in &outcome.violations {
            self.record(v)?;
        }
        Ok((judgement, outcome))
    }

    fn unjudged(
        &mut self,
        id: &str,
        snap_path: &std::path::Path,
        failed: bool,
        before: Snapshot,
        why: &ShellWatchError,
    ) -> Result<Reply, HookError> {
        self.keep_unchecked(id, "Bash", before, why)?;
        self.record(&AuditEvent::ToolFinished {
            call_id: id.to_string(),
            tool: "Bash".into(),
            is_error: true,
            effects: vec![],
            summary: "Bash ran; its changes could not be compared".into(),
            output: None,
        })?;
        let _ = std::fs::remove_file(snap_path);
        let message = format!(
            "the command ran, but the workspace could not be compared afterwards ({why}); its changes are unchecked and were reported, and they will be compared with the workspace as it was before the command (what may not stand put back) as soon as it can be; until then commands and writes are refused"
        );
        Ok(if failed {
            Reply::FailureContext { context: message }
        } else {
            Reply::Block { reason: message }
        })
    }
}
