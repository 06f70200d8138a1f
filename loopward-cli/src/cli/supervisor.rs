//! The channel between a contained program's hooks and `loopward contain`, its supervisor.
//!
//! Inside the sandbox, `loopward hook claude-code|codex|gemini` cannot read the ledger key or
//! the session state (loopward's state is unreadable there), so it judges nothing itself: it
//! sends the event over the Unix socket named by [`SUPERVISOR_ENV`] and prints the answer it
//! gets. The supervisor, outside, judges the event with its own config and agent (never the
//! client's flags) and records it in its ledgers. A socket that cannot be reached blocks the
//! call.
//!
//! On the wire: the host's name (`claude-code`, `codex`, `gemini`) on the first line, then the
//! event as the host wrote it; back comes one JSON object (`stdout`, `stderr`, `exit_code`).

use anyhow::{bail, Context, Result};
use loopward_hooks::{HookAnswer, HookContext};
use loopward_runner::gates::Host;
use loopward_runner::secrets::Masker;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The variable naming the supervisor's hook socket in a contained program's environment.
pub(super) const SUPERVISOR_ENV: &str = "LOOPWARD_SUPERVISOR";

/// How long a hook waits for the supervisor (Claude Code's own hook timeout is longer).
const WAIT: Duration = Duration::from_secs(50);

/// The hosts whose hooks relay, by the name of their `loopward hook` subcommand.
const HOSTS: [(&str, Host); 3] = [
    ("claude-code", Host::ClaudeCode),
    ("codex", Host::Codex),
    ("gemini", Host::GeminiCli),
];

fn host_named(name: &str) -> Option<Host> {
    HOSTS.iter().find(|(n, _)| *n == name).map(|(_, h)| *h)
}

fn name_of(host: Host) -> &'static str {
    HOSTS
        .iter()
        .find(|(_, h)| *h == host)
        .map_or("claude-code", |(n, _)| n)
}

/// `loopward hook <host> …` inside `loopward contain`: relays the event on stdin to the
/// supervisor and prints its answer, before the command line is parsed or anything else is
/// built (the relay is all this process does, and the host waits on it for every tool call).
/// `None` when this process is not such a hook: no supervisor in `env`, another command, or a
/// request for help, which the full parser answers.
pub fn relay(args: &[OsString], env: impl Fn(&str) -> Option<OsString>) -> Option<ExitCode> {
    let host = match args {
        [_, hook, host, rest @ ..] if hook == "hook" => {
            let asks_help = rest
                .iter()
                .any(|a| ["-h", "--help", "-V", "--version"].contains(&a.to_str().unwrap_or("")));
            host_named(host.to_str()?).filter(|_| !asks_help)?
        }
        _ => return None,
    };
    let socket = env(SUPERVISOR_ENV)?;
    let answer = read_event()
        .and_then(|input| forward(Path::new(&socket), host, &input))
        .unwrap_or_else(|e| HookAnswer::fail_closed(crate::error_text(&e)));
    Some(print(&answer))
}

/// Prints a hook's answer: exit 2 (block) unless it allowed and was written whole.
pub(super) fn print(answer: &HookAnswer) -> ExitCode {
    let printed = std::io::stdout()
        .write_all(answer.stdout.as_bytes())
        .and_then(|()| std::io::stdout().flush());
    let _ = std::io::stderr().write_all(answer.stderr.as_bytes());
    match (printed, answer.exit_code) {
        (Ok(()), 0) => ExitCode::SUCCESS,
        _ => ExitCode::from(2),
    }
}

/// The hook event on stdin, at most the size a host sends.
pub(super) fn read_event() -> Result<String> {
    let mut input = String::new();
    std::io::stdin()
        .take(loopward_hooks::claude_code::MAX_INPUT_BYTES as u64 + 1)
        .read_to_string(&mut input)
        .context("reading the hook event on stdin")?;
    Ok(input)
}

/// The hook's side: sends `host`'s event `input` to the supervisor at `socket` and returns its
/// answer.
pub(super) fn forward(socket: &Path, host: Host, input: &str) -> Result<HookAnswer> {
    let mut s = std::os::unix::net::UnixStream::connect(socket)
        .with_context(|| format!("reaching loopward's supervisor at {}", socket.display()))?;
    s.set_read_timeout(Some(WAIT))?;
    s.set_write_timeout(Some(WAIT))?;
    s.write_all(format!("{}\n{input}", name_of(host)).as_bytes())?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)
        .context("reading the supervisor's answer")?;
    let v: serde_json::Value =
        serde_json::from_str(&reply).context("the supervisor's answer is not JSON")?;
    Ok(HookAnswer {
        stdout: v["stdout"].as_str().unwrap_or_default().to_string(),
        stderr: v["stderr"].as_str().unwrap_or_default().to_string(),
        exit_code: v["exit_code"].as_i64().map_or(2, |c| c as i32),
    })
}

/// A host's judging context, as built from the config's bytes it was built with.
struct Built {
    host: Host,
    config: Vec<u8>,
    context: Arc<(HookContext, Masker)>,
}

/// The supervisor's judge: one context per host, built at its host's first call and again only
/// when the config's bytes change (an edited policy applies from the next call). The ledger
/// key and the secrets are the ones of the supervisor's start, as its proxy's are.
struct Judge {
    config: PathBuf,
    agent: String,
    built: Mutex<Vec<Built>>,
}

impl Judge {
    fn context(&self, host: Host) -> Result<Arc<(HookContext, Masker)>> {
        let bytes = std::fs::read(&self.config)
            .with_context(|| format!("reading {}", self.config.display()))?;
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = built.iter().find(|b| b.host == host && b.config == bytes) {
            return Ok(Arc::clone(&b.context));
        }
        let context = Arc::new(super::hook::context(
            &self.config,
            &self.agent,
            false,
            host,
        )?);
        built.retain(|b| b.host != host);
        built.push(Built {
            host,
            config: bytes,
            context: Arc::clone(&context),
        });
        Ok(context)
    }

    /// Judges one message off the wire: the host's name, a newline, the event.
    fn answer(&self, message: &str) -> Result<HookAnswer> {
        let Some((name, event)) = message.split_once('\n') else {
            bail!("the hook's message names no host");
        };
        let Some(host) = host_named(name) else {
            bail!("the hook's message names an unknown host {name:?}");
        };
        let context = self.context(host)?;
        let (ctx, masker) = &*context;
        Ok(super::hook::judge_with(ctx, masker, event))
    }
}

/// The supervisor's side: answers every hook event sent to `listener` with `config`'s policy,
/// `agent` as the main agent, until the returned future is dropped.
pub(super) async fn serve(listener: tokio::net::UnixListener, config: PathBuf, agent: String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let judge = Arc::new(Judge {
        config,
        agent,
        built: Mutex::default(),
    });
    while let Ok((mut stream, _)) = listener.accept().await {
        let judge = Arc::clone(&judge);
        tokio::spawn(async move {
            let mut input = Vec::new();
            // The host's name and its newline besides the event.
            let limit = loopward_hooks::claude_code::MAX_INPUT_BYTES as u64 + 16;
            let read = (&mut stream).take(limit).read_to_end(&mut input).await;
            let answer = match (read, String::from_utf8(input)) {
                (Ok(_), Ok(input)) => tokio::task::spawn_blocking(move || {
                    judge
                        .answer(&input)
                        .unwrap_or_else(|e| HookAnswer::fail_closed(crate::error_text(&e)))
                })
                .await
                .unwrap_or_else(|e| HookAnswer::fail_closed(format!("the supervisor failed: {e}"))),
                _ => HookAnswer::fail_closed("the hook event could not be read as UTF-8"),
            };
            let reply = serde_json::json!({
                "stdout": answer.stdout, "stderr": answer.stderr, "exit_code": answer.exit_code,
            });
            let _ = stream.write_all(reply.to_string().as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn only_a_hook_of_a_known_host_under_a_supervisor_relays() {
        let none = |_: &str| None;
        let some = |_: &str| Some(OsString::from("/nonexistent/hooks.sock"));
        // Not a hook, a hook asking for help, a hook of no host, no supervisor: the parser's.
        assert!(relay(&args(&["loopward", "run"]), some).is_none());
        assert!(relay(&args(&["loopward", "hook", "claude-code", "--help"]), some).is_none());
        assert!(relay(&args(&["loopward", "hook", "install"]), some).is_none());
        assert!(relay(&args(&["loopward", "hook", "codex"]), none).is_none());
    }

    #[test]
    fn the_wire_names_the_host_and_an_unknown_one_is_refused() {
        for (name, host) in HOSTS {
            assert_eq!(host_named(name_of(host)), Some(host));
            assert_eq!(name_of(host_named(name).unwrap()), name);
        }
        let judge = Judge {
            config: PathBuf::from("/nonexistent/loopward.toml"),
            agent: "builder".into(),
            built: Mutex::default(),
        };
        let e = judge.answer("cursor\n{}").unwrap_err().to_string();
        assert!(e.contains("unknown host \"cursor\""), "{e}");
        let e = judge.answer("{}").unwrap_err().to_string();
        assert!(e.contains("names no host"), "{e}");
    }
}
