//! `loopward hook install` and `loopward hook doctor`: put a host's hook in place so it cannot
//! fail open, and tell whether an installed one would.
//!
//! Claude Code, Codex and Gemini CLI all treat a hook command that cannot start (exit 127: not
//! on their `PATH`) or that exits 1 as "go ahead". So the installed command names the binary by
//! its absolute path, is run once before it is written, and the settings folder it is written
//! in (`.claude/`, `.codex/`, `.gemini/`) is a control file agents cannot change. What each host
//! adds on top (Codex runs a hook only once a person trusted it; Gemini CLI asks before a new
//! project hook) is said by `install` and `doctor`, since loopward cannot see it.

use anyhow::{bail, Context, Result};
use loopward::config::Config;
use loopward_hooks::claude_code::ReadTool;
use loopward_hooks::session::LOCK_WAIT;
use loopward_runner::cli_agent::{HookCommand, CLAUDE_CODE_VERSION};
use loopward_runner::gates::Host;
use loopward_runner::sandbox::{kernel_support, SandboxMode};
use loopward_term::render::{Printer, Tone};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// The matcher Claude Code documents for "every tool".
const EVERY_TOOL: &str = "*";

/// The Claude Code events the hook answers, and the tools each matches. `PreToolUse` matches
/// every tool: the writers and the tools that read files in Claude Code's own process (`Read`,
/// `Grep`, …: every [`ReadTool`]) are judged, the client's tools known to change nothing are let
/// through, and any other tool (an MCP server's, a newer client's) is denied unless `[hooks]
/// allow_tools` names it; a tool a matcher left out would run unjudged.
const CLAUDE_EVENTS: [(&str, Option<&str>); 4] = [
    ("PreToolUse", Some(EVERY_TOOL)),
    (
        "PostToolUse",
        Some("Write|Edit|MultiEdit|NotebookEdit|Bash"),
    ),
    // A failed call may still have written (a shell command that then failed, a file tool
    // whose write went through a link swapped in after the check): compared all the same.
    (
        "PostToolUseFailure",
        Some("Write|Edit|MultiEdit|NotebookEdit|Bash"),
    ),
    ("UserPromptSubmit", None),
];

/// Codex: its shell surfaces all reach hooks as `Bash`, its file edits as `apply_patch`; there
/// is no failure event (a failed call comes as `PostToolUse`).
const CODEX_EVENTS: [(&str, Option<&str>); 3] = [
    ("PreToolUse", Some("Bash|apply_patch")),
    ("PostToolUse", Some("Bash|apply_patch")),
    ("UserPromptSubmit", None),
];

/// Gemini CLI: `write_file`, `replace` and `run_shell_command`; `BeforeAgent` is a prompt.
const GEMINI_EVENTS: [(&str, Option<&str>); 3] = [
    ("BeforeTool", Some("write_file|replace|run_shell_command")),
    ("AfterTool", Some("write_file|replace|run_shell_command")),
    ("BeforeAgent", None),
];

/// Where and how one host's hook is installed.
struct Spec {
    /// The settings file, relative to the project root.
    file: &'static str,
    /// The `loopward hook` subcommand that answers it.
    sub: &'static str,
    /// The events and the tools each matches.
    events: &'static [(&'static str, Option<&'static str>)],
    /// The hook `timeout` unit: 1 for seconds (Claude Code, Codex), 1000 for milliseconds.
    per_second: u64,
    /// What the host adds that loopward cannot check from here.
    caveat: Option<&'static str>,
}

fn spec(host: Host) -> Spec {
    match host {
        Host::Codex => Spec {
            file: ".codex/hooks.json",
            sub: "codex",
            events: &CODEX_EVENTS,
            per_second: 1,
            caveat: Some("Codex runs a hook from .codex/hooks.json only in a trusted project and only once a person has reviewed and trusted it (/hooks in Codex); until then it does not run and nothing is enforced. loopward cannot see Codex's trust from here: check /hooks, or contain the whole session (`loopward contain`)"),
        },
        Host::GeminiCli => Spec {
            file: ".gemini/settings.json",
            sub: "gemini",
            events: &GEMINI_EVENTS,
            per_second: 1000,
            caveat: Some("Gemini CLI loads project hooks only in a trusted folder and warns before a new or changed one runs; a person must accept it once. loopward cannot see that from here: contain the whole session (`loopward contain`) where it must hold regardless"),
        },
        _ => Spec {
            file: ".claude/settings.json",
            sub: "claude-code",
            events: &CLAUDE_EVENTS,
            per_second: 1,
            caveat: None,
        },
    }
}

/// The `timeout` written on each hook entry. A hook Claude Code stops for taking longer is a
/// non-blocking error (the call goes ahead), so it is far above the longest wait on the hook's
/// path: the session lock ([`LOCK_WAIT`]), after which the hook blocks the call itself.
const HOOK_TIMEOUT: Duration = Duration::from_secs(60);
const _: () = assert!(HOOK_TIMEOUT.as_secs() >= 4 * LOCK_WAIT.as_secs());

/// loopward's hook in an entry of the host's settings, as a shell line; `None` when the entry
/// holds none.
fn ours(entry: &Value, spec: &Spec) -> Option<String> {
    entry["hooks"]
        .as_array()?
        .iter()
        .find_map(|h| HookCommand::installed(h, spec.sub))
}

/// The hook command of `host` (what `loopward loop` writes into each session's own config):
/// the binary and the config by absolute path.
pub(super) fn host_command(
    host: Host,
    exe: &Path,
    config: &Path,
    main_agent: &str,
) -> Result<HookCommand> {
    command(&spec(host), exe, config, main_agent)
}

/// `exe` is the running `loopward`; the hook starts `loopward-hook` where it sits beside it.
fn command(spec: &Spec, exe: &Path, config: &Path, main_agent: &str) -> Result<HookCommand> {
    let config = config.to_str().context("the config's path is not UTF-8")?;
    let program = super::binaries::hook_program(exe);
    program
        .to_str()
        .context("the loopward binary's path is not UTF-8")?;
    Ok(HookCommand::new(
        program,
        [
            "hook",
            spec.sub,
            "--config",
            config,
            "--main-agent",
            main_agent,
        ],
    ))
}

/// Runs the hook command as its host would (Claude Code: directly; Codex and Gemini CLI:
/// through a shell), asking only for its help: it must start and exit 0.
pub(super) fn check_runs(cmd: &HookCommand, host: Host) -> Result<()> {
    if host != Host::ClaudeCode {
        return check_runs_line(&cmd.shell_line());
    }
    let out = std::process::Command::new(&cmd.program)
        .args(&cmd.args)
        .arg("--help")
        .output();
    exited_zero(&cmd.shell_line(), out)
}

/// Runs a hook's shell command line through `sh`, asking only for its help.
fn check_runs_line(line: &str) -> Result<()> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{line} --help"))
        .output();
    exited_zero(line, out)
}

fn exited_zero(line: &str, out: std::io::Result<std::process::Output>) -> Result<()> {
    let out = out.with_context(|| format!("`{line}` could not start"))?;
    if !out.status.success() {
        bail!(
            "`{line}` exited {} ({}); the agent host would go ahead on every tool call",
            out.status
                .code()
                .map_or("by a signal".into(), |c| c.to_string()),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Where a host's hook goes for a config.
struct Site {
    /// The config file, canonical.
    config: PathBuf,
    cfg: Config,
    /// Its workspace, canonical.
    root: PathBuf,
    /// The host's settings file in the workspace.
    path: PathBuf,
}

/// Where the hook of `spec` goes for the config `config`; when the config is not found, the
/// error says so, then `missing`.
fn site(config: &Path, spec: &Spec, missing: &str) -> Result<Site> {
    let config = config
        .canonicalize()
        .with_context(|| format!("{} not found{missing}", config.display()))?;
    let cfg = Config::load(&config)?;
    let root = cfg.workspace_dir(&config).canonicalize()?;
    let path = root.join(spec.file);
    Ok(Site {
        config,
        cfg,
        root,
        path,
    })
}

/// Writes `host`'s hook into its settings file in the project (`.claude/settings.json`,
/// `.codex/hooks.json`, `.gemini/settings.json`; other settings and hooks are kept).
pub(super) fn install(config: &Path, main_agent: &str, host: Host) -> Result<ExitCode> {
    let spec = spec(host);
    let Site {
        config,
        cfg,
        root,
        path,
    } = site(config, &spec, "; run `loopward init` first")?;
    let exe = std::env::current_exe().context("finding the loopward binary")?;
    let cmd = command(&spec, &exe, &config, main_agent)?;
    check_runs(&cmd, host)?;
    let dir = path.parent().unwrap_or(&root).to_path_buf();
    let mut settings: Value = match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON; fix or move it", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let Some(obj) = settings.as_object_mut() else {
        bail!("{} is not a JSON object", path.display());
    };
    let hooks = obj.entry("hooks").or_insert_with(|| json!({}));
    let Some(hooks) = hooks.as_object_mut() else {
        bail!("`hooks` in {} is not an object", path.display());
    };
    for &(event, matcher) in spec.events {
        let list = hooks.entry(event).or_insert_with(|| json!([]));
        let Some(list) = list.as_array_mut() else {
            bail!("`hooks.{event}` in {} is not a list", path.display());
        };
        // An older loopward entry (a bare `loopward` on PATH, say) is replaced, not kept beside.
        list.retain(|e| ours(e, &spec).is_none());
        let timeout = HOOK_TIMEOUT.as_secs() * spec.per_second;
        let hook = if host == Host::ClaudeCode {
            cmd.claude_code_hook(timeout)
        } else {
            json!({"type": "command", "command": cmd.shell_line(), "timeout": timeout})
        };
        let mut entry = json!({"hooks": [hook]});
        if let Some(m) = matcher {
            entry["matcher"] = json!(m);
        }
        list.push(entry);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let text = serde_json::to_string_pretty(&settings)? + "\n";
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    let mut out = Printer::stdout();
    out.line(Tone::Ok, format!("wrote {}", path.display()));
    out.line(Tone::Dim, format!("hook command: {}", cmd.shell_line()));
    report(&mut out, &cfg, &spec);
    Ok(ExitCode::SUCCESS)
}

/// Whether `host`'s installed hook would fail open; exit 1 when it would.
pub(super) fn doctor(config: &Path, host: Host) -> Result<ExitCode> {
    let spec = spec(host);
    let Site { cfg, path, .. } = site(config, &spec, "")?;
    let mut out = Printer::stdout();
    let mut problems: Vec<String> = Vec::new();
    let settings: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    for &(event, matcher) in spec.events {
        let entries: Vec<&Value> = settings["hooks"][event]
            .as_array()
            .map(|l| l.iter().filter(|e| ours(e, &spec).is_some()).collect())
            .unwrap_or_default();
        let Some(entry) = entries.first() else {
            problems.push(format!(
                "no loopward hook for {event} in {}",
                path.display()
            ));
            continue;
        };
        if let Some(m) = matcher {
            if let Some(problem) = uncovered(event, entry["matcher"].as_str(), m) {
                problems.push(problem);
            }
        }
        // The client's own default applies where no timeout is given (longer than ours).
        if let Some(t) = entry["hooks"][0]["timeout"].as_f64() {
            let t = t / spec.per_second as f64;
            if t < 2.0 * LOCK_WAIT.as_secs_f64() {
                problems.push(format!(
                    "{event}: timeout {t} s is not comfortably above the {} s the hook may wait for its session's lock; a hook the host stops for taking too long lets the call go ahead",
                    LOCK_WAIT.as_secs()
                ));
            }
        }
        let hook = entry["hooks"]
            .as_array()
            .and_then(|l| {
                l.iter()
                    .find(|h| HookCommand::installed(h, spec.sub).is_some())
            })
            .unwrap_or(&Value::Null);
        let program = hook["command"].as_str().unwrap_or("");
        if !program.starts_with('\'') && !program.starts_with('/') {
            problems.push(format!(
                "{event}: `{program}` finds loopward on the host's PATH; where it is not there the hook exits 127 and the host goes ahead"
            ));
        }
        if host == Host::ClaudeCode && hook["onFailure"].as_str() != Some("block") {
            problems.push(format!(
                "{event}: no `\"onFailure\": \"block\"`: a hook that cannot start, times out or answers what the client cannot read lets the call go ahead"
            ));
        }
        let checked = match hook["args"].as_array() {
            Some(args) => check_runs(
                &HookCommand::new(program, args.iter().filter_map(Value::as_str)),
                Host::ClaudeCode,
            ),
            // A shell line is run as the host runs it.
            None => check_runs_line(program),
        };
        if let Err(e) = checked {
            problems.push(format!("{event}: {}", crate::error_text(&e)));
        }
    }
    report(&mut out, &cfg, &spec);
    if problems.is_empty() {
        out.line(Tone::Ok, "the hook runs and would not fail open");
        return Ok(ExitCode::SUCCESS);
    }
    for p in &problems {
        out.line(Tone::Refusal, format!("would fail open: {p}"));
    }
    out.line(
        Tone::Dim,
        format!(
            "fix: `loopward hook install --host {}` (writes the absolute binary path and checks it runs)",
            spec.sub
        ),
    );
    Ok(ExitCode::from(1))
}

/// What an installed matcher (`have`; absent or empty matches every tool) leaves out of the
/// tools `want` names, as a problem; `None` when it covers them.
fn uncovered(event: &str, have: Option<&str>, want: &str) -> Option<String> {
    let have = have.unwrap_or("");
    if have.is_empty() || have == EVERY_TOOL {
        return None;
    }
    if want == EVERY_TOOL {
        return Some(format!(
            "{event} matches only {have:?}: every other tool (Task, WebFetch, MCP tools, tools of newer clients) runs without the hook judging it; the hook needs every tool ({EVERY_TOOL:?})"
        ));
    }
    let missing: Vec<&str> = want
        .split('|')
        .filter(|t| !have.split('|').any(|h| h == *t))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{event} matches {have:?}, not every tool of {want:?}: {} run without the hook judging them",
            missing.join(", ")
        )
    })
}

/// The sandbox shell commands will run in, the bounds the hook keeps, and what the host adds.
fn report<W: std::io::Write>(out: &mut Printer<W>, cfg: &Config, spec: &Spec) {
    if let Some(caveat) = spec.caveat {
        out.line(Tone::Refusal, format!("not checked: {caveat}"));
        out.line(
            Tone::Dim,
            "reads: the host's own read tools are not judged on this host (only the shell's reads are contained, by the sandbox)",
        );
    } else {
        out.line(
            Tone::Dim,
            format!(
                "reads: {} of loopward's state are denied at PreToolUse (observed at the hook, not contained)",
                ReadTool::ALL.map(ReadTool::name).join("/")
            ),
        );
        out.line(
            Tone::Dim,
            match cfg.hooks.allow_tools.as_slice() {
                [] => format!(
                    "other tools: the client's own that change nothing the hook judges (Task, TodoWrite, WebFetch, …, as of Claude Code {CLAUDE_CODE_VERSION}) run; any other is denied until [hooks] allow_tools names it"
                ),
                listed => format!(
                    "other tools: the client's own that change nothing the hook judges run; [hooks] allow_tools lets {} run unjudged; any other is denied",
                    listed.join(", ")
                ),
            },
        );
    }
    out.line(
        Tone::Dim,
        format!(
            "bound: a session lock held by another process is waited on for at most {} s, then the call is blocked (hook timeout {} s)",
            LOCK_WAIT.as_secs(),
            HOOK_TIMEOUT.as_secs()
        ),
    );
    let support = kernel_support();
    match (cfg.policy().gates.shell.sandbox, &support.missing) {
        (SandboxMode::WatchOnly, _) => out.line(
            Tone::Refusal,
            "sandbox: watch-only (configured): Bash commands are only watched, not contained",
        ),
        (_, None) => out.line(
            Tone::Ok,
            format!(
                "sandbox: Bash commands run in a Landlock sandbox (ABI {})",
                support.abi.map_or("?".into(), |a| a.to_string())
            ),
        ),
        (_, Some(why)) => out.line(
            Tone::Refusal,
            format!("sandbox: unavailable here ({why}); Bash calls will be denied"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_tool_use_matches_every_tool() {
        assert_eq!(CLAUDE_EVENTS[0], ("PreToolUse", Some(EVERY_TOOL)));
    }

    #[test]
    fn a_matcher_that_leaves_tools_out_is_named_with_what_it_leaves_out() {
        assert_eq!(uncovered("PreToolUse", Some("*"), "*"), None);
        assert_eq!(uncovered("PreToolUse", None, "*"), None);
        assert_eq!(uncovered("PreToolUse", Some(""), "*"), None);
        let e = uncovered("PreToolUse", Some("Write|Edit|Bash"), "*").unwrap();
        assert!(
            e.contains("every other tool (Task, WebFetch, MCP tools"),
            "{e}"
        );
        assert_eq!(
            uncovered("PostToolUse", Some("Write|Bash|Edit"), "Write|Edit"),
            None
        );
        let e = uncovered("PostToolUse", Some("Write"), "Write|Edit|Bash").unwrap();
        assert!(
            e.contains("Edit, Bash run without the hook judging them"),
            "{e}"
        );
    }
}
