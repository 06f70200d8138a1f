//! Calls of one session that overlap in time. Claude Code runs subagents in the background, so
//! two agents' calls can both be between their `PreToolUse` and `PostToolUse`; each watched call
//! compares the whole workspace, so one call's before/after difference holds the other's
//! changes too. A change is judged as this call's only when no overlapping call accounts for it:
//!
//! - the target another watched file-tool call was allowed to write (live, or finished since this
//!   call started), the folders made on the way to it, and (to another file tool) the temporary
//!   sibling it writes through before renaming it over the target, are that call's: never judged here,
//!   never put back (to a command, a live `Write`'s target is the `Write`'s only when it holds the
//!   content that `Write` writes);
//! - a path an overlapping call already judged as its own is that call's;
//! - a file tool writes only its target (through a link swapped in, where the target lands): a
//!   change elsewhere while a shell command of another call overlapped is that command's, judged
//!   by its own `PostToolUse`, not the file tool's;
//! - between two overlapping shell commands of different agents, a change the judging call's
//!   agent may not make but the other's may is not put back: who made it cannot be told from the
//!   workspace (the kernel sandbox already kept a command from writing where its agent may not),
//!   so it is recorded as such, an advisory shell-watch decision naming both, never blamed;
//! - anything else is this call's, judged and put back as before.
//!
//! "Overlapping" is decided by the order of the session's events (the hook handles them one at a
//! time under the session lock), not by a clock; the bookkeeping starts afresh at each human
//! prompt, so a call interrupted before its `PostToolUse` is not live forever. What this cannot
//! do: tell two overlapping commands apart when both agents may make a change (it is counted for
//! the call that sees it first), or judge a change made, outside every watched call, while a
//! file tool and a command overlapped (left to the command, whose window may not include it).

use super::decide::Engine;
use super::HookError;
use loopward_core::{Action, AuditEvent, CallId, Decision, GateId, GateKind, GateMode};
use loopward_runner::gates::{refusals, Change, Snapshot};
use serde::{Deserialize, Serialize};
use sha2::Digest;

/// The most finished calls kept for the calls that overlapped them.
const MAX_FINISHED: usize = 256;

/// A watched call between its `PreToolUse` and `PostToolUse`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchedCall {
    /// The agent that made it.
    pub agent: String,
    /// The session's event number at its `PreToolUse`.
    pub started: u64,
    /// A file-tool call: the path it was allowed to write (`None`: a shell command).
    #[serde(default)]
    pub target: Option<String>,
    /// A `Write`: the SHA-256 (hex) of the content it writes, so its change can be told from
    /// another's at the same path.
    #[serde(default)]
    pub expect: Option<String>,
}

/// A watched call that finished while others were still live: what it judged as its own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishedCall {
    /// The call's id.
    pub id: CallId,
    /// The agent that made it.
    pub agent: String,
    /// The session's event number at its `PostToolUse`.
    pub finished: u64,
    /// The paths it changed and that were judged as its own (its target included).
    pub paths: Vec<String>,
    /// Whether it was a shell command.
    #[serde(default)]
    pub shell: bool,
}

/// Another call that overlapped the one being judged.
struct Other {
    agent: String,
    paths: Vec<String>,
    shell: bool,
    /// Live: what its target will hold (a `Write`), or `None` (unknown, or finished).
    expect: Option<String>,
    live: bool,
}

impl Engine<'_> {
    /// Notes that call `id` is watched from now on (`target`: the path a file tool may write).
    pub(super) fn begin_watch(&mut self, id: &CallId, target: Option<&str>, content: Option<&str>) {
        self.state.events += 1;
        let call = WatchedCall {
            agent: self.caller.to_string(),
            started: self.state.events,
            target: target.map(str::to_string),
            expect: content.map(|c| hex::encode(sha2::Sha256::digest(c.as_bytes()))),
        };
        self.state.live.insert(id.clone(), call);
    }

    /// The calls that overlapped `id`: the other live ones, and those that finished after it
    /// started.
    fn overlapping(&self, id: &CallId) -> Vec<Other> {
        let started = self.state.live.get(id).map_or(0, |c| c.started);
        let live = self
            .state
            .live
            .iter()
            .filter(|(other, _)| *other != id)
            .map(|(_, c)| Other {
                agent: c.agent.clone(),
                paths: c.target.iter().cloned().collect(),
                shell: c.target.is_none(),
                expect: c.expect.clone(),
                live: true,
            });
        let finished = self
            .state
            .finished
            .iter()
            .filter(|f| f.id != *id && f.finished > started)
            .map(|f| Other {
                agent: f.agent.clone(),
                paths: f.paths.clone(),
                shell: f.shell,
                expect: None,
                live: false,
            });
        live.chain(finished).collect()
    }

    /// The changes of `diff` that are call `id`'s own to be judged; the rest are another
    /// overlapping call's, and those no one can attribute are recorded as such.
    pub(super) fn own_changes(
        &mut self,
        id: &CallId,
        action: &Action,
        diff: Vec<Change>,
        after: &Snapshot,
    ) -> Result<Vec<Change>, HookError> {
        let others = self.overlapping(id);
        if others.is_empty() {
            return Ok(diff);
        }
        let judging_shell = self.state.live.get(id).is_some_and(|c| c.target.is_none());
        let other_shell = others.iter().any(|o| o.shell);
        let mut own = Vec::new();
        for change in diff {
            // Another call's target, or a folder made on the way to it. A live file write's
            // target is its own to a file tool (which writes only its target), and to a command
            // only when it holds what that `Write` writes: otherwise the command may have made
            // the change, and it is judged as the command's.
            let theirs = |o: &Other, t: &String| {
                let on_way = t
                    .strip_prefix(change.path.as_str())
                    .is_some_and(|r| r.starts_with('/'));
                // A file tool writes through a temporary sibling it then renames over its
                // target (Claude Code: `<target>.tmp.<pid>.<hex>`): seen mid-write by another
                // call, that file is the writing call's.
                let in_flight = !judging_shell
                    && change
                        .path
                        .strip_prefix(t.as_str())
                        .and_then(|r| r.strip_prefix(".tmp."))
                        .is_some_and(|r| !r.is_empty() && !r.contains('/'));
                let same = t == &change.path
                    && (!o.live
                        || !judging_shell
                        || o.expect
                            .as_deref()
                            .is_some_and(|e| after.content_sha256(&change.path) == Some(e)));
                on_way || same || in_flight
            };
            if others.iter().any(|o| o.paths.iter().any(|t| theirs(o, t))) {
                continue;
            }
            if !judging_shell {
                // A file tool writes its target only: with a command overlapping, a change
                // elsewhere is the command's to answer for.
                if !other_shell {
                    own.push(change);
                }
                continue;
            }
            let clock = &*self.ctx.clock;
            let refused = self.policy.guarded(&self.caller, &change.path, clock);
            let mut may: Vec<&str> = others
                .iter()
                .filter(|o| o.shell && o.agent != self.caller.as_str())
                .filter(|o| {
                    loopward_core::AgentId::new(o.agent.clone())
                        .is_ok_and(|a| self.policy.guarded(&a, &change.path, clock).is_none())
                })
                .map(|o| o.agent.as_str())
                .collect();
            may.sort_unstable();
            may.dedup();
            match refused {
                Some(rule) if !may.is_empty() => {
                    let who = may.join(", ");
                    let me = &self.caller;
                    self.record(&AuditEvent::GateDecision {
                        call_id: Some(id.clone()),
                        gate: GateId::of(GateKind::ShellWatch),
                        mode: GateMode::Advisory,
                        action: action.clone(),
                        path_raw: None,
                        source: None,
                        path: Some(change.path.as_str().into()),
                        decision: Decision::Warn(refusals::unattributable(
                            &change.path,
                            me,
                            &who,
                            &rule.reason,
                        )),
                    })?;
                }
                _ => own.push(change),
            }
        }
        Ok(own)
    }

    /// Ends the watch of call `id`, which judged `paths` as its own; kept for the calls that
    /// overlapped it for as long as one of them is live.
    pub(super) fn end_watch(&mut self, id: &CallId, mut paths: Vec<String>) {
        if let Some(call) = self.state.live.remove(id) {
            paths.extend(call.target.clone());
            self.state.events += 1;
            let now = self.state.events;
            if !self.state.live.is_empty() {
                self.state.finished.push(FinishedCall {
                    id: id.clone(),
                    shell: call.target.is_none(),
                    agent: call.agent,
                    finished: now,
                    paths,
                });
            }
        }
        let live = &self.state.live;
        self.state
            .finished
            .retain(|f| live.values().any(|c| c.started < f.finished));
        // Bounded, whatever the client does: the oldest go first.
        let excess = self.state.finished.len().saturating_sub(MAX_FINISHED);
        self.state.finished.drain(..excess);
    }
}
