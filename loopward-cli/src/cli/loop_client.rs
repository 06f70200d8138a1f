//! The coding CLI a loop (or a team's coding-CLI agent) runs: Claude Code, Codex or Gemini
//! CLI, found, checked at its pinned version and given its session hook, before the first
//! record.

use anyhow::{bail, Context, Result};
use loopward::config::AgentKind;
use loopward_runner::cli_agent::{ClaudeCode, Client, Codex, Gemini, HookCommand};
use loopward_runner::gates::Host;
use std::path::{Path, PathBuf};

/// What a client is made from.
pub(super) struct Want<'a> {
    pub(super) kind: AgentKind,
    /// The binary, by path or name (default: the client's usual name, on PATH).
    pub(super) program: Option<&'a Path>,
    pub(super) config: &'a Path,
    pub(super) agent: &'a str,
    pub(super) base_url: Option<&'a str>,
    pub(super) model: Option<&'a str>,
    /// Arguments for every session; empty: the client's defaults ([`default_args`]).
    pub(super) args: &'a [String],
    pub(super) workspace: &'a Path,
}

/// The kind `--agent` names.
pub(super) fn kind(agent: &str) -> Result<AgentKind> {
    Ok(match agent {
        "claude-code" => AgentKind::ClaudeCode,
        "codex" => AgentKind::Codex,
        "gemini" => AgentKind::Gemini,
        other => bail!(
            "--agent {other:?} is not a coding CLI loopward runs: use claude-code, codex or gemini"
        ),
    })
}

/// The arguments each session gets when none are given (after `--`): what lets a headless
/// session act at all, every tool call still judged by the hook, every command in the
/// agent's sandbox.
pub(super) fn default_args(kind: AgentKind) -> Vec<String> {
    let a: &[&str] = match kind {
        AgentKind::Codex => &[
            // Codex's own sandbox off: loopward's hook runs each command in loopward's.
            "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check",
        ],
        AgentKind::Gemini => &["--approval-mode", "yolo"],
        _ => &["--permission-mode", "acceptEdits"],
    };
    a.iter().map(|s| (*s).to_string()).collect()
}

/// The client, checked: it runs, it is the tested version, its hook command runs, and (Claude
/// Code) the project's own hook agrees with the session's.
pub(super) fn client(w: &Want<'_>) -> Result<Client> {
    let (host, usual) = match w.kind {
        AgentKind::Codex => (Host::Codex, "codex"),
        AgentKind::Gemini => (Host::GeminiCli, "gemini"),
        _ => (Host::ClaudeCode, "claude"),
    };
    let program = find_program(w.program.unwrap_or(Path::new(usual)), w.kind)?;
    let hook_command = super::hook_install::host_command(
        host,
        &std::env::current_exe().context("finding the loopward binary")?,
        w.config,
        w.agent,
    )?;
    let args: Vec<std::ffi::OsString> = if w.args.is_empty() {
        default_args(w.kind)
    } else {
        w.args.to_vec()
    }
    .into_iter()
    .map(Into::into)
    .collect();
    let (base_url, model) = (w.base_url.map(String::from), w.model.map(String::from));
    let client: Client = match w.kind {
        AgentKind::Codex => Codex {
            program,
            hook_command: hook_command.shell_line(),
            base_url,
            env_key: "OPENAI_API_KEY".into(),
            model,
            person_home: std::env::var_os("CODEX_HOME")
                .map(PathBuf::from)
                .or_else(|| home().map(|h| h.join(".codex"))),
            args,
            env: vec![],
        }
        .into(),
        AgentKind::Gemini => Gemini {
            program,
            hook_command: hook_command.shell_line(),
            base_url,
            model,
            person_home: std::env::var_os("GEMINI_CLI_HOME")
                .map(PathBuf::from)
                .or_else(home)
                .map(|h| h.join(".gemini")),
            args,
            env: vec![],
        }
        .into(),
        _ => {
            let mut args = args;
            if let Some(m) = model {
                args.extend(["--model".into(), m.into()]);
            }
            ClaudeCode {
                program,
                hook: hook_command.clone(),
                args,
                env: base_url
                    .map(|b| ("ANTHROPIC_BASE_URL".into(), b.into()))
                    .into_iter()
                    .collect(),
            }
            .into()
        }
    };
    client.check_version()?;
    let (files, sub): (&[&str], &str) = match &client {
        Client::Codex(_) => (&[".codex/hooks.json"], "codex"),
        Client::Gemini(_) => (&[".gemini/settings.json"], "gemini"),
        Client::ClaudeCode(_) => (
            &[".claude/settings.json", ".claude/settings.local.json"],
            "claude-code",
        ),
        _ => bail!("a client this loopward cannot check"),
    };
    super::hook_install::check_runs(&hook_command, host)?;
    installed_hooks_agree(w.workspace, files, sub, &hook_command.shell_line())?;
    Ok(client)
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

/// A client that runs nothing (`loopward replay` re-judges recorded sessions).
pub(super) fn recorded(kind: AgentKind) -> Client {
    let program = PathBuf::from("recorded");
    match kind {
        AgentKind::Codex => Codex {
            program,
            hook_command: String::new(),
            base_url: None,
            env_key: String::new(),
            model: None,
            person_home: None,
            args: vec![],
            env: vec![],
        }
        .into(),
        AgentKind::Gemini => Gemini {
            program,
            hook_command: String::new(),
            base_url: None,
            model: None,
            person_home: None,
            args: vec![],
            env: vec![],
        }
        .into(),
        _ => ClaudeCode {
            program,
            hook: HookCommand::new("recorded", [""; 0]),
            args: vec![],
            env: vec![],
        }
        .into(),
    }
}

/// A loopward hook the project installed for the client (`.claude/settings.json`,
/// `.codex/hooks.json`, `.gemini/settings.json`, which the sessions also read) must be the
/// sessions' own command — each client runs an identical command once (checked with each
/// pinned version) — or two hooks would judge each call under two names: refused before the
/// first session.
fn installed_hooks_agree(root: &Path, files: &[&str], sub: &str, ours: &str) -> Result<()> {
    for file in files {
        let path = root.join(file);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let settings: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON; fix or move it", path.display()))?;
        let installed = settings["hooks"]
            .as_object()
            .into_iter()
            .flat_map(|events| events.values())
            .flat_map(|list| list.as_array().into_iter().flatten())
            .flat_map(|entry| entry["hooks"].as_array().into_iter().flatten())
            .filter_map(|h| HookCommand::installed(h, sub));
        for cmd in installed {
            if cmd != ours {
                bail!(
                    "{} installs loopward's hook as `{cmd}`, but the loop's sessions run `{ours}`: both would judge every call, under two names. Reinstall it for the loop's agent (`loopward hook install --host {sub} --main-agent <agent>`, the agent of --as) or remove it from that file",
                    path.display()
                );
            }
        }
    }
    Ok(())
}

/// The client's binary by path, or found on PATH.
fn find_program(p: &Path, kind: AgentKind) -> Result<PathBuf> {
    if p.components().count() > 1 {
        return Ok(std::path::absolute(p)?);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(p))
        .find(|c| c.is_file())
        .with_context(|| {
            let pin = recorded(kind).pin();
            format!(
                "{} is not on PATH: install {} {} (`{}`) or name the binary with {}",
                p.display(),
                pin.client,
                pin.version,
                pin.install,
                pin.flag
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_hook_of_the_client_for_another_agent_is_refused_and_the_same_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".codex")).unwrap();
        let ours = "'/bin/loopward' hook codex --config '/p/l.toml' --main-agent 'root'";
        let hooks = |cmd: &str| {
            serde_json::json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": cmd}]}]}})
                .to_string()
        };
        let file = dir.path().join(".codex/hooks.json");
        let check = || installed_hooks_agree(dir.path(), &[".codex/hooks.json"], "codex", ours);
        std::fs::write(&file, hooks(ours)).unwrap();
        assert!(check().is_ok());
        std::fs::write(&file, hooks(&ours.replace("root", "planner"))).unwrap();
        let e = check().unwrap_err().to_string();
        assert!(e.contains("--host codex") && e.contains("two names"), "{e}");
    }

    #[test]
    fn an_absent_client_is_named_with_its_pinned_version_and_how_to_install_it() {
        for (kind, says) in [
            (AgentKind::Codex, "install Codex 0.171.0"),
            (AgentKind::Gemini, "install Gemini CLI 0.61.0"),
            (AgentKind::ClaudeCode, "install Claude Code 2.1.332"),
        ] {
            let e = find_program(Path::new("no-such-client-here"), kind).unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
        }
        assert!(kind("aider").is_err());
    }
}
