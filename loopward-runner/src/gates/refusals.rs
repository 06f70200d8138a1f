//! Every refusal text the gates give, once, whichever enforcement point asked: what was touched,
//! the rule, and the way out that actually works.

use super::config::SprawlConfig;
use super::control::CONTROL_GATE;
use super::host::Host;
use super::overrides::OverrideError;
use super::policy::{POLICY_GATE, SANDBOX_GATE, SHELL_GATE};
use super::territory::Territory;
use loopward_core::{AgentId, Refusal};
use std::time::Duration;

/// The longest TTL a refusal suggests asking for.
const SUGGESTED_TTL: Duration = Duration::from_secs(600);

/// A path as shown to the model.
pub(crate) fn show(rel: &str) -> &str {
    if rel.is_empty() {
        "the workspace root"
    } else {
        rel
    }
}

/// A write to a control file.
pub(crate) fn control(rel: &str) -> Refusal {
    Refusal::new(
        CONTROL_GATE,
        format!("{} is a control file: .loopward/, the config file and the runs directory are never writable by agents, with or without an override", show(rel)),
        "leave it unchanged; if it must change, say so in your reply and a person will do it",
    )
}

/// What a territory says to a non-owner, with why each override on offer was refused.
/// `subagent`: the agent is not one of the config's `[[agent]]`s, so the override command it is
/// told to ask for carries `--subagent` (without it, `override grant` refuses the name).
pub(crate) fn territory(
    t: &Territory,
    agent: &AgentId,
    rel: &str,
    no_override: Option<&OverrideError>,
    max_ttl: Duration,
    subagent: bool,
    host: Host,
) -> Refusal {
    let mut reason = format!(
        "{} belongs to {} ({}); {agent} does not own it",
        show(rel),
        t.owner_list(),
        t.name()
    );
    if let Some(OverrideError::NoneValid { rejections, .. }) = no_override {
        for r in rejections {
            reason.push_str(&format!("; override {} refused: {}", r.file, r.why));
        }
    }
    let owner = t.owners().first().map_or("its owner", AgentId::as_str);
    Refusal::new(
        t.name(),
        reason,
        format!(
            "leave the change to {owner}: {}, saying exactly what to change and why; or ask a person for a one-shot override (loopward override grant --agent {agent}{} --path {} --reason \"<why>\" --ttl {}) and make the same call again",
            host.pass_to(owner),
            if subagent { " --subagent" } else { "" },
            show(rel),
            humantime::format_duration(max_ttl.min(SUGGESTED_TTL))
        ),
    )
}

/// A path that would have gone through on an override, in a call another gate refused: the
/// override is left for the next try.
pub(crate) fn unused_override(gate: &str, rel: &str, id: &str, refused_by: &str) -> Refusal {
    Refusal::new(
        gate,
        format!(
            "{rel} needs override {id}, which was not used because {refused_by} refused the call"
        ),
        "",
    )
}

/// The sprawl gate: a third unit of work with no plan. `plan_owner` is the territory the plan
/// file lies in when the caller may not write it.
pub(crate) fn sprawl(
    cfg: &SprawlConfig,
    plan_owner: Option<&Territory>,
    files: &[&str],
    touched: &[&str],
    n: usize,
) -> Refusal {
    let plan = &cfg.plan_path;
    let way = match plan_owner {
        Some(t) => format!(
            "{plan} is in {}'s territory, so hand the work to {} and ask for a plan there (its first line must start with {:?})",
            t.owner_list(),
            t.owners().first().map_or("its owner", AgentId::as_str),
            cfg.marker
        ),
        None => format!(
            "write your plan to {plan}, its first line starting with {:?}, naming the units of work and their order",
            cfg.marker
        ),
    };
    Refusal::new(
        loopward_core::GateKind::Sprawl.as_str(),
        format!(
            "this call would start unit of work #{n} since the last human message ({}) with no plan since then; files touched so far: {}",
            files.join(", "),
            touched.join(", ")
        ),
        format!("{way}. A plan written after the last human message clears this gate; then make the same call again. This gate refuses once per turn."),
    )
}

/// A call whose effects could not be worked out (too many paths, an unreadable folder).
pub(crate) fn undecidable(why: &str) -> Refusal {
    Refusal::new(
        POLICY_GATE,
        format!("could not tell what this call would change: {why}"),
        "act on fewer paths at once, or on files rather than large folders",
    )
}

/// A path outside the workspace, which no gate can judge.
pub(crate) fn outside(why: &str) -> Refusal {
    Refusal::new(
        loopward_core::GateKind::Workspace.as_str(),
        why,
        "write inside the project; loopward cannot judge a path outside it, so it refuses",
    )
}

/// A shell command that was not run because its changes could not have been checked.
pub fn unwatchable(why: &str, host: Host) -> Refusal {
    Refusal::new(
        SHELL_GATE,
        format!("not run: the workspace could not be recorded before the command, so its changes could not be checked ({why})"),
        format!("use {} instead, or ask a person to list big generated folders under [gates.shell] skip", host.file_tools()),
    )
}

/// A shell command that was not run because it could not be put in its kernel sandbox.
pub(crate) fn not_contained(why: &str, host: Host) -> Refusal {
    Refusal::new(
        SANDBOX_GATE,
        format!("not run: {why}"),
        format!(
            "use {} instead; a person can fix the sandbox as the reason says",
            host.file_tools()
        ),
    )
}

/// The warning on every command of a `watch-only` config.
pub(crate) fn watch_only() -> Refusal {
    Refusal::new(
        SANDBOX_GATE,
        "watch-only: this command runs without a kernel sandbox; its changes are only compared and reverted afterwards",
        "remove `sandbox = \"watch-only\"` from [gates.shell] to contain commands",
    )
}

/// What the model reads when a command ran but its changes could not be compared afterwards.
pub(crate) fn blinded(why: &str) -> String {
    format!(
        "the command ran, but the workspace could not be compared afterwards ({why}); its changes are unchecked and were reported, and they will be compared with the workspace as it was before the command (what may not stand put back) as soon as it can be; until then commands and writes are refused"
    )
}
