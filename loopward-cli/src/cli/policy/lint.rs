//! `loopward policy lint`: rules that load but will not do what they seem to. Each finding
//! names where the rule is written (`loopward.toml:<line>`) and what to do.
//!
//! What the config refuses to load is not linted here: an owner, reviewer or stop-gate agent
//! not on the team, an empty, absolute, `./` or `..` glob, territories of different owners that
//! overlap, a review gate on an agent without the handoff tool.

use super::Sources;
use loopward::config::{AgentConfig, Config};
use loopward_core::ToolName;
use loopward_runner::gates::{
    redundant_claims, ControlFiles, GlobFlaw, Policy, ReviewConfig, Territory,
};
use loopward_runner::sandbox::SandboxMode;
use loopward_runner::Workspace;
use loopward_term::render::{Printer, Tone};
use std::process::ExitCode;

/// One rule that will not do what it seems to: where it is written, what is wrong, the remedy.
struct Finding {
    at: String,
    what: String,
    fix: String,
}

/// The findings, in the order of the sections they concern.
#[derive(Default)]
struct Findings(Vec<Finding>);

impl Findings {
    fn add(&mut self, at: impl Into<String>, what: impl Into<String>, fix: impl Into<String>) {
        self.0.push(Finding {
            at: at.into(),
            what: what.into(),
            fix: fix.into(),
        });
    }
}

/// A glob's literal folders lie in loopward's control files, which no agent may write.
fn in_control(control: &ControlFiles, glob: &str) -> bool {
    let literal: String = glob
        .split('/')
        .take_while(|part| !part.contains(['*', '?', '[', '{', '\\']))
        .collect::<Vec<_>>()
        .join("/");
    let literal = literal.trim_end_matches('/');
    !literal.is_empty() && control.covers(literal)
}

pub(super) fn lint<W: std::io::Write>(
    out: &mut Printer<W>,
    cfg: &Config,
    config_path: &std::path::Path,
    sources: &Sources,
    ws: Workspace,
) -> anyhow::Result<ExitCode> {
    // The control files as a run of this config has them: its own file name and runs folder.
    let config_abs = std::path::absolute(config_path)?;
    let control = ControlFiles::in_workspace(&ws, &config_abs, &cfg.run.runs_dir);
    let policy_cfg = cfg.policy();
    let policy = Policy::with_control(&policy_cfg, ws.clone(), control.clone())?;
    let mut found = Findings::default();
    territories(&mut found, cfg, &control)?;
    sprawl(&mut found, cfg, &policy)?;
    for r in &cfg.gates.review {
        review(&mut found, r, &control, &ws);
    }
    stopgates(&mut found, cfg, sources, &control, &ws);
    agents(&mut found, cfg, sources);
    if policy_cfg.gates.shell.sandbox == SandboxMode::WatchOnly {
        found.add(
            sources.header("[gates.shell]").unwrap_or_default(),
            "[gates.shell] sandbox = \"watch-only\": commands are only compared and put back, never contained",
            "remove `sandbox = \"watch-only\"` where the kernel sandbox is available (Linux with Landlock)",
        );
    }
    for f in &found.0 {
        out.line(Tone::Refusal, format!("{}: {}", f.at, f.what));
        out.line(Tone::Dim, format!("  what to do: {}", f.fix));
    }
    if found.0.is_empty() {
        out.line(Tone::Ok, "no finding: every rule does what it says");
        return Ok(ExitCode::SUCCESS);
    }
    out.line(Tone::Refusal, format!("{} finding(s)", found.0.len()));
    Ok(ExitCode::from(1))
}

fn source_of(t: &loopward::config::TerritoryConfig) -> String {
    t.source.as_str().unwrap_or("loopward.toml").to_string()
}

/// Territories: globs in control files or that match nothing, and paths claimed twice.
fn territories(found: &mut Findings, cfg: &Config, control: &ControlFiles) -> anyhow::Result<()> {
    for t in &cfg.territories {
        let (at, name) = (source_of(t), t.gate_name());
        for glob in &t.paths {
            if in_control(control, glob) {
                found.add(
                    &at,
                    format!("{name}: `{glob}` lies in loopward's control files, which no agent may write: its owners can never write it either"),
                    "remove the glob; a person changes control files",
                );
            } else if let Some(flaw) = GlobFlaw::of(glob, true) {
                found.add(&at, format!("{name}: `{glob}` {flaw}"), flaw.remedy());
            }
        }
    }
    let ts = &cfg.territories;
    for c in redundant_claims(ts)? {
        let (a, b) = (&ts[c.first.0], &ts[c.second.0]);
        let (ga, gb) = (&a.paths[c.first.1], &b.paths[c.second.1]);
        let what = match c.adds_nothing {
            Some(n) => {
                let (dead, by) = if n == c.first { (ga, gb) } else { (gb, ga) };
                format!("redundant: `{dead}` adds nothing, `{by}` already claims it for the same owners")
            }
            None => format!(
                "redundant: `{ga}` and `{gb}` both claim {} for the same owners",
                c.path
            ),
        };
        let (what, fix) = if c.first.0 == c.second.0 {
            (
                format!("{}: {what}", a.gate_name()),
                "remove the glob that adds nothing",
            )
        } else {
            (
                format!(
                    "{} and {} ({}): {what}",
                    a.gate_name(),
                    b.gate_name(),
                    source_of(b)
                ),
                "merge the two [[territory]] tables into one, or narrow one glob so each path is claimed once",
            )
        };
        found.add(source_of(a), what, fix);
    }
    Ok(())
}

/// The sprawl gate's plan inside a territory: only its owners can clear the gate.
fn sprawl(found: &mut Findings, cfg: &Config, policy: &Policy) -> anyhow::Result<()> {
    let sprawl = &cfg.gates.sprawl;
    if !sprawl.enabled {
        return Ok(());
    }
    let plan = &sprawl.plan_path;
    for t in &cfg.territories {
        if Territory::from_config(t)?.covers(plan) {
            found.add(
                super::Sources::of("sprawl", policy),
                format!("the sprawl gate's plan {plan} lies in {}: only its owners can write the plan that clears the gate for everyone", t.gate_name()),
                format!("move plan_path out of {}, or take {plan} out of the territory", t.gate_name()),
            );
            break;
        }
    }
    Ok(())
}

/// A glob matched against written files as written (no widening): why it never matches, with
/// the remedy. `what` names the rule's key for the message.
fn dead_glob(glob: &str, control: &ControlFiles, ws: &Workspace) -> Option<(String, String)> {
    if let Some(flaw) = GlobFlaw::of(glob, false) {
        return Some((flaw.to_string(), flaw.remedy().into()));
    }
    if in_control(control, glob) {
        return Some((
            "lies in loopward's control files, which no agent may write (the policy refuses such a write before any other gate is asked)".into(),
            "remove it; a person changes control files".into(),
        ));
    }
    // A plain name matches that path only, not what lies below it: a folder's is never a
    // changed file's path.
    let literal = !glob.contains(['*', '?', '[', '{', '\\']);
    if literal && ws.root().join(glob).is_dir() {
        return Some((
            format!("names the folder {glob}, and matches that path only, never a file in it"),
            format!("write \"{glob}/**\""),
        ));
    }
    None
}

/// A review gate's `when` globs that can never arm it.
fn review(found: &mut Findings, r: &ReviewConfig, control: &ControlFiles, ws: &Workspace) {
    let at = r.source.as_str().unwrap_or("loopward.toml").to_string();
    for w in &r.when {
        if let Some((why, fix)) = dead_glob(w, control, ws) {
            found.add(
                &at,
                format!(
                    "{}: when `{w}` {why}: changes by {} never arm the gate through it",
                    r.gate_name(),
                    r.from
                ),
                fix,
            );
        }
    }
}

/// Stop-gates that cannot fire: a tool no agent has, a write glob that matches nothing an agent
/// may write, a handoff nobody can make.
fn stopgates(
    found: &mut Findings,
    cfg: &Config,
    sources: &Sources,
    control: &ControlFiles,
    ws: &Workspace,
) {
    let hands_off = |a: &AgentConfig| a.tools.iter().any(|t| t == "handoff");
    for (i, g) in cfg.stopgates.iter().enumerate() {
        let at = sources
            .nth("[[stopgate]]", i)
            .unwrap_or_else(|| format!("stopgate[{i}]"));
        let tool = g.tool.as_ref().map(ToolName::as_str);
        let target = [
            tool,
            g.glob.as_deref(),
            g.to.as_deref(),
            g.agent.as_deref(),
            g.phase.as_deref(),
        ]
        .into_iter()
        .flatten()
        .next()
        .unwrap_or_default();
        // Its name as its decisions record it (default `<point>:<target>`).
        let name = g
            .name
            .clone()
            .unwrap_or_else(|| format!("{}:{target}", g.point));
        let name = format!("stopgate {name}");
        match g.point.as_str() {
            "tool" => {
                let tool = tool.unwrap_or_default();
                if !cfg.agents.iter().any(|a| a.tools.iter().any(|t| t == tool)) {
                    let known = loopward::config::BUILTIN_TOOLS.contains(&tool);
                    found.add(
                        at,
                        format!(
                            "{name}: tool = \"{tool}\" cannot fire: {}; stop-gates stand before loopward's own tools, not a coding client's (those are the hook's)",
                            if known { "no [[agent]] lists it in its tools" } else { "there is no loopward tool of that name" }
                        ),
                        format!(
                            "name a tool an agent lists ({}), or remove the gate",
                            loopward::config::BUILTIN_TOOLS.join(", ")
                        ),
                    );
                }
            }
            "write" => {
                let glob = g.glob.as_deref().unwrap_or_default();
                if let Some((why, fix)) = dead_glob(glob, control, ws) {
                    found.add(
                        at,
                        format!("{name}: glob `{glob}` {why}: the gate cannot fire"),
                        fix,
                    );
                }
            }
            "handoff" => {
                let to = g.to.as_deref().unwrap_or_default();
                if !cfg
                    .agents
                    .iter()
                    .any(|a| a.name.as_str() != to && hands_off(a))
                {
                    found.add(
                        at,
                        format!("{name}: a handoff to {to} cannot happen: no other agent has the handoff tool, so the gate cannot fire"),
                        "add \"handoff\" to the tools of the agent that hands work to it, or remove the gate",
                    );
                }
            }
            _ => {}
        }
    }
}

/// Agents no rule names: not `run.first`, no territory's owner, no review or stop-gate's agent.
fn agents(found: &mut Findings, cfg: &Config, sources: &Sources) {
    for (i, a) in cfg.agents.iter().enumerate() {
        let name = a.name.as_str();
        let owns = cfg
            .territories
            .iter()
            .any(|t| t.owner.iter().chain(&t.owners).any(|o| o == name));
        let reviews = cfg
            .gates
            .review
            .iter()
            .any(|r| r.from == name || r.via == name);
        let gated = cfg
            .stopgates
            .iter()
            .any(|g| g.agent.as_deref() == Some(name) || g.to.as_deref() == Some(name));
        if owns || reviews || gated || cfg.run.first == a.name {
            continue;
        }
        let writes = a.kind.is_cli()
            || a.tools
                .iter()
                .any(|t| ["write_file", "edit_file", "shell"].contains(&t.as_str()));
        let means = if writes {
            "it may write every path no territory claims, and nothing says which are its"
        } else {
            "it has no tool that writes, and no gate or handoff rule expects it"
        };
        found.add(
            sources
                .nth("[[agent]]", i)
                .unwrap_or_else(|| format!("agent[{i}]")),
            format!("agent {name} is named nowhere: it owns no territory, and no review gate, stop-gate or run.first names it: {means}"),
            format!("give {name} a [[territory]] of its own, name it in a gate, or remove the [[agent]]"),
        );
    }
}
