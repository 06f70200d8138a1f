//! loopward's own tools in a CLI session, over MCP: the loop's end of the relay.
//!
//! A session's client starts `loopward mcp` (an MCP stdio server) from the MCP config the
//! session is given; that server holds no state and decides nothing. For each `tools/list` and
//! `tools/call` it opens the loop's relay socket (made for that session alone, in loopward's
//! state directory; its path is in [`RELAY_ENV`]) and sends the session's token (its
//! [`RELAY_TOKEN_ENV`], which only the MCP config in loopward's state directory holds) on the
//! first line and one [`RelayRequest`] line after it; the loop answers one [`RelayReply`] line.
//! A connection without the token — a command the session ran that found the socket's path —
//! is refused before anything is run or recorded. Here, in the runner, each call goes through the agent's
//! tool stack as a hosted agent's call does (the policy gates — review, one handoff — then the
//! layers' tool stack) and is recorded in the run's ledger under the session's turn; a handoff
//! it registers is the turn's handoff.
//!
//! The relay is served in the session's own task, beside the stream reader: a call's records
//! never fall between a model call's two records.

use super::agent::{CliAgentBuilder, Inner, Session, SESSION};
use super::changes::Manifest;
use super::socket::Answer;
use crate::context::TurnContext;
use crate::model::ModelError;
use crate::tool::{BoxToolService, ToolError, ToolSet};
use crate::turn::TurnError;
use loopward_core::{AuditEvent, ToolCall, ToolName, ToolSpec};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The variable that tells `loopward mcp` where its session's relay socket is.
pub const RELAY_ENV: &str = "LOOPWARD_MCP_SOCKET";

/// The variable holding the token `loopward mcp` sends with each request: a secret of the
/// relay socket's own, written only into the session's MCP config (in loopward's state
/// directory, which no sandboxed command may read), not into the client's environment.
pub const RELAY_TOKEN_ENV: &str = "LOOPWARD_MCP_TOKEN";

/// The first line's name on the relay's wire.
const WIRE: &str = "mcp";

/// The variable that tells a session's hook which of loopward's tools its session was served
/// (their names, comma-separated): a territory refusal names `handoff` only where the session
/// has it ([`served`]). Set on the session's client, whose hooks inherit it.
pub const TOOLS_ENV: &str = "LOOPWARD_MCP_TOOLS";

/// The tool names a [`TOOLS_ENV`] value lists.
///
/// ```
/// use loopward_runner::cli_agent::served;
/// assert!(served("handoff,report_attempt").any(|t| t == "handoff"));
/// assert_eq!(served("").count(), 0);
/// ```
pub fn served(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').filter(|t| !t.is_empty())
}

/// The name loopward's MCP server has in a session's MCP config: its tools reach the model as
/// `mcp__loopward__<tool>` (Claude Code, Codex) or `mcp_loopward_<tool>` (Gemini CLI); see
/// [`Host::relayed_name`](crate::gates::Host::relayed_name).
pub const MCP_SERVER: &str = "loopward";

/// What `loopward mcp` asks the loop: one JSON line per connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum RelayRequest {
    /// The tools the session is offered.
    List,
    /// A call of one of them.
    Call {
        /// The tool, by its loopward name (`handoff`).
        name: String,
        /// Its arguments, as the model gave them.
        #[serde(default)]
        arguments: serde_json::Value,
    },
}

/// The loop's answer: one JSON line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case", deny_unknown_fields)]
pub enum RelayReply {
    /// The tools, as a hosted agent's model is offered them.
    Tools {
        /// Their specs.
        tools: Vec<ToolSpec>,
    },
    /// How a call ended: what the model reads as the tool's result.
    Result {
        /// The result (on a refusal: why, and what to do instead).
        content: String,
        /// Whether it is an error (a refusal, a failure).
        is_error: bool,
    },
}

/// Asks the loop at `socket` (from [`RELAY_ENV`]) one request, with the session's `token`
/// (from [`RELAY_TOKEN_ENV`]): `loopward mcp`'s end.
pub async fn ask(socket: &Path, token: &str, request: &RelayRequest) -> Result<RelayReply, String> {
    let unreachable = |e: std::io::Error| {
        format!(
            "loopward's loop is not answering at {} ({e}); the session outlived its turn, or was not started by `loopward loop`/`loopward run`",
            socket.display()
        )
    };
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(unreachable)?;
    let (read, mut write) = stream.into_split();
    let mut line = super::hooks::first_line(WIRE, Some(token));
    line.push('\n');
    line.push_str(&serde_json::to_string(request).map_err(|e| e.to_string())?);
    line.push('\n');
    write
        .write_all(line.as_bytes())
        .await
        .map_err(unreachable)?;
    let mut answer = String::new();
    BufReader::new(read)
        .read_line(&mut answer)
        .await
        .map_err(unreachable)?;
    serde_json::from_str(&answer).map_err(|e| {
        format!(
            "the loop's answer is not a relay reply ({e}): {:?}",
            answer.chars().take(200).collect::<String>()
        )
    })
}

/// How a session's client starts loopward's MCP server: `<loopward> mcp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServer {
    /// The `loopward` binary (absolute).
    pub program: PathBuf,
    /// Its arguments (`["mcp"]`).
    pub args: Vec<OsString>,
}

/// The tools a CLI agent's sessions are served, and the stack their calls go through.
pub(super) struct LoopTools {
    tools: ToolSet,
    stack: BoxToolService,
}

impl CliAgentBuilder {
    /// Serves `tools` (loopward's own: `handoff`, `report_attempt`, `say`) to each session over
    /// MCP, each call run through `stack` (the policy gates and the layers' tool stack, as for a
    /// hosted agent). Needs [`mcp_server`](Self::mcp_server) to start the server.
    pub fn loop_tools(mut self, tools: ToolSet, stack: BoxToolService) -> Self {
        self.inner.loop_tools = (!tools.is_empty()).then(|| Arc::new(LoopTools { tools, stack }));
        self
    }

    /// How the session's client starts loopward's MCP server (`<loopward> mcp`).
    pub fn mcp_server(mut self, server: McpServer) -> Self {
        self.inner.mcp_server = Some(server);
        self
    }

    /// Whether the agent can serve tools over MCP (it has a server to start).
    pub fn has_mcp_server(&self) -> bool {
        self.inner.mcp_server.is_some()
    }
}

/// How one session's client starts loopward's MCP server: its command line, told of the
/// session's relay socket in its environment. Each host writes it in its own config format
/// ([`Client::prepare`](super::host::Client::prepare)); the client may call its tools without
/// asking anyone, since the loop's gates judge each call.
pub(super) struct LoopServer<'a> {
    pub(super) server: &'a McpServer,
    pub(super) socket: &'a Path,
    /// The relay's token ([`RELAY_TOKEN_ENV`]).
    pub(super) token: &'a str,
    /// How long one call may take (the session's own timeout: the loop's gates answer it).
    pub(super) timeout: std::time::Duration,
}

impl LoopServer<'_> {
    /// The `loopward` binary.
    pub(super) fn program(&self) -> String {
        self.server.program.to_string_lossy().into_owned()
    }

    /// Its arguments.
    pub(super) fn args(&self) -> Vec<String> {
        self.server
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// Its environment: the relay socket and its token, and nothing else of the session's.
    pub(super) fn env(&self) -> [(&'static str, String); 2] {
        [
            (RELAY_ENV, self.socket.to_string_lossy().into_owned()),
            (RELAY_TOKEN_ENV, self.token.to_string()),
        ]
    }

    /// `{"command", "args", "env"}`: the stdio server as Claude Code's and Gemini CLI's JSON
    /// configs both spell it.
    pub(super) fn json(&self) -> serde_json::Value {
        let env: serde_json::Map<String, serde_json::Value> = self
            .env()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect();
        serde_json::json!({"command": self.program(), "args": self.args(), "env": env})
    }
}

/// The server the hosts' tests write into a session's config: `/bin/loopward mcp` on the
/// socket `/state/mcp-s.sock`, token `t0k`, a call allowed 90 s.
#[cfg(test)]
pub(super) fn test_server() -> LoopServer<'static> {
    static SERVER: std::sync::LazyLock<McpServer> = std::sync::LazyLock::new(|| McpServer {
        program: "/bin/loopward".into(),
        args: vec!["mcp".into()],
    });
    LoopServer {
        server: &SERVER,
        socket: Path::new("/state/mcp-s.sock"),
        token: "t0k",
        timeout: std::time::Duration::from_secs(90),
    }
}

/// A session's relay: its socket, removed when the session is over.
pub(super) struct Relay {
    listener: tokio::net::UnixListener,
    socket: PathBuf,
    /// What a connection must send first ([`RELAY_TOKEN_ENV`]).
    token: String,
    server: McpServer,
    timeout: std::time::Duration,
    tools: Arc<LoopTools>,
    calls: AtomicU32,
    /// The workspace before the session: a handoff is judged by what changed since.
    before: Arc<Manifest>,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Relay {
    /// How the session's client starts loopward's MCP server, for its config.
    pub(super) fn server(&self) -> LoopServer<'_> {
        LoopServer {
            server: &self.server,
            socket: &self.socket,
            token: &self.token,
            timeout: self.timeout,
        }
    }

    /// The session's environment: the socket (a client passes it on to the server it starts
    /// only where its config names it), and the tools served, for its hooks ([`TOOLS_ENV`]).
    pub(super) fn env(&self) -> [(OsString, OsString); 2] {
        [
            (RELAY_ENV.into(), self.socket.as_os_str().to_owned()),
            (TOOLS_ENV.into(), self.tools.tools.names().join(",").into()),
        ]
    }
}

impl Inner {
    /// Opens `session`'s relay when the agent has loop tools: its socket in the scratch
    /// directory (a private temporary one when that path is too long to bind).
    pub(super) fn open_relay(
        &self,
        session: &str,
        before: &Arc<Manifest>,
    ) -> Result<Option<Relay>, TurnError> {
        let Some(tools) = &self.loop_tools else {
            return Ok(None);
        };
        let local = |why: String| TurnError::Model(ModelError::Local(why));
        let Some(server) = &self.mcp_server else {
            return Err(local(format!(
                "{} has loop tools but nothing to serve them over MCP: name the server with CliAgentBuilder::mcp_server",
                self.name
            )));
        };
        let name = format!("mcp-{}.sock", &session[..session.len().min(13)]);
        let (listener, socket, dir) =
            super::socket::bind(&self.scratch, &name, "mcp").map_err(local)?;
        let token = super::hooks::new_token()
            .map_err(|e| local(format!("cannot make the session's relay token: {e}")))?;
        Ok(Some(Relay {
            listener,
            socket,
            token,
            server: server.clone(),
            timeout: self.session_timeout,
            tools: tools.clone(),
            calls: AtomicU32::new(0),
            before: Arc::clone(before),
            _dir: dir,
        }))
    }
}

impl Answer for Relay {
    fn listener(&self) -> &tokio::net::UnixListener {
        &self.listener
    }

    /// Answers one connection's request: refused unless its first line carries the token.
    async fn answer(
        &self,
        turn: &TurnContext,
        stream: tokio::net::UnixStream,
    ) -> Result<(), TurnError> {
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        let (mut first, mut line) = (String::new(), String::new());
        if read.read_line(&mut first).await.is_err() {
            return Ok(());
        }
        let (wire, sent) = super::hooks::sent_token(first.trim_end());
        let reply = if wire != WIRE || !super::hooks::token_matches(&self.token, sent) {
            RelayReply::Result {
                content: format!("refused: this session's relay answers its own MCP server only (it holds the relay's token, {RELAY_TOKEN_ENV}); nothing was run or recorded"),
                is_error: true,
            }
        } else if read.read_line(&mut line).await.is_err() {
            return Ok(());
        } else {
            match serde_json::from_str::<RelayRequest>(&line) {
                Ok(RelayRequest::List) => RelayReply::Tools {
                    tools: self.tools.tools.specs(),
                },
                Ok(RelayRequest::Call { name, arguments }) => {
                    self.call(turn, name, arguments).await?
                }
                Err(e) => RelayReply::Result {
                    content: format!("not a relay request ({e})"),
                    is_error: true,
                },
            }
        };
        let mut text = serde_json::to_string(&reply).unwrap_or_default();
        text.push('\n');
        // A client gone before its answer has nothing to read it; the record stands.
        let _ = write.write_all(text.as_bytes()).await;
        Ok(())
    }
}

impl Relay {
    /// One call, recorded and run as a hosted agent's: requested, through the tool stack,
    /// finished. After a handoff stands, only another handoff is run (the one-handoff rule
    /// refuses it, naming the one that stands).
    async fn call(
        &self,
        turn: &TurnContext,
        name: String,
        arguments: serde_json::Value,
    ) -> Result<RelayReply, TurnError> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        if name == "handoff" {
            // The session wrote through its client's tools: the workspace says what, and the
            // review gates judge the handoff by it as by a hosted agent's writes.
            let (root, before) = (turn.workspace().root().to_path_buf(), self.before.clone());
            let changes =
                tokio::task::spawn_blocking(move || before.changes_to(&Manifest::take(&root)))
                    .await
                    .map_err(|e| {
                        TurnError::Model(ModelError::Local(format!(
                            "could not tell what the session changed before its handoff: {e}"
                        )))
                    })?;
            super::changes::written(turn, changes)?;
        }
        let call = ToolCall {
            id: format!("{CALL_PREFIX}{n}").into(),
            name: name.into(),
            arguments,
        };
        let (content, is_error) = self.tools.call(turn, call).await?;
        Ok(RelayReply::Result { content, is_error })
    }
}

/// The call ids of a session's relayed calls: `mcp-1`, `mcp-2`…
pub(super) const CALL_PREFIX: &str = "mcp-";

impl LoopTools {
    /// The names of the tools served.
    pub(super) fn names(&self) -> Vec<ToolName> {
        self.tools.names()
    }

    /// Records `call`, runs it through the stack, records how it ended: its result and whether
    /// it is an error. `loopward replay` runs a recorded call again through here.
    pub(super) async fn call(
        &self,
        turn: &TurnContext,
        call: ToolCall,
    ) -> Result<(String, bool), TurnError> {
        turn.record_owned(AuditEvent::ToolRequested {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        })?;
        let outcome = if turn.state().handoff.is_some() && call.name != "handoff" {
            Err(ToolError::Failed(
                "not run: you already handed off this session; finish your reply".into(),
            ))
        } else {
            crate::agent::dispatch(&self.tools, &self.stack, turn, &call).await
        };
        let result = crate::agent::finish_call(turn, call, outcome)?;
        Ok((result.content, result.is_error))
    }
}

impl Inner {
    /// The turn's outcome when its session handed off (live, or as the journal of a resumed
    /// turn recorded it): the session's result, and the handoff, which the runner follows.
    pub(super) fn handed_off(
        &self,
        turn: &TurnContext,
        feed: Option<&crate::journal::TurnFeed>,
        session: &Session,
    ) -> Option<crate::turn::TurnOutcome> {
        let handoff = {
            let mut st = turn.state();
            if st.handoff.is_none() {
                st.handoff = feed.and_then(crate::journal::TurnFeed::handoff);
            }
            st.handoff.clone()
        }?;
        Some(crate::turn::TurnOutcome {
            messages: vec![loopward_core::Message::Tool(loopward_core::ToolResult {
                call_id: SESSION.into(),
                name: self.host.tool().into(),
                content: session.content.clone(),
                is_error: !session.claimed,
            })],
            effects: vec![],
            handoff: Some(handoff),
            usage: session.usage,
            finish: loopward_core::FinishReason::Handoff,
            text: session.answer.clone(),
        })
    }
}
