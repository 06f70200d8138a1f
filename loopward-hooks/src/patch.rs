//! Codex's `apply_patch` around the engine: the patch's file operations become the engine's
//! accesses (an added or updated file a write, a moved one a rename, a deleted one a delete),
//! judged as one call at `PreToolUse`; the workspace is recorded then and compared at
//! `PostToolUse`, where a territory or control file the patch was not allowed to write, reached
//! through a link swapped in since, is put back (the same second line as Claude Code's file
//! tools, `write_watch.rs`).

use super::claude_code::{Reply, ToolUse};
use super::codex::{patch_paths, PatchOp};
use super::decide::Engine;
use super::HookError;
use loopward_core::{Action, Effect, EffectKind, GateId, GateKind, Refusal};
use loopward_runner::gates::refusals;
use loopward_runner::tool::Access;
use loopward_runner::WorkPath;

/// Why a patch could not be judged: the gate that refuses it, the raw path, the refusal.
type Unresolved = (GateKind, Option<String>, Refusal);

/// A patch resolved in the workspace: the accesses to judge and the effects it claims.
struct Resolved {
    accesses: Vec<Access>,
    effects: Vec<Effect>,
    targets: Vec<String>,
}

impl Engine<'_> {
    /// Resolves the patch's paths; `Err`: the gate, the raw path and the refusal for a body
    /// that is not a patch or a path outside the workspace.
    fn resolve_patch(&self, patch: &str) -> Result<Resolved, Unresolved> {
        let deny =
            |gate: GateKind, raw: Option<&str>, r: Refusal| Err((gate, raw.map(str::to_string), r));
        let ops = match patch_paths(patch) {
            Ok(ops) => ops,
            Err(why) => return deny(GateKind::Policy, None, refusals::undecidable(&why)),
        };
        let mut out = Resolved {
            accesses: vec![],
            effects: vec![],
            targets: vec![],
        };
        let path = |raw: &str| -> Result<WorkPath, String> {
            self.resolve(raw).map_err(|e| e.to_string())
        };
        for op in &ops {
            let raw = match op {
                PatchOp::Add(p) | PatchOp::Delete(p) => p,
                PatchOp::Update { path, .. } => path,
            };
            let from = match path(raw) {
                Ok(p) => p,
                Err(why) => return deny(GateKind::Workspace, Some(raw), refusals::outside(&why)),
            };
            out.targets.push(from.rel().to_string());
            match op {
                PatchOp::Add(_) => {
                    out.effects.push(Effect::ok(from.rel(), EffectKind::Create));
                    out.accesses.push(Access::Write(from));
                }
                PatchOp::Delete(_) => {
                    out.effects.push(Effect::ok(from.rel(), EffectKind::Delete));
                    out.accesses.push(Access::Delete(from));
                }
                PatchOp::Update {
                    to: None, replaced, ..
                } => {
                    out.effects.push(Effect::ok(from.rel(), EffectKind::Modify));
                    out.accesses
                        .extend(replaced.iter().map(|(old, new)| Access::Edit {
                            path: from.clone(),
                            old: old.clone(),
                            new: new.clone(),
                        }));
                    if replaced.is_empty() {
                        out.accesses.push(Access::Write(from));
                    }
                }
                PatchOp::Update { to: Some(to), .. } => {
                    let to = match path(to) {
                        Ok(p) => p,
                        Err(why) => {
                            return deny(GateKind::Workspace, Some(to), refusals::outside(&why))
                        }
                    };
                    out.targets.push(to.rel().to_string());
                    out.effects.push(Effect::ok(from.rel(), EffectKind::Delete));
                    out.effects.push(Effect::ok(to.rel(), EffectKind::Create));
                    out.accesses.push(Access::Rename { from, to });
                }
            }
        }
        Ok(out)
    }

    /// `PreToolUse` of an `apply_patch`: every file it touches judged as one call.
    pub(super) fn pre_patch(&mut self, call: &ToolUse, patch: &str) -> Result<Reply, HookError> {
        let action = Action::tool(call.tool.name());
        let resolved = match self.resolve_patch(patch) {
            Ok(r) => r,
            Err((gate, raw, refusal)) => {
                let refusal = self.refuse(
                    call.id.as_ref(),
                    GateId::of(gate),
                    action,
                    raw.as_deref(),
                    refusal,
                )?;
                return Ok(Reply::denied(&refusal));
            }
        };
        if let Err(refusal) = self.judge_accesses(call, &action, &resolved.accesses)? {
            return Ok(Reply::denied(&refusal));
        }
        if let Some(id) = call.id.as_ref().filter(|s| !s.as_str().is_empty()) {
            let (first, rest) = resolved
                .targets
                .split_first()
                .map_or(("", &[][..]), |(f, r)| (f.as_str(), r));
            if let Some(refusal) = self.watch_write(call, id, first)? {
                return Ok(Reply::denied(&refusal));
            }
            self.state.patch_targets.insert(id.clone(), rest.to_vec());
            self.state.allowed_calls.insert(id.clone());
        }
        Ok(Reply::Allow {
            reason: format!(
                "loopward: {} may patch {}",
                self.caller,
                resolved.targets.join(", ")
            ),
        })
    }

    /// `PostToolUse` of an `apply_patch` (`failed`: the tool reported an error): its effects
    /// recorded and counted, and the workspace compared with the record taken before it.
    pub(super) fn post_patch(
        &mut self,
        call: &ToolUse,
        patch: &str,
        failed: bool,
    ) -> Result<Reply, HookError> {
        let authorised = call
            .id
            .as_ref()
            .is_some_and(|id| self.state.allowed_calls.remove(id));
        let mut reply = Reply::Silent;
        let mut effects = vec![];
        if let Ok(resolved) = self.resolve_patch(patch) {
            // A patch no PreToolUse allowed that breaks a rule: counted, and the model told.
            if !authorised {
                let broken = resolved.targets.iter().find_map(|t| {
                    self.policy
                        .guarded(&self.caller, t, &*self.ctx.clock)
                        .map(|r| (t.clone(), r))
                });
                if let Some((path, rule)) = broken {
                    reply = self.unasked(path, &rule)?;
                }
            }
            if !failed {
                let work = self.policy.work(&resolved.accesses);
                self.state.sprawl.touch(&self.caller, work);
                self.policy
                    .note_plan(&resolved.effects, &mut self.state.sprawl);
                effects = resolved.effects;
            }
        }
        self.finish_write(call, effects, failed, reply)
    }
}
