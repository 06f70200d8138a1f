//! Where a refusal is shown. A refusal's remedy must name a move that exists there: the runner's
//! agents hand work on with the `handoff` tool; a Claude Code agent delegates to a subagent; a
//! Codex or Gemini CLI session has no way loopward checked to pass work to another agent, so
//! it asks the person in its reply. A refused command points to the file tools of its host.
//!
//! ```
//! use loopward_runner::gates::Host;
//! assert!(Host::Runner.pass_to("planner").contains("hand it to planner"));
//! assert!(Host::ClaudeCode.pass_to("planner").contains("subagent_type \"planner\""));
//! assert!(Host::Codex.pass_to("planner").contains("in your reply"));
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

    /// How an agent passes a change to `owner` on this host.
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
}
