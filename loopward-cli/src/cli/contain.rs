//! `loopward contain`: runs a whole program — an agent host (`claude`, `codex`, `gemini`), a
//! script — inside one agent's sandbox, with loopward beside it as the supervisor.
//!
//! The supervisor stays outside: it holds the ledger key, the ledger and the egress proxy. The
//! program and everything it starts write only the agent's territories and unclaimed paths,
//! read only the workspace, the system folders and `[read] allow`, start with the allowed
//! environment and a scratch `HOME`, and reach the network only through the proxy, to the
//! agent's `net` hosts; every egress decision is recorded in the session's ledger
//! (`runs/<id>/`), masked like every record. Nothing starts when the sandbox cannot be made.

use anyhow::{bail, Context, Result};
use loopward::config::Config;
use loopward_core::{AgentId, AuditEvent, AuditSink, RunId, RunStatus, Scope, Usage};
use loopward_runner::egress::{EgressPolicy, Gateway, Recorder};
use loopward_runner::sandbox::{kernel_support, spawn_contained, Network};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Run a program inside one agent's sandbox, loopward supervising from outside.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward contain --agent builder -- claude
  loopward contain --agent builder -- bash -c 'cargo test'

The program may write only the agent's territories and unclaimed paths, reads only the
workspace, the system folders and [read] allow, starts with PATH, LANG, TERM, [env] pass and
a scratch HOME, and reaches only the agent's `net` hosts, through loopward's egress proxy
(HTTP_PROXY, HTTPS_PROXY). Every egress decision is in the session's ledger, runs/<id>/.
Exit status: the program's; 126 when the sandbox cannot be set up, 127 when the program is
not found (nothing ran).")]
pub struct Args {
    /// The config file; its folder is the project root.
    #[arg(long, default_value = "loopward.toml")]
    pub config: PathBuf,
    /// The agent whose sandbox the program runs in.
    #[arg(long)]
    pub agent: String,
    /// The session's run id (default: from the clock).
    #[arg(long)]
    pub id: Option<String>,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// `program` as the sandbox's `PATH` finds it (an explicit path as it is).
fn find_program(program: &str, path: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program).is_file().then(|| PathBuf::from(program));
    }
    std::env::split_paths(path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Runs the program; returns its exit status.
pub async fn run(args: Args) -> Result<ExitCode> {
    loopward_runner::sandbox::hide_this_process()?;
    let env: loopward::backend::EnvLookup = |k| std::env::var(k).ok();
    let cfg = Config::load(&args.config)?;
    let agent = AgentId::new(args.agent.clone()).context("--agent")?;
    if !cfg.agents.iter().any(|a| a.name == agent) {
        bail!(
            "{}: there is no agent {agent} on the team; use one of: {}",
            args.config.display(),
            cfg.team()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let masker = loopward::contain::masker(&cfg, &args.config, Some(env))?;
    if let Some(why) = &kernel_support().missing {
        return refuse(
            126,
            &format!("the kernel cannot sandbox the program: {why}"),
        );
    }
    let (mut plan, scratch) = super::sandbox::plan_agent(&cfg, &args.config, &args.agent, &[])?;
    // loopward's binaries run inside too, as the program's hook command (`loopward-hook`, or
    // `loopward` where it stands alone): it forwards each hook event to this supervisor (a hook
    // that cannot start would let the client go ahead).
    let exe = std::env::current_exe().context("finding the loopward binary")?;
    let reach = plan
        .reach()
        .clone()
        .read(&exe)
        .read(super::binaries::hook_program(&exe));
    plan = plan.with_reach(reach);
    let hooks_dir = std::env::temp_dir().join(format!("loopward-contain-{}", std::process::id()));
    std::fs::create_dir_all(&hooks_dir)
        .with_context(|| format!("creating {}", hooks_dir.display()))?;
    let hooks_socket = hooks_dir.join("hooks.sock");
    // Removed after the supervisor's thread has stopped (locals drop in reverse order).
    let _cleanup = RemoveOnDrop(hooks_dir);
    let _ = std::fs::remove_file(&hooks_socket);
    let hooks = std::os::unix::net::UnixListener::bind(&hooks_socket)
        .with_context(|| format!("listening for hooks at {}", hooks_socket.display()))?;
    // The program's hooks send it; the commands they wrap are not given it.
    let token = loopward_runner::cli_agent::new_token().context("making the hooks' token")?;
    let _hooks = super::supervisor::serve(
        hooks,
        args.config
            .canonicalize()
            .unwrap_or_else(|_| args.config.clone()),
        args.agent.clone(),
        token.clone(),
    )?;
    // A brokered model key: the program gets the proxy as its base URL and a placeholder.
    let gateway = match cfg.secrets.iter().find(|(_, s)| s.gateway.is_some()) {
        Some((name, s)) => {
            let kind = s.gateway.as_deref().unwrap_or_default();
            let (base_var, key_var, header, default_upstream, suffix) = match kind {
                "openai" => (
                    "OPENAI_BASE_URL",
                    "OPENAI_API_KEY",
                    "authorization",
                    "https://api.openai.com/v1",
                    "/v1",
                ),
                _ => (
                    "ANTHROPIC_BASE_URL",
                    "ANTHROPIC_API_KEY",
                    "x-api-key",
                    "https://api.anthropic.com",
                    "",
                ),
            };
            let value = loopward::contain::secret_value(&cfg, &args.config, Some(env), name)?;
            let value = if header == "authorization" {
                format!("Bearer {value}")
            } else {
                value
            };
            let upstream = s.upstream.as_deref().unwrap_or(default_upstream);
            // The provider's path prefix is the program's (`/v1` in its base URL).
            let upstream = upstream.strip_suffix(suffix).unwrap_or(upstream);
            let g = match Gateway::new(upstream, header, value, name) {
                Ok(g) => g,
                Err(why) => return refuse(126, &format!("[secrets.{name}]: {why}")),
            };
            plan = plan
                .with_proxy_env(base_var, &format!("{{proxy}}{suffix}"))
                .with_proxy_env(key_var, &format!("loopward-brokered-{name}"))
                .with_proxy_env("NO_PROXY", "127.0.0.1,localhost")
                .with_proxy_env("no_proxy", "127.0.0.1,localhost");
            Some(g)
        }
        None => None,
    };
    let path = plan
        .reach()
        .environment()
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or(
            loopward_runner::sandbox::DEFAULT_PATH.to_string(),
            |(_, v)| v.clone(),
        );
    let Some(program) = find_program(&args.command[0], &path) else {
        return refuse(
            127,
            &format!(
                "{:?} is not found on the sandbox's PATH ({path}); give its full path, or pass the folder that holds it with [env] pass / [read] allow",
                args.command[0]
            ),
        );
    };
    let workspace = cfg.workspace_dir(&args.config);
    let runs_dir = workspace.join(&cfg.run.runs_dir);
    let clock = loopward_runner::SystemClock;
    let id = match &args.id {
        Some(s) => RunId::new(s.clone()).with_context(|| format!("--id {s:?} is not a run id"))?,
        None => loopward::ledger::new_run_id(&clock),
    };
    let custody = super::state::open(&cfg, &args.config)?;
    let mut opts = custody.ledger_options(&runs_dir, Arc::new(clock))?;
    opts.masker = masker.clone();
    let ledger = loopward::ledger::create(&runs_dir, &id, opts)?;
    let scope = Scope {
        run: id.clone(),
        turn: None,
        agent: Some(agent.clone()),
    };
    let task = format!("contain: {}", args.command.join(" "));
    ledger.record(
        &scope,
        &AuditEvent::RunStarted {
            agent: agent.clone(),
            task: task.clone(),
        },
    )?;
    if *plan.network() == Network::Host {
        // An explicit opt-out, on the record: the report shows it as a sandbox warning.
        ledger.record(
            &scope,
            &AuditEvent::GateDecision {
                action: loopward_core::Action::tool("contain"),
                call_id: None,
                decision: loopward_core::Decision::Warn(loopward_core::Refusal::new(
                    loopward_core::GateKind::Sandbox,
                    "network: the contained program reaches any host; its connections are neither limited nor recorded",
                    "remove `isolate = false` from [net] to send it out only through the egress proxy",
                )),
                gate: loopward_core::GateId::of(loopward_core::GateKind::Sandbox),
                mode: loopward_core::GateMode::Advisory,
                path: None,
                path_raw: None,
                source: None,
            },
        )?;
    }
    ledger.commit()?;
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&args.command[1..]);
    plan.apply_env(cmd.as_std_mut());
    if let Some(s) = &scratch {
        cmd.env("TMPDIR", s).env("HOME", s);
    }
    cmd.env("LOOPWARD_AGENT", agent.as_str());
    cmd.env(super::supervisor::SUPERVISOR_ENV, &hooks_socket);
    cmd.env(loopward_runner::cli_agent::TOKEN_ENV, &token);
    let started = match spawn_contained(cmd, &plan).await {
        Ok(s) => s,
        Err(e) => {
            let status = RunStatus::Failed {
                error: format!("not started: {e}"),
            };
            end(&ledger, &scope, status)?;
            return refuse(126, &e.to_string());
        }
    };
    let mut child = started.child;
    let hosts = plan.reach().net_of(&agent).to_vec();
    #[allow(clippy::print_stderr)]
    {
        let net = match (plan.network(), &started.proxy) {
            (Network::Host, _) => "the host's network (isolation opted out)".to_string(),
            (_, Some(l)) => format!(
                "{} through the proxy at {}",
                if hosts.is_empty() {
                    "no host".to_string()
                } else {
                    format!("only {}", hosts.join(", "))
                },
                l.local_addr().map(|a| a.to_string()).unwrap_or_default()
            ),
            _ => "none".to_string(),
        };
        eprintln!(
            "loopward contain: {} as {agent}; network: {net}; ledger {}",
            args.command[0],
            ledger.run_dir().display()
        );
    }
    let (recorder, mut records) = Recorder::channel();
    let _proxy = match started.proxy {
        Some(l) => {
            let l = tokio::net::TcpListener::from_std(l).context("serving the egress proxy")?;
            let mut policy = EgressPolicy::new(hosts);
            if let Some(g) = gateway {
                policy = policy.with_gateway(g);
            }
            let policy = Arc::new(policy);
            Some(AbortOnDrop(tokio::spawn(loopward_runner::egress::serve(
                l, policy, recorder, None,
            ))))
        }
        None => None,
    };
    let mut stop = super::ending::Stop::catch()?;
    let pid = child.id();
    let status = loop {
        tokio::select! {
            s = child.wait() => break s.context("waiting for the program")?,
            // Stop signals are passed on; killed by its recorded PID, it ends all with it.
            () = stop.kill_due(pid) => { let _ = child.start_kill(); }
            Some(r) = records.recv() => {
                let decision = r.event.is_decision();
                let done = ledger.record(&scope, &r.event).and_then(|()| if decision { ledger.commit() } else { Ok(()) });
                let _ = r.done.send(done);
            }
        }
    };
    while let Ok(r) = records.try_recv() {
        let done = ledger.record(&scope, &r.event);
        let _ = r.done.send(done);
    }
    let code = status.code().unwrap_or(128 + 9);
    let end_status = if status.success() {
        RunStatus::Completed
    } else {
        RunStatus::Failed {
            error: format!("the program exited with status {code}"),
        }
    };
    end(&ledger, &scope, end_status)?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// Removes the hook socket's folder with the session.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Ends a task (the proxy's, the hook channel's) with the session or command.
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn end(
    ledger: &Arc<loopward_runner::audit::Ledger>,
    scope: &Scope,
    status: RunStatus,
) -> Result<()> {
    ledger.record(
        scope,
        &AuditEvent::RunEnded {
            cost_micros: None,
            status,
            usage: Usage::default(),
        },
    )?;
    ledger.finish().context("closing the session's ledger")?;
    Ok(())
}

fn refuse(code: u8, why: &str) -> Result<ExitCode> {
    #[allow(clippy::print_stderr)]
    {
        eprintln!("loopward contain: not run: {why}");
    }
    Ok(ExitCode::from(code))
}
