//! What chapter 9's loop is made of, besides the stand-in client: the `kind = "claude-code"`
//! agent as `loopward loop` builds it (the client, its hook command, the verifier in the
//! sandbox, the hook ledgers linked), the hook command itself (the demo binary answering
//! with `loopward_hooks::handle`, as `loopward hook claude-code` does), and the timeline view.

use super::stand_in::{HOOK_FLAG, STAND_IN_ENV};
use super::DEMO_EPOCH_MILLIS;
use anyhow::{Context, Result};
use loopward::config::{AgentConfig, Config};
use loopward::ledger;
use loopward::state::Custody;
use loopward_core::{AgentId, AuditError, AuditEvent, AuditSink, LayerId, RunId, Scope};
use loopward_hooks::{FileLedgers, HookAnswer, HookContext, LedgerOpener};
use loopward_runner::cli_agent::{
    ClaudeCode, CliAgent, CliAgentBuilder, HookCommand, SessionLedgers, SessionLink, Verifier,
};
use loopward_runner::gates::{ControlFiles, Host};
use loopward_runner::sandbox::Protected;
use loopward_runner::{Clock, ManualClock, Workspace};
use loopward_term::timeline::{SharedPrinter, Timeline};
use serde_json::json;
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
    /// The config file the hook reads.
    pub config: PathBuf,
    /// The workspace.
    pub workspace: PathBuf,
    /// The demo's scratch folder (its state directory and key).
    pub scratch: PathBuf,
    /// Where the loop's and the sessions' ledgers go.
    pub runs_dir: PathBuf,
    /// The demo's custody.
    pub custody: Custody,
    /// The run's clock.
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
        let text = |p: &Path| p.to_string_lossy().into_owned();
        let host = ClaudeCode {
            program: self.exe.clone(),
            hook: HookCommand::new(
                &self.exe,
                [
                    HOOK_FLAG,
                    "--config",
                    &text(&self.config),
                    "--root",
                    &text(&self.workspace),
                    "--scratch",
                    &text(&self.scratch),
                    "--runs",
                    &text(&self.runs_dir),
                    "--main-agent",
                    a.name.as_str(),
                ],
            ),
            args: vec![],
            env: vec![(STAND_IN_ENV.into(), self.state.clone().into())],
        };
        // As `loopward loop` does before the first session: the client is the tested version.
        host.check_version()?;
        Ok(CliAgent::builder(
            a.name.clone(),
            host,
            verifier,
            self.custody.state().root().join("loop-sessions"),
        )
        .session_timeout(Duration::from_secs(60))
        .ledgers(Arc::new(Closer {
            runs_dir: self.runs_dir.clone(),
            custody: self.custody.clone(),
            clock: self.clock.clone(),
        })))
    }
}

/// Closes each session's hook ledger under the demo key, anchoring it (as `loopward loop`).
struct Closer {
    runs_dir: PathBuf,
    custody: Custody,
    clock: Arc<dyn Clock>,
}

impl SessionLedgers for Closer {
    fn close(&self, run: &RunId) -> Result<Option<SessionLink>, String> {
        let dir = ledger::run_dir(&self.runs_dir, run);
        if !dir.join(ledger::EVENTS_FILE).exists() {
            return Ok(None);
        }
        let text = |e: anyhow::Error| format!("{e:#}");
        let opts = self
            .custody
            .reopen_options(&dir, self.clock.clone())
            .map_err(text)?;
        let l = ledger::reopen(&self.runs_dir, run, opts).map_err(text)?;
        let f = l.finish().map_err(|e| e.to_string())?;
        Ok(Some(SessionLink {
            records: f.final_seq,
            final_hash: f.final_hash,
        }))
    }
}

/// The hook's session ledgers, in the loop's runs folder (beside the loop's own ledger).
struct HookLedgers {
    runs_dir: PathBuf,
    inner: FileLedgers,
}

impl LedgerOpener for HookLedgers {
    fn open(
        &self,
        _workspace_runs: &Path,
        run: &RunId,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<dyn AuditSink>, AuditError> {
        self.inner.open(&self.runs_dir, run, clock)
    }
}

/// The stand-in's hook command (`loopward-demo --hook --config … --root … --scratch … --runs …
/// --main-agent …`, its arguments after the flag): judges the event `input` with the config's
/// policy, as `loopward hook claude-code` does. `loop_session` is the session's
/// `LOOPWARD_SESSION`. Anything that goes wrong blocks (exit status 2).
pub fn hook(args: &[String], loop_session: Option<String>, input: &str) -> HookAnswer {
    match context(args, loop_session) {
        Ok(ctx) => loopward_hooks::handle(input, &ctx),
        Err(e) => HookAnswer::fail_closed(format!("{e:#}")),
    }
}

fn context(args: &[String], loop_session: Option<String>) -> Result<HookContext> {
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from)
            .with_context(|| format!("the demo's hook needs {name}"))
    };
    let config = arg("--config")?;
    let cfg = Config::load(&config)?;
    let custody = super::demo_custody(&arg("--scratch")?)?;
    let key = custody
        .ledger_key()?
        .context("the demo's custody has its key")?;
    let main = AgentId::new(arg("--main-agent")?.to_string_lossy().into_owned())
        .context("--main-agent")?;
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(DEMO_EPOCH_MILLIS));
    HookContext::builder(&cfg.policy())
        .ledgers(Arc::new(HookLedgers {
            runs_dir: arg("--runs")?,
            inner: FileLedgers::keyed(key),
        }))
        .overrides(custody.overrides()?)
        .team(cfg.team())
        .root(arg("--root")?)
        .state_dir(custody.state())
        .unreadable(custody.unreadable().to_vec())
        .config_file("")
        .main_agent(main)
        .host(Host::ClaudeCode)
        .loop_session(loop_session)
        .clock(clock)
        .build()
        .with_context(|| config.display().to_string())
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
            AuditEvent::LayerDecision { layer, .. }
                if *layer == LayerId::Session || *layer == LayerId::SessionLedger =>
            {
                return Ok(())
            }
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
    #[test]
    fn a_hook_without_its_arguments_blocks() {
        let a = super::hook(&[], None, "{}");
        assert_eq!(a.exit_code, loopward_hooks::EXIT_BLOCK);
        assert!(a.stderr.contains("--config"), "{}", a.stderr);
    }
}
