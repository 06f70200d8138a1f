//! A session's hook, answered by the loop: each tool call inside a CLI session judged by the
//! loop's [`HookJudge`] and recorded in the run's one ledger, under the session's turn.
//!
//! The client runs `loopward hook <host>` for every hook event, as installed in the session's
//! own config. That process judges nothing: it finds the session's hook socket in
//! [`HOOK_ENV`] (made for that session alone, in loopward's state directory, removed when the
//! session ends), sends the host's name on the first line and the event after it, and prints
//! the answer it gets back (one JSON object: `stdout`, `stderr`, `exit_code`) — the wire of
//! `loopward contain`'s supervisor. The first line also carries the session's token
//! ([`TOKEN_ENV`], which the client's hooks inherit and no command the hook wraps in the
//! sandbox is given): a sandboxed command that finds the socket's path cannot pass its own
//! events off as the client's. Here the loop hands the event to its judge (the CLI's: the
//! same engine `loopward hook` runs, with the session's lock), records what the judge decided
//! (a `layer_decision` `hook` saying how many records follow, then those records) and makes it
//! durable, and only then answers. Served in the session's own task, beside the stream reader,
//! so the records never fall between a model call's two records.
//!
//! The egress proxy of a command the hook wrapped (`loopward sandbox exec`) sends its decisions
//! the same way (first line [`EGRESS_WIRE`], then an [`EgressRecord`]): recorded under the turn
//! before the proxy acts on them.
//!
//! Fail closed: an event that cannot be read, of another host or another session, a judge
//! that errs or runs past [`JUDGE_WAIT`], and records the ledger cannot take all answer with a
//! block; the last also ends the turn. A hook that cannot reach the socket blocks its call
//! itself (the relay's side, [`relay_event`]).

use super::agent::{CliAgentBuilder, Inner};
use super::socket::Answer;
use crate::context::TurnContext;
use crate::gates::Host;
use crate::model::ModelError;
use crate::turn::TurnError;
use loopward_core::{AgentId, AuditEvent, LayerId, LayerVerdict};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The variable naming a session's hook socket in its client's environment (the one
/// `loopward contain` sets for its supervisor: the hook relays the same way to either).
pub const HOOK_ENV: &str = "LOOPWARD_SUPERVISOR";

/// The variable holding the token a hook sends with its host's name: a secret of the socket's
/// own, given to the client and not to the commands its hook wraps (their environment is the
/// sandbox's own), so only the client's hooks (and `loopward sandbox exec`'s proxy, started
/// by the client) are answered.
pub const TOKEN_ENV: &str = "LOOPWARD_SUPERVISOR_TOKEN";

/// A fresh socket token: 32 random bytes, in hex.
pub fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(hex::encode(bytes))
}

/// The wire's first line: `name`, then the token when there is one.
///
/// ```
/// use loopward_runner::cli_agent::{first_line, sent_token};
/// assert_eq!(first_line("codex", Some("t0k")), "codex t0k");
/// assert_eq!(sent_token("codex t0k"), ("codex", Some("t0k")));
/// assert_eq!(sent_token("codex"), ("codex", None));
/// ```
pub fn first_line(name: &str, token: Option<&str>) -> String {
    match token {
        Some(t) => format!("{name} {t}"),
        None => name.to_string(),
    }
}

/// The name and the token a first line carries.
pub fn sent_token(line: &str) -> (&str, Option<&str>) {
    match line.split_once(' ') {
        Some((name, token)) => (name, Some(token)),
        None => (line, None),
    }
}

/// Whether `sent` is `token`, compared in time that does not depend on where they differ.
///
/// ```
/// use loopward_runner::cli_agent::token_matches;
/// assert!(token_matches("abc", Some("abc")));
/// assert!(!token_matches("abc", Some("abd")) && !token_matches("abc", None));
/// ```
pub fn token_matches(token: &str, sent: Option<&str>) -> bool {
    let Some(sent) = sent else { return false };
    sent.len() == token.len()
        && sent
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |d, (a, b)| d | (a ^ b))
            == 0
}

/// How long one judgement may take before the call is blocked (inside the hook's own wait on
/// the socket, [`RELAY_WAIT`], and the client's hook timeout).
pub const JUDGE_WAIT: Duration = Duration::from_secs(45);

/// How long a hook waits on the socket for its answer (past [`JUDGE_WAIT`], so a slow judgement
/// is answered with the loop's block; within the client's own hook timeout).
pub const RELAY_WAIT: Duration = Duration::from_secs(50);

/// The hook's end of the wire: sends `host`'s `event`, with the socket's `token`, to the socket
/// at `socket` (the path in [`HOOK_ENV`]) and returns the answer to print. Prints nothing: the
/// hook prints the reply and exits with its status, and blocks the call with the error's text
/// when there is no answer ([`HookReply::block`]).
///
/// ```
/// use loopward_runner::cli_agent::relay_event;
/// use loopward_runner::gates::Host;
/// let e = relay_event("/nonexistent/hook.sock".as_ref(), None, Host::ClaudeCode, "{}").unwrap_err();
/// assert!(e.contains("/nonexistent/hook.sock"), "{e}");
/// ```
pub fn relay_event(
    socket: &Path,
    token: Option<&str>,
    host: Host,
    event: &str,
) -> Result<HookReply, String> {
    use std::io::{Read, Write};
    let unreachable = |e: std::io::Error| {
        format!(
            "the hook cannot reach loopward at {} ({e}): the loop that started this session (or `loopward contain`'s supervisor) is gone, or this process was not started by it",
            socket.display()
        )
    };
    let mut s = std::os::unix::net::UnixStream::connect(socket).map_err(unreachable)?;
    s.set_read_timeout(Some(RELAY_WAIT))
        .and_then(|()| s.set_write_timeout(Some(RELAY_WAIT)))
        .map_err(unreachable)?;
    s.write_all(format!("{}\n{event}", first_line(wire_name(host), token)).as_bytes())
        .and_then(|()| s.shutdown(std::net::Shutdown::Write))
        .map_err(unreachable)?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).map_err(|e| {
        format!(
            "loopward at {} gave no answer within {}s ({e})",
            socket.display(),
            RELAY_WAIT.as_secs()
        )
    })?;
    serde_json::from_str(&answer).map_err(|e| {
        format!(
            "loopward's answer at {} is not a hook reply ({e}): {:?}",
            socket.display(),
            answer.chars().take(200).collect::<String>()
        )
    })
}

/// How long a connected hook may take to send its whole event (it writes it at once).
const EVENT_WAIT: Duration = Duration::from_secs(2);

/// The largest event read (Claude Code's hook input limit, with room for the host's name).
const MAX_EVENT_BYTES: u64 = 8 * 1024 * 1024;

/// The exit status a hook blocks with: the host shows its stderr to the model.
pub const EXIT_BLOCK: i32 = 2;

/// What the hook prints and how it exits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookReply {
    /// Printed on stdout (a JSON answer, or nothing).
    pub stdout: String,
    /// Printed on stderr (the reason, when it blocks).
    pub stderr: String,
    /// The exit status: 0, or [`EXIT_BLOCK`].
    pub exit_code: i32,
}

impl HookReply {
    /// A block: nothing on stdout, the reason on stderr, exit status 2.
    ///
    /// ```
    /// use loopward_runner::cli_agent::HookReply;
    /// let r = HookReply::block("the judge is gone");
    /// assert_eq!((r.exit_code, r.stdout.as_str()), (2, ""));
    /// assert!(r.stderr.contains("the judge is gone") && r.stderr.contains("blocked"));
    /// ```
    pub fn block(reason: impl std::fmt::Display) -> Self {
        Self {
            stdout: String::new(),
            stderr: format!("loopward: {reason}\nThe tool call is blocked until this is fixed (loopward fails closed).\n"),
            exit_code: EXIT_BLOCK,
        }
    }

    /// Writes the answer as a hook command's process does — stdout, stderr — and gives its exit
    /// status: 2 (block) unless the answer allows and stdout was written whole (a half-written
    /// answer must not read as an allow).
    pub fn print(&self) -> std::process::ExitCode {
        use std::io::Write;
        let printed = std::io::stdout()
            .write_all(self.stdout.as_bytes())
            .and_then(|()| std::io::stdout().flush());
        drop(std::io::stderr().write_all(self.stderr.as_bytes()));
        match (printed, self.exit_code) {
            (Ok(()), 0) => std::process::ExitCode::SUCCESS,
            _ => std::process::ExitCode::from(EXIT_BLOCK as u8),
        }
    }
}

/// One hook event of a session, as the judge is asked it.
#[derive(Clone, Copy, Debug)]
pub struct HookEvent<'a> {
    /// The host whose hook sent it.
    pub host: Host,
    /// The event, as the host wrote it.
    pub event: &'a str,
    /// The loop's id of the session (its `LOOPWARD_SESSION`): its prompts are the loop's.
    pub session: &'a str,
    /// Whether the session is served loopward's `handoff` (what a refusal names).
    pub handoff: bool,
}

/// What the judge decided: the hook's answer, and the decision's records for the run's ledger.
#[derive(Clone, Debug, PartialEq)]
pub struct Judged {
    /// The answer the hook prints.
    pub reply: HookReply,
    /// The records, in order, each with the agent that acted (a subagent by its name; `None`:
    /// the session's own agent). No `run_started` or `turn_started`: the turn is the session's.
    pub records: Vec<(Option<AgentId>, AuditEvent)>,
}

/// Judges a session's hook events: the CLI injects the hook engine (`loopward_hooks`), which
/// the runner does not depend on. Called off the async runtime (it may wait on the session's
/// lock or hash the workspace); an `Err` blocks the call with its text. Closures are judges.
pub trait HookJudge: Send + Sync {
    /// Judges one event.
    fn judge(&self, event: &HookEvent<'_>) -> Result<Judged, String>;
}

impl<F> HookJudge for F
where
    F: Fn(&HookEvent<'_>) -> Result<Judged, String> + Send + Sync,
{
    fn judge(&self, event: &HookEvent<'_>) -> Result<Judged, String> {
        self(event)
    }
}

/// The first line of an egress record sent to a session's socket: a command the session's
/// hook wrapped (`loopward sandbox exec`) asked its proxy for a connection.
pub const EGRESS_WIRE: &str = "egress";

/// An egress record as `loopward sandbox exec` sends it after [`EGRESS_WIRE`]: the wrapped
/// command's agent and the proxy's `egress_decided` or `egress_closed`. The answer's exit status
/// 0 says it is recorded (the proxy acts on no decision it was not told is).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressRecord {
    /// The agent whose command asked.
    pub agent: AgentId,
    /// What the proxy decided, or how much went through.
    pub event: AuditEvent,
}

/// The name a host's hook sends on the wire's first line (its `loopward hook` subcommand).
pub(super) fn wire_name(host: Host) -> &'static str {
    match host {
        Host::Codex => "codex",
        Host::GeminiCli => "gemini",
        _ => "claude-code",
    }
}

impl CliAgentBuilder {
    /// Answers each session's hook over a socket of the session's own, judged by `judge`, and
    /// records every decision in the run's ledger under the session's turn (instead of the
    /// hook keeping a ledger of its own, linked by [`ledgers`](Self::ledgers)).
    pub fn hook_judge(mut self, judge: Arc<dyn HookJudge>) -> Self {
        self.inner.hook_judge = Some(judge);
        self
    }
}

/// A session's hook socket: removed when the session is over.
pub(super) struct HookSocket {
    listener: tokio::net::UnixListener,
    socket: PathBuf,
    judge: Arc<dyn HookJudge>,
    host: Host,
    /// The loop's session id; the event's own `session_id` must be it, where the client takes
    /// it on its command line (Claude Code, Gemini CLI).
    session: String,
    /// What a connection must send with its host's name ([`TOKEN_ENV`]).
    token: String,
    checks_session: bool,
    handoff: bool,
    /// Events judged: a session that ran with none was not governed.
    judged: AtomicU32,
    /// One judgement at a time, recorded in the order judged.
    order: tokio::sync::Mutex<()>,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for HookSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl HookSocket {
    /// The client's environment entries naming the socket and its token.
    pub(super) fn env(&self) -> [(std::ffi::OsString, std::ffi::OsString); 2] {
        [
            (HOOK_ENV.into(), self.socket.as_os_str().to_owned()),
            (TOKEN_ENV.into(), self.token.clone().into()),
        ]
    }

    /// Events judged so far.
    pub(super) fn judged(&self) -> u32 {
        self.judged.load(Ordering::Relaxed)
    }
}

impl Inner {
    /// Opens `session`'s hook socket when the agent has a judge.
    pub(super) fn open_hooks(&self, session: &str) -> Result<Option<HookSocket>, TurnError> {
        let Some(judge) = &self.hook_judge else {
            return Ok(None);
        };
        let name = format!("hook-{}.sock", &session[..session.len().min(13)]);
        let (listener, socket, dir) = super::socket::bind(&self.scratch, &name, "hook")
            .map_err(|e| TurnError::Model(ModelError::Local(e)))?;
        let token = new_token().map_err(|e| {
            TurnError::Model(ModelError::Local(format!(
                "cannot make the session's hook token: {e}"
            )))
        })?;
        let handoff = self
            .loop_tools
            .as_ref()
            .is_some_and(|t| t.names().iter().any(|n| n == "handoff"));
        Ok(Some(HookSocket {
            listener,
            socket,
            judge: Arc::clone(judge),
            host: self.host.host(),
            session: session.to_string(),
            token,
            checks_session: self.host.hooks_prompt(),
            handoff,
            judged: AtomicU32::new(0),
            order: tokio::sync::Mutex::new(()),
            _dir: dir,
        }))
    }
}

impl Answer for HookSocket {
    fn listener(&self) -> &tokio::net::UnixListener {
        &self.listener
    }

    /// Answers one connection: reads the event, judges it, records the decision, answers.
    async fn answer(
        &self,
        turn: &TurnContext,
        mut stream: tokio::net::UnixStream,
    ) -> Result<(), TurnError> {
        let mut input = Vec::new();
        let read = tokio::time::timeout(
            EVENT_WAIT,
            (&mut stream).take(MAX_EVENT_BYTES).read_to_end(&mut input),
        )
        .await;
        let (reply, failed) = match (read, String::from_utf8(input)) {
            (Ok(Ok(_)), Ok(message)) => self.decide(turn, &message).await,
            (Ok(Err(e)), _) => (
                HookReply::block(format!("the hook event could not be read: {e}")),
                None,
            ),
            (Err(_), _) => (
                HookReply::block(format!(
                    "the hook sent no whole event within {}s",
                    EVENT_WAIT.as_secs()
                )),
                None,
            ),
            (_, Err(_)) => (
                HookReply::block("the hook event could not be read as UTF-8"),
                None,
            ),
        };
        let text = serde_json::to_string(&reply).unwrap_or_default();
        // A hook gone before its answer blocks on its own (no answer is a block).
        let _ = stream.write_all(text.as_bytes()).await;
        let _ = stream.shutdown().await;
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl HookSocket {
    /// Judges one message off the wire and records the decision; the error, if any, is the
    /// ledger's (it ends the turn once the hook is told).
    async fn decide(&self, turn: &TurnContext, message: &str) -> (HookReply, Option<TurnError>) {
        let Some((first, event)) = message.split_once('\n') else {
            return (HookReply::block("the hook's message names no host"), None);
        };
        let (name, sent) = sent_token(first);
        if !token_matches(&self.token, sent) {
            return (
                HookReply::block(format!(
                    "this session's hook socket answers its client's hooks only (they hold its token, {TOKEN_ENV}); a command the hook wrapped has none"
                )),
                None,
            );
        }
        if name == EGRESS_WIRE {
            return self.egress(turn, event).await;
        }
        if name != wire_name(self.host) {
            return (
                HookReply::block(format!(
                    "this session's hook socket answers {} hooks only, not {name:?}",
                    wire_name(self.host)
                )),
                None,
            );
        }
        if let Some(other) = self.other_session(event) {
            return (
                HookReply::block(format!(
                    "this hook socket answers session {} only, not {other:?}: each session's hook reaches its own",
                    self.session
                )),
                None,
            );
        }
        let _one = self.order.lock().await;
        let judge = Arc::clone(&self.judge);
        let (host, event, session, handoff) = (
            self.host,
            event.to_string(),
            self.session.clone(),
            self.handoff,
        );
        let judging = tokio::task::spawn_blocking(move || {
            judge.judge(&HookEvent {
                host,
                event: &event,
                session: &session,
                handoff,
            })
        });
        let judged = match tokio::time::timeout(JUDGE_WAIT, judging).await {
            Ok(Ok(Ok(j))) => j,
            Ok(Ok(Err(why))) => return (HookReply::block(why), None),
            Ok(Err(e)) => {
                return (
                    HookReply::block(format!("the hook's judgement failed: {e}")),
                    None,
                )
            }
            Err(_) => {
                return (
                    HookReply::block(format!(
                        "the hook's judgement took longer than {}s",
                        JUDGE_WAIT.as_secs()
                    )),
                    None,
                )
            }
        };
        self.judged.fetch_add(1, Ordering::Relaxed);
        match record(turn, wire_name(self.host), judged.records) {
            Ok(()) => (judged.reply, None),
            Err(e) => (
                HookReply::block(format!("the decision could not be recorded: {e}")),
                Some(e),
            ),
        }
    }

    /// An egress decision of a command the session's hook wrapped (`loopward sandbox exec`'s
    /// proxy): recorded under the turn for the agent named, as a one-record hook decision.
    async fn egress(&self, turn: &TurnContext, body: &str) -> (HookReply, Option<TurnError>) {
        let egress = match serde_json::from_str::<EgressRecord>(body) {
            Ok(e)
                if matches!(
                    e.event,
                    AuditEvent::EgressDecided { .. } | AuditEvent::EgressClosed { .. }
                ) =>
            {
                e
            }
            Ok(_) => return (HookReply::block("only egress records are taken here"), None),
            Err(e) => {
                return (
                    HookReply::block(format!("not an egress record ({e})")),
                    None,
                )
            }
        };
        let _one = self.order.lock().await;
        let records = vec![(Some(egress.agent), egress.event)];
        match record(turn, EGRESS_WIRE, records) {
            Ok(()) => (
                HookReply {
                    stdout: String::new(),
                    stderr: String::new(),
                    exit_code: 0,
                },
                None,
            ),
            Err(e) => (
                HookReply::block(format!("the egress decision could not be recorded: {e}")),
                Some(e),
            ),
        }
    }

    /// The event's `session_id` when it is not this session's (where the client's id is the
    /// loop's); `None` when it is, or cannot be told here (the judge reads the event).
    fn other_session(&self, event: &str) -> Option<String> {
        if !self.checks_session {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(event).ok()?;
        let id = v.get("session_id")?.as_str()?;
        (id != self.session).then(|| id.to_string())
    }
}

/// Records one event's decision under the turn — how many records follow, then them — and
/// makes it durable before the hook is answered.
fn record(
    turn: &TurnContext,
    from: &str,
    records: Vec<(Option<AgentId>, AuditEvent)>,
) -> Result<(), TurnError> {
    turn.record_owned(AuditEvent::LayerDecision {
        layer: LayerId::Hook,
        decision: LayerVerdict::Observed,
        detail: serde_json::json!({"host": from, "records": records.len()}).into(),
    })?;
    for (agent, r) in records {
        turn.record_as(agent, r)?;
    }
    turn.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A socket that answers one connection with `reply`, handing back what it was sent.
    fn answering(reply: &'static str) -> (tempfile::TempDir, std::thread::JoinHandle<String>) {
        let dir = tempfile::tempdir().unwrap();
        let listener =
            std::os::unix::net::UnixListener::bind(dir.path().join("hook.sock")).unwrap();
        let served = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut sent = String::new();
            s.read_to_string(&mut sent).unwrap();
            s.write_all(reply.as_bytes()).unwrap();
            sent
        });
        (dir, served)
    }

    #[test]
    fn the_relay_sends_the_hosts_name_its_token_and_the_event_and_returns_the_answer() {
        let (dir, served) = answering(r#"{"stdout":"{}","stderr":"","exit_code":0}"#);
        let socket = dir.path().join("hook.sock");
        let reply = relay_event(&socket, Some("t0k"), Host::Codex, "{\"a\":1}").unwrap();
        assert_eq!((reply.stdout.as_str(), reply.exit_code), ("{}", 0));
        assert_eq!(served.join().unwrap(), "codex t0k\n{\"a\":1}");
    }

    #[test]
    fn an_answer_that_is_not_a_hook_reply_is_an_error_naming_it() {
        let (dir, served) = answering("busy");
        let e =
            relay_event(&dir.path().join("hook.sock"), None, Host::ClaudeCode, "{}").unwrap_err();
        assert!(e.contains("not a hook reply") && e.contains("busy"), "{e}");
        assert_eq!(served.join().unwrap(), "claude-code\n{}");
    }
}
