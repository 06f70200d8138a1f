//! What chapter 9's loop is made of, besides the stand-in client: the `kind = "claude-code"`
//! agent as `loopward loop` builds it (the client, its hook command, the verifier in the
//! sandbox, the loop's judge of the session's hook), the hook command itself (the demo binary
//! relaying each event to the loop, as `loopward hook claude-code` does in a loop's session),
//! and the timeline view.

use super::stand_in::{HOOK_FLAG, STAND_IN_ENV};
use anyhow::{Context, Result};
use loopward::config::{AgentConfig, Config};
use loopward::state::Custody;
use loopward_core::{AgentId, AuditError, AuditEvent, AuditSink, LayerId, Scope};
use loopward_hooks::HookContext;
use loopward_runner::cli_agent::{
    relay_event, ClaudeCode, CliAgent, CliAgentBuilder, HookCommand, HookEvent, HookReply, Judged,
    Verifier,
};
use loopward_runner::gates::{ControlFiles, Host};
use loopward_runner::sandbox::Protected;
use loopward_runner::{Clock, Workspace};
use loopward_term::timeline::{SharedPrinter, Timeline};
use serde_json::json;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Builds chapter 9's `kind = "claude-code"` agents: sessions of the stand-in client (the
/// demo binary `exe`), checked by the agent's `verify` command in the sandbox.
pub(crate) struct StandIns {
    /// The demo binary.
    pub exe: PathBuf,
    /// The stand-in's state folder (its script, its session count).
    pub state: PathBuf,
    /// The config file the judge reads.
    pub config: PathBuf,
    /// The workspace.
    pub workspace: PathBuf,
    /// The demo's custody.
    pub custody: Custody,
    /// The judge's clock (the demo's fixed epoch, as the run's).
    pub clock: Arc<dyn Clock>,
}

impl loopward::team::CliAgents for StandIns {
    fn agent(&self, a: &AgentConfig) -> Result<CliAgentBuilder> {
        let cfg = Config::load(&self.config)?;
        let ws = Workspace::new(&self.workspace).context("the workspace")?;
        let control = ControlFiles::new("", "runs").resolved(&ws);
        let protected = Protected::from_policy(control, &cfg.policy(), &a.name)?;
        let verifier = Verifier::new(
            a.verify.clone().unwrap_or_default(),
            Duration::from_secs(60),
            protected,
        )
        .unreadable(self.custody.unreadable().to_vec());
        let host = ClaudeCode {
            program: self.exe.clone(),
            hook: HookCommand::new(&self.exe, [HOOK_FLAG]),
            args: vec![],
            env: vec![(STAND_IN_ENV.into(), self.state.clone().into())],
        };
        // As `loopward loop` does before the first session: the client is the tested version.
        host.check_version()?;
        let judge = Judge {
            config: self.config.clone(),
            root: self.workspace.clone(),
            custody: self.custody.clone(),
            clock: self.clock.clone(),
            main: a.name.clone(),
        };
        Ok(CliAgent::builder(
            a.name.clone(),
            host,
            verifier,
            self.custody.state().root().join("loop-sessions"),
        )
        .session_timeout(Duration::from_secs(60))
        // Each session's hook asks the loop, which records its decisions in the run's ledger.
        .hook_judge(Arc::new(move |e: &HookEvent<'_>| judge.judge(e))))
    }
}

/// The loop's judge of a session's hook events: the engine `loopward hook` runs, with the
/// config's policy and the demo's custody; its records go to the run's ledger.
struct Judge {
    config: PathBuf,
    root: PathBuf,
    custody: Custody,
    clock: Arc<dyn Clock>,
    main: AgentId,
}

impl Judge {
    fn judge(&self, event: &HookEvent<'_>) -> Result<Judged, String> {
        let ctx = self.context(event).map_err(|e| format!("{e:#}"))?;
        let (answer, records) = loopward_hooks::handle_recorded(event.event, &ctx);
        Ok(Judged {
            reply: answer,
            records,
        })
    }

    /// Built for each event from the config as it is then (an edited policy applies from the
    /// next call, as with `loopward loop`).
    fn context(&self, event: &HookEvent<'_>) -> Result<HookContext> {
        let cfg = Config::load(&self.config)?;
        HookContext::builder(&cfg.policy())
            .overrides(self.custody.overrides()?)
            .team(cfg.team())
            .root(&self.root)
            .state_dir(self.custody.state())
            .unreadable(self.custody.unreadable().to_vec())
            .config_file("")
            .main_agent(self.main.clone())
            .host(event.host)
            .loop_session(Some(event.session.to_string()))
            .handoff(event.handoff)
            .clock(self.clock.clone())
            .build()
            .with_context(|| self.config.display().to_string())
    }
}

/// The stand-in's hook command (`loopward-demo --hook`): relays the event `input` to the loop
/// at `socket` (the session's `LOOPWARD_SUPERVISOR`) with the session's `token` (its
/// `LOOPWARD_SUPERVISOR_TOKEN`) and returns the loop's answer; judges nothing itself. Without
/// either, or without an answer, it blocks (exit status 2).
pub fn hook(socket: Option<OsString>, token: Option<String>, input: &str) -> HookReply {
    use loopward_runner::cli_agent::{HOOK_ENV, TOKEN_ENV};
    let (Some(socket), Some(token)) = (socket, token) else {
        return HookReply::block(format!(
            "the demo's hook relays to the loop that started its session, and {HOOK_ENV} or {TOKEN_ENV} is not set: run it as chapter 9 does (`cargo run -p loopward-demo -- --chapter 9`), not by hand"
        ));
    };
    relay_event(Path::new(&socket), Some(&token), Host::ClaudeCode, input)
        .unwrap_or_else(HookReply::block)
}

/// The live timeline of a loop: every event recorded into the ledger; shown as `loopward run`
/// shows it, less what varies from one demo to the next (the session's process id and id, the
/// workspace fingerprints: they stay in the ledger).
pub(crate) struct LoopView<W: Write + Send> {
    pub ledger: Arc<dyn AuditSink>,
    pub view: Mutex<Timeline>,
    pub out: SharedPrinter<W>,
}

impl<W: Write + Send> AuditSink for LoopView<W> {
    fn commit(&self) -> Result<(), AuditError> {
        self.ledger.commit()
    }

    fn record(&self, scope: &Scope, event: &AuditEvent) -> Result<(), AuditError> {
        self.ledger.record(scope, event)?;
        let shown = match event {
            AuditEvent::LayerDecision { layer, .. } if *layer == LayerId::Session => return Ok(()),
            AuditEvent::LayerDecision {
                layer,
                decision,
                detail,
            } if *layer == LayerId::Verify => {
                let d = detail.as_verify();
                AuditEvent::LayerDecision {
                    layer: layer.clone(),
                    decision: *decision,
                    detail: json!({"claimed_done": d.as_ref().map(|d| d.claimed_done),
                                   "passed": d.as_ref().map(|d| d.passed)})
                    .into(),
                }
            }
            other => other.clone(),
        };
        let mut view = self.view.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        view.render(&mut out, scope, &shown);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use loopward_runner::cli_agent::{HOOK_ENV, TOKEN_ENV};

    #[test]
    fn a_hook_outside_a_loops_session_blocks_naming_what_is_missing() {
        for (socket, token) in [(None, Some("t".into())), (Some("/s.sock".into()), None)] {
            let a = super::hook(socket, token, "{}");
            assert_eq!(a.exit_code, loopward_hooks::EXIT_BLOCK);
            assert!(
                a.stderr.contains(HOOK_ENV) && a.stderr.contains(TOKEN_ENV),
                "{}",
                a.stderr
            );
        }
    }

    #[test]
    fn a_hook_whose_loop_is_gone_blocks_naming_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("hook-gone.sock");
        let a = super::hook(Some(gone.clone().into()), Some("t".into()), "{}");
        assert_eq!(a.exit_code, loopward_hooks::EXIT_BLOCK);
        assert!(a.stderr.contains(&*gone.to_string_lossy()), "{}", a.stderr);
    }
}
