//! Google's Gemini CLI as a host: its pinned version, the command line of one headless session
//! (`gemini -p … --output-format stream-json`), the session's own settings home
//! (`GEMINI_CLI_HOME`, whose `.gemini/settings.json` installs loopward's hook for that session
//! only), and its JSONL stream.
//!
//! The stream (Gemini CLI 0.61.0, captured from the real client): `init {session_id, model}`,
//! `message {role, content, delta}`, `tool_use {tool_name, tool_id, parameters}`,
//! `tool_result {tool_id, status, output, error}`, `error {severity, message}` (the client's
//! warnings), then `result {status, error, stats}`. Gemini CLI reports its tokens for the whole
//! session and no cost: a session is recorded as one model call carrying them, its text and
//! its tool calls. A call the hook refused comes back as a `tool_result` with status `error`.

use super::host::link_sign_in;
use super::one_call::OneCall;
use super::pin::{version_word, Pin};
use super::process::CommandLine;
use super::relay::{LoopServer, MCP_SERVER};
use super::stream::{json_line, str_of, Parse, SessionEvent, StreamError};
use super::CliAgentError;
use loopward_core::{ToolCall, Usage};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The Gemini CLI version the stream parser and the hook protocol are tested against.
pub const GEMINI_VERSION: &str = "0.61.0";

pub(super) static PIN: Pin = Pin {
    client: "Gemini CLI",
    program: "gemini",
    version: GEMINI_VERSION,
    install: "npm install -g @google/gemini-cli@0.61.0",
    flag: "--gemini",
};

/// The tools the hook judges (as `loopward hook install --host gemini`).
const MATCHER: &str = "write_file|replace|run_shell_command";

/// How to run Gemini CLI sessions.
#[derive(Clone, Debug)]
pub struct Gemini {
    /// The `gemini` binary.
    pub program: PathBuf,
    /// The hook command (`'<loopward>' hook gemini --config '<config>' --main-agent '<agent>'`).
    pub hook_command: String,
    /// The Gemini API base (`GOOGLE_GEMINI_BASE_URL`); `None`: Google's.
    pub base_url: Option<String>,
    /// The model (`-m`), if not the client's default.
    pub model: Option<String>,
    /// The person's own `.gemini` folder, whose sign-in (the auth type in its
    /// `settings.json`, `oauth_creds.json`, `google_accounts.json`) each session keeps; nothing
    /// else of it is read.
    pub person_home: Option<PathBuf>,
    /// Arguments added to every session.
    pub args: Vec<OsString>,
    /// Variables set for every session.
    pub env: Vec<(OsString, OsString)>,
}

impl Gemini {
    /// Checks that `program` runs and is the tested version (`0.61.0`).
    pub fn check_version(&self) -> Result<(), CliAgentError> {
        PIN.check(&self.program, &self.env, |out| version_word(out, 0))
    }

    /// The session's settings: loopward's hook on the tools that write and on the prompt
    /// (`BeforeAgent`: the session's id is the loop's, so the hook knows it for the loop's),
    /// and the API-key sign-in when an API base is named (the person's own otherwise).
    pub fn settings(&self, auth: Option<&str>) -> Value {
        let hook = json!([{"type": "command", "command": self.hook_command, "timeout": 60_000}]);
        let mut s = json!({"hooks": {
            "BeforeTool": [{"matcher": MATCHER, "hooks": hook}],
            "AfterTool": [{"matcher": MATCHER, "hooks": hook}],
            "BeforeAgent": [{"hooks": hook}],
        }});
        let auth = if self.base_url.is_some() {
            Some("gemini-api-key")
        } else {
            auth
        };
        if let Some(a) = auth {
            s["security"] = json!({"auth": {"selectedType": a}});
        }
        s
    }

    /// The `mcpServers.loopward` entry that starts loopward's MCP server in a session: trusted
    /// (its tools run without a confirmation a headless session could not give: the loop's
    /// gates judge each call), a call allowed as long as the session is. The client starts it
    /// only in a trusted folder, which the session's workspace is
    /// (`GEMINI_CLI_TRUST_WORKSPACE`).
    fn mcp_server(server: &LoopServer<'_>) -> Value {
        let mut entry = server.json();
        entry["trust"] = json!(true);
        entry["timeout"] = json!(server.timeout.as_millis().max(1) as u64);
        entry
    }

    /// Writes the session's home (`<scratch>/<session>.gemini`, its `.gemini/settings.json`,
    /// with loopward's MCP server `mcp` when the agent has loop tools), keeping the person's
    /// sign-in: their chosen auth type and links to their credentials.
    pub(super) fn prepare(
        &self,
        scratch: &Path,
        session: &str,
        mcp: Option<&LoopServer<'_>>,
    ) -> std::io::Result<PathBuf> {
        let home = scratch.join(format!("{session}.gemini"));
        let dir = home.join(".gemini");
        std::fs::create_dir_all(&dir)?;
        let theirs = self.person_home.as_deref();
        let auth = theirs
            .and_then(|d| std::fs::read_to_string(d.join("settings.json")).ok())
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| {
                v["security"]["auth"]["selectedType"]
                    .as_str()
                    .map(String::from)
            });
        let mut settings = self.settings(auth.as_deref());
        if let Some(server) = mcp {
            settings["mcpServers"] = json!({ MCP_SERVER: Self::mcp_server(server) });
        }
        std::fs::write(dir.join("settings.json"), settings.to_string())?;
        link_sign_in(theirs, &dir, &["oauth_creds.json", "google_accounts.json"])?;
        Ok(home)
    }

    /// The command line of one headless session: the prompt, the stream format, the loop's
    /// session id, its own settings home, and the workspace trusted (the project's settings
    /// load, as a person's trusted folder would).
    pub fn command(&self, cwd: &Path, prompt: &str, session: &str, home: &Path) -> CommandLine {
        let mut args: Vec<OsString> = vec![
            "-p".into(),
            prompt.into(),
            "--output-format".into(),
            "stream-json".into(),
            "--session-id".into(),
            session.into(),
        ];
        if let Some(m) = &self.model {
            args.extend(["-m".into(), m.into()]);
        }
        args.extend(self.args.iter().cloned());
        let mut env = self.env.clone();
        env.push(("GEMINI_CLI_HOME".into(), home.as_os_str().to_owned()));
        env.push(("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()));
        if let Some(base) = &self.base_url {
            env.push(("GOOGLE_GEMINI_BASE_URL".into(), base.into()));
        }
        CommandLine {
            program: self.program.clone(),
            args,
            env,
            cwd: cwd.to_path_buf(),
        }
    }
}

/// Reads `gemini --output-format stream-json`.
#[derive(Debug, Default)]
pub struct GeminiParser {
    line: usize,
    session: OneCall,
    /// The text since the last tool call: the final answer at the end.
    answer: String,
}

impl GeminiParser {
    /// A parser for a new stream.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Parse for GeminiParser {
    fn line(&mut self, text: &str) -> Result<Vec<SessionEvent>, StreamError> {
        let Some((v, bad)) = json_line(&PIN, &mut self.line, text)? else {
            return Ok(vec![]);
        };
        let mut out = vec![];
        match v["type"].as_str().unwrap_or_default() {
            "init" => {
                self.session.model = str_of(&v["model"]);
                out.push(SessionEvent::Started {
                    session: str_of(&v["session_id"]),
                    model: self.session.model.clone(),
                });
            }
            "message" => match v["role"].as_str().unwrap_or_default() {
                "user" => {}
                "assistant" => {
                    let part = str_of(&v["content"]);
                    if v["delta"] != true && !self.answer.is_empty() {
                        self.answer.push('\n');
                        self.session.text.push('\n');
                    }
                    self.answer.push_str(&part);
                    self.session.text.push_str(&part);
                }
                other => return Err(bad(format!("a message of role {other:?}"))),
            },
            "tool_use" => {
                self.answer.clear();
                if !self.session.text.is_empty() && !self.session.text.ends_with('\n') {
                    self.session.text.push('\n');
                }
                self.session.calls.push(ToolCall {
                    id: str_of(&v["tool_id"]).into(),
                    name: str_of(&v["tool_name"]).into(),
                    arguments: v["parameters"].clone(),
                });
            }
            "tool_result" => {
                let is_error = v["status"] != "success";
                let content = match v["output"].as_str() {
                    Some(o) => o.to_string(),
                    None => str_of(&v["error"]["message"]),
                };
                out.push(SessionEvent::ToolResult {
                    call_id: str_of(&v["tool_id"]).into(),
                    is_error,
                    content,
                });
            }
            "error" => {}
            "result" => {
                let s = &v["stats"];
                let n = |k: &str| s[k].as_u64().unwrap_or_default();
                let usage = Usage {
                    cached_tokens: n("cached"),
                    calls: 1,
                    input_tokens: n("input_tokens"),
                    output_tokens: n("output_tokens"),
                };
                let status = str_of(&v["status"]);
                let failed = status != "success";
                let answer = self.answer.trim().to_string();
                out.extend(self.session.end(&v, usage, status, failed, answer));
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

    /// What Gemini CLI 0.61.0 wrote for a command the hook refused and an answer (captured
    /// from the real client against a scripted Gemini API; timestamps left out).
    const STREAM: &str = r#"{"type":"init","session_id":"af1a9587-af61-44da-b4f8-973eb6bed97e","model":"gemini-2.5-flash"}
{"type":"message","role":"user","content":"do it"}
{"type":"tool_use","tool_name":"run_shell_command","tool_id":"run_shell_command__run_shell_command_1796147737173_0","parameters":{"command":"echo hi > a.txt"}}
{"type":"tool_result","tool_id":"run_shell_command__run_shell_command_1796147737173_0","status":"error","output":"Tool execution blocked: denied by test","error":{"type":"policy_violation","message":"Tool execution blocked: denied by test"}}
{"type":"message","role":"assistant","content":"All ","delta":true}
{"type":"message","role":"assistant","content":"done.","delta":true}
{"type":"result","status":"success","stats":{"total_tokens":26,"input_tokens":20,"output_tokens":6,"cached":0,"input":20,"duration_ms":206,"tool_calls":1,"models":{"gemini-2.5-flash":{"total_tokens":26,"input_tokens":20,"output_tokens":6,"cached":0,"input":20}}}}"#;

    fn parse(text: &str) -> Result<Vec<SessionEvent>, StreamError> {
        crate::cli_agent::stream::parse_all(&mut GeminiParser::new(), text)
    }

    #[test]
    fn a_refused_call_is_an_error_result_and_the_end_carries_the_answer_and_tokens() {
        let events = parse(STREAM).unwrap();
        assert_eq!(events.len(), 4, "{events:#?}");
        assert!(
            matches!(&events[1], SessionEvent::ToolResult { is_error: true, content, .. } if content.contains("denied by test"))
        );
        let (model, _, tool_calls, usage) = model_call(&events[2]);
        assert_eq!(model, "gemini-2.5-flash");
        assert_eq!(tool_calls[0].name, "run_shell_command");
        assert_eq!((usage.input_tokens, usage.output_tokens), (20, 6));
        let end = ended(&events[3]);
        assert_eq!(
            (end.subtype.as_str(), end.text.as_str()),
            ("success", "All done.")
        );
    }

    #[test]
    fn with_loop_tools_the_settings_start_loopwards_mcp_server_trusted() {
        let g = Gemini {
            program: "gemini".into(),
            hook_command: "'/bin/loopward' hook gemini".into(),
            base_url: None,
            model: None,
            person_home: None,
            args: vec![],
            env: vec![],
        };
        let mcp = crate::cli_agent::relay::test_server();
        let scratch = tempfile::tempdir().unwrap();
        let read = |home: PathBuf| -> Value {
            let text = std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap();
            serde_json::from_str(&text).unwrap()
        };
        let s = read(g.prepare(scratch.path(), "s1", Some(&mcp)).unwrap());
        let ours = &s["mcpServers"]["loopward"];
        assert_eq!(
            (ours["command"].as_str(), &ours["args"]),
            (Some("/bin/loopward"), &json!(["mcp"]))
        );
        assert_eq!(ours["env"]["LOOPWARD_MCP_SOCKET"], "/state/mcp-s.sock");
        assert_eq!(ours["env"]["LOOPWARD_MCP_TOKEN"], "t0k");
        assert_eq!(
            (&ours["trust"], &ours["timeout"]),
            (&json!(true), &json!(90_000))
        );
        assert!(s["hooks"]["BeforeTool"].is_array());
        let s = read(g.prepare(scratch.path(), "s2", None).unwrap());
        assert!(s["mcpServers"].is_null(), "{s}");
    }

    #[test]
    fn an_error_result_is_an_error_and_an_unknown_line_is_refused() {
        let events =
            parse(r#"{"type":"result","status":"error","error":{"type":"X","message":"quota"}}"#)
                .unwrap();
        assert!(
            matches!(events.last(), Some(SessionEvent::Ended(e)) if e.is_error && e.text == "quota")
        );
        let e = parse("{\"type\":\"init\"}\n{\"type\":\"telepathy\"}").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("Gemini CLI 0.61.0"), "{e}");
    }
}
