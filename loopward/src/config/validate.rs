//! Whole-file checks: names that must exist, globs that must compile, territories that must not
//! overlap with different owners, caps that must be positive.

use super::{Config, BUILTIN_TOOLS};
use loopward_core::AgentId;
use loopward_runner::gates::ConfigError as GateConfigError;
use std::collections::BTreeSet;

/// (key, problem, what to do)
pub(super) type Problem = (String, String, String);

pub(super) fn check(cfg: &Config) -> Result<(), Problem> {
    let team: BTreeSet<&AgentId> = cfg.agents.iter().map(|a| &a.name).collect();
    let names = || {
        cfg.agents
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if cfg.agents.is_empty() {
        return Err((
            "agent".into(),
            "the team has no agents".into(),
            "add at least one [[agent]] with a name and its tools".into(),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, a) in cfg.agents.iter().enumerate() {
        if !seen.insert(&a.name) {
            return Err((
                format!("agent[{i}].name"),
                format!("agent {} is declared twice", a.name),
                "give each [[agent]] a unique name".into(),
            ));
        }
        for (j, t) in a.tools.iter().enumerate() {
            if !BUILTIN_TOOLS.contains(&t.as_str()) {
                return Err((
                    format!("agent[{i}].tools[{j}]"),
                    format!("there is no tool named {t:?}"),
                    format!("use one of: {}", BUILTIN_TOOLS.join(", ")),
                ));
            }
        }
        if a.max_steps == Some(0) {
            return Err(zero(&format!("agent[{i}].max_steps")));
        }
        let kind = a.kind.name();
        match (a.kind, &a.verify) {
            (k, v) if k.is_cli() && v.as_deref().is_none_or(|v| v.trim().is_empty()) => {
                return Err((
                    format!("agent[{i}].verify"),
                    format!("{} is a {kind} agent with no verify command: its work would end on its word", a.name),
                    "add verify = \"cargo test\" (the command that says its work is done)".into(),
                ))
            }
            (k, _) if k.is_cli() => {
                if let Some(t) = a.tools.iter().find(|t| !super::LOOP_TOOLS.contains(&t.as_str())) {
                    return Err((
                        format!("agent[{i}].tools"),
                        format!("{} is a {kind} agent: its tools are the client's, governed by the hook; {t} is not one loopward serves to its sessions", a.name),
                        format!("remove {t}; a {kind} agent may list only loopward's own tools ({}), served to its sessions over MCP", super::LOOP_TOOLS.join(", ")),
                    ));
                }
            }
            (super::AgentKind::Model, Some(_)) => {
                return Err((
                    format!("agent[{i}].verify"),
                    format!("verify is for coding-CLI agents (claude-code, codex, gemini); {} is a model agent", a.name),
                    "remove verify, or set kind = \"claude-code\", \"codex\" or \"gemini\"".into(),
                ))
            }
            (super::AgentKind::Model, _) if a.base_url.is_some() => {
                return Err((
                    format!("agent[{i}].base_url"),
                    format!("base_url is for coding-CLI agents; {} is a model agent", a.name),
                    "remove it; a model agent's API is [backend]'s".into(),
                ))
            }
            (super::AgentKind::Model, _) if a.model.is_some() => {
                return Err((
                    format!("agent[{i}].model"),
                    format!("model is for coding-CLI agents; {} is a model agent", a.name),
                    "remove it; a model agent's model is [backend]'s".into(),
                ))
            }
            _ => {}
        }
    }
    let unknown = |key: String, who: &AgentId| -> Problem {
        (
            key,
            format!("there is no agent named {who} on the team"),
            format!("use one of: {}", names()),
        )
    };
    workspace_path("run.runs_dir", &cfg.run.runs_dir.to_string_lossy())?;
    if !team.contains(&cfg.run.first) {
        return Err(unknown("run.first".into(), &cfg.run.first));
    }
    if cfg.class_jump.is_none() {
        for (i, a) in cfg.agents.iter().enumerate() {
            if let Some(j) = a.tools.iter().position(|t| t == "report_attempt") {
                return Err((
                    format!("agent[{i}].tools[{j}]"),
                    "report_attempt reports to the class-jump tracker, and there is no [class_jump] table".into(),
                    "add [class_jump] with strategies = [\"…\", \"…\"], or remove the tool".into(),
                ));
            }
        }
    }
    if let Some(cj) = &cfg.class_jump {
        // report_attempt with the same subtask, strategy and outcome is the same call each
        // time: past max_identical the repeat layer refuses it before class-jump can count it.
        if cj.failures_per_strategy > cfg.repeat.max_identical {
            return Err((
                "class_jump.failures_per_strategy".into(),
                format!(
                    "is {}, but repeat.max_identical is {}: the repeat limit refuses the {}th identical report_attempt before class-jump can count it, so class-jump would never fire",
                    cj.failures_per_strategy,
                    cfg.repeat.max_identical,
                    cfg.repeat.max_identical + 1
                ),
                format!(
                    "lower class_jump.failures_per_strategy to at most {}, or raise [repeat] max_identical to at least {}",
                    cfg.repeat.max_identical, cj.failures_per_strategy
                ),
            ));
        }
    }
    for (i, g) in cfg.stopgates.iter().enumerate() {
        if g.point == "phase" {
            return Err((
                format!("stopgate[{i}].point"),
                format!(
                    "is \"phase\" (phase {:?}), but a configured team has no phases: the gate would load and never fire",
                    g.phase.as_deref().unwrap_or("")
                ),
                "gate the agent's turn instead (point = \"turn\", agent = \"…\"), a tool, a write or a handoff; phase gates are for a custom loop that calls StopGates::before_phase".into(),
            ));
        }
        for (field, who) in [("agent", &g.agent), ("to", &g.to)] {
            if let Some(name) = who {
                match AgentId::new(name.clone()) {
                    Ok(id) if team.contains(&id) => {}
                    Ok(id) => return Err(unknown(format!("stopgate[{i}].{field}"), &id)),
                    Err(e) => {
                        return Err((
                            format!("stopgate[{i}].{field}"),
                            e.to_string(),
                            "name an agent of the team".into(),
                        ))
                    }
                }
            }
        }
    }
    loopward_runner::layers::stack::Stack::new(&cfg.layers()).map_err(|e| {
        (
            e.field.clone(),
            e.why.clone(),
            "fix the value, or remove the key to use the default".into(),
        )
    })?;
    check_territories(cfg, &team, &unknown)?;
    super::contain::check(cfg)
}

/// A path inside the workspace as `loopward.toml` writes it: relative to the workspace,
/// `/`-separated, no `.`, `..` or empty parts (the one path format of the file; see
/// docs/config.md).
fn workspace_path(key: &str, path: &str) -> Result<(), Problem> {
    let bad = path.is_empty()
        || path.starts_with('/')
        || path.contains('\\')
        || path
            .trim_end_matches('/')
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..");
    if bad {
        return Err((
            key.into(),
            format!("{path:?} is not a workspace path"),
            "write it relative to the workspace, with `/` between folders and no `.`, `..` or leading `/` (e.g. \"runs\")".into(),
        ));
    }
    Ok(())
}

fn zero(key: &str) -> Problem {
    (
        key.into(),
        "is 0, which would stop every run before it starts".into(),
        "set it to at least 1, or remove the key to use the default".into(),
    )
}

fn check_territories(
    cfg: &Config,
    team: &BTreeSet<&AgentId>,
    unknown: &dyn Fn(String, &AgentId) -> Problem,
) -> Result<(), Problem> {
    // `key` names `name`, which must be an agent of the team.
    let member = |key: String, name: &str| match AgentId::new(name) {
        Ok(id) if team.contains(&id) => Ok(()),
        Ok(id) => Err(unknown(key, &id)),
        Err(e) => Err((key, e.to_string(), "name an agent of the team".into())),
    };
    for (i, t) in cfg.territories.iter().enumerate() {
        for o in t.owner.iter().chain(t.owners.iter()) {
            member(format!("territory[{i}].owner"), o)?;
        }
    }
    for (i, r) in cfg.gates.review.iter().enumerate() {
        for (field, who) in [("from", &r.from), ("via", &r.via)] {
            member(format!("gates.review[{i}].{field}"), who)?;
        }
    }
    // A review gate judges `from`'s handoffs: without the handoff tool it can never fire, and a
    // gate that cannot fire is a promise the config does not keep.
    for (i, r) in cfg.gates.review.iter().enumerate() {
        let from = cfg.agents.iter().find(|a| a.name.as_str() == r.from);
        if from.is_some_and(|a| !a.tools.iter().any(|t| t == "handoff")) {
            return Err((
                format!("gates.review[{i}].from"),
                format!(
                    "agent {} has no handoff tool, so this review gate on its handoffs can never fire",
                    r.from
                ),
                format!(
                    "add \"handoff\" to the tools of [[agent]] {}, or remove this [[gates.review]]",
                    r.from
                ),
            ));
        }
    }
    // Two review gates with one name cannot both be told apart in the ledger, nor removed by
    // name: the gates refuse to build, so the file must not load.
    for (j, r) in cfg.gates.review.iter().enumerate() {
        let name = r.gate_name();
        if let Some(i) = cfg.gates.review[..j]
            .iter()
            .position(|o| o.gate_name() == name)
        {
            let first = &cfg.gates.review[i];
            // An empty `when` arms on anything, so the merge does too.
            let mut when: Vec<&str> = first.when.iter().map(String::as_str).collect();
            if first.when.is_empty() || r.when.is_empty() {
                when.clear();
            } else {
                for w in &r.when {
                    if !when.contains(&w.as_str()) {
                        when.push(w);
                    }
                }
            }
            return Err((
                format!("gates.review[{j}]"),
                format!("gates.review[{i}] and gates.review[{j}] are both named {name:?}"),
                format!(
                    "merge them into one [[gates.review]] with when = [{}], or give one of them its own name = \"…\"",
                    when.iter().map(|w| format!("{w:?}")).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    cfg.policy().validate().map_err(gate_problem)
}

/// The gates module's own checks (globs, overlaps, owners, sprawl, TTLs), as a problem.
fn gate_problem(e: GateConfigError) -> Problem {
    match e {
        GateConfigError::BadGlob { section, glob, why } => (
            section,
            format!("{glob:?} is not a valid glob: {why}"),
            "fix the pattern (`*` matches within one folder, `**` across folders, `{a,b}` alternatives)".into(),
        ),
        GateConfigError::Overlap { a, b, path } => (
            a.clone(),
            format!("territories {a} and {b} overlap at {path:?} but have different owners"),
            "give each path one set of owners: narrow one pattern, or merge the two territories with owners = [...]".into(),
        ),
        GateConfigError::Invalid { section, why } => (
            section,
            why,
            "fix the value; `loopward init` writes a commented example of every section".into(),
        ),
        other => (
            "(gates)".into(),
            other.to_string(),
            "fix the gate sections; `loopward init` writes a commented example".into(),
        ),
    }
}
