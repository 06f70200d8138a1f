//! `loopward hook install` and `loopward hook doctor`: put the Claude Code hook in place so it
//! cannot fail open, and tell whether an installed one would.
//!
//! Claude Code treats a hook command that cannot start (exit 127: not on its `PATH`) or that
//! exits 1 as "go ahead". So the installed command names the binary by its absolute path, is
//! run once before it is written, and `.claude/` is a control file agents cannot change.

use anyhow::{bail, Context, Result};
use loopward::config::Config;
use loopward_runner::sandbox::{kernel_support, SandboxMode};
use loopward_term::render::{Printer, Tone};
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitCode;

/// The Claude Code events the hook answers, and the tools each matches.
const EVENTS: [(&str, Option<&str>); 4] = [
    ("PreToolUse", Some("Write|Edit|MultiEdit|NotebookEdit|Bash")),
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

/// What marks a hook entry as loopward's.
const MARK: &str = " hook claude-code";

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The hook command: the binary and the config by absolute path.
pub(super) fn command(exe: &Path, config: &Path, main_agent: &str) -> Result<String> {
    let exe = exe
        .to_str()
        .context("the loopward binary's path is not UTF-8")?;
    let config = config.to_str().context("the config's path is not UTF-8")?;
    Ok(format!(
        "{}{MARK} --config {} --main-agent {}",
        quote(exe),
        quote(config),
        quote(main_agent)
    ))
}

/// Runs the hook command as Claude Code would (through a shell), asking only for its help:
/// it must start and exit 0.
pub(super) fn check_runs(cmd: &str) -> Result<()> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{cmd} --help"))
        .output()
        .context("running sh")?;
    if !out.status.success() {
        bail!(
            "`{cmd}` exited {} ({}); Claude Code would go ahead on every tool call",
            out.status
                .code()
                .map_or("by a signal".into(), |c| c.to_string()),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Writes the hook into `<project>/.claude/settings.json` (other settings and hooks are kept).
pub(super) fn install(config: &Path, main_agent: &str) -> Result<ExitCode> {
    let config = config
        .canonicalize()
        .with_context(|| format!("{} not found; run `loopward init` first", config.display()))?;
    let cfg = Config::load(&config)?;
    let root = cfg.workspace_dir(&config).canonicalize()?;
    let exe = std::env::current_exe().context("finding the loopward binary")?;
    let cmd = command(&exe, &config, main_agent)?;
    check_runs(&cmd)?;
    let dir = root.join(".claude");
    let path = dir.join("settings.json");
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
    for (event, matcher) in EVENTS {
        let list = hooks.entry(event).or_insert_with(|| json!([]));
        let Some(list) = list.as_array_mut() else {
            bail!("`hooks.{event}` in {} is not a list", path.display());
        };
        // An older loopward entry (a bare `loopward` on PATH, say) is replaced, not kept beside.
        list.retain(|e| !e.to_string().contains(MARK));
        let mut entry = json!({"hooks": [{"type": "command", "command": cmd, "timeout": 60}]});
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
    out.line(Tone::Dim, format!("hook command: {cmd}"));
    report(&mut out, &cfg);
    Ok(ExitCode::SUCCESS)
}

/// Whether the installed hook would fail open; exit 1 when it would.
pub(super) fn doctor(config: &Path) -> Result<ExitCode> {
    let config = config
        .canonicalize()
        .with_context(|| format!("{} not found", config.display()))?;
    let cfg = Config::load(&config)?;
    let root = cfg.workspace_dir(&config).canonicalize()?;
    let path = root.join(".claude").join("settings.json");
    let mut out = Printer::stdout();
    let mut problems: Vec<String> = Vec::new();
    let settings: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    for (event, matcher) in EVENTS {
        let entries: Vec<&Value> = settings["hooks"][event]
            .as_array()
            .map(|l| l.iter().filter(|e| e.to_string().contains(MARK)).collect())
            .unwrap_or_default();
        let Some(entry) = entries.first() else {
            problems.push(format!(
                "no loopward hook for {event} in {}",
                path.display()
            ));
            continue;
        };
        if let Some(m) = matcher {
            let have = entry["matcher"].as_str().unwrap_or("");
            if have != "*" && m.split('|').any(|t| !have.split('|').any(|h| h == t)) {
                problems.push(format!("{event} matches {have:?}, not every tool of {m:?}"));
            }
        }
        let cmd = entry["hooks"][0]["command"].as_str().unwrap_or("");
        if !cmd.starts_with('\'') && !cmd.starts_with('/') {
            problems.push(format!(
                "{event}: `{cmd}` finds loopward on Claude Code's PATH; where it is not there the hook exits 127 and Claude Code goes ahead"
            ));
        }
        if let Err(e) = check_runs(cmd) {
            problems.push(format!("{event}: {}", crate::error_text(&e)));
        }
    }
    report(&mut out, &cfg);
    if problems.is_empty() {
        out.line(Tone::Ok, "the hook runs and would not fail open");
        return Ok(ExitCode::SUCCESS);
    }
    for p in &problems {
        out.line(Tone::Refusal, format!("would fail open: {p}"));
    }
    out.line(
        Tone::Dim,
        "fix: `loopward hook install` (writes the absolute binary path and checks it runs)",
    );
    Ok(ExitCode::from(1))
}

/// The sandbox Bash commands will run in.
fn report<W: std::io::Write>(out: &mut Printer<W>, cfg: &Config) {
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
