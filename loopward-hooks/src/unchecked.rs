//! A blinded call in a Claude Code session (see [`Unchecked`]): its baseline is kept in the
//! session folder (`shell/unchecked.json`, contents in the session's blobs), and the next watched
//! call (`Bash`, or a file tool's `PreToolUse`) compares the workspace with it first.

use super::decide::Engine;
use super::shell::ShellWatchError;
use super::HookError;
use loopward_core::{Action, CallId, GateId, GateKind, Refusal, ToolName};
use loopward_runner::gates::{Snapshot, Unchecked};
use std::path::PathBuf;

impl Engine<'_> {
    fn unchecked_path(&self) -> PathBuf {
        self.dir.path().join("shell").join("unchecked.json")
    }

    /// Records that call `id` (its tool `tool`) could not be compared with `before`, which
    /// stays the baseline: the violation naming what blinded the watch, and the baseline saved
    /// for the next call to compare with.
    pub(super) fn keep_unchecked(
        &mut self,
        id: &CallId,
        tool: &ToolName,
        before: Snapshot,
        why: &ShellWatchError,
    ) -> Result<(), HookError> {
        let unchecked = Unchecked {
            before,
            call_id: id.clone(),
            agent: self.caller.clone(),
            tool: tool.clone(),
            path: match why {
                ShellWatchError::Snapshot(e) => e.path().to_string(),
                _ => ".".into(),
            },
            why: why.to_string(),
        };
        self.record(&unchecked.violation())?;
        let path = self.unchecked_path();
        let bytes = serde_json::to_vec(&unchecked).map_err(|e| ShellWatchError::Corrupt {
            path: path.clone(),
            why: e.to_string(),
        })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| ShellWatchError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        loopward_runner::write_atomic(&path, &bytes, 0o600)
            .map_err(|source| ShellWatchError::Io { path, source })?;
        Ok(())
    }

    /// Before watched call `id` (tool `tool`): when an earlier call was blinded, compares the
    /// workspace with the baseline it left, judging each change as that call's (put back when
    /// it may not stand, recorded under its id and agent). `Some`: the workspace still cannot
    /// be compared; the call is refused (and the refusal recorded) and the baseline kept.
    pub(super) fn settle_unchecked(
        &mut self,
        id: &CallId,
        tool: &ToolName,
    ) -> Result<Option<Refusal>, HookError> {
        let path = self.unchecked_path();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ShellWatchError::Io { path, source }.into()),
        };
        let unchecked: Unchecked =
            serde_json::from_slice(&bytes).map_err(|e| ShellWatchError::Corrupt {
                path: path.clone(),
                why: e.to_string(),
            })?;
        let action = Action::tool(unchecked.tool.clone());
        let now = match self
            .policy
            .shell_watch(&unchecked.agent, &unchecked.call_id, &action)
            .after()
        {
            Ok(now) => now,
            Err(why) => {
                let refusal = unchecked.refusal(&why.to_string());
                let refusal = self.refuse(
                    Some(id),
                    GateId::of(GateKind::ShellWatch),
                    Action::tool(tool.clone()),
                    None,
                    refusal,
                )?;
                return Ok(Some(refusal));
            }
        };
        let diff = unchecked.before.diff(&now);
        // Judged, and recorded, as the blinded call's.
        let caller = std::mem::replace(&mut self.caller, unchecked.agent.clone());
        let judged = self.judge_diff(
            &unchecked.call_id,
            &Action::tool(unchecked.tool.clone()),
            &unchecked.before,
            &now,
            &diff,
        );
        self.caller = caller;
        judged?;
        std::fs::remove_file(&path).map_err(|source| ShellWatchError::Io { path, source })?;
        Ok(None)
    }
}
