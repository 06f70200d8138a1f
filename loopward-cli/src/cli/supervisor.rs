//! The channel between a contained program's hooks and `loopward contain`, its supervisor.
//!
//! Inside the sandbox, `loopward hook claude-code|codex|gemini` cannot read the ledger key or
//! the session state (loopward's state is unreadable there), so it judges nothing itself: it
//! sends the event over the Unix socket named by [`SUPERVISOR_ENV`] and prints the answer it
//! gets. The supervisor, outside, judges the event with its own config and agent (never the
//! client's flags) and records it in its ledgers. A socket that cannot be reached blocks the
//! call.
//!
//! On the wire: the host's name (`claude-code`, `codex`, `gemini`) and the supervisor's token
//! ([`TOKEN_ENV`]: given to the program, never to a command its hook wraps, whose environment
//! is the sandbox's own) on the first line, then the event as the host wrote it; back comes one
//! JSON object (`stdout`, `stderr`, `exit_code`). A connection without the token is refused: a
//! sandboxed command that finds the socket cannot pass events of its own off as its host's.

use anyhow::{bail, Context, Result};
use loopward_hooks::{HookAnswer, HookContext};
use loopward_runner::cli_agent::{relay_event, sent_token, token_matches, TOKEN_ENV};
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

/// The hosts whose hooks relay, by the name of their `loopward hook` subcommand.
const HOSTS: [(&str, Host); 3] = [
    ("claude-code", Host::ClaudeCode),
    ("codex", Host::Codex),
    ("gemini", Host::GeminiCli),
];

fn host_named(name: &str) -> Option<Host> {
    HOSTS.iter().find(|(n, _)| *n == name).map(|(_, h)| *h)
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
    let token = env(TOKEN_ENV).and_then(|t| t.into_string().ok());
    let answer = read_event()
        .and_then(|input| forward(Path::new(&socket), token.as_deref(), host, &input))
        .unwrap_or_else(|e| HookAnswer::block(crate::error_text(&e)));
    Some(answer.print())
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

/// The hook's side: sends `host`'s event `input` with the supervisor's `token` to the
/// supervisor at `socket` and returns its answer (the runner's client, as a loop's hook uses).
pub(super) fn forward(
    socket: &Path,
    token: Option<&str>,
    host: Host,
    input: &str,
) -> Result<HookAnswer> {
    let reply = relay_event(socket, token, host, input).map_err(anyhow::Error::msg)?;
    Ok(HookAnswer {
        stdout: reply.stdout,
        stderr: reply.stderr,
        exit_code: reply.exit_code,
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
    /// What a connection must send with its host's name.
    token: String,
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
        let Some((first, event)) = message.split_once('\n') else {
            bail!("the hook's message names no host");
        };
        let (name, sent) = sent_token(first);
        if !token_matches(&self.token, sent) {
            bail!("this supervisor answers its program's hooks only (they hold its token, {TOKEN_ENV}); a command the hook wrapped has none");
        }
        let Some(host) = host_named(name) else {
            bail!("the hook's message names an unknown host {name:?}");
        };
        let context = self.context(host)?;
        let (ctx, masker) = &*context;
        Ok(super::hook::judge_with(ctx, masker, event))
    }
}

/// How long the supervisor waits for a connected hook's whole event: the relay writes it at
/// once, so a connection that stalls is not a hook (it is answered with a block and dropped).
const EVENT_WAIT: Duration = Duration::from_secs(2);

/// The supervisor's side, on a thread of its own: answers every hook event sent to `listener`
/// with `token` with `config`'s policy, `agent` as the main agent, until the returned guard is
/// dropped.
///
/// Each event is answered inline, one at a time: a judgement holds its session's lock anyway,
/// and a hook waits on its answer for every tool call, so no hop between threads is added to
/// it (an async accept handing to a blocking pool cost three wake-ups a call).
pub(super) fn serve(
    listener: std::os::unix::net::UnixListener,
    config: PathBuf,
    agent: String,
    token: String,
) -> Result<Serving> {
    let socket = listener
        .local_addr()?
        .as_pathname()
        .map(Path::to_path_buf)
        .context("the supervisor's socket has no path")?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let judge = Judge {
        config,
        agent,
        token,
        built: Mutex::default(),
    };
    let stopped = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("loopward-supervisor".into())
        .spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    // A judgement that panics fails its own call (the hook reads no answer and
                    // blocks), not every later one.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        answer_one(&judge, stream);
                    }));
                }
            }
        })
        .context("starting the supervisor's thread")?;
    Ok(Serving {
        socket,
        stop,
        thread: Some(thread),
    })
}

/// Reads one hook event from `stream`, judges it and writes the answer back.
fn answer_one(judge: &Judge, mut stream: std::os::unix::net::UnixStream) {
    let _ = stream.set_read_timeout(Some(EVENT_WAIT));
    let _ = stream.set_write_timeout(Some(EVENT_WAIT));
    let mut input = Vec::new();
    // The host's name and its newline besides the event.
    let limit = loopward_hooks::claude_code::MAX_INPUT_BYTES as u64 + 16;
    let read = (&mut stream).take(limit).read_to_end(&mut input);
    let answer = match (read, String::from_utf8(input)) {
        (Ok(_), Ok(input)) => judge
            .answer(&input)
            .unwrap_or_else(|e| HookAnswer::block(crate::error_text(&e))),
        (Err(e), _) => HookAnswer::block(format!("the hook event could not be read: {e}")),
        (_, Err(_)) => HookAnswer::block("the hook event could not be read as UTF-8"),
    };
    let reply = serde_json::json!({
        "stdout": answer.stdout, "stderr": answer.stderr, "exit_code": answer.exit_code,
    });
    let _ = stream.write_all(reply.to_string().as_bytes());
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// The supervisor's thread while it serves; dropping it stops the thread and waits for it
/// (an answer being written is finished first).
pub(super) struct Serving {
    socket: PathBuf,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // A connection of our own wakes the thread's `accept`; it sees the stop and ends.
        if std::os::unix::net::UnixStream::connect(&self.socket).is_ok() {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
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
    fn the_thread_answers_closed_on_a_config_it_cannot_read_and_stops_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("hooks.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let serving = serve(
            listener,
            dir.path().join("missing.toml"),
            "builder".into(),
            "t0k".into(),
        )
        .unwrap();
        // Every host's relay names it as the supervisor reads it (then judged: the config).
        for (_, host) in HOSTS {
            let answer = forward(&socket, Some("t0k"), host, "{}").unwrap();
            assert_eq!(answer.exit_code, 2, "{answer:?}");
            assert!(answer.stderr.contains("missing.toml"), "{answer:?}");
        }
        // Without the token, or with another, nothing is judged (the config is not even read).
        for token in [None, Some("t0K")] {
            let answer = forward(&socket, token, Host::ClaudeCode, "{}").unwrap();
            assert_eq!(answer.exit_code, 2, "{answer:?}");
            assert!(answer.stderr.contains(TOKEN_ENV), "{answer:?}");
            assert!(!answer.stderr.contains("missing.toml"), "{answer:?}");
        }
        // A connection that sends nothing is answered with a block once its wait is over.
        let mut idle = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        let mut reply = String::new();
        idle.read_to_string(&mut reply).unwrap();
        assert!(reply.contains("\"exit_code\":2"), "{reply}");
        drop(serving);
        assert!(
            forward(&socket, Some("t0k"), Host::ClaudeCode, "{}").is_err(),
            "nobody answers once the supervisor stopped"
        );
    }

    #[test]
    fn the_wire_names_the_host_and_an_unknown_one_is_refused() {
        for (name, host) in HOSTS {
            assert_eq!(host_named(name), Some(host));
        }
        let judge = Judge {
            config: PathBuf::from("/nonexistent/loopward.toml"),
            agent: "builder".into(),
            token: "t".into(),
            built: Mutex::default(),
        };
        let e = judge.answer("cursor t\n{}").unwrap_err().to_string();
        assert!(e.contains("unknown host \"cursor\""), "{e}");
        let e = judge.answer("{}").unwrap_err().to_string();
        assert!(e.contains("names no host"), "{e}");
    }
}
