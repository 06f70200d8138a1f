//! The loop's judge of its sessions' hooks: the engine `loopward hook` runs
//! ([`loopward_hooks::handle_recorded`]), with the session's lock and state, its decisions
//! handed to the runner for the run's ledger instead of a ledger of the session's own; and the
//! way a command the session's hook wrapped sends its egress decisions to the same ledger.

use super::hook::{context_for, masked, LoopSession};
use loopward_core::{AgentId, AuditError, AuditEvent};
use loopward_hooks::HookContext;
use loopward_runner::cli_agent::{
    first_line, EgressRecord, HookEvent, HookJudge, HookReply, Judged, EGRESS_WIRE, HOOK_ENV,
    SESSION_MARK,
};
use loopward_runner::gates::Host;
use loopward_runner::secrets::Masker;
use std::io::{Read, Write};
use std::path::Path;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The context a judgement was made with: built for a host and a session from the config's
/// bytes, and built again when any of them changes (an edited policy applies from the next
/// call, as with a hook process per call).
struct Built {
    host: Host,
    session: LoopSession,
    config: Vec<u8>,
    context: Arc<(HookContext, Masker)>,
}

/// Judges one agent's sessions' hook events with `config`'s policy, `agent` as the main agent.
pub(super) struct LoopJudge {
    config: PathBuf,
    agent: String,
    built: Mutex<Option<Built>>,
}

impl LoopJudge {
    /// The judge of `agent`'s sessions under `config` (absolute).
    pub(super) fn new(config: PathBuf, agent: &str) -> Arc<Self> {
        Arc::new(Self {
            config,
            agent: agent.to_string(),
            built: Mutex::default(),
        })
    }

    fn context(
        &self,
        host: Host,
        session: LoopSession,
    ) -> anyhow::Result<Arc<(HookContext, Masker)>> {
        use anyhow::Context as _;
        let bytes = std::fs::read(&self.config)
            .with_context(|| format!("reading {}", self.config.display()))?;
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = built
            .as_ref()
            .filter(|b| b.host == host && b.session == session && b.config == bytes)
        {
            return Ok(Arc::clone(&b.context));
        }
        let context = Arc::new(context_for(
            &self.config,
            &self.agent,
            false,
            host,
            &session,
        )?);
        *built = Some(Built {
            host,
            session,
            config: bytes,
            context: Arc::clone(&context),
        });
        Ok(context)
    }
}

impl HookJudge for LoopJudge {
    fn judge(&self, event: &HookEvent<'_>) -> Result<Judged, String> {
        let session = LoopSession {
            mark: Some(event.session.to_string()),
            handoff: event.handoff,
        };
        let context = self
            .context(event.host, session)
            .map_err(|e| crate::error_text(&e))?;
        let (ctx, masker) = &*context;
        let (answer, records) = loopward_hooks::handle_recorded(event.event, ctx);
        let answer = masked(answer, masker);
        Ok(Judged {
            reply: answer,
            records,
        })
    }
}

/// The loop's socket for this session when this process runs in a `loopward loop` session
/// (its client set both the session's mark and the socket; `loopward contain` sets only the
/// socket, for its own supervisor).
pub(super) fn loop_socket(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    env(SESSION_MARK)?;
    env(HOOK_ENV).map(PathBuf::from)
}

/// How long a proxy waits for the loop to record its decision.
const EGRESS_WAIT: Duration = Duration::from_secs(20);

/// Sends `event` (an egress decision of `agent`'s wrapped command) to the loop at `socket`,
/// which records it in the run's ledger; an error unless the loop said it is recorded.
pub(super) fn record_egress(
    socket: &Path,
    token: Option<&str>,
    agent: &AgentId,
    event: &AuditEvent,
) -> Result<(), AuditError> {
    let fail = |why: String| {
        AuditError(format!(
            "the loop at {} did not record the egress decision: {why}",
            socket.display()
        ))
    };
    let body = serde_json::to_string(&EgressRecord {
        agent: agent.clone(),
        event: event.clone(),
    })
    .map_err(|e| fail(e.to_string()))?;
    let mut s = std::os::unix::net::UnixStream::connect(socket).map_err(|e| fail(e.to_string()))?;
    let _ = s.set_read_timeout(Some(EGRESS_WAIT));
    let _ = s.set_write_timeout(Some(EGRESS_WAIT));
    s.write_all(format!("{}\n{body}", first_line(EGRESS_WIRE, token)).as_bytes())
        .and_then(|()| s.shutdown(std::net::Shutdown::Write))
        .map_err(|e| fail(e.to_string()))?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)
        .map_err(|e| fail(e.to_string()))?;
    let reply: HookReply =
        serde_json::from_str(&reply).map_err(|e| fail(format!("its answer is not one ({e})")))?;
    match reply.exit_code {
        0 => Ok(()),
        _ => Err(fail(reply.stderr.trim().to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loop_sessions_process_sends_its_egress_to_the_loop() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        const LOOPED: [(&str, &str); 2] = [(SESSION_MARK, "s1"), (HOOK_ENV, "/state/hook-s1.sock")];
        assert_eq!(
            loop_socket(env(&LOOPED)),
            Some(PathBuf::from("/state/hook-s1.sock"))
        );
        // `loopward contain`'s supervisor: no session mark.
        assert_eq!(loop_socket(env(&[(HOOK_ENV, "/s/hooks.sock")])), None);
        assert_eq!(loop_socket(env(&[(SESSION_MARK, "s1")])), None);
    }

    #[test]
    fn a_loop_that_does_not_answer_leaves_the_decision_unrecorded() {
        let dir = tempfile::tempdir().unwrap();
        let event = AuditEvent::EgressDecided {
            allowed: true,
            call_id: None,
            host: "example.org".into(),
            port: 443,
            reason: "net".into(),
        };
        let agent = AgentId::new("builder").unwrap();
        let e = record_egress(&dir.path().join("gone.sock"), None, &agent, &event).unwrap_err();
        assert!(
            e.0.contains("gone.sock") && e.0.contains("did not record"),
            "{e}"
        );
    }
}
