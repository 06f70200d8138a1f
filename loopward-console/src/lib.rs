//! The loopward console (`loopward serve`): a local web app to leave running beside runs that
//! go on for hours — the runs list and each run's timeline, live as their ledgers grow; the
//! stop-gates waiting for a person, answered with Approve / Deny; one-shot overrides; and a kill
//! switch. The ledgers stay the only source of truth: every figure shown is read from them, and
//! every answer is the same sealed record the CLI writes (`loopward approve|deny`,
//! `loopward override grant`), so `--resume`, the runner and the ledger treat them alike.
//!
//! | module | what it holds |
//! |---|---|
//! | [`auth`] | the token (in the state directory), session cookie, CSRF value, `Origin` and `Host` checks |
//! | `watch` | one task following every ledger's tail and the sealed stores; pages and live streams read its snapshot |
//! | [`actions`] | approve, deny, stop, stop all, grant: the same calls as the CLI's |
//! | [`resume`] | the runs the console goes on with after an answer, tracked by PID |
//! | [`notify`] | signed webhook notices when a gate starts waiting or an agent says something |
//! | [`passphrase`] | signing in with a passphrase (its Argon2id hash in the state directory), rate-limited |
//! | [`remote`] | stop-gates waiting elsewhere (runs on Restate), listed and answered beside the local ones |
//! | [`tls`] | TLS from PEM files, for a console served beyond loopback |
//!
//! Security: bound to loopback by the binary; every request authenticated; a state-changing
//! request needs the CSRF value and its own `Origin`; the token lives in the state directory,
//! which no agent's tool or sandboxed command can read. See `docs/console.md`.
//!
//! ```
//! use loopward_console::{Console, ConsoleOptions};
//! # let dir = tempfile::tempdir().unwrap();
//! # let state = tempfile::tempdir().unwrap();
//! # std::fs::write(dir.path().join("loopward.toml"),
//! #     "[run]\nfirst = \"solo\"\n[[agent]]\nname = \"solo\"\ntools = []\n").unwrap();
//! let console = Console::open(ConsoleOptions::new(
//!     dir.path().join("loopward.toml"),
//!     Some(state.path().to_path_buf()),
//! ))
//! .unwrap();
//! // Nothing runs yet; the token sits in the state directory, outside the workspace.
//! assert!(console.snapshot().runs.is_empty());
//! assert!(console.token().file().starts_with(state.path()));
//! ```

pub mod actions;
pub mod auth;
mod error;
pub mod notify;
mod pages;
pub mod passphrase;
pub mod remote;
pub mod resume;
mod routes;
pub mod tls;
mod watch;

pub use error::ConsoleError;
pub use watch::{RunRow, Snapshot, Waiting};

use auth::Token;
use loopward::config::Config;
use loopward::state::Custody;
use notify::Notifier;
use resume::Resumer;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::watch as channel;

/// How a console is opened ([`ConsoleOptions::new`], then set what differs).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConsoleOptions {
    /// The workspace's `loopward.toml`.
    pub config: PathBuf,
    /// The base of loopward's state (`$XDG_STATE_HOME`, else `~/.local/state`), as the binary
    /// found it; the config's `[state] dir` wins.
    pub state_base: Option<PathBuf>,
    /// The `loopward` binary to resume a run with once a person's answer frees it (none: runs
    /// are resumed by someone else, `loopward run --resume`).
    pub resume_with: Option<PathBuf>,
    /// Webhooks told when a gate starts waiting.
    pub webhooks: Vec<String>,
    /// How often the ledgers and stores are looked at.
    pub tick: Duration,
    /// Replace the token (signs out every browser).
    pub fresh_token: bool,
    /// More names the console answers to in the `Host` header (`console.example:8377`), beside
    /// the address it is bound to (and, on loopback, `127.0.0.1`/`localhost`).
    pub hosts: Vec<String>,
    /// Stop-gates waiting elsewhere (`loopward serve --restate`: runs on Restate), listed and
    /// answered beside the local ones.
    pub remote: Option<Arc<dyn remote::RemoteGates>>,
    /// Set this passphrase (its hash, in `<state>/console/passphrase`) before opening.
    pub set_passphrase: Option<String>,
}

impl ConsoleOptions {
    /// A console over the workspace of `config`, state under `state_base`, no resuming, no
    /// webhooks, looking every 250 ms.
    pub fn new(config: PathBuf, state_base: Option<PathBuf>) -> Self {
        Self {
            config,
            state_base,
            resume_with: None,
            webhooks: Vec::new(),
            tick: Duration::from_millis(250),
            fresh_token: false,
            hosts: Vec::new(),
            remote: None,
            set_passphrase: None,
        }
    }
}

/// The console: its state, shared by every request. Clones share it.
#[derive(Clone)]
pub struct Console {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: Config,
    config_path: PathBuf,
    custody: Custody,
    workspace: PathBuf,
    runs_dir: PathBuf,
    token: Token,
    hosts: RwLock<Vec<String>>,
    extra_hosts: Vec<String>,
    base_url: RwLock<String>,
    secure: std::sync::atomic::AtomicBool,
    watcher: Mutex<watch::Watcher>,
    snapshot: channel::Sender<Arc<Snapshot>>,
    resumer: Option<Arc<Resumer>>,
    notifier: Notifier,
    tick: Duration,
    remote: Option<Arc<dyn remote::RemoteGates>>,
    /// The waits elsewhere, as last listed (none before the first listing), and why the last
    /// listing failed.
    remote_seen: Mutex<(Option<Vec<remote::RemoteWaiting>>, Option<String>)>,
    answered: remote::Answered,
    passphrase: passphrase::Passphrase,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("config", &self.inner.config_path)
            .finish_non_exhaustive()
    }
}

fn setup(what: &str, e: impl std::fmt::Display) -> ConsoleError {
    ConsoleError::Internal(format!("cannot open the console: {what}: {e:#}"))
}

impl Console {
    /// Loads the config, opens its state directory's custody, and makes (or reads) the token in
    /// `<state>/console/token`.
    pub fn open(opts: ConsoleOptions) -> Result<Self, ConsoleError> {
        let cfg = Config::load(&opts.config).map_err(|e| setup("the config", e))?;
        let custody = Custody::open(&cfg, &opts.config, opts.state_base.as_deref())
            .map_err(|e| setup("the state directory", e))?;
        let dir = custody.state().root().join("console");
        let token = Token::load_or_create(&dir.join("token"), opts.fresh_token)?;
        let secret = Token::load_or_create(&dir.join("webhook.secret"), false)?;
        if let Some(p) = &opts.set_passphrase {
            passphrase::Passphrase::set(&dir.join("passphrase"), p)?;
        }
        let passphrase = passphrase::Passphrase::load(&dir.join("passphrase"))?;
        let workspace = cfg.workspace_dir(&opts.config);
        let runs_dir = workspace.join(&cfg.run.runs_dir);
        let approvals = custody.approvals().map_err(|e| setup("the approvals", e))?;
        let stops = custody.stops().map_err(|e| setup("the stop requests", e))?;
        let mut watcher = watch::Watcher::new(runs_dir.clone(), approvals, stops);
        let (first, _) = watcher.tick(&watch::Remote::default());
        let (snapshot, _) = channel::channel(first);
        let resumer = opts
            .resume_with
            .map(|p| Arc::new(Resumer::new(p, opts.config.clone(), dir.join("logs"))));
        Ok(Self {
            inner: Arc::new(Inner {
                cfg,
                config_path: opts.config,
                custody,
                workspace,
                runs_dir,
                token,
                hosts: RwLock::new(Vec::new()),
                extra_hosts: opts.hosts,
                base_url: RwLock::new(String::new()),
                secure: std::sync::atomic::AtomicBool::new(false),
                watcher: Mutex::new(watcher),
                snapshot,
                resumer,
                notifier: Notifier::new(opts.webhooks, secret.secret()),
                tick: opts.tick,
                remote: opts.remote,
                remote_seen: Mutex::new((None, None)),
                answered: remote::Answered::new(dir.join("answered")),
                passphrase,
            }),
        })
    }

    /// The token (and where it is kept).
    pub fn token(&self) -> &Token {
        &self.inner.token
    }

    /// The passphrase (whether one is set, and where).
    pub fn passphrase(&self) -> &passphrase::Passphrase {
        &self.inner.passphrase
    }

    /// The runs directory followed.
    pub fn runs_dir(&self) -> &std::path::Path {
        &self.inner.runs_dir
    }

    /// The `Host`s the console answers to: the address `addr` it is bound to, on loopback also
    /// `127.0.0.1:<port>` and `localhost:<port>`, and the names of [`ConsoleOptions::hosts`]
    /// (with the port when they name none). Call it once the listener is bound.
    pub fn answer_at(&self, addr: SocketAddr) {
        self.answer_at_as(addr, false);
    }

    /// [`answer_at`](Self::answer_at), saying whether it is served over TLS (`https` links, a
    /// `Secure` cookie).
    pub fn answer_at_as(&self, addr: SocketAddr, tls: bool) {
        let port = addr.port();
        let mut hosts = vec![addr.to_string()];
        let mut named: Vec<String> = self
            .inner
            .extra_hosts
            .iter()
            .map(|h| {
                if h.rsplit_once(':')
                    .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
                {
                    h.clone()
                } else {
                    format!("{h}:{port}")
                }
            })
            .collect();
        if addr.ip().is_loopback() {
            named.extend([format!("127.0.0.1:{port}"), format!("localhost:{port}")]);
        }
        for h in named {
            if !hosts.contains(&h) {
                hosts.push(h);
            }
        }
        let scheme = if tls { "https" } else { "http" };
        let shown = if addr.ip().is_unspecified() {
            hosts.get(1).cloned().unwrap_or_else(|| addr.to_string())
        } else {
            addr.to_string()
        };
        *self.inner.hosts.write().unwrap_or_else(|p| p.into_inner()) = hosts;
        *self
            .inner
            .base_url
            .write()
            .unwrap_or_else(|p| p.into_inner()) = format!("{scheme}://{shown}");
        self.inner
            .secure
            .store(tls, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the console is served over TLS (its cookie is then `Secure`).
    pub fn is_secure(&self) -> bool {
        self.inner.secure.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The sign-in link: the console's address with the token.
    pub fn login_url(&self) -> String {
        format!(
            "{}/login?token={}",
            self.inner
                .base_url
                .read()
                .unwrap_or_else(|p| p.into_inner()),
            self.inner.token.secret()
        )
    }

    /// What the console knows now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.inner.snapshot.borrow().clone()
    }

    /// Looks at the ledgers and stores now; tells the webhooks about gates that started waiting
    /// and what agents said to the people watching.
    pub fn refresh(&self) {
        let remote = self.remote_now();
        let (snap, fresh) = self
            .inner
            .watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .tick(&remote);
        if self.inner.notifier.is_on() {
            let base = self
                .inner
                .base_url
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            for w in &fresh.waiting {
                if let Some(run) = snap.runs.iter().find(|r| r.waiting.contains(w)) {
                    self.inner.notifier.gate_waiting(&run.run, w, &base);
                }
            }
            for s in &fresh.said {
                self.inner.notifier.agent_said(s, &base);
            }
        }
        self.inner.snapshot.send_if_modified(|now| {
            let changed = now.version != snap.version;
            *now = snap;
            changed
        });
    }

    /// The app: every route, every check.
    pub fn router(&self) -> axum::Router {
        routes::router(self.clone())
    }

    /// Serves on `listener` until the process ends, following the workspace every tick.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        self.answer_at(listener.local_addr()?);
        self.follow();
        axum::serve(listener, self.router()).await
    }

    /// [`serve`](Self::serve) over TLS: only connections whose handshake finished reach the
    /// console, and its cookie is `Secure`.
    pub async fn serve_tls(
        self,
        listener: tokio::net::TcpListener,
        tls: &tls::Tls,
    ) -> std::io::Result<()> {
        self.answer_at_as(listener.local_addr()?, true);
        self.follow();
        let listener = tls::TlsListener::new(listener, tls)?;
        axum::serve(listener, self.router()).await
    }

    /// The waits elsewhere as last listed, and why the last listing failed.
    pub(crate) fn remote_seen(&self) -> (Option<Vec<remote::RemoteWaiting>>, Option<String>) {
        self.inner
            .remote_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The waits elsewhere as last listed, with who answered each from here.
    fn remote_now(&self) -> watch::Remote {
        let Some(source) = &self.inner.remote else {
            return watch::Remote::default();
        };
        let on = source.describe();
        let (seen, problem) = self.remote_seen();
        let listed = seen.is_some();
        let waiting = seen
            .iter()
            .flatten()
            .map(|w| {
                let id = w.console_id();
                let answered = self.inner.answered.get(&id).or_else(|| {
                    w.answered
                        .then(|| "elsewhere (Restate keeps the first verdict)".to_string())
                });
                let row = Waiting {
                    id,
                    gate: w.gate.clone(),
                    agent: w.agent.clone(),
                    summary: w.summary.clone(),
                    action: w.action.clone(),
                    requested_at: String::new(),
                    on: Some(on.clone()),
                    answered,
                };
                (w.run.clone(), row)
            })
            .collect();
        watch::Remote {
            waiting,
            problem,
            listed,
        }
    }

    /// Lists the waits elsewhere now (a source that cannot be reached within 10 s keeps the
    /// last list, and the runs page says why).
    pub async fn refresh_remote(&self) {
        let Some(source) = self.inner.remote.clone() else {
            return;
        };
        let listed = tokio::time::timeout(Duration::from_secs(10), source.waiting()).await;
        let mut seen = self
            .inner
            .remote_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        seen.1 = match listed {
            Ok(Ok(list)) => {
                seen.0 = Some(list);
                None
            }
            Ok(Err(e)) => Some(format!("{}: {e}", source.describe())),
            Err(_) => Some(format!("{}: no answer within 10 s", source.describe())),
        };
    }

    /// Looks at the workspace every tick, in the background (and lists the waits elsewhere
    /// every second).
    fn follow(&self) {
        if self.inner.remote.is_some() {
            let lister = self.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(Duration::from_secs(1));
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    every.tick().await;
                    lister.refresh_remote().await;
                }
            });
        }
        let follower = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(follower.inner.tick);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let c = follower.clone();
                if tokio::task::spawn_blocking(move || c.refresh())
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
    }
}
