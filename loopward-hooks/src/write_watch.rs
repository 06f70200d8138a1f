//! The second line behind a Claude Code file tool (`Write`, `Edit`, …): Claude Code writes in its
//! own process and follows links, so a link swapped in after `PreToolUse` judged the path (by a
//! process a command left running) can carry the write into a territory. Like a `Bash` call, the
//! workspace is recorded at `PreToolUse` and compared at `PostToolUse` (or
//! `PostToolUseFailure`); a change to a territory or control file other than the path the call
//! was allowed to write is judged by the engine
//! ([`Policy::judge_changes`](loopward_runner::gates::Policy::judge_changes)), put back when it may not
//! stand, recorded as a violation, and reported to the model. Observed and repaired, not
//! prevented: for the moment between the write and `PostToolUse` the territory holds it.

use super::claude_code::ToolUse;
use super::decide::Engine;
use super::shell::{self, ShellWatchError};
use super::HookError;
use loopward_core::{Action, AuditEvent, CallId, Effect, GateId, GateKind, Refusal, ToolName};
use loopward_runner::gates::{refusals, DirStore};

impl Engine<'_> {
    /// Records the workspace before an allowed file-tool call `id` (allowed to write `target`).
    /// A workspace that cannot be recorded cannot be checked afterwards: the refusal to answer.
    pub(super) fn watch_write(
        &mut self,
        call: &ToolUse,
        id: &CallId,
        target: &str,
    ) -> Result<Option<Refusal>, HookError> {
        let tool = ToolName::from(call.tool.name());
        if let Some(refusal) = self.settle_unchecked(id, &tool)? {
            return Ok(Some(refusal));
        }
        let action = Action::tool(tool.clone());
        let taken = self
            .policy
            .shell_watch(&self.caller, id, &action)
            .take_before(&DirStore::new(self.blobs()))
            .map_err(ShellWatchError::from)
            .and_then(|snap| shell::save(&snap, &self.snapshot_path(id)));
        match taken {
            Ok(()) => {
                self.state
                    .write_targets
                    .insert(id.clone(), target.to_string());
                let content = match &call.tool {
                    super::claude_code::ClaudeTool::Write { .. } => call.input["content"].as_str(),
                    _ => None,
                };
                self.begin_watch(id, Some(target), content);
                Ok(None)
            }
            Err(why) => {
                let refusal = refusals::write_unrecorded(&why.to_string());
                let refusal = self.refuse(
                    Some(id),
                    GateId::of(GateKind::ShellWatch),
                    Action::tool(call.tool.name()),
                    None,
                    refusal,
                )?;
                Ok(Some(refusal))
            }
        }
    }

    /// Compares the workspace with the record taken before file-tool call `call`: every change
    /// to a territory or control file other than the allowed target is judged, and put back
    /// when it may not stand. Returns the effects of what was judged and, when anything was
    /// refused, what to tell the model. A call without a record (not allowed by this hook) is
    /// left to the caller.
    pub(super) fn judge_write(
        &mut self,
        call: &ToolUse,
    ) -> Result<(Vec<Effect>, Option<String>), HookError> {
        let Some(id) = call.id.as_ref().filter(|s| !s.as_str().is_empty()) else {
            return Ok((vec![], None));
        };
        let target = self.state.write_targets.remove(id);
        let also = self.state.patch_targets.remove(id).unwrap_or_default();
        let snap_path = self.snapshot_path(id);
        let before = match shell::load(&snap_path, id) {
            Ok(b) => b,
            Err(ShellWatchError::NoSnapshot(_)) if target.is_none() => {
                self.end_watch(id, vec![]);
                return Ok((vec![], None));
            }
            Err(e) => {
                self.end_watch(id, vec![]);
                return Err(e.into());
            }
        };
        let tool = ToolName::from(call.tool.name());
        let after = self
            .policy
            .shell_watch(&self.caller, id, &Action::tool(tool.clone()))
            .after()
            .map_err(ShellWatchError::from);
        let _ = std::fs::remove_file(&snap_path);
        let after = match after {
            Ok(a) => a,
            Err(why) => {
                self.end_watch(id, vec![]);
                // `before` stays the baseline until the workspace can be compared.
                self.keep_unchecked(id, &tool, before, &why)?;
                return Ok((
                    vec![],
                    Some(refusals::write_blinded(tool.as_str(), &why.to_string())),
                ));
            }
        };
        let diff: Vec<_> = before
            .diff(&after)
            .into_iter()
            .filter(|c| {
                Some(&c.path) != target.as_ref()
                    && !also.contains(&c.path)
                    && self.policy.watched(&c.path)
            })
            .collect();
        let action = Action::tool(tool.clone());
        let diff = self.own_changes(id, &action, diff, &after)?;
        if diff.is_empty() {
            self.end_watch(id, vec![]);
            return Ok((vec![], None));
        }
        let loopward_runner::gates::Judged {
            judgement, outcome, ..
        } = self.judge_diff(id, &action, &before, &after, &diff)?;
        self.end_watch(id, vec![]);
        let message = outcome.message.map(|_| {
            let paths: Vec<String> = outcome
                .violations
                .iter()
                .filter_map(|v| match v {
                    AuditEvent::Violation { path, remedy, .. } => {
                        Some(format!("{path} ({remedy})"))
                    }
                    _ => None,
                })
                .collect();
            let reason = judgement
                .refusals
                .iter()
                .flatten()
                .next()
                .map(|r| r.reason.clone())
                .unwrap_or_default();
            refusals::write_landed_elsewhere(tool.as_str(), &paths, &reason)
        });
        Ok((outcome.effects, message))
    }
}
