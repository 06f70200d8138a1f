//! Whole-file checks: names that must exist, globs that must compile, territories that must not
//! overlap with different owners, caps that must be positive.

use super::{Config, BUILTIN_TOOLS};
use globset::{Glob, GlobBuilder, GlobMatcher};
use loopward_core::AgentId;
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
    }
    let unknown = |key: String, who: &AgentId| -> Problem {
        (
            key,
            format!("there is no agent named {who} on the team"),
            format!("use one of: {}", names()),
        )
    };
    if !team.contains(&cfg.run.first) {
        return Err(unknown("run.first".into(), &cfg.run.first));
    }
    if cfg.limits.turns_per_run == Some(0) {
        return Err(zero("limits.turns_per_run"));
    }
    check_territories(cfg, &team, &unknown)?;
    for (i, r) in cfg.gates.review.iter().enumerate() {
        for (field, who) in [("from", &r.from), ("via", &r.via)] {
            if !team.contains(who) {
                return Err(unknown(format!("gates.review[{i}].{field}"), who));
            }
        }
        for (j, g) in r.when.iter().enumerate() {
            glob(g).map_err(|why| bad_glob(format!("gates.review[{i}].when[{j}]"), g, &why))?;
        }
    }
    if cfg.gates.sprawl.enabled && cfg.gates.sprawl.threshold == 0 {
        return Err(zero("gates.sprawl.threshold"));
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

fn bad_glob(key: String, g: &str, why: &str) -> Problem {
    (
        key,
        format!("{g:?} is not a valid glob: {why}"),
        "fix the pattern (`*` matches within one folder, `**` across folders, `{a,b}` alternatives)"
            .into(),
    )
}

/// Compiles a territory glob the way the gates do: `*` never crosses `/`.
pub(crate) fn glob(pattern: &str) -> Result<GlobMatcher, String> {
    if pattern.is_empty() {
        return Err("the pattern is empty".into());
    }
    if pattern.starts_with('/') || pattern.split('/').any(|c| c == "..") {
        return Err("patterns are workspace-relative: no leading `/`, no `..`".into());
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g: Glob| g.compile_matcher())
        .map_err(|e| e.kind().to_string())
}

fn is_literal(p: &str) -> bool {
    !p.contains(['*', '?', '[', '{'])
}

/// The fixed folder prefix of a glob (`src/**/*.rs` → `src/`).
fn literal_prefix(p: &str) -> &str {
    let cut = p.find(['*', '?', '[', '{']).unwrap_or(p.len());
    &p[..p[..cut].rfind('/').map_or(0, |i| i + 1)]
}

fn check_territories(
    cfg: &Config,
    team: &BTreeSet<&AgentId>,
    unknown: &dyn Fn(String, &AgentId) -> Problem,
) -> Result<(), Problem> {
    let mut compiled = Vec::new();
    for (i, t) in cfg.territories.iter().enumerate() {
        let owners = t.all_owners();
        if owners.is_empty() {
            return Err((
                format!("territory[{i}].owner"),
                "the territory has no owner".into(),
                "set owner = \"<agent>\" or owners = [\"<agent>\", …]".into(),
            ));
        }
        for o in &owners {
            if !team.contains(o) {
                return Err(unknown(format!("territory[{i}].owner"), o));
            }
        }
        if t.paths.is_empty() {
            return Err((
                format!("territory[{i}].paths"),
                "the territory has no paths".into(),
                "list at least one glob, e.g. paths = [\"plan.md\"]".into(),
            ));
        }
        for (j, p) in t.paths.iter().enumerate() {
            let m =
                glob(p).map_err(|why| bad_glob(format!("territory[{i}].paths[{j}]"), p, &why))?;
            compiled.push((i, j, p.as_str(), m, owners.clone()));
        }
    }
    for (a, x) in compiled.iter().enumerate() {
        for y in &compiled[a + 1..] {
            if x.0 == y.0 || x.4 == y.4 {
                continue;
            }
            if overlaps(x.2, &x.3, y.2, &y.3) {
                return Err((
                    format!("territory[{}].paths[{}]", y.0, y.1),
                    format!(
                        "{:?} overlaps {:?} (territory[{}]) but the owners differ ({} vs {})",
                        y.2,
                        x.2,
                        x.0,
                        join(&y.4),
                        join(&x.4)
                    ),
                    "give each path one set of owners: narrow one pattern, or merge the two territories with owners = [...]".into(),
                ));
            }
        }
    }
    Ok(())
}

fn join(v: &[AgentId]) -> String {
    v.iter().map(AgentId::as_str).collect::<Vec<_>>().join(", ")
}

/// Whether two globs can match the same path: decided exactly when one is literal, and
/// conservatively (shared folder prefix) when both have wildcards.
fn overlaps(p: &str, pm: &GlobMatcher, q: &str, qm: &GlobMatcher) -> bool {
    if p == q {
        return true;
    }
    match (is_literal(p), is_literal(q)) {
        (true, _) => qm.is_match(p) || q.starts_with(&format!("{p}/")),
        (_, true) => pm.is_match(q) || p.starts_with(&format!("{q}/")),
        _ => {
            let (a, b) = (literal_prefix(p), literal_prefix(q));
            if !(a.starts_with(b) || b.starts_with(a)) {
                return false;
            }
            // Without `**` a pattern only matches paths of its own depth.
            let depth = |s: &str| s.matches('/').count();
            match (p.contains("**"), q.contains("**")) {
                (false, false) => depth(p) == depth(q),
                (false, true) => depth(p) >= depth(b),
                (true, false) => depth(q) >= depth(a),
                (true, true) => true,
            }
        }
    }
}
