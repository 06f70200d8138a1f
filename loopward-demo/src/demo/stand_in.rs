//! Chapter 9's coding agent: the demo binary standing in for a Claude Code client.
//!
//! It speaks what the real client speaks, so loopward's side runs unchanged: it answers
//! `--version` with the pinned [`CLAUDE_CODE_VERSION`], reads the hook command from the
//! `--settings` file the session wrote (the `PreToolUse`/`PostToolUse`/`UserPromptSubmit`
//! entries whose matcher names the tool), runs it with `sh -c` and the client's hook JSON on
//! stdin, obeys its answer (a `deny` or exit status 2: the tool does not run, and the reason is
//! the tool's result), and prints the session as `--output-format stream-json`. Only what it
//! decides to do is scripted, by session number (kept in its state folder): see `script`.

use anyhow::{Context, Result};
use loopward_runner::cli_agent::CLAUDE_CODE_VERSION;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The variable that makes the demo binary the stand-in client: its state folder (set by the
/// session's `ClaudeCode::env`, so `--version` and every session see it).
pub const STAND_IN_ENV: &str = "LOOPWARD_DEMO_STAND_IN";

/// The first argument that makes the demo binary the stand-in's hook command.
pub const HOOK_FLAG: &str = "--hook";

/// The model the stand-in reports.
const MODEL: &str = "claude-stand-in";

/// What the stand-in does, one step after another.
#[derive(Clone, Debug)]
enum Step {
    /// Says something (one model call).
    Say(&'static str),
    /// Writes a file with the client's `Write` tool (one model call, then the hooks).
    Write(&'static str, &'static str),
    /// After a refused call: reads the refusal and says what it does instead.
    Correct(&'static str),
    /// Ends the session, claiming the work is done (`result` `success`).
    Done(&'static str),
}

/// The stand-in's script: `progress` makes the parser pass in its second session; `stuck`
/// claims done every session and changes nothing.
fn script(kind: &str, session: u32) -> Vec<Step> {
    const PARSER: &str =
        "pub fn parse(s: &str) -> Vec<&str> {\n    s.split_whitespace().collect()\n}\n";
    match (kind, session) {
        ("progress", 1) => vec![
            Step::Say("The parser looks right to me."),
            Step::Done("Done: the parser works and its test passes."),
        ],
        ("progress", _) => vec![
            Step::Say("The verifier says src/parser.rs has no parse. I will plan the fix first."),
            Step::Write(
                "plan.md",
                "# Plan\n1. Add `pub fn parse` to src/parser.rs.\n",
            ),
            Step::Correct("plan.md is the planner's, so I write my own file, src/parser.rs."),
            Step::Write("src/parser.rs", PARSER),
            Step::Done("Done: src/parser.rs has pub fn parse."),
        ],
        _ => vec![
            Step::Say("Nothing seems to be left to do."),
            Step::Done("Done: the work is complete."),
        ],
    }
}

/// Runs one invocation of the stand-in client with `args` (its command line, program name
/// left out) in `cwd`, its state in `dir`, printing its stream into `out`; returns its exit
/// status.
pub fn client(dir: &Path, cwd: &Path, args: &[String], out: &mut impl Write) -> Result<i32> {
    if args.first().map(String::as_str) == Some("--version") {
        writeln!(out, "{CLAUDE_CODE_VERSION} (Claude Code)")?;
        return Ok(0);
    }
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .with_context(|| format!("the stand-in client needs {name}"))
    };
    let (prompt, session, settings) = (arg("-p")?, arg("--session-id")?, arg("--settings")?);
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(settings).with_context(|| format!("reading {settings}"))?,
    )
    .with_context(|| format!("{settings} is not JSON"))?;
    let kind = std::fs::read_to_string(dir.join("script")).context("the stand-in's script")?;
    let count = dir.join("sessions");
    let n = std::fs::read_to_string(&count)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .unwrap_or(0)
        + 1;
    std::fs::write(&count, n.to_string())?;
    let mut s = Session {
        hooks: Hooks {
            settings,
            cwd: cwd.to_path_buf(),
            session: session.clone(),
        },
        out,
        messages: 0,
        refusal: None,
    };
    s.line(
        &json!({"type": "system", "subtype": "init", "cwd": cwd, "session_id": session,
                    "tools": ["Read", "Write", "Edit", "Bash"], "model": MODEL,
                    "permissionMode": "acceptEdits"}),
    )?;
    // The prompt goes through `UserPromptSubmit` before the model sees it.
    if let Hook::Deny(why) = s
        .hooks
        .run("UserPromptSubmit", None, json!({"prompt": prompt}))?
    {
        return s.end(&why, true);
    }
    for step in script(kind.trim(), n) {
        match step {
            Step::Say(text) => s.say(text)?,
            Step::Write(path, content) => s.write(path, content)?,
            Step::Correct(instead) => {
                let why = s.refusal.take().unwrap_or_default();
                let first = why.lines().next().unwrap_or_default().trim().to_string();
                s.say(&format!("The hook said: {first}. {instead}"))?;
            }
            Step::Done(text) => return s.end(text, false),
        }
    }
    s.end("The session ended.", false)
}

/// What a hook answered.
enum Hook {
    /// Go ahead (allowed, or no answer).
    Go,
    /// Blocked, with the reason the model reads.
    Deny(String),
}

/// The session's hooks, as its settings file installs them.
struct Hooks {
    settings: Value,
    cwd: PathBuf,
    session: String,
}

impl Hooks {
    /// Runs every hook command `event` has for `tool`, as the client does: the event on stdin,
    /// then exit status 2 (stderr the reason) or a JSON `deny`/`block` stops the call; any other
    /// status is a non-blocking error and the call goes ahead.
    fn run(&self, event: &str, tool: Option<&str>, fields: Value) -> Result<Hook> {
        let mut input = json!({"session_id": self.session, "transcript_path": "",
                               "cwd": self.cwd, "hook_event_name": event,
                               "permission_mode": "acceptEdits"});
        if let (Some(obj), Some(more)) = (input.as_object_mut(), fields.as_object()) {
            obj.extend(more.clone());
        }
        for (program, args) in commands(&self.settings, event, tool) {
            let command = format!("{program} {}", args.join(" "));
            let mut child = Command::new(&program)
                .args(&args)
                .current_dir(&self.cwd)
                .env_remove(STAND_IN_ENV)
                .env("CLAUDE_PROJECT_DIR", &self.cwd)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .with_context(|| format!("starting the hook `{command}`"))?;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(input.to_string().as_bytes())?;
            }
            let done = child.wait_with_output()?;
            let stdout = String::from_utf8_lossy(&done.stdout);
            match done.status.code() {
                Some(2) => return Ok(Hook::Deny(String::from_utf8_lossy(&done.stderr).into())),
                Some(0) if !stdout.trim().is_empty() => {
                    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
                    let o = &v["hookSpecificOutput"];
                    if o["permissionDecision"] == "deny" {
                        let why = o["permissionDecisionReason"].as_str().unwrap_or_default();
                        return Ok(Hook::Deny(why.to_string()));
                    }
                    if v["decision"] == "block" {
                        return Ok(Hook::Deny(v["reason"].as_str().unwrap_or_default().into()));
                    }
                }
                _ => {}
            }
        }
        Ok(Hook::Go)
    }
}

/// The hook commands of `event` whose matcher names `tool` (`A|B|C`; none or `*`: every tool),
/// each as the program and arguments Claude Code starts: exec form (`command` and `args`)
/// directly, a shell line through `sh -c`.
fn commands(settings: &Value, event: &str, tool: Option<&str>) -> Vec<(String, Vec<String>)> {
    let matches = |m: Option<&str>| match (m, tool) {
        (None | Some("" | "*"), _) | (Some(_), None) => true,
        (Some(m), Some(t)) => m.split('|').any(|x| x == t),
    };
    settings["hooks"][event]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| matches(entry["matcher"].as_str()))
        .flat_map(|entry| entry["hooks"].as_array().into_iter().flatten())
        .filter_map(|h| {
            let command = h["command"].as_str()?.to_string();
            Some(match h["args"].as_array() {
                Some(args) => (
                    command,
                    args.iter()
                        .filter_map(|a| a.as_str().map(str::to_string))
                        .collect(),
                ),
                None => ("sh".to_string(), vec!["-c".to_string(), command]),
            })
        })
        .collect()
}

/// One session's stream.
struct Session<'a, W: Write> {
    hooks: Hooks,
    out: &'a mut W,
    /// Model calls so far (each one API message).
    messages: u32,
    /// The last refusal's reason, which the agent reads.
    refusal: Option<String>,
}

impl<W: Write> Session<'_, W> {
    fn line(&mut self, v: &Value) -> Result<()> {
        writeln!(self.out, "{v}")?;
        self.out.flush()?;
        Ok(())
    }

    /// One model call with these content blocks.
    fn message(&mut self, content: Value) -> Result<()> {
        self.messages += 1;
        let m = json!({"type": "assistant", "session_id": self.hooks.session,
            "parent_tool_use_id": null,
            "message": {"id": format!("msg_{:02}", self.messages), "model": MODEL,
                        "role": "assistant", "content": content,
                        "usage": {"input_tokens": 1200, "output_tokens": 40}}});
        self.line(&m)
    }

    fn say(&mut self, text: &str) -> Result<()> {
        self.message(json!([{"type": "text", "text": text}]))
    }

    /// A `Write` call: `PreToolUse`, the write if allowed, `PostToolUse`, the tool's result.
    fn write(&mut self, path: &str, content: &str) -> Result<()> {
        let id = format!("toolu_{:02}", self.messages + 1);
        let file = self.hooks.cwd.join(path);
        let input = json!({"file_path": file, "content": content});
        self.message(json!([{"type": "tool_use", "id": id, "name": "Write", "input": input}]))?;
        let call = json!({"tool_name": "Write", "tool_use_id": id, "tool_input": input});
        let (text, is_error) = match self.hooks.run("PreToolUse", Some("Write"), call.clone())? {
            Hook::Deny(why) => {
                self.refusal = Some(why.clone());
                (why, true)
            }
            Hook::Go => {
                if let Some(parent) = file.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&file, content)?;
                let mut post = call;
                post["tool_response"] = json!({"type": "create", "filePath": file,
                                               "content": content});
                match self.hooks.run("PostToolUse", Some("Write"), post)? {
                    Hook::Deny(why) => (why, true),
                    Hook::Go => (
                        format!("File created successfully at: {}", file.display()),
                        false,
                    ),
                }
            }
        };
        let result = json!({"type": "user", "session_id": self.hooks.session,
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id,
                                                     "content": text, "is_error": is_error}]}});
        self.line(&result)
    }

    /// The `result` line: the answer, the session's usage and its reported cost.
    fn end(&mut self, text: &str, is_error: bool) -> Result<i32> {
        let n = u64::from(self.messages);
        let r = json!({"type": "result",
            "subtype": if is_error { "error_during_execution" } else { "success" },
            "is_error": is_error, "result": text, "num_turns": n,
            "session_id": self.hooks.session, "total_cost_usd": 0.004 * f64::from(self.messages),
            "usage": {"input_tokens": 1200 * n, "output_tokens": 40 * n}});
        self.line(&r)?;
        Ok(i32::from(is_error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_commands_are_those_whose_matcher_names_the_tool() {
        let settings = json!({"hooks": {
            "PreToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "a"}]},
                           {"matcher": "Bash", "hooks": [{"type": "command", "command": "b", "args": ["x"]}]}],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "c"}]}],
        }});
        let sh = |c: &str| vec![("sh".to_string(), vec!["-c".to_string(), c.to_string()])];
        assert_eq!(commands(&settings, "PreToolUse", Some("Write")), sh("a"));
        assert_eq!(
            commands(&settings, "PreToolUse", Some("Bash")),
            [("b".to_string(), vec!["x".to_string()])]
        );
        assert!(commands(&settings, "PreToolUse", Some("WriteX")).is_empty());
        assert_eq!(commands(&settings, "UserPromptSubmit", None), sh("c"));
        assert!(commands(&settings, "PostToolUse", Some("Write")).is_empty());
    }

    #[test]
    fn a_refusing_hook_stops_the_write_and_its_reason_is_the_result() {
        let dir = tempfile::tempdir().unwrap();
        let hooks = Hooks {
            settings: json!({"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [
                {"type": "command", "command": "cat >/dev/null; echo 'not yours' >&2; exit 2"}]}]}}),
            cwd: dir.path().to_path_buf(),
            session: "s1".into(),
        };
        let mut out = Vec::new();
        let mut s = Session {
            hooks,
            out: &mut out,
            messages: 0,
            refusal: None,
        };
        s.write("plan.md", "x").unwrap();
        assert_eq!(s.refusal.as_deref(), Some("not yours\n"));
        assert!(!dir.path().join("plan.md").exists());
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(r#""is_error":true"#), "{text}");
    }
}
