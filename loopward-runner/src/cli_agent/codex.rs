//! OpenAI's Codex CLI as a host: its pinned version, the command line of one headless session
//! (`codex exec --json`), the session's own `CODEX_HOME` (a `config.toml` naming the
//! configured API base, a `hooks.json` installing loopward's hook for that session only), and
//! its JSONL stream.
//!
//! The stream (Codex 0.171.0, captured from the real client): `thread.started {thread_id}`,
//! `turn.started`, `item.started`/`item.updated`/`item.completed {item}` (items of type
//! `agent_message`, `reasoning`, `command_execution`, `file_change`, `mcp_tool_call`,
//! `collab_tool_call`, `web_search`, `todo_list`, `error`), then `turn.completed {usage}` or
//! `turn.failed {error}`; a top-level `error {message}` is the client's own (a retry, a warning).
//! Codex reports its tokens for the whole turn, not per model call, and no cost: a session is
//! recorded as one model call carrying the turn's usage, its text and every tool call the
//! client ran. A call the hook refused never reaches the stream (Codex gives the refusal to
//! the model only): the hook's ledger has it.

use super::host::link_sign_in;
use super::one_call::OneCall;
use super::pin::{version_word, Pin};
use super::process::CommandLine;
use super::relay::{LoopServer, MCP_SERVER};
use super::stream::{json_line, str_of, Parse, SessionEvent, StreamError};
use super::CliAgentError;
use loopward_core::{CallId, ToolCall, Usage};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The Codex version the stream parser and the hook protocol are tested against.
pub const CODEX_VERSION: &str = "0.171.0";

pub(super) static PIN: Pin = Pin {
    client: "Codex",
    program: "codex",
    version: CODEX_VERSION,
    install: "npm install -g @openai/codex@0.171.0",
    flag: "--codex",
};

/// The hook's events and the tools each matches (as `loopward hook install --host codex`).
const EVENTS: [(&str, &str); 2] = [
    ("PreToolUse", "Bash|apply_patch"),
    ("PostToolUse", "Bash|apply_patch"),
];

/// How to run Codex sessions.
#[derive(Clone, Debug)]
pub struct Codex {
    /// The `codex` binary.
    pub program: PathBuf,
    /// The hook command (`'<loopward>' hook codex --config '<config>' --main-agent '<agent>'`).
    pub hook_command: String,
    /// The API base of an OpenAI Responses API (`…/v1`): a custom provider `loopward` in the
    /// session's `config.toml`. `None`: Codex's own default provider.
    pub base_url: Option<String>,
    /// The variable that holds the custom provider's key.
    pub env_key: String,
    /// The model (`model` in the session's config), if not Codex's default.
    pub model: Option<String>,
    /// The person's own `CODEX_HOME` (`~/.codex`), whose sign-in (`auth.json`) each session
    /// links to; nothing else of it is read.
    pub person_home: Option<PathBuf>,
    /// Arguments added to every session.
    pub args: Vec<OsString>,
    /// Variables set for every session.
    pub env: Vec<(OsString, OsString)>,
}

impl Codex {
    /// Checks that `program` runs and is the tested version (`codex-cli 0.171.0`).
    pub fn check_version(&self) -> Result<(), CliAgentError> {
        PIN.check(&self.program, &self.env, |out| version_word(out, 1))
    }

    /// The session's `config.toml`: the model and, with an API base, the provider.
    pub fn config(&self) -> String {
        let q = |s: &str| json!(s).to_string();
        let mut top = String::new();
        let mut tables = String::new();
        if let Some(m) = &self.model {
            top.push_str(&format!("model = {}\n", q(m)));
        }
        if let Some(base) = &self.base_url {
            top.push_str("model_provider = \"loopward\"\n");
            tables.push_str(&format!(
                "\n[model_providers.loopward]\nname = \"loopward\"\nbase_url = {}\nwire_api = \"responses\"\nenv_key = {}\n",
                q(base),
                q(&self.env_key)
            ));
        }
        top + &tables
    }

    /// The `[mcp_servers.loopward]` table that starts loopward's MCP server in a session:
    /// required (a session whose server does not start fails rather than run without it), its
    /// tools approved without asking (`codex exec` can ask no one: the loop's gates judge each
    /// call), and a call allowed as long as the session is.
    fn mcp_table(server: &LoopServer<'_>) -> String {
        let q = |s: &str| json!(s).to_string();
        let env: Vec<String> = server
            .env()
            .iter()
            .map(|(key, value)| format!("{key} = {}", q(value)))
            .collect();
        let args: Vec<String> = server.args().iter().map(|a| q(a)).collect();
        format!(
            "\n[mcp_servers.{MCP_SERVER}]\ncommand = {}\nargs = [{}]\nenv = {{ {} }}\nrequired = true\nstartup_timeout_sec = 30\ntool_timeout_sec = {}\ndefault_tools_approval_mode = \"approve\"\n",
            q(&server.program()),
            args.join(", "),
            env.join(", "),
            server.timeout.as_secs().max(1),
        )
    }

    /// The session's `hooks.json`: loopward's hook on Codex's tool events. No
    /// `UserPromptSubmit`: Codex's session id is its own (not the loop's), so the hook could
    /// not tell the loop's prompt from a person's and would record it as the person's words.
    pub fn hooks(&self) -> Value {
        let mut hooks = serde_json::Map::new();
        for (event, matcher) in EVENTS {
            hooks.insert(
                event.into(),
                json!([{"matcher": matcher, "hooks": [{"type": "command",
                    "command": self.hook_command, "timeout": 60}]}]),
            );
        }
        json!({ "hooks": hooks })
    }

    /// Writes the session's `CODEX_HOME` (`<scratch>/<session>.codex`): its config (with
    /// loopward's MCP server `mcp` when the agent has loop tools), its hooks, and a link to the
    /// person's `auth.json` if they signed in (Codex keeps it in `CODEX_HOME`, `~/.codex` by
    /// default).
    pub(super) fn prepare(
        &self,
        scratch: &Path,
        session: &str,
        mcp: Option<&LoopServer<'_>>,
    ) -> std::io::Result<PathBuf> {
        let home = scratch.join(format!("{session}.codex"));
        std::fs::create_dir_all(&home)?;
        let mut config = self.config();
        if let Some(server) = mcp {
            config.push_str(&Self::mcp_table(server));
        }
        std::fs::write(home.join("config.toml"), config)?;
        std::fs::write(home.join("hooks.json"), self.hooks().to_string())?;
        link_sign_in(self.person_home.as_deref(), &home, &["auth.json"])?;
        Ok(home)
    }

    /// The command line of one headless session in its own `CODEX_HOME`. Codex runs hooks
    /// only once a person trusted them; the session's hooks are loopward's own, written by it
    /// where the agent cannot write, so they run without that review
    /// (`--dangerously-bypass-hook-trust`, which also runs the project's `.codex/hooks.json`).
    pub fn command(&self, cwd: &Path, prompt: &str, home: &Path) -> CommandLine {
        let mut args: Vec<OsString> = vec![
            "exec".into(),
            "--json".into(),
            "--dangerously-bypass-hook-trust".into(),
        ];
        args.extend(self.args.iter().cloned());
        args.push("--".into());
        args.push(prompt.into());
        let mut env = self.env.clone();
        env.retain(|(k, _)| k != "CODEX_HOME");
        env.push(("CODEX_HOME".into(), home.as_os_str().to_owned()));
        CommandLine {
            program: self.program.clone(),
            args,
            env,
            cwd: cwd.to_path_buf(),
        }
    }
}

/// Reads `codex exec --json`.
#[derive(Debug, Default)]
pub struct CodexParser {
    line: usize,
    session: OneCall,
    /// The agent's last message since the text was taken: the final answer at the end.
    answer: Option<String>,
}

impl CodexParser {
    /// A parser for one session whose model is `model` (Codex does not name it in the stream).
    pub fn new(model: &str) -> Self {
        let mut p = Self::default();
        p.session.model = model.to_string();
        p
    }

    /// An item Codex finished: a tool call and its result, or the agent's text.
    fn item(&mut self, item: &Value) -> Result<Vec<SessionEvent>, String> {
        let id = CallId::from(str_of(&item["id"]));
        let status = item["status"].as_str().unwrap_or("completed");
        let (name, args, failed, content) = match item["type"].as_str().unwrap_or_default() {
            "agent_message" => {
                let said = str_of(&item["text"]);
                if self.answer.is_some() {
                    self.session.text.push('\n');
                }
                self.session.text.push_str(&said);
                self.answer = Some(said);
                return Ok(vec![]);
            }
            "reasoning" | "todo_list" | "error" => return Ok(vec![]),
            "command_execution" => (
                "Bash".to_string(),
                json!({"command": item["command"]}),
                status != "completed" || item["exit_code"].as_i64().is_some_and(|c| c != 0),
                str_of(&item["aggregated_output"]),
            ),
            "file_change" => (
                "apply_patch".to_string(),
                json!({"changes": item["changes"]}),
                status != "completed",
                String::new(),
            ),
            // Named as Codex names it to the model (`mcp__loopward__handoff`).
            "mcp_tool_call" => {
                let name = format!(
                    "mcp__{}__{}",
                    str_of(&item["server"]),
                    str_of(&item["tool"])
                );
                let failed = status != "completed" || !item["error"].is_null();
                let content = item["result"].to_string();
                (name, item["arguments"].clone(), failed, content)
            }
            "collab_tool_call" => (
                "collab".to_string(),
                item.clone(),
                status != "completed",
                String::new(),
            ),
            "web_search" => (
                "web_search".to_string(),
                json!({"query": item["query"]}),
                false,
                String::new(),
            ),
            other => return Err(format!("an item of type {other:?}")),
        };
        self.session.calls.push(ToolCall {
            id: id.clone(),
            name: name.into(),
            arguments: args,
        });
        Ok(vec![SessionEvent::ToolResult {
            call_id: id,
            is_error: failed,
            content,
        }])
    }
}

impl Parse for CodexParser {
    fn line(&mut self, text: &str) -> Result<Vec<SessionEvent>, StreamError> {
        let Some((v, bad)) = json_line(&PIN, &mut self.line, text)? else {
            return Ok(vec![]);
        };
        let mut out = vec![];
        match v["type"].as_str().unwrap_or_default() {
            "thread.started" => out.push(SessionEvent::Started {
                session: str_of(&v["thread_id"]),
                model: self.session.model.clone(),
            }),
            "turn.started" | "item.started" | "item.updated" | "error" => {}
            "item.completed" => out.extend(self.item(&v["item"]).map_err(bad)?),
            kind @ ("turn.completed" | "turn.failed") => {
                let u = &v["usage"];
                let n = |k: &str| u[k].as_u64().unwrap_or_default();
                let usage = Usage {
                    cached_tokens: n("cached_input_tokens"),
                    calls: 1,
                    input_tokens: n("input_tokens"),
                    output_tokens: n("output_tokens") + n("reasoning_output_tokens"),
                };
                let failed = kind == "turn.failed";
                let subtype = if failed { "error" } else { "success" };
                let answer = self.answer.take().unwrap_or_default();
                out.extend(self.session.end(&v, usage, subtype.into(), failed, answer));
            }
            other => return Err(bad(format!("a line of type {other:?}"))),
        }
        Ok(out)
    }

    fn finish(&mut self) -> Option<SessionEvent> {
        self.session.rest()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli_agent::stream::{ended, model_call};

    /// What Codex 0.171.0 wrote for a command, a patch and an answer (captured from the real
    /// client against a scripted Responses API).
    const STREAM: &str = r#"{"type":"thread.started","thread_id":"01a232be-d280-7df1-867f-a43aec10aeba"}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'echo hi > a.txt'","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'echo hi > a.txt'","aggregated_output":"","exit_code":0,"status":"completed"}}
{"type":"item.started","item":{"id":"item_1","type":"file_change","changes":[{"path":"/p/b.txt","kind":"add"}],"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":[{"path":"/p/b.txt","kind":"add"}],"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"All done."}}
{"type":"turn.completed","usage":{"input_tokens":30,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":9,"reasoning_output_tokens":0}}"#;

    fn parse(text: &str) -> Result<Vec<SessionEvent>, StreamError> {
        crate::cli_agent::stream::parse_all(&mut CodexParser::new("gpt-5.5"), text)
    }

    #[test]
    fn a_turn_is_one_model_call_with_its_tool_calls_and_the_end_carries_the_answer() {
        let events = parse(STREAM).unwrap();
        assert_eq!(events.len(), 5, "{events:#?}");
        assert!(
            matches!(&events[0], SessionEvent::Started { session, .. } if session.starts_with("01a232be"))
        );
        let (_, text, tool_calls, usage) = model_call(&events[3]);
        assert_eq!(text, "All done.");
        let names: Vec<_> = tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Bash", "apply_patch"]);
        assert_eq!((usage.input_tokens, usage.output_tokens), (30, 9));
        let end = ended(&events[4]);
        assert_eq!(
            (end.subtype.as_str(), end.text.as_str()),
            ("success", "All done.")
        );
        assert_eq!(end.cost_micros, None);
    }

    #[test]
    fn a_failed_turn_is_an_error_and_an_unknown_line_or_item_is_refused() {
        let events =
            parse(r#"{"type":"turn.failed","error":{"message":"stream disconnected"}}"#).unwrap();
        assert!(
            matches!(events.last(), Some(SessionEvent::Ended(e)) if e.is_error && e.text == "stream disconnected")
        );
        let e = parse("{\"type\":\"turn.started\"}\n{\"type\":\"telepathy\"}").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("Codex 0.171.0"), "{e}");
        let e =
            parse(r#"{"type":"item.completed","item":{"id":"i","type":"hologram"}}"#).unwrap_err();
        assert!(e.to_string().contains("hologram"), "{e}");
    }

    #[test]
    fn the_config_names_the_api_base_as_a_provider_and_the_hooks_only_tool_events() {
        let c = Codex {
            program: "codex".into(),
            hook_command: "'/bin/loopward' hook codex".into(),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            env_key: "OPENAI_API_KEY".into(),
            model: Some("gpt-5.5".into()),
            person_home: None,
            args: vec![],
            env: vec![],
        };
        let cfg: toml::Value = toml::from_str(&c.config()).unwrap();
        assert_eq!(cfg["model_provider"].as_str(), Some("loopward"));
        assert_eq!(
            cfg["model_providers"]["loopward"]["base_url"].as_str(),
            Some("http://127.0.0.1:9/v1")
        );
        let hooks = c.hooks();
        assert!(hooks["hooks"]["PreToolUse"].is_array());
        assert!(hooks["hooks"]["UserPromptSubmit"].is_null());
        // With loop tools: loopward's MCP server, required, its tools approved unasked.
        let scratch = tempfile::tempdir().unwrap();
        let mcp = crate::cli_agent::relay::test_server();
        let home = c.prepare(scratch.path(), "s1", Some(&mcp)).unwrap();
        let text = std::fs::read_to_string(home.join("config.toml")).unwrap();
        let cfg: toml::Value = toml::from_str(&text).unwrap();
        let ours = &cfg["mcp_servers"]["loopward"];
        assert_eq!(ours["command"].as_str(), Some("/bin/loopward"));
        assert_eq!(ours["args"][0].as_str(), Some("mcp"));
        assert_eq!(
            ours["env"]["LOOPWARD_MCP_SOCKET"].as_str(),
            Some("/state/mcp-s.sock")
        );
        assert_eq!(ours["env"]["LOOPWARD_MCP_TOKEN"].as_str(), Some("t0k"));
        assert_eq!(ours["required"].as_bool(), Some(true));
        assert_eq!(ours["tool_timeout_sec"].as_integer(), Some(90));
        assert_eq!(
            ours["default_tools_approval_mode"].as_str(),
            Some("approve")
        );
        assert_eq!(cfg["model_provider"].as_str(), Some("loopward"));
        // Without: no server.
        let home = c.prepare(scratch.path(), "s2", None).unwrap();
        let text = std::fs::read_to_string(home.join("config.toml")).unwrap();
        assert!(!text.contains("mcp_servers"), "{text}");
    }

    #[test]
    fn an_mcp_call_is_named_as_codex_names_it_to_the_model() {
        let line = r#"{"type":"item.completed","item":{"id":"item_1","type":"mcp_tool_call","server":"loopward","tool":"handoff","arguments":{"to":"builder"},"result":{"content":[]},"error":null,"status":"completed"}}"#;
        let events = parse(&format!(
            "{line}\n{{\"type\":\"turn.completed\",\"usage\":{{}}}}"
        ))
        .unwrap();
        let (_, _, tool_calls, _) = model_call(&events[1]);
        assert_eq!(tool_calls[0].name, "mcp__loopward__handoff");
        assert_eq!(tool_calls[0].arguments, json!({"to": "builder"}));
        assert_eq!(
            crate::gates::Host::Codex.relayed_tool(tool_calls[0].name.as_str()),
            Some("handoff")
        );
    }
}
