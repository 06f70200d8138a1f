//! A wrapped `Bash` command's way out, on the session's record: `loopward sandbox exec` serves
//! the command's egress proxy and records each of its decisions in the ledger of the session
//! whose hook wrapped the command, through [`HookContext::record_for_session`].

use super::session::{SessionDir, SessionKey};
use super::{HookContext, HookError};
use loopward_core::{AgentId, AuditError, AuditEvent, Scope, TurnNumber};
use loopward_runner::Workspace;

/// The hosts whose sessions' ledgers a wrapped command may belong to, by run-id prefix.
const HOSTS: [&str; 3] = ["claude-code", "codex", "gemini"];

impl HookContext {
    /// Records `event` (an egress decision or a connection's byte counts) for `agent`'s
    /// wrapped command in the ledger of `session` — whichever host's session it is, the one
    /// its hooks started — under the session's lock, and makes it durable before returning.
    /// A session no hook started is an error: the command was not wrapped by a hook.
    pub fn record_for_session(
        &self,
        session: &str,
        agent: &AgentId,
        event: &AuditEvent,
    ) -> Result<(), HookError> {
        let root = self.root.as_deref().ok_or(HookError::NoRoot)?;
        let ws = Workspace::new(root)?;
        let key = SessionKey::new(session)?;
        let dir = SessionDir::under(&self.sessions_dir(ws.root()), key).lock_wait(self.lock_wait);
        let runs_dir = ws.root().join(&self.runs_dir);
        dir.locked(|state| {
            let run = HOSTS
                .iter()
                .map(|host| dir.key().run_id_of(host))
                .find(|run| runs_dir.join(run.as_str()).join("events.jsonl").is_file())
                .ok_or_else(|| {
                    AuditError(format!(
                        "session {session:?} has no ledger under {}: only a command its hook wrapped records there",
                        runs_dir.display()
                    ))
                })?;
            let ledger = self.ledgers.open(&runs_dir, &run, self.clock.clone())?;
            let scope = Scope {
                run,
                turn: (state.turn > 0).then_some(TurnNumber(state.turn)),
                agent: Some(agent.clone()),
            };
            ledger.record(&scope, event)?;
            ledger.commit()?;
            Ok(())
        })
    }
}
