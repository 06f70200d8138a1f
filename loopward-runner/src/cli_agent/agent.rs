//! `CliAgent`: one turn is one session of the coding CLI, then the verifier.

use super::claude_code::{session_id, ClaudeCode};
use super::process::{self, NoWrap, Wrap};
use super::recorded::RecordedSessions;
use super::stream::{SessionEnd, SessionEvent, StreamParser};
use super::verify::{fingerprint, Verdict, Verifier};
use crate::context::TurnContext;
use crate::journal::{FedCall, TurnFeed, RESUME_LAYER};
use crate::layers::classjump::ClassJump;
use crate::model::{ModelError, StopReason};
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use futures::future::BoxFuture;
use loopward_core::{
    AgentId, AuditEvent, FinishReason, LayerVerdict, Message, RunId, RunStatus, ToolResult, Usage,
};
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// Sessions in a row that change nothing (same fingerprint, same verdict) before the run
/// stops.
pub const DEFAULT_NO_PROGRESS: u32 = 3;

/// The call ids of a turn's two steps (`verify` is also the verifier's tool name).
const SESSION: &str = "session";
pub(super) const VERIFY: &str = "verify";
/// The tool name a session is recorded under.
pub(super) const TOOL: &str = "claude_code";

/// Closes a session's hook ledger once the session is over, so the run's ledger can name it.
pub trait SessionLedgers: Send + Sync {
    /// Closes (anchors) the ledger of `run` and says what it holds; `Ok(None)` when the
    /// session left none.
    fn close(&self, run: &RunId) -> Result<Option<SessionLink>, String>;
}

/// A closed session ledger, as the run's ledger names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionLink {
    /// Its records.
    pub records: u64,
    /// Its last record's hash (the anchor).
    pub final_hash: String,
}

/// An agent whose turn is one headless Claude Code session followed by the verifier. See the
/// [module docs](super).
#[derive(Clone)]
pub struct CliAgent {
    inner: Arc<Inner>,
}

struct Inner {
    name: AgentId,
    host: ClaudeCode,
    verifier: Verifier,
    session_timeout: Duration,
    scratch: PathBuf,
    wrap: Arc<dyn Wrap>,
    ledgers: Option<Arc<dyn SessionLedgers>>,
    no_progress: u32,
    class_jump: Option<ClassJump>,
    recorded: Option<Arc<RecordedSessions>>,
}

impl std::fmt::Debug for CliAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CliAgent")
            .field("name", &self.inner.name)
            .field("program", &self.inner.host.program)
            .field("verify", &self.inner.verifier.command())
            .finish_non_exhaustive()
    }
}

/// Builds a [`CliAgent`].
pub struct CliAgentBuilder {
    inner: Inner,
}

impl CliAgent {
    /// An agent `name` running `host` sessions, each checked by `verifier`; the sessions'
    /// settings files go in `scratch` (in loopward's state directory: out of the agent's reach).
    pub fn builder(
        name: AgentId,
        host: ClaudeCode,
        verifier: Verifier,
        scratch: PathBuf,
    ) -> CliAgentBuilder {
        CliAgentBuilder {
            inner: Inner {
                name,
                host,
                verifier,
                session_timeout: Duration::from_secs(30 * 60),
                scratch,
                wrap: Arc::new(NoWrap),
                ledgers: None,
                no_progress: DEFAULT_NO_PROGRESS,
                class_jump: None,
                recorded: None,
            },
        }
    }
}

impl CliAgentBuilder {
    /// How long one session may run before its process group is ended (default 30 minutes).
    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.inner.session_timeout = t;
        self
    }

    /// Wraps each session's command line (see [`Wrap`]).
    pub fn wrap(mut self, wrap: Arc<dyn Wrap>) -> Self {
        self.inner.wrap = wrap;
        self
    }

    /// Closes each session's hook ledger and links it from the run's.
    pub fn ledgers(mut self, ledgers: Arc<dyn SessionLedgers>) -> Self {
        self.inner.ledgers = Some(ledgers);
        self
    }

    /// Sessions in a row that change nothing before the run stops (at least 1).
    pub fn no_progress(mut self, n: u32) -> Self {
        self.inner.no_progress = n.max(1);
        self
    }

    /// Counts each failed verification against `tracker` (the run's `[class_jump]`): a
    /// strategy that failed its allowance is jumped (the next session is told which to use),
    /// and when all are spent its turn layer ends the run `Exhausted`.
    pub fn class_jump(mut self, tracker: ClassJump) -> Self {
        self.inner.class_jump = Some(tracker);
        self
    }

    /// Replays `sessions` instead of running the client and the verifier (`loopward replay`):
    /// each turn records what its session and its verification recorded, and is judged again.
    pub fn recorded(mut self, sessions: Arc<RecordedSessions>) -> Self {
        self.inner.recorded = Some(sessions);
        self
    }

    /// Builds the agent.
    pub fn build(self) -> CliAgent {
        CliAgent {
            inner: Arc::new(self.inner),
        }
    }
}

impl tower::Service<TurnRequest> for CliAgent {
    type Response = TurnOutcome;
    type Error = TurnError;
    type Future = BoxFuture<'static, Result<TurnOutcome, TurnError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), TurnError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: TurnRequest) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move { inner.turn(req).await })
    }
}

/// What the loop remembers between sessions (per run): the last verdict and how many sessions
/// in a row changed nothing.
#[derive(Default)]
struct Progress(Mutex<(Option<String>, u32)>);

/// How the session step ended.
struct Session {
    /// What the model read back as the session's result.
    content: String,
    /// The agent's final answer.
    answer: String,
    /// Whether the session claimed to be done (it ended `success`).
    claimed: bool,
    usage: Usage,
}

impl Inner {
    async fn turn(&self, req: TurnRequest) -> Result<TurnOutcome, TurnError> {
        let turn = req.turn;
        if let Some(rec) = &self.recorded {
            return self.replayed(&turn, rec);
        }
        let feed = turn.extensions().get::<TurnFeed>();
        let root = turn.workspace().root().to_path_buf();
        let before = {
            let root = root.clone();
            tokio::task::spawn_blocking(move || fingerprint(&root))
                .await
                .unwrap_or_default()
        };
        let fed = feed.as_deref().and_then(|f| f.find_call(SESSION, TOOL));
        let session = match fed {
            Some(FedCall::Finished {
                content, is_error, ..
            }) => Session {
                answer: String::new(),
                claimed: !is_error,
                content,
                usage: Usage::default(),
            },
            Some(FedCall::Interrupted { .. }) => {
                self.end_orphan(&turn)?;
                self.interrupted(&turn)?
            }
            // Never started (or no record of it): the session runs now.
            Some(FedCall::Again { .. }) => {
                self.end_orphan(&turn)?;
                self.session(&turn, &prompt(&req.messages)).await?
            }
            None => self.session(&turn, &prompt(&req.messages)).await?,
        };
        let verdict = match feed.as_deref().and_then(|f| f.find_call(VERIFY, VERIFY)) {
            Some(FedCall::Finished {
                content, is_error, ..
            }) => Verdict {
                passed: !is_error,
                code: None,
                output: content,
            },
            _ => self.verify(&turn).await?,
        };
        let after = tokio::task::spawn_blocking(move || fingerprint(&root))
            .await
            .unwrap_or_default();
        self.outcome(&turn, session, &verdict, (&before, &after))
    }

    /// Judges the turn and makes its outcome: the session's and the verifier's results, and
    /// what the next session is told beyond them.
    fn outcome(
        &self,
        turn: &TurnContext,
        session: Session,
        verdict: &Verdict,
        (before, after): (&str, &str),
    ) -> Result<TurnOutcome, TurnError> {
        let (finish, notice) = self.judge(turn, &session, verdict, (before, after))?;
        let verify_text = verify_text(self.verifier.command(), verdict);
        let mut messages = vec![
            Message::Tool(ToolResult {
                call_id: SESSION.into(),
                name: TOOL.into(),
                content: session.content,
                is_error: !session.claimed,
            }),
            Message::Tool(ToolResult {
                call_id: VERIFY.into(),
                name: VERIFY.into(),
                content: verify_text,
                is_error: !verdict.passed,
            }),
        ];
        messages.extend(notice.map(Message::notice));
        Ok(TurnOutcome {
            messages,
            effects: vec![],
            handoff: None,
            usage: session.usage,
            finish,
            text: session.answer,
        })
    }

    /// A turn as its ledger recorded it: the agent's own records made again, its cost charged,
    /// its verification judged again.
    fn replayed(
        &self,
        turn: &TurnContext,
        rec: &RecordedSessions,
    ) -> Result<TurnOutcome, TurnError> {
        let n = turn.turn().0;
        let events = rec.turn(n).ok_or_else(|| {
            TurnError::Model(ModelError::Local(format!(
                "the ledger holds no session for turn {n}: the run stopped before it"
            )))
        })?;
        let mut session = Session {
            content: String::new(),
            answer: String::new(),
            claimed: false,
            usage: Usage::default(),
        };
        let mut verdict: Option<Verdict> = None;
        let (mut before, mut after) = (String::new(), String::new());
        for e in events {
            match e {
                AuditEvent::LayerDecision { layer, detail, .. } if layer == "budget" => {
                    let d = detail.to_json();
                    let cost = d[crate::layers::budget::REPORTED].as_u64().unwrap_or(0);
                    crate::layers::budget::charge_reported(turn, cost)?;
                }
                // Judged again below.
                AuditEvent::LayerDecision { layer, detail, .. } if layer == "verify" => {
                    let d = detail.to_json();
                    let text = |k: &str| d[k].as_str().unwrap_or_default().to_string();
                    (before, after) = (text("workspace_before"), text("workspace_after"));
                    if let Some(v) = &mut verdict {
                        v.code = d["code"].as_i64().and_then(|c| i32::try_from(c).ok());
                    }
                }
                AuditEvent::ToolFinished {
                    tool,
                    is_error,
                    output,
                    ..
                } => {
                    let text = output.clone().unwrap_or_default();
                    if tool == TOOL {
                        session.claimed = !is_error;
                        session.content = text;
                    } else {
                        verdict = Some(Verdict {
                            passed: !is_error,
                            code: None,
                            output: text,
                        });
                    }
                    turn.record(e)?;
                }
                AuditEvent::ModelCall { usage, .. } => {
                    session.usage += *usage;
                    turn.record(e)?;
                }
                AuditEvent::ModelReply { text, .. } => {
                    session.answer.clone_from(text);
                    turn.record(e)?;
                }
                _ => turn.record(e)?,
            }
        }
        let verdict = verdict.ok_or_else(|| {
            TurnError::Model(ModelError::Local(format!(
                "the ledger holds no verification for turn {n}: the run stopped before it"
            )))
        })?;
        self.outcome(turn, session, &verdict, (&before, &after))
    }

    /// Where a running session's PID is kept (loopward's state directory), so a loop killed
    /// mid-session can end the session it left behind when it resumes.
    fn pid_file(&self, session: &str) -> PathBuf {
        self.scratch.join(format!("{session}.pid"))
    }

    /// Ends the process group of this turn's session if a killed loop left it running: by the
    /// recorded PID, and only if that process is still this session's client (its command
    /// line names the session id), never a process that reused the number.
    fn end_orphan(&self, turn: &TurnContext) -> Result<(), TurnError> {
        let session = session_of(turn);
        let path = self.pid_file(&session);
        let Some(pid) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
        else {
            return Ok(());
        };
        let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == session.as_bytes()));
        if ours {
            process::kill_group(pid);
        }
        // What it started carries the session's mark, whoever its parent is now.
        process::end_marked(&session);
        let _ = std::fs::remove_file(&path);
        turn.record_owned(AuditEvent::LayerDecision {
            layer: "session".into(),
            decision: LayerVerdict::Observed,
            detail: json!({"session": session, "pid": pid, "left_running": ours,
                           "ended": ours})
            .into(),
        })?;
        Ok(())
    }

    /// A session that started and was not recorded as finished (the loop was killed): recorded
    /// as interrupted, never run again.
    fn interrupted(&self, turn: &TurnContext) -> Result<Session, TurnError> {
        turn.record_owned(AuditEvent::LayerDecision {
            layer: RESUME_LAYER.into(),
            decision: LayerVerdict::Interrupted,
            detail: json!({"call_id": SESSION, "tool": TOOL}).into(),
        })?;
        let content = "interrupted: this session started, then loopward stopped before it ended; it was not run again. Its changes, if any, are in the workspace.".to_string();
        turn.record_owned(AuditEvent::ToolFinished {
            call_id: SESSION.into(),
            tool: TOOL.into(),
            is_error: true,
            effects: vec![],
            summary: content.clone(),
            output: Some(content.clone()),
        })?;
        self.link(turn, &session_of(turn), false)?;
        Ok(Session {
            content,
            answer: String::new(),
            claimed: false,
            usage: Usage::default(),
        })
    }

    /// Runs one session, recording its model calls as they stream and how it ended.
    async fn session(&self, turn: &TurnContext, prompt: &str) -> Result<Session, TurnError> {
        let local = |why: String| TurnError::Model(ModelError::Local(why));
        let session = session_of(turn);
        let settings = self.scratch.join(format!("{session}.settings.json"));
        std::fs::create_dir_all(&self.scratch)
            .and_then(|()| std::fs::write(&settings, self.host.settings().to_string()))
            .map_err(|e| {
                local(format!(
                    "cannot write the session's settings {}: {e}",
                    settings.display()
                ))
            })?;
        let cmd = self
            .wrap
            .wrap(
                self.host
                    .command(turn.workspace().root(), prompt, &session, &settings),
            )
            .map_err(|e| local(format!("cannot contain the session: {e}")))?;
        turn.record_owned(AuditEvent::ToolRequested {
            call_id: SESSION.into(),
            tool: TOOL.into(),
            arguments: json!({"prompt": prompt, "session": session}),
        })?;
        turn.commit()?;
        let stderr_path = self.scratch.join(format!("{session}.stderr"));
        let stderr = std::fs::File::create(&stderr_path)
            .map_err(|e| local(format!("cannot write {}: {e}", stderr_path.display())))?;
        let mut running = process::start(&cmd, &session, stderr).map_err(local)?;
        let pid_file = self.pid_file(&session);
        std::fs::write(&pid_file, running.pid.to_string())
            .map_err(|e| local(format!("cannot write {}: {e}", pid_file.display())))?;
        turn.record_owned(AuditEvent::ToolStarted {
            call_id: SESSION.into(),
            tool: TOOL.into(),
        })?;
        turn.record_owned(AuditEvent::LayerDecision {
            layer: "session".into(),
            decision: LayerVerdict::Observed,
            detail: json!({"session": session, "pid": running.pid}).into(),
        })?;
        turn.commit()?;
        let mut parser = StreamParser::new();
        let mut end: Option<SessionEnd> = None;
        let mut usage = Usage::default();
        let (mut calls, mut refused) = (0u32, 0u32);
        let read = async {
            loop {
                let line = match running.stdout.next_line().await {
                    Ok(Some(l)) => l,
                    Ok(None) => return Ok::<_, TurnError>(Ok(())),
                    Err(e) => return Ok(Err(format!("reading the session's stream: {e}"))),
                };
                let events = match parser.line(&line) {
                    Ok(ev) => ev,
                    Err(e) => return Ok(Err(e.to_string())),
                };
                for ev in events {
                    self.record(turn, ev, &mut end, &mut usage, &mut calls, &mut refused)?;
                }
            }
        };
        let read_error = match tokio::time::timeout(self.session_timeout, read).await {
            Ok(Ok(r)) => r.err(),
            // The ledger failed: the session is ended (its guard) with the turn.
            Ok(Err(e)) => return Err(e),
            Err(_) => Some(format!(
                "the session ran past its timeout of {}s; its process group (PID {}) was ended",
                self.session_timeout.as_secs(),
                running.pid
            )),
        };
        // A model call the stream had begun is recorded even when the session was cut short.
        if let Some(ev) = parser.finish() {
            self.record(turn, ev, &mut end, &mut usage, &mut calls, &mut refused)?;
        }
        if read_error.is_some() {
            process::end_session(running.pid, &session);
        }
        let status = running.child.wait().await.ok();
        // Whatever the session left running (background jobs, the client's shells) ends with it.
        process::end_session(running.pid, &session);
        let _ = std::fs::remove_file(&pid_file);
        let status_text = status.map_or_else(
            || "unknown".to_string(),
            |s| {
                s.code()
                    .map_or("ended by a signal".into(), |c| c.to_string())
            },
        );
        let exited_ok = status.is_some_and(|s| s.success());
        let stderr_tail = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let claimed = read_error.is_none()
            && exited_ok
            && end
                .as_ref()
                .is_some_and(|e| !e.is_error && e.subtype == "success");
        let answer = end.as_ref().map(|e| e.text.clone()).unwrap_or_default();
        let mut content = format!(
            "session {session}: exit status {status_text}; {calls} tool call(s), {refused} refused or failed; result: {}",
            end.as_ref().map_or("none (the stream ended without one)", |e| e.subtype.as_str())
        );
        if let Some(e) = &read_error {
            content.push_str(&format!("\nerror: {e}"));
        }
        if !exited_ok && !stderr_tail.trim().is_empty() {
            let t: String = stderr_tail
                .chars()
                .rev()
                .take(2000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            content.push_str(&format!("\nstderr: {}", t.trim()));
        }
        if !answer.is_empty() {
            content.push_str(&format!("\nanswer: {answer}"));
        }
        turn.record_owned(AuditEvent::ToolFinished {
            call_id: SESSION.into(),
            tool: TOOL.into(),
            is_error: !claimed,
            effects: vec![],
            summary: content.lines().next().unwrap_or_default().to_string(),
            output: Some(content.clone()),
        })?;
        self.link(turn, &session, read_error.is_none())?;
        // A stream the parser does not know ends the loop: a half-understood client is not
        // governed.
        if let Some(e) = read_error.filter(|e| e.contains("is not what Claude Code")) {
            return Err(TurnError::Model(ModelError::InvalidResponse(e)));
        }
        Ok(Session {
            content,
            answer,
            claimed,
            usage,
        })
    }

    /// Records one stream event in the run's ledger.
    fn record(
        &self,
        turn: &TurnContext,
        ev: SessionEvent,
        end: &mut Option<SessionEnd>,
        usage: &mut Usage,
        calls: &mut u32,
        refused: &mut u32,
    ) -> Result<(), TurnError> {
        match ev {
            SessionEvent::Started { .. } => {}
            SessionEvent::ModelCall {
                model,
                text,
                tool_calls,
                usage: u,
                ..
            } => {
                *usage += u;
                *calls += u32::try_from(tool_calls.len()).unwrap_or(u32::MAX);
                turn.record_owned(AuditEvent::ModelCall {
                    cost_micros: None,
                    model,
                    tool_calls: u32::try_from(tool_calls.len()).unwrap_or(u32::MAX),
                    usage: u,
                })?;
                turn.record_owned(AuditEvent::ModelReply {
                    text,
                    tool_calls,
                    stop: StopReason::Finished,
                })?;
            }
            SessionEvent::ToolResult { is_error, .. } => {
                *refused += u32::from(is_error);
            }
            SessionEvent::Ended(e) => {
                if let Some(cost) = e.cost_micros {
                    crate::layers::budget::charge_reported(turn, cost)?;
                }
                *end = Some(e);
            }
        }
        Ok(())
    }

    /// Closes the session's hook ledger and names it in the run's. A session that ran to its
    /// end (`ran`) without its hook ever recording (the client answers every prompt through
    /// `UserPromptSubmit`) was not governed: the run fails, saying so.
    fn link(&self, turn: &TurnContext, session: &str, ran: bool) -> Result<(), TurnError> {
        let Some(ledgers) = &self.ledgers else {
            return Ok(());
        };
        let run = RunId::new(format!("claude-code-{session}")).ok_or_else(|| {
            TurnError::Model(ModelError::Local(format!(
                "session {session} gives no valid run id for its ledger"
            )))
        })?;
        let (detail, ungoverned) = match ledgers.close(&run) {
            Ok(Some(l)) => (
                json!({"run": run, "records": l.records, "final_hash": l.final_hash}),
                false,
            ),
            Ok(None) => (json!({"run": run, "records": 0}), ran),
            Err(why) => (json!({"run": run, "error": why}), false),
        };
        turn.record_owned(AuditEvent::LayerDecision {
            layer: "session_ledger".into(),
            decision: LayerVerdict::Observed,
            detail: detail.into(),
        })?;
        if ungoverned {
            return Err(TurnError::Model(ModelError::Local(format!(
                "session {session} ran, but loopward's hook recorded nothing for it (no runs/{run}): the client did not run the hook, so the session was not governed. Check that `loopward hook doctor` passes and that the client is {}",
                super::CLAUDE_CODE_VERSION
            ))));
        }
        Ok(())
    }

    /// Runs the verifier, recorded as the turn's `verify` call.
    async fn verify(&self, turn: &TurnContext) -> Result<Verdict, TurnError> {
        turn.record_owned(AuditEvent::ToolRequested {
            call_id: VERIFY.into(),
            tool: VERIFY.into(),
            arguments: json!({"command": self.verifier.command()}),
        })?;
        turn.commit()?;
        turn.record_owned(AuditEvent::ToolStarted {
            call_id: VERIFY.into(),
            tool: VERIFY.into(),
        })?;
        turn.commit()?;
        let verdict = self.verifier.run(turn.workspace()).await;
        let text = verify_text(self.verifier.command(), &verdict);
        turn.record_owned(AuditEvent::ToolFinished {
            call_id: VERIFY.into(),
            tool: VERIFY.into(),
            is_error: !verdict.passed,
            effects: vec![],
            summary: text.lines().next().unwrap_or_default().to_string(),
            output: Some(text),
        })?;
        Ok(verdict)
    }

    /// Done only when verified; a claim the verifier contradicts is refused; a session that
    /// changed nothing and left the verdict where it was is a repeat.
    /// Also says what the next session should be told beyond the verdict (a class-jump).
    fn judge(
        &self,
        turn: &TurnContext,
        session: &Session,
        verdict: &Verdict,
        (before, after): (&str, &str),
    ) -> Result<(FinishReason, Option<String>), TurnError> {
        let decide = |decision, detail: serde_json::Value| {
            turn.record_owned(AuditEvent::LayerDecision {
                layer: "verify".into(),
                decision,
                detail: detail.into(),
            })
        };
        // The workspace's fingerprints before and after: the evidence a repeat is judged by.
        let detail = json!({"claimed_done": session.claimed, "passed": verdict.passed,
                            "code": verdict.code, "command": self.verifier.command(),
                            "workspace_before": before, "workspace_after": after});
        if verdict.passed {
            decide(LayerVerdict::Allow, detail)?;
            return Ok((FinishReason::Done, None));
        }
        decide(LayerVerdict::Refused, detail)?;
        let notice = match &self.class_jump {
            Some(cj) => Some(cj.observe_failure(turn, VERIFY)?.message()),
            None => None,
        };
        let unchanged = before == after;
        let progress = turn
            .run()
            .extensions()
            .get_or_insert_with(Progress::default);
        let mut p = progress.0.lock().unwrap_or_else(|p| p.into_inner());
        let same_verdict = p.0.as_deref() == Some(verdict.key().as_str());
        p.0 = Some(verdict.key());
        if unchanged && same_verdict {
            p.1 += 1;
            turn.record_owned(AuditEvent::LayerDecision {
                layer: "repeat".into(),
                decision: LayerVerdict::Refused,
                detail:
                    json!({"evidence": "the session changed no file and the verifier said the same",
                               "in_a_row": p.1, "limit": self.no_progress})
                    .into(),
            })?;
            if p.1 >= self.no_progress {
                turn.end_run(RunStatus::CapReached {
                    cap: format!(
                        "no progress: {} session(s) in a row changed nothing and left the verifier failing",
                        p.1
                    ),
                });
            }
        } else {
            p.1 = 0;
        }
        Ok((FinishReason::Unverified, notice))
    }
}

/// The id of `turn`'s session.
fn session_of(turn: &TurnContext) -> String {
    session_id(
        turn.workspace().root(),
        turn.run().run().as_str(),
        turn.turn().0,
    )
}

/// What the next session reads of a verdict.
fn verify_text(command: &str, v: &Verdict) -> String {
    let status = match (v.passed, v.code) {
        (true, _) => "passed".to_string(),
        (false, Some(c)) => format!("failed (exit status {c})"),
        (false, None) => "failed".to_string(),
    };
    format!("verification `{command}` {status}\n{}", v.output)
}

/// The session's prompt: the task, then what loopward said since (the verifier's results, in
/// order), so a new session knows why it was started.
fn prompt(messages: &[Message]) -> String {
    let mut out = String::new();
    let mut verdicts = vec![];
    for m in messages {
        match m {
            Message::Human(w) => {
                if !out.is_empty() {
                    out.push_str("\n\n");
                }
                out.push_str(w.content());
            }
            Message::Notice { content } => {
                out.push_str(&format!("\n\n[loopward] {content}"));
            }
            Message::Tool(r) if r.name == VERIFY => verdicts.push(r.content.clone()),
            _ => {}
        }
    }
    if let Some(last) = verdicts.last() {
        out.push_str(&format!(
            "\n\n[loopward] This is session {} of a loop that ends only when the verifier passes. The last {}",
            verdicts.len() + 1,
            last
        ));
    }
    out
}
