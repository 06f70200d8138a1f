//! A Claude Code `Bash` call around the hook engine: the command wrapped in loopward's sandbox
//! and the workspace recorded at `PreToolUse`, and compared at `PostToolUse` (or
//! `PostToolUseFailure`); the policy engine judges what changed
//! ([`Policy::judge_changes`](loopward_runner::gates::Policy::judge_changes)).

use super::claude_code::{ClaudeTool, Reply, ToolUse};
use super::decide::{call_id, Engine};
use super::shell::{self, ShellWatchError};
use super::HookError;
use loopward_core::{Action, AuditEvent, CallId};
use loopward_runner::gates::{Change, Contained, DirStore, Judged, Snapshot, SnapshotError};

impl Engine<'_> {
    /// Contains a shell command (wrapped in `loopward sandbox exec`) and records the workspace
    /// before it, through the runner's shell watch; a command that cannot be wrapped or whose
    /// workspace cannot be recorded is denied.
    pub(super) fn pre_bash(&mut self, call: &ToolUse) -> Result<Reply, HookError> {
        let id = call_id(call)?;
        let action = Action::tool("Bash");
        let caller = self.caller.clone();
        let policy = self.policy;
        let watch = policy.shell_watch(&caller, id, &action);
        // Contain first: a command that cannot be wrapped in the sandbox does not run.
        let wrapped = match watch.contain(|| self.sandbox_for(call), &mut self.sink())? {
            Ok(Contained::Kernel(input)) => {
                if self.ctx.network_open {
                    watch.network_open(&mut self.sink())?;
                }
                Some(input)
            }
            Ok(Contained::WatchOnly) => None,
            Err(refusal) => return Ok(Reply::denied(&refusal)),
        };
        // A blinded call's changes are judged before this command can add to them.
        if let Some(refusal) = self.settle_unchecked(id, &"Bash".into())? {
            return Ok(Reply::denied(&refusal));
        }
        let blobs = DirStore::new(self.blobs());
        let saved = self.snapshot_path(id);
        // Saved for `PostToolUse` before the decision is recorded: a record that cannot be kept
        // is one the command cannot be checked against.
        let taken = watch.take_before(&blobs).and_then(|before| {
            shell::save(&before, &saved)
                .map(|()| before)
                .map_err(|e| SnapshotError::Store {
                    what: e.to_string(),
                })
        });
        if let Err(r) = watch.record_before(taken, &mut self.sink())? {
            return Ok(Reply::denied(&r));
        }
        self.begin_watch(id, None, None);
        Ok(match wrapped {
            Some(input) => Reply::Rewrite {
                reason: format!("loopward: runs in the sandbox of {}", self.caller),
                input,
            },
            None => Reply::Silent,
        })
    }

    /// The call's input with its command wrapped in the sandbox, or why it cannot be.
    fn sandbox_for(&self, call: &ToolUse) -> Result<serde_json::Value, String> {
        let Some(exec) = &self.ctx.sandbox_exec else {
            return Err("the hook does not know the loopward binary, so the command cannot be wrapped in its sandbox; install the hook with `loopward hook install`".into());
        };
        let ClaudeTool::Bash { command } = &call.tool else {
            return Err("not a Bash call".into());
        };
        let wrapped = exec
            .wrap(&self.input.session_id, self.caller.as_str(), command)
            .ok_or("the loopward binary or config path is not valid UTF-8, so it cannot be written into a command")?;
        let mut input = match &call.input {
            serde_json::Value::Object(m) => m.clone(),
            _ => serde_json::Map::new(),
        };
        input.insert("command".into(), serde_json::Value::String(wrapped));
        Ok(serde_json::Value::Object(input))
    }

    pub(super) fn judge_bash(&mut self, call: &ToolUse, failed: bool) -> Result<Reply, HookError> {
        let id = call_id(call)?;
        let snap_path = self.snapshot_path(id);
        let before = shell::load(&snap_path, id)?;
        let action = Action::tool("Bash");
        let after = match self.policy.shell_watch(&self.caller, id, &action).after() {
            Ok(after) => after,
            // Blinded (a folder that cannot be listed, too many paths): what the command changed
            // cannot be judged now. `before` stays the baseline until it can (`unchecked.rs`).
            Err(why) => {
                self.end_watch(id, vec![]);
                return self.unjudged(id, &snap_path, failed, before, &ShellWatchError::from(why));
            }
        };
        let diff = self.own_changes(id, &action, before.diff(&after), &after)?;
        let Judged {
            judgement, outcome, ..
        } = self.judge_diff(id, &action, &before, &after, &diff)?;
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
            call_id: id.clone(),
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

    /// Judges what `diff` (the workspace from `before` to `after`) changed as the caller's
    /// `action` on call `id`, through the runner's shell watch, the one way both the `Bash`
    /// watch and the file-tool watch do.
    pub(super) fn judge_diff(
        &mut self,
        id: &CallId,
        action: &Action,
        before: &Snapshot,
        after: &Snapshot,
        diff: &[Change],
    ) -> Result<Judged, HookError> {
        let caller = self.caller.clone();
        let blobs = DirStore::new(self.blobs());
        let clock = self.ctx.clock.clone();
        Ok(self.policy.shell_watch(&caller, id, action).judge(
            before,
            after,
            diff,
            &blobs,
            &*clock,
            &mut self.sink(),
        )?)
    }

    /// The answer for a command whose changes could not be compared: recorded, and blocking.
    fn unjudged(
        &mut self,
        id: &CallId,
        snap_path: &std::path::Path,
        failed: bool,
        before: Snapshot,
        why: &ShellWatchError,
    ) -> Result<Reply, HookError> {
        self.keep_unchecked(id, &"Bash".into(), before, why)?;
        self.record(&AuditEvent::ToolFinished {
            call_id: id.clone(),
            tool: "Bash".into(),
            is_error: true,
            effects: vec![],
            summary: "Bash ran; its changes could not be compared".into(),
            output: None,
        })?;
        let _ = std::fs::remove_file(snap_path);
        let message = self
            .policy
            .shell_watch(&self.caller, id, &Action::tool("Bash"))
            .blinded(&why.to_string());
        Ok(if failed {
            Reply::FailureContext { context: message }
        } else {
            Reply::Block { reason: message }
        })
    }
}
