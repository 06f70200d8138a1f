//! The live session: started, streamed into the ledger beside its hook's decisions, timed out;
//! and, on resume, the session a killed loop left behind.

use super::agent::{session_of, Inner, Session, SESSION};
use super::changes::Manifest;
use super::process;
use super::stream::{SessionEnd, SessionEvent};
use crate::context::TurnContext;
use crate::model::{ModelError, StopReason};
use crate::turn::TurnError;
use loopward_core::LayerId;
use loopward_core::{
    AuditEvent, LayerDetail, LayerVerdict, ResumeDetail, RunId, SessionEndedDetail,
    SessionLedgerDetail, SessionStartedDetail, Usage,
};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

/// Whether `id` is a plain id (`[A-Za-z0-9_-]`, 1 to 64 bytes): one a mark or a ledger can be
/// named by.
fn plain(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// What a session's stream said so far.
#[derive(Default)]
struct Tally {
    end: Option<SessionEnd>,
    usage: Usage,
    /// Tool calls, and those refused or failed.
    calls: u32,
    refused: u32,
    /// Tool calls the session's hook judges: all but loopward's own, relayed over MCP (the
    /// loop's gates judge those).
    hooked: u32,
    /// The session id the client reported.
    reported: Option<String>,
}

impl Inner {
    /// Where a running session's PID is kept (loopward's state directory), so a loop killed
    /// mid-session can end the session it left behind when it resumes.
    fn pid_file(&self, session: &str) -> PathBuf {
        self.scratch.join(format!("{session}.pid"))
    }

    /// Where the session id the client reported is kept (Codex's is its own: the hook marks
    /// the commands it wraps with it, and names its ledger by it).
    fn client_file(&self, session: &str) -> PathBuf {
        self.scratch.join(format!("{session}.client"))
    }

    /// The session id the client reported for `session`, if it did (and it is a plain id).
    fn reported_of(&self, session: &str) -> Option<String> {
        let id = std::fs::read_to_string(self.client_file(session)).ok()?;
        plain(&id).then_some(id)
    }

    /// Ends the process group of this turn's session if a killed loop left it running: by the
    /// recorded PID, and only if that process is still this session's client (its command
    /// line names the session id, or it carries the session's mark), never a process that
    /// reused the number.
    pub(super) fn end_orphan(&self, turn: &TurnContext) -> Result<(), TurnError> {
        let session = session_of(turn);
        let path = self.pid_file(&session);
        let Some(pid) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
        else {
            return Ok(());
        };
        let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == session.as_bytes()))
            || process::carries_mark(pid, &session);
        if ours {
            process::kill_group(pid);
        }
        // What it started carries the session's mark, whoever its parent is now; what the hook
        // wrapped, the client's own session id (Codex's).
        let mut marked = process::end_marked(&session);
        if let Some(reported) = self.reported_of(&session) {
            marked += process::end_marked(&reported);
        }
        let _ = std::fs::remove_file(&path);
        turn.record_owned(AuditEvent::LayerDecision {
            layer: LayerId::Session,
            decision: LayerVerdict::Observed,
            detail: LayerDetail::SessionEnded(SessionEndedDetail {
                ended: ours,
                left_running: ours,
                marked_ended: marked as u64,
                pid,
                session,
            }),
        })?;
        Ok(())
    }

    /// A session that started and was not recorded as finished (the loop was killed): recorded
    /// as interrupted, never run again.
    pub(super) fn interrupted(&self, turn: &TurnContext) -> Result<Session, TurnError> {
        turn.record_owned(AuditEvent::LayerDecision {
            layer: LayerId::Resume,
            decision: LayerVerdict::Interrupted,
            detail: LayerDetail::Resume(ResumeDetail {
                call_id: SESSION.into(),
                tool: self.host.tool().into(),
            }),
        })?;
        let content = "interrupted: this session started, then loopward stopped before it ended; it was not run again. Its changes, if any, are in the workspace.".to_string();
        turn.record_owned(AuditEvent::ToolFinished {
            call_id: SESSION.into(),
            tool: self.host.tool().into(),
            is_error: true,
            effects: vec![],
            summary: content.clone(),
            output: Some(content.clone()),
        })?;
        // Codex's own session id is known if its stream said it before the loop stopped.
        let session = session_of(turn);
        let reported = self.reported_of(&session);
        // With a judge, what its hook decided is in the run's ledger already.
        let linked = self.hook_judge.is_none();
        if let Some(hook) = self
            .host
            .hook_session(&session, reported.as_deref())
            .filter(|_| linked)
        {
            self.link(turn, &hook, false)?;
        }
        let _ = std::fs::remove_file(self.client_file(&session));
        Ok(Session {
            content,
            answer: String::new(),
            claimed: false,
            usage: Usage::default(),
        })
    }

    /// Runs one session, recording its model calls as they stream and how it ended.
    pub(super) async fn session(
        &self,
        turn: &TurnContext,
        prompt: &str,
        before: &Arc<Manifest>,
    ) -> Result<Session, TurnError> {
        let local = |why: String| TurnError::Model(ModelError::Local(why));
        let session = session_of(turn);
        // loopward's own tools, served over MCP through this session's relay when the agent
        // has them, written into the session's own config in the client's format.
        let relay = self.open_relay(&session, before)?;
        let server = relay.as_ref().map(super::relay::Relay::server);
        let prepared = self
            .host
            .prepare(&self.scratch, &session, server.as_ref())
            .map_err(|e| {
                local(format!(
                    "cannot write the session's own config in {}: {e}",
                    self.scratch.display()
                ))
            })?;
        // The session's hook asks the loop over a socket of the session's own.
        let hooks = self.open_hooks(&session)?;
        let mut cmd = self
            .host
            .command(turn.workspace().root(), prompt, &session, &prepared);
        cmd.env.extend(
            relay
                .as_ref()
                .into_iter()
                .flat_map(super::relay::Relay::env),
        );
        cmd.env
            .extend(hooks.iter().flat_map(super::hooks::HookSocket::env));
        let cmd = self
            .wrap
            .wrap(cmd)
            .map_err(|e| local(format!("cannot contain the session: {e}")))?;
        turn.record_owned(AuditEvent::ToolRequested {
            call_id: SESSION.into(),
            tool: self.host.tool().into(),
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
            tool: self.host.tool().into(),
        })?;
        turn.record_owned(AuditEvent::LayerDecision {
            layer: LayerId::Session,
            decision: LayerVerdict::Observed,
            detail: LayerDetail::SessionStarted(SessionStartedDetail {
                pid: running.pid,
                session: session.clone(),
            }),
        })?;
        turn.commit()?;
        let mut parser = self.host.parser();
        let mut t = Tally::default();
        let mut unknown = false;
        let read = async {
            loop {
                let line = match running.stdout.next_line().await {
                    Ok(Some(l)) => l,
                    Ok(None) => return Ok::<_, TurnError>(Ok(())),
                    Err(e) => return Ok(Err(format!("reading the session's stream: {e}"))),
                };
                let events = match parser.line(&line) {
                    Ok(ev) => ev,
                    Err(e) => {
                        unknown = true;
                        return Ok(Err(e.to_string()));
                    }
                };
                for ev in events {
                    self.record(turn, ev, &mut t)?;
                }
            }
        };
        let read = super::socket::serve(hooks.as_ref(), turn, read);
        let read = super::socket::serve(relay.as_ref(), turn, read);
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
            self.record(turn, ev, &mut t)?;
        }
        let (end, usage, calls, refused, hooked) = (t.end, t.usage, t.calls, t.refused, t.hooked);
        let reported = t.reported;
        if read_error.is_some() {
            process::end_session(running.pid, &session);
        }
        let status = running.child.wait().await.ok();
        // Whatever the session left running (background jobs, the client's shells, the commands
        // the hook wrapped under the client's own session id) ends with it.
        process::end_session(running.pid, &session);
        if let Some(r) = reported.as_deref().filter(|r| plain(r)) {
            let _ = process::end_marked(r);
        }
        let _ = std::fs::remove_file(&pid_file);
        let _ = std::fs::remove_file(self.client_file(&session));
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
            tool: self.host.tool().into(),
            is_error: !claimed,
            effects: vec![],
            summary: content.lines().next().unwrap_or_default().to_string(),
            output: Some(content.clone()),
        })?;
        let ran = read_error.is_none() && (self.host.hooks_prompt() || hooked > 0);
        match &hooks {
            Some(h) if ran && h.judged() == 0 => return Err(self.ungoverned(&session, calls)),
            Some(_) => {}
            None => self.link_own(turn, &session, reported.as_deref(), ran, calls)?,
        }
        drop(hooks);
        // A stream the parser does not know ends the loop: a half-understood client is not
        // governed.
        if let Some(e) = read_error.filter(|_| unknown) {
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
    fn record(&self, turn: &TurnContext, ev: SessionEvent, t: &mut Tally) -> Result<(), TurnError> {
        let Tally {
            end,
            usage,
            calls,
            refused,
            hooked,
            reported,
        } = t;
        match ev {
            SessionEvent::Started { session, .. } => {
                // Kept where a resumed loop finds it, before anything it marks can run.
                if plain(&session) {
                    let _ = std::fs::write(self.client_file(&session_of(turn)), &session);
                }
                *reported = Some(session);
            }
            SessionEvent::ModelCall {
                model,
                text,
                tool_calls,
                usage: u,
                ..
            } => {
                *usage += u;
                *calls += u32::try_from(tool_calls.len()).unwrap_or(u32::MAX);
                let host = self.host.host();
                let judged = tool_calls
                    .iter()
                    .filter(|c| host.relayed_tool(c.name.as_str()).is_none());
                *hooked += u32::try_from(judged.count()).unwrap_or(u32::MAX);
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

    /// Without a judge: links the hook's own ledger of the session, found by the session id.
    fn link_own(
        &self,
        turn: &TurnContext,
        session: &str,
        reported: Option<&str>,
        ran: bool,
        calls: u32,
    ) -> Result<(), TurnError> {
        match self.host.hook_session(session, reported) {
            Some(hook) => self.link(turn, &hook, ran),
            None if ran => Err(TurnError::Model(ModelError::Local(format!(
                "session {session} ran {calls} tool call(s), but its stream never said its session id, so its hook's ledger cannot be found"
            )))),
            None => Ok(()),
        }
    }

    /// A session that ran to its end without its hook ever asking the loop: not governed.
    fn ungoverned(&self, session: &str, calls: u32) -> TurnError {
        TurnError::Model(ModelError::Local(format!(
            "session {session} ran ({calls} tool call(s)), but loopward's hook never asked the loop about it: the client did not run the hook, so the session was not governed. Check that `loopward hook doctor` passes and that the client is {} {}",
            self.host.pin().client,
            self.host.pin().version
        )))
    }

    /// Closes the session's hook ledger (`runs/<hook>`) and names it in the run's. A session
    /// that ran to its end (`ran`: the client answers every prompt through its prompt hook, or
    /// the stream showed tool calls) without its hook ever recording was not governed: the run
    /// fails, saying so.
    fn link(&self, turn: &TurnContext, hook: &str, ran: bool) -> Result<(), TurnError> {
        let session = hook;
        let Some(ledgers) = &self.ledgers else {
            return Ok(());
        };
        let run = RunId::new(hook).ok_or_else(|| {
            TurnError::Model(ModelError::Local(format!(
                "session {session} gives no valid run id for its ledger"
            )))
        })?;
        let link = |error, final_hash, records| SessionLedgerDetail {
            error,
            final_hash,
            records,
            run: run.clone(),
        };
        let (detail, ungoverned) = match ledgers.close(&run) {
            Ok(Some(l)) => (link(None, Some(l.final_hash), Some(l.records)), false),
            Ok(None) => (link(None, None, Some(0)), ran),
            Err(why) => (link(Some(why), None, None), false),
        };
        turn.record_owned(AuditEvent::LayerDecision {
            layer: LayerId::SessionLedger,
            decision: LayerVerdict::Observed,
            detail: LayerDetail::SessionLedger(detail),
        })?;
        if ungoverned {
            return Err(TurnError::Model(ModelError::Local(format!(
                "session {session} ran, but loopward's hook recorded nothing for it (no runs/{run}): the client did not run the hook, so the session was not governed. Check that `loopward hook doctor` passes and that the client is {} {}",
                self.host.pin().client,
                self.host.pin().version
            ))));
        }
        Ok(())
    }
}
