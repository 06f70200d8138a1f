//! The loop's judge of its sessions' hooks: the engine `loopward hook` runs
//! ([`loopward_hooks::handle_recorded`]), with the session's lock and state, its decisions
//! handed to the runner for the run's ledger instead of a ledger of the session's own.

use super::hook::{context_for, masked, LoopSession};
use loopward_hooks::HookContext;
use loopward_runner::cli_agent::{HookEvent, HookJudge, HookReply, Judged};
use loopward_runner::gates::Host;
use loopward_runner::secrets::Masker;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

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
            reply: HookReply {
                stdout: answer.stdout,
                stderr: answer.stderr,
                exit_code: answer.exit_code,
            },
            records,
        })
    }
}
