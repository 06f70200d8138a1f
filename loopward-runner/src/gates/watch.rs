//! The shell watch, once for every enforcement point ([`ShellWatch`]).

use super::engine::{ChangedPath, ShellAsk, ShellJudgement, ShellOutcome};
use super::policy::Policy;
use super::refusals;
use super::snapshot::{Change, ContentStore, Snapshot, SnapshotError};
use crate::clock::Clock;
use crate::sandbox::{kernel_support, SandboxError, SandboxMode};
use loopward_core::{
    Action, AgentId, AuditError, AuditEvent, CallId, Decision, GateId, GateKind, GateMode, Refusal,
    Remedy,
};

/// Where a watch records its events, in order: the runner's turn, a hook's session ledger.
pub type Record<'r> = dyn FnMut(&AuditEvent) -> Result<(), AuditError> + 'r;

/// The shell watch of one agent's command, once for every enforcement point: a command (or a
/// write a host makes in its own process) is judged by what it changed.
///
/// It is the procedure the runner's `shell` tool and every host's hook adapter follow, step by
/// step, each keeping what it learns where its protocol allows (the runner in
/// memory for one call, a hook on disk between two processes):
///
/// 1. [`ShellWatch::contain`] — the sandbox decision: the kernel sandbox the policy asks for (the
///    adapter plans it, or wraps the command in `loopward sandbox exec`), `watch-only`, or a
///    refusal when it cannot be had; recorded as a `sandbox` gate decision.
/// 2. [`ShellWatch::before`] — the workspace recorded, with the contents the watch may have to
///    put back kept in the adapter's [`ContentStore`]; a workspace that cannot be recorded
///    refuses the command (a `shell_watch` gate decision either way).
/// 3. the command runs (the adapter's business).
/// 4. [`ShellWatch::after`] then [`ShellWatch::judge`] — the changes judged by the engine
///    ([`Policy::judge_changes`]: links made into a territory are writes there), each that may
///    not stand put back from the record before and recorded as a violation; the call's effects
///    are the diff. An `after` that fails moves no baseline (see [`Unchecked`](super::Unchecked)).
///
/// What no watch compares or restores ([`Policy::unwatched`]): `.git/` (a commit's objects are
/// the repository's bookkeeping, not units of work; the kernel sandbox still bounds what a
/// command writes there), the `[gates.shell] skip` folders, the runs directory (loopward appends
/// ledgers while commands run) and an adapter's own state folder in the workspace
/// ([`Policy::with_own_state`]). Every refusal comes from the engine's texts, with a remedy that
/// exists on the policy's [`Host`](super::Host).
///
/// ```
/// use loopward_core::{Action, AgentId, AuditEvent, CallId};
/// use loopward_runner::{gates::{Contained, MemoryStore, Policy, PolicyConfig}, SystemClock, Workspace};
/// let dir = tempfile::tempdir().unwrap();
/// let cfg = PolicyConfig::from_toml(r#"
///     [[territory]]
///     paths = ["plan.md"]
///     owner = "planner"
///     [gates.shell]
///     sandbox = "watch-only" # so this runs on any kernel; the adapter's sandbox step is not asked
/// "#).unwrap();
/// let policy = Policy::from_config(&cfg, Workspace::new(dir.path()).unwrap()).unwrap();
/// std::fs::write(dir.path().join("plan.md"), "# Plan\n").unwrap();
/// let (agent, action) = (AgentId::new("builder").unwrap(), Action::tool("shell"));
/// let call = CallId::from("c1");
/// let watch = policy.shell_watch(&agent, &call, &action);
/// let mut events: Vec<AuditEvent> = vec![];
/// let mut record = |e: &AuditEvent| { events.push(e.clone()); Ok(()) };
/// let contained = watch.contain(|| Ok("a plan"), &mut record).unwrap().unwrap();
/// assert!(matches!(contained, Contained::WatchOnly));
/// let store = MemoryStore::default();
/// let before = watch.before(&store, &mut record).unwrap().unwrap();
/// std::fs::write(dir.path().join("plan.md"), "mine now").unwrap(); // the command
/// let after = watch.after().unwrap();
/// let judged = watch.judge(&before, &after, &before.diff(&after), &store, &SystemClock, &mut record).unwrap();
/// assert!(judged.outcome.message.unwrap().contains("plan.md belongs to planner"));
/// assert_eq!(std::fs::read_to_string(dir.path().join("plan.md")).unwrap(), "# Plan\n");
/// ```
#[derive(Clone, Copy)]
pub struct ShellWatch<'a> {
    policy: &'a Policy,
    agent: &'a AgentId,
    call_id: &'a CallId,
    action: &'a Action,
}

/// How a command runs, as [`ShellWatch::contain`] decided.
#[derive(Debug)]
pub enum Contained<T> {
    /// Inside the kernel sandbox: what the adapter's sandbox step made (a plan, a wrapped
    /// command line).
    Kernel(T),
    /// Without one: the config says `sandbox = "watch-only"`; its changes are only compared
    /// and put back afterwards.
    WatchOnly,
}

/// What [`ShellWatch::judge`] found and did.
#[derive(Debug)]
pub struct Judged {
    /// The engine's judgement (its events are recorded already).
    pub judgement: ShellJudgement,
    /// What the command left (its violations are recorded already).
    pub outcome: ShellOutcome,
    /// The changes as judged, in the order of the judgement's refusals.
    pub changes: Vec<ChangedPath>,
}

impl Policy {
    /// The shell watch of `agent`'s call `call_id` (`action`: `tool:shell`, `tool:Bash`, …).
    pub fn shell_watch<'a>(
        &'a self,
        agent: &'a AgentId,
        call_id: &'a CallId,
        action: &'a Action,
    ) -> ShellWatch<'a> {
        ShellWatch {
            policy: self,
            agent,
            call_id,
            action,
        }
    }
}

impl ShellWatch<'_> {
    fn decision(&self, gate: GateKind, mode: GateMode, decision: Decision) -> AuditEvent {
        AuditEvent::GateDecision {
            call_id: Some(self.call_id.clone()),
            gate: GateId::of(gate),
            mode,
            action: self.action.clone(),
            path_raw: None,
            source: None,
            path: None,
            decision,
        }
    }

    /// Records that a contained command's network is the host's (`[net] isolate = false`): an
    /// advisory sandbox decision on every such call.
    pub fn network_open(&self, record: &mut Record<'_>) -> Result<(), AuditError> {
        record(&self.decision(
            GateKind::Sandbox,
            GateMode::Advisory,
            Decision::Warn(refusals::network_open()),
        ))
    }

    /// Whether the policy asks for the kernel sandbox (`false`: `sandbox = "watch-only"`).
    pub fn wants_kernel(&self) -> bool {
        self.policy.inner.shell.sandbox != SandboxMode::WatchOnly
    }

    /// Decides how the command runs and records it: `watch-only` when the config says so, else
    /// the kernel sandbox — refused when the kernel lacks it or the adapter's `sandbox` step
    /// (plan it, wrap the command) says why it cannot. `Ok(Err(refusal))`: the command must not
    /// run.
    pub fn contain<T>(
        &self,
        sandbox: impl FnOnce() -> Result<T, String>,
        record: &mut Record<'_>,
    ) -> Result<Result<Contained<T>, Refusal>, AuditError> {
        if !self.wants_kernel() {
            record(&self.decision(
                GateKind::Sandbox,
                GateMode::Advisory,
                Decision::Warn(refusals::watch_only()),
            ))?;
            return Ok(Ok(Contained::WatchOnly));
        }
        let made = match kernel_support().missing.clone() {
            Some(why) => Err(SandboxError::Unsupported { why }.to_string()),
            None => sandbox(),
        };
        match made {
            Ok(t) => {
                record(&self.decision(GateKind::Sandbox, GateMode::Enforce, Decision::Allow))?;
                Ok(Ok(Contained::Kernel(t)))
            }
            Err(why) => {
                let r = refusals::not_contained(&why, self.policy.inner.host);
                record(&self.decision(
                    GateKind::Sandbox,
                    GateMode::Enforce,
                    Decision::Deny(r.clone()),
                ))?;
                Ok(Err(r))
            }
        }
    }

    /// Records the workspace before the command, keeping in `store` the contents of the files
    /// it may have to put back (control files, territories the agent does not own), and
    /// records the decision ([`ShellWatch::take_before`] then [`ShellWatch::record_before`]).
    /// `Ok(Err(refusal))`: the workspace could not be recorded, so the command must not run.
    pub fn before(
        &self,
        store: &dyn ContentStore,
        record: &mut Record<'_>,
    ) -> Result<Result<Snapshot, Refusal>, AuditError> {
        self.record_before(self.take_before(store), record)
    }

    /// Records the workspace before the command or a host's own file write, keeping what may
    /// have to be put back in `store`; nothing is recorded in the ledger (an adapter that takes
    /// it off its async threads records the decision with [`ShellWatch::record_before`]).
    pub fn take_before(&self, store: &dyn ContentStore) -> Result<Snapshot, SnapshotError> {
        self.take(Some(store))
    }

    /// Records the decision on the record taken before the command: allowed, or refused
    /// because the workspace could not be recorded (`Ok(Err(refusal))`).
    pub fn record_before(
        &self,
        taken: Result<Snapshot, SnapshotError>,
        record: &mut Record<'_>,
    ) -> Result<Result<Snapshot, Refusal>, AuditError> {
        match taken {
            Ok(s) => {
                record(&self.decision(GateKind::ShellWatch, GateMode::Enforce, Decision::Allow))?;
                Ok(Ok(s))
            }
            Err(why) => {
                let r = refusals::unwatchable(&why.to_string(), self.policy.inner.host);
                record(&self.decision(
                    GateKind::ShellWatch,
                    GateMode::Enforce,
                    Decision::Deny(r.clone()),
                ))?;
                Ok(Err(r))
            }
        }
    }

    /// Records the workspace without keeping anything (after the command, or to compare with
    /// a blinded call's baseline). An error blinds the watch: the record before stays the
    /// baseline ([`Unchecked`](super::Unchecked)).
    pub fn after(&self) -> Result<Snapshot, SnapshotError> {
        self.take(None)
    }

    fn take(&self, store: Option<&dyn ContentStore>) -> Result<Snapshot, SnapshotError> {
        let inner = &self.policy.inner;
        let gates = self.policy.gates();
        let keep = |p: &str| {
            store.is_some()
                && (inner.control.covers(p)
                    || gates
                        .territories
                        .iter()
                        .any(|t| t.covers(p) && !t.owned_by(self.agent)))
        };
        let none = super::snapshot::MemoryStore::default();
        Snapshot::take(
            inner.workspace.root(),
            &self.policy.unwatched(),
            inner.shell.max_snapshot_bytes,
            &keep,
            store.unwrap_or(&none),
        )
    }

    /// Judges `diff` (the workspace from `before` to `after`) as this call's: the engine's
    /// events recorded, each change that may not stand put back from `before` (its kept
    /// contents in `store`) and its violation recorded.
    pub fn judge(
        &self,
        before: &Snapshot,
        after: &Snapshot,
        diff: &[Change],
        store: &dyn ContentStore,
        clock: &dyn Clock,
        record: &mut Record<'_>,
    ) -> Result<Judged, AuditError> {
        let ws = &self.policy.inner.workspace;
        let changes: Vec<ChangedPath> = diff
            .iter()
            .map(|c| {
                // The other ends of a link the command made, as the record after saw them; a
                // symbolic link is followed by its bytes, whatever they are.
                let mut ends = after.hard_links_of(&c.path);
                if after.is_link(&c.path) {
                    if let Ok(p) = ws.land_text(&c.path) {
                        ends.push(p);
                    }
                }
                ChangedPath {
                    path: c.path.clone(),
                    kind: c.kind.clone(),
                    dir: after.is_dir(&c.path),
                    ends: Ok(ends),
                }
            })
            .collect();
        let judgement = self.policy.judge_changes(&ShellAsk {
            agent: self.agent,
            call_id: Some(self.call_id),
            action: self.action,
            changes: &changes,
            clock,
        });
        judgement.events.iter().try_for_each(&mut *record)?;
        let remedies: Vec<Option<Remedy>> = diff
            .iter()
            .zip(&judgement.refusals)
            .map(|(c, r)| {
                r.as_ref()
                    .map(|_| match before.revert(ws.root(), c, store) {
                        Ok(()) => Remedy::Reverted,
                        Err(e) => Remedy::NotReverted { why: e.to_string() },
                    })
            })
            .collect();
        let outcome = judgement.outcome(&changes, &remedies);
        outcome.violations.iter().try_for_each(&mut *record)?;
        Ok(Judged {
            judgement,
            outcome,
            changes,
        })
    }

    /// The text the model reads when the command ran but its changes could not be compared
    /// (`why`: what blinded the watch).
    pub fn blinded(&self, why: &str) -> String {
        refusals::blinded(why)
    }
}
