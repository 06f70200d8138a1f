//! Where a refusal is shown, and how each host names loopward's own tools served to its sessions
//! over MCP. A refusal's remedy must name a move that exists there: the runner's agents hand
//! work on with the `handoff` tool; a CLI session a loop served loopward's `handoff` over MCP
//! calls it by its host's name for it; otherwise a Claude Code agent delegates to a subagent,
//! and a Codex or Gemini CLI agent asks the person in its reply. A refused command points to
//! the file tools of its host.
//!
//! ```
//! use loopward_runner::gates::{Host, Passing};
//! assert!(Host::Runner.pass_to("planner").contains("hand it to planner"));
//! assert!(Host::ClaudeCode.pass_to("planner").contains("subagent_type \"planner\""));
//! assert!(Host::Codex.pass_to("planner").contains("in your reply"));
//! let served = Passing::new(Host::Codex).with_handoff(true);
//! assert!(served.pass_to("planner").contains("mcp__loopward__handoff"));
//! assert!(Host::Codex.file_tools().contains("apply_patch"));
//! assert!(Host::GeminiCli.file_tools().contains("write_file, replace"));
//! ```

/// The enforcement point a refusal is shown on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Host {
    /// loopward's own runner: agents have the `handoff` tool.
    #[default]
    Runner,
    /// Claude Code, through its hooks: the main agent delegates with its `Agent` tool to a
    /// subagent defined in `.claude/agents/`; there is no handoff.
    ClaudeCode,
    /// OpenAI's Codex CLI, through its hooks: files change through `apply_patch`.
    Codex,
    /// Google's Gemini CLI, through its hooks: files change through `write_file` and `replace`.
    GeminiCli,
}

impl Host {
    /// The tools an agent on this host writes files with, which the policy judges before they
    /// run: what a refused shell command is pointed to.
    ///
    /// ```
    /// use loopward_runner::gates::Host;
    /// assert!(Host::ClaudeCode.file_tools().contains("Write, Edit"));
    /// ```
    pub fn file_tools(self) -> &'static str {
        match self {
            Self::Runner => "the file tools (write_file, edit_file)",
            Self::ClaudeCode => "the file tools (Write, Edit)",
            Self::Codex => "the apply_patch tool",
            Self::GeminiCli => "the file tools (write_file, replace)",
        }
    }

    /// How an agent passes a change to `owner` on this host, when its session has no
    /// `handoff` of loopward's (see [`Passing`] for one that has).
    pub fn pass_to(self, owner: &str) -> String {
        match self {
            Self::Runner => format!("hand it to {owner}"),
            Self::ClaudeCode => format!(
                "delegate it to the {owner} subagent (the Agent tool with subagent_type \"{owner}\"; a person defines it in .claude/agents/ if it is missing)"
            ),
            Self::Codex | Self::GeminiCli => format!(
                "say in your reply what {owner} should change, for the person to pass on to {owner}"
            ),
        }
    }

    /// What this host's model calls loopward's own tool `tool` (`handoff`), served to its
    /// sessions over MCP by the server [`MCP_SERVER`](crate::cli_agent::MCP_SERVER): Claude Code
    /// and Codex name an MCP tool `mcp__<server>__<tool>`, Gemini CLI `mcp_<server>_<tool>`.
    /// The runner's agents call it by its own name.
    ///
    /// ```
    /// use loopward_runner::gates::Host;
    /// assert_eq!(Host::Codex.relayed_name("handoff"), "mcp__loopward__handoff");
    /// assert_eq!(Host::GeminiCli.relayed_name("handoff"), "mcp_loopward_handoff");
    /// ```
    pub fn relayed_name(self, tool: &str) -> String {
        match self.relay_prefix() {
            Some((prefix, sep)) => format!("{prefix}{}{sep}{tool}", crate::cli_agent::MCP_SERVER),
            None => tool.to_string(),
        }
    }

    /// The loopward tool a call of `name` on this host is, when it is one of loopward's own
    /// served over MCP (the inverse of [`relayed_name`](Self::relayed_name)): the hooks let
    /// these through, since the loop's gates judge each call where it is relayed.
    ///
    /// ```
    /// use loopward_runner::gates::Host;
    /// assert_eq!(Host::ClaudeCode.relayed_tool("mcp__loopward__handoff"), Some("handoff"));
    /// assert_eq!(Host::GeminiCli.relayed_tool("mcp_loopward_handoff"), Some("handoff"));
    /// assert_eq!(Host::Codex.relayed_tool("mcp__loopwardx__handoff"), None);
    /// assert_eq!(Host::Runner.relayed_tool("handoff"), None);
    /// ```
    pub fn relayed_tool(self, name: &str) -> Option<&str> {
        let (prefix, sep) = self.relay_prefix()?;
        name.strip_prefix(prefix)?
            .strip_prefix(crate::cli_agent::MCP_SERVER)?
            .strip_prefix(sep)
            .filter(|tool| !tool.is_empty())
    }

    /// How this host prefixes an MCP tool's name and separates its server from the tool.
    fn relay_prefix(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::Runner => None,
            Self::ClaudeCode | Self::Codex => Some(("mcp__", "__")),
            Self::GeminiCli => Some(("mcp_", "_")),
        }
    }
}

/// How a refused agent passes a change on: its [`Host`], and whether its session has
/// loopward's `handoff` tool (a CLI session of a loop whose agent lists it in `tools`, served
/// over MCP). Known from the session, never guessed: without it the host's own way is named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Passing {
    host: Host,
    handoff: bool,
}

impl Passing {
    /// On `host`, with no `handoff` of loopward's.
    pub fn new(host: Host) -> Self {
        Self {
            host,
            handoff: false,
        }
    }

    /// Says whether the session has loopward's `handoff` tool.
    pub fn with_handoff(self, handoff: bool) -> Self {
        Self { handoff, ..self }
    }

    /// The host.
    pub fn host(self) -> Host {
        self.host
    }

    /// How the agent passes a change to `owner`: by loopward's `handoff` under the host's
    /// name for it when the session has it, else as [`Host::pass_to`] says.
    ///
    /// ```
    /// use loopward_runner::gates::{Host, Passing};
    /// let gemini = Passing::new(Host::GeminiCli).with_handoff(true);
    /// assert!(gemini.pass_to("planner").contains("mcp_loopward_handoff tool with to \"planner\""));
    /// let claude = Passing::new(Host::ClaudeCode).with_handoff(true);
    /// assert!(!claude.pass_to("planner").contains("subagent_type"));
    /// assert_eq!(Passing::new(Host::Codex).pass_to("planner"), Host::Codex.pass_to("planner"));
    /// ```
    pub fn pass_to(self, owner: &str) -> String {
        match self.host {
            Host::Runner => self.host.pass_to(owner),
            host if self.handoff => format!(
                "hand it to {owner} (the {} tool with to \"{owner}\")",
                host.relayed_name("handoff")
            ),
            host => host.pass_to(owner),
        }
    }
}
