//! `loopward mcp`: loopward's own tools (`handoff`, `report_attempt`, `say`) served to a
//! coding-agent session over MCP (stdio, the official SDK `rmcp`). The session's client starts it from the
//! MCP config the loop gave that session; it decides and records nothing itself: each
//! `tools/list` and `tools/call` is relayed to the loop over the session's relay socket
//! ([`RELAY_ENV`], with the relay's token from [`RELAY_TOKEN_ENV`]), where the runner runs the
//! call through the agent's gates and records it.
//! See docs/loop.md ("Handoffs between CLI agents").

use anyhow::{Context, Result};
use loopward_runner::cli_agent::{
    ask, CliAgentBuilder, McpServer, RelayReply, RelayRequest, RELAY_ENV, RELAY_TOKEN_ENV,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Serve loopward's own tools to the session that started this, over MCP on stdio.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Example (what a coding-CLI agent's session config starts; the loop sets the socket):
  LOOPWARD_MCP_SOCKET=/path/to/state/mcp-s1.sock LOOPWARD_MCP_TOKEN=… loopward mcp

Not for use by hand: without the loop's socket every call is answered with an error.")]
pub struct Args {}

/// The relay's end in the session: no state, every answer the loop's.
#[derive(Clone, Debug)]
struct Relayed {
    socket: PathBuf,
    token: String,
}

pub(super) async fn run(_args: Args) -> Result<ExitCode> {
    let socket = std::env::var_os(RELAY_ENV).with_context(|| {
        format!("{RELAY_ENV} is not set: `loopward mcp` is started by a coding-agent session of `loopward loop` or `loopward run` (from the MCP config the loop gives it), not by hand")
    })?;
    let token = std::env::var(RELAY_TOKEN_ENV).with_context(|| {
        format!("{RELAY_TOKEN_ENV} is not set: the loop's relay answers only the MCP server its session's config starts (with the relay's token); start the session from `loopward loop` or `loopward run`")
    })?;
    let server = Relayed {
        socket: PathBuf::from(socket),
        token,
    }
    .serve(rmcp::transport::stdio())
    .await
    .context("the MCP client did not complete the handshake")?;
    server.waiting().await.context("serving MCP")?;
    Ok(ExitCode::SUCCESS)
}

/// How the sessions' clients start this server: this binary, `mcp`.
pub(super) fn server() -> Result<McpServer> {
    Ok(McpServer {
        program: std::env::current_exe().context("finding the loopward binary")?,
        args: vec!["mcp".into()],
    })
}

/// The team's CLI agents, each able to serve its `tools` to its sessions over MCP.
pub(super) struct Serving<T>(pub(super) T);

impl<T: loopward::team::CliAgents> loopward::team::CliAgents for Serving<T> {
    fn agent(&self, a: &loopward::config::AgentConfig) -> Result<CliAgentBuilder> {
        Ok(self.0.agent(a)?.mcp_server(server()?))
    }
}

impl Relayed {
    async fn ask(&self, request: RelayRequest) -> Result<RelayReply, ErrorData> {
        ask(&self.socket, &self.token, &request)
            .await
            .map_err(|e| ErrorData::internal_error(e, None))
    }
}

impl ServerHandler for Relayed {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("loopward", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "loopward's own tools for this session: hand the work to another agent of the team (handoff), report an attempt (report_attempt), tell the people watching the run something (say; the run goes on). The loop decides and records each call.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let RelayReply::Tools { tools } = self.ask(RelayRequest::List).await? else {
            return Err(ErrorData::internal_error(
                "the loop answered a tool list with something else",
                None,
            ));
        };
        let tools = tools
            .into_iter()
            .map(|t| {
                let schema = match t.parameters {
                    serde_json::Value::Object(o) => o,
                    _ => serde_json::Map::new(),
                };
                Tool::new(t.name.to_string(), t.description, Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let call = RelayRequest::Call {
            name: request.name.into_owned(),
            arguments: request
                .arguments
                .map_or(serde_json::Value::Null, serde_json::Value::Object),
        };
        // A loop that does not answer is a refusal the model reads, never a call let through.
        let (content, is_error) = match ask(&self.socket, &self.token, &call).await {
            Ok(RelayReply::Result { content, is_error }) => (content, is_error),
            Ok(RelayReply::Tools { .. }) => (
                "not run: the loop answered a call with a tool list".to_string(),
                true,
            ),
            Err(e) => (format!("not run: {e}"), true),
        };
        let block = vec![ContentBlock::text(content)];
        Ok(if is_error {
            CallToolResult::error(block)
        } else {
            CallToolResult::success(block)
        }
        .into())
    }
}
