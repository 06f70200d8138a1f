//! `loopward serve`: the console (loopward-console) on this machine's loopback — live runs,
//! waiting stop-gates answered from the browser, overrides, a kill switch.

use anyhow::{bail, Context, Result};
use loopward::config::CONFIG_FILE;
use loopward_console::{Console, ConsoleOptions};
use loopward_term::render::{Printer, Tone};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

/// Serve the console: live runs, approvals, overrides and a kill switch in a browser.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward serve
  loopward serve --port 8377 --notify http://127.0.0.1:9000/loopward

Prints a sign-in link carrying the console's token (kept in loopward's state directory,
<state>/console/token, outside every sandbox). Open it once; the browser keeps a session cookie.
After an Approve or Deny frees a paused run, the console resumes it (`loopward run --resume`)
unless --no-resume. A non-loopback --bind needs --tls-cert and --tls-key (and --host for the
name you open it at):
  loopward serve --bind 0.0.0.0 --tls-cert cert.pem --tls-key key.pem --host box.lan
A passphrase (read from standard input, only its hash kept) signs in beside the link:
  read -rs P && printf '%s\\n' \"$P\" | loopward serve --set-passphrase
With --restate, runs executing on Restate that wait at a stop-gate are listed beside the local
ones and answered from the same page (the verdict goes to Restate, as `loopward approve
--restate` gives it):
  loopward serve --restate http://127.0.0.1:8080
See docs/console.md.")]
pub struct Args {
    /// The config file.
    #[arg(long, default_value = CONFIG_FILE)]
    pub config: PathBuf,
    /// The address to listen on (beyond loopback only with --tls-cert and --tls-key).
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub bind: IpAddr,
    /// The port (0: any free port).
    #[arg(long, default_value_t = 8377)]
    pub port: u16,
    /// A webhook told (a signed JSON POST) when a stop-gate starts waiting; may be repeated.
    #[arg(long = "notify", value_name = "URL")]
    pub notify: Vec<String>,
    /// Do not resume runs after a person's answer (someone else runs `loopward run --resume`).
    #[arg(long)]
    pub no_resume: bool,
    /// Make a new token, signing out every browser that held the old one.
    #[arg(long)]
    pub new_token: bool,
    /// Serve over TLS with this PEM certificate chain (with --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A name the console is opened at (`box.lan`, `box.lan:8377`), accepted in the `Host`
    /// header; may be repeated.
    #[arg(long = "host", value_name = "NAME")]
    pub hosts: Vec<String>,
    /// Set the sign-in passphrase, read from standard input (one line, at least 12 characters):
    /// only its Argon2id hash is kept, in `<state>/console/passphrase`; /login then takes it
    /// beside the token's link.
    #[arg(long)]
    pub set_passphrase: bool,
    /// Also list and answer the stop-gates of runs on Restate: its ingress (http://HOST:8080).
    #[arg(long, value_name = "URL")]
    pub restate: Option<String>,
    /// The Restate admin API, where the waits are read (default: the ingress's host, port 9070).
    #[arg(long, value_name = "URL", requires = "restate")]
    pub restate_admin: Option<String>,
}

#[cfg(feature = "restate")]
fn restate(
    args: &Args,
) -> Result<Option<std::sync::Arc<dyn loopward_console::remote::RemoteGates>>> {
    let Some(ingress) = &args.restate else {
        return Ok(None);
    };
    let server = super::restate::Restate::new(ingress, args.restate_admin.as_deref())?;
    Ok(Some(std::sync::Arc::new(server)))
}

#[cfg(not(feature = "restate"))]
fn restate(
    args: &Args,
) -> Result<Option<std::sync::Arc<dyn loopward_console::remote::RemoteGates>>> {
    if args.restate.is_some() {
        bail!("this loopward was built without Restate (the `restate` feature of loopward-cli); build it with default features to follow runs on Restate");
    }
    Ok(None)
}

pub(super) async fn run(args: &Args) -> Result<ExitCode> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(loopward_console::tls::Tls::from_pem_files(cert, key)?),
        _ => None,
    };
    if !args.bind.is_loopback() && tls.is_none() {
        bail!(
            "--bind {} is not a loopback address, and the console is served beyond this machine only over TLS: give --tls-cert and --tls-key (every request also needs the console's token). Or keep the default 127.0.0.1 and forward the port over SSH",
            args.bind
        );
    }
    for hook in &args.notify {
        if !(hook.starts_with("http://") || hook.starts_with("https://")) {
            bail!("--notify {hook:?} is not an http(s) URL");
        }
    }
    let mut opts = ConsoleOptions::new(args.config.clone(), super::state::base());
    opts.webhooks.clone_from(&args.notify);
    opts.fresh_token = args.new_token;
    opts.hosts.clone_from(&args.hosts);
    opts.remote = restate(args)?;
    if args.set_passphrase {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("cannot read the passphrase from standard input")?;
        opts.set_passphrase = Some(line);
    }
    if !args.no_resume {
        opts.resume_with =
            Some(std::env::current_exe().context("cannot find this binary to resume runs with")?);
    }
    let console = Console::open(opts)?;
    let addr = SocketAddr::new(args.bind, args.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}; pick another --port"))?;
    console.answer_at_as(listener.local_addr()?, tls.is_some());
    let mut out = Printer::stdout();
    out.line(Tone::Ok, format!("console: {}", console.login_url()));
    out.line(
        Tone::Dim,
        format!(
            "following {}; token in {}",
            console.runs_dir().display(),
            console.token().file().display()
        ),
    );
    if console.passphrase().is_set() {
        out.line(
            Tone::Dim,
            format!(
                "or sign in with the passphrase (its hash in {}) at /login",
                console.passphrase().file().display()
            ),
        );
    }
    if let Some(ingress) = &args.restate {
        out.line(
            Tone::Dim,
            format!("and the stop-gates of runs on Restate at {ingress}"),
        );
    }
    match tls {
        Some(tls) => console.serve_tls(listener, &tls).await?,
        None => console.serve(listener).await?,
    }
    Ok(ExitCode::SUCCESS)
}
