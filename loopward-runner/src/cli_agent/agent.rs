//! `CliAgent`: one turn is one session of the coding CLI, then the verifier.

use super::changes::Manifest;
use super::claude_code::session_id;
use super::host::Client;
use super::process::{NoWrap, Wrap};
use super::recorded::RecordedSessions;
use super::verify::{Verdict, Verifier};
use crate::context::TurnContext;
use crate::journal::{FedCall, TurnFeed};
use crate::layers::classjump::ClassJump;
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use loopward_core::LayerId;
use loopward_core::{
    AgentId, AuditEvent, FinishReason, LayerDetail, LayerVerdict, Message, NoProgressDetail, RunId,
    RunStatus, ToolResult, Usage, VerifyDetail,
};
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Sessions in a row that change nothing (same fingerprint, same verdict) before the run
/// stops.
pub const DEFAULT_NO_PROGRESS: u32 = 3;

/// The call ids of a turn's two steps (`verify` is also the verifier's tool name).
pub(super) const SESSION: &str = "session";
pub(super) const VERIFY: &str = "verify";

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

/// An agent whose turn is one headless session of a coding CLI followed by the verifier. See the
/// [module docs](super).
#[derive(Clone)]
pub struct CliAgent {
    inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) name: AgentId,
    pub(super) host: Client,
    pub(super) verifier: Verifier,
    pub(super) session_timeout: Duration,
    pub(super) scratch: PathBuf,
    pub(super) wrap: Arc<dyn Wrap>,
    pub(super) ledgers: Option<Arc<dyn SessionLedgers>>,
    pub(super) no_progress: u32,
    pub(super) class_jump: Option<ClassJump>,
    pub(super) recorded: Option<Arc<RecordedSessions>>,
    pub(super) loop_tools: Option<Arc<super::relay::LoopTools>>,
    pub(super) mcp_server: Option<super::relay::McpServer>,
    pub(super) hook_judge: Option<Arc<dyn super::hooks::HookJudge>>,
}

impl std::fmt::Debug for CliAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CliAgent")
            .field("name", &self.inner.name)
            .field("program", &self.inner.host.program())
            .field("verify", &self.inner.verifier.command())
            .finish_non_exhaustive()
    }
}

/// Builds a [`CliAgent`].
pub struct CliAgentBuilder {
    pub(super) inner: Inner,
}

impl CliAgent {
    /// An agent `name` running `host` sessions (a [`Client`], or one client's settings such as
    /// a [`ClaudeCode`](super::ClaudeCode)), each checked by `verifier`; the sessions' own
    /// configs go in `scratch` (in loopward's state directory: out of the agent's reach).
    pub fn builder(
        name: AgentId,
        host: impl Into<Client>,
        verifier: Verifier,
        scratch: PathBuf,
    ) -> CliAgentBuilder {
        CliAgentBuilder {
            inner: Inner {
                name,
                host: host.into(),
                verifier,
                session_timeout: Duration::from_secs(30 * 60),
                scratch,
                wrap: Arc::new(NoWrap),
                ledgers: None,
                no_progress: DEFAULT_NO_PROGRESS,
                class_jump: None,
                recorded: None,
                loop_tools: None,
                mcp_server: None,
                hook_judge: None,
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

    /// Closes each session's hook ledger and links it from the run's: for sessions whose hook
    /// keeps a ledger of its own (no [`hook_judge`](Self::hook_judge), which records the
    /// decisions in the run's ledger instead).
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

crate::leaf_service!(CliAgent: TurnRequest => Result<TurnOutcome, TurnError>, |agent, req| {
    let inner = agent.inner.clone();
    Box::pin(async move { inner.turn(req).await })
});

/// What the loop remembers between sessions (per run): the last verdict and how many sessions
/// in a row changed nothing.
#[derive(Default)]
struct Progress(Mutex<(Option<String>, u32)>);

impl Progress {
    /// For a resumed run, what its journal's `verify` decisions settled (each records the
    /// verdict and the fingerprints before and after), so the count goes on where it was.
    fn rebuilt(resumed: Option<Arc<crate::journal::Resumed>>) -> Self {
        let mut state = (None::<String>, 0u32);
        if let Some(resumed) = resumed {
            for d in resumed.decisions(&LayerId::Verify) {
                let Some(d) = d.decision.detail.as_verify() else {
                    continue;
                };
                let key = Verdict {
                    passed: d.passed,
                    code: d.code,
                    output: String::new(),
                }
                .key();
                let unchanged = d.workspace_before == d.workspace_after;
                state.1 = if unchanged && state.0.as_deref() == Some(key.as_str()) {
                    state.1 + 1
                } else {
                    0
                };
                state.0 = Some(key);
            }
        }
        Self(Mutex::new(state))
    }
}

/// How the session step ended.
pub(super) struct Session {
    /// What the model read back as the session's result.
    pub(super) content: String,
    /// The agent's final answer.
    pub(super) answer: String,
    /// Whether the session claimed to be done (it ended `success`).
    pub(super) claimed: bool,
    pub(super) usage: Usage,
}

impl Inner {
    async fn turn(&self, req: TurnRequest) -> Result<TurnOutcome, TurnError> {
        let turn = req.turn;
        if let Some(rec) = &self.recorded {
            return self.replayed(&turn, rec).await;
        }
        let feed = turn.extensions().get::<TurnFeed>();
        let root = turn.workspace().root().to_path_buf();
        // Every path before the session: its fingerprint judges progress, and the session's
        // changes since arm the review gates on its handoff.
        let manifest = {
            let root = root.clone();
            Arc::new(
                tokio::task::spawn_blocking(move || Manifest::take(&root))
                    .await
                    .unwrap_or_default(),
            )
        };
        let before = manifest.fingerprint();
        let fed = feed
            .as_deref()
            .and_then(|f| f.find_call(&SESSION.into(), &self.host.tool().into()));
        // A session that ran before the loop was stopped changed the workspace before `before`
        // was taken: no evidence either way, so never a repeat.
        let before = match fed {
            Some(FedCall::Finished { .. } | FedCall::Interrupted { .. }) => {
                "(not measured: the session ran before the loop was resumed)".to_string()
            }
            _ => before,
        };
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
                self.session(&turn, &prompt(&req.messages), &manifest)
                    .await?
            }
            None => {
                self.session(&turn, &prompt(&req.messages), &manifest)
                    .await?
            }
        };
        // A session that handed off is not verified: the work goes on with its target.
        if let Some(out) = self.handed_off(&turn, feed.as_deref(), &session) {
            return Ok(out);
        }
        let verdict = match feed
            .as_deref()
            .and_then(|f| f.find_call(&VERIFY.into(), &VERIFY.into()))
        {
            Some(FedCall::Finished {
                content, is_error, ..
            }) => Verdict {
                passed: !is_error,
                code: None,
                output: content,
            },
            _ => self.verify(&turn).await?,
        };
        let after = tokio::task::spawn_blocking(move || Manifest::take(&root).fingerprint())
            .await
            .unwrap_or_default();
        self.outcome(&turn, session, &verdict, (&before, &after))
    }

    /// Judges the turn and makes its outcome: the session's and the verifier's results, and
    /// what the next session is told beyond them.
    pub(super) fn outcome(
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
                name: self.host.tool().into(),
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

    /// Runs the verifier, recorded as the turn's `verify` call.
    pub(super) async fn verify(&self, turn: &TurnContext) -> Result<Verdict, TurnError> {
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
        let decide = |decision, detail: VerifyDetail| {
            turn.record_owned(AuditEvent::LayerDecision {
                layer: LayerId::Verify,
                decision,
                detail: LayerDetail::Verify(detail),
            })
        };
        // The workspace's fingerprints before and after: the evidence a repeat is judged by.
        let detail = VerifyDetail {
            claimed_done: session.claimed,
            code: verdict.code,
            command: self.verifier.command().into(),
            passed: verdict.passed,
            workspace_after: after.into(),
            workspace_before: before.into(),
        };
        if verdict.passed {
            decide(LayerVerdict::Allow, detail)?;
            return Ok((FinishReason::Done, None));
        }
        decide(LayerVerdict::Refused, detail)?;
        let notice = match &self.class_jump {
            Some(cj) => Some(cj.observe_failure(turn, &VERIFY.into())?.message()),
            None => None,
        };
        let unchanged = before == after;
        // Read before the extensions are locked for the insert (a lookup inside would wait on it).
        let resumed = crate::journal::Resumed::of(turn.run());
        let progress = turn
            .run()
            .extensions()
            .get_or_insert_with(|| Progress::rebuilt(resumed));
        let mut p = progress.0.lock().unwrap_or_else(|p| p.into_inner());
        let same_verdict = p.0.as_deref() == Some(verdict.key().as_str());
        p.0 = Some(verdict.key());
        if unchanged && same_verdict {
            p.1 += 1;
            turn.record_owned(AuditEvent::LayerDecision {
                layer: LayerId::Repeat,
                decision: LayerVerdict::Refused,
                detail: LayerDetail::NoProgress(NoProgressDetail {
                    evidence: "the session changed no file and the verifier said the same".into(),
                    in_a_row: p.1,
                    limit: self.no_progress,
                }),
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
pub(super) fn session_of(turn: &TurnContext) -> String {
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
