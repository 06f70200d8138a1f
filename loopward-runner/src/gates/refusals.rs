//! Every refusal text the gates give, once, whichever enforcement point asked: what was touched,
//! the rule, and the way out that actually works. Adapters (the runner's tool stack, each host's
//! hook in `loopward-hooks`) take their texts from here and hold none of their own (`cargo
//! xtask tidy` checks the hooks crate).

use super::config::SprawlConfig;
use super::host::{Host, Passing};
use super::overrides::OverrideError;
use super::territory::Territory;
use loopward_core::{AgentId, GateId, GateKind, Refusal};
use std::sync::LazyLock;
use std::time::Duration;

/// The longest TTL a refusal suggests asking for.
const SUGGESTED_TTL: Duration = Duration::from_secs(600);

/// A path as shown to the model.
pub fn show(rel: &str) -> &str {
    if rel.is_empty() {
        "the workspace root"
    } else {
        rel
    }
}

/// A write to a control file.
pub fn control(rel: &str) -> Refusal {
    Refusal::new(
        GateKind::Control,
        format!("{} is a control file: .loopward/, the config file and the runs directory are never writable by agents, with or without an override", show(rel)),
        "leave it unchanged; if it must change, say so in your reply and a person will do it",
    )
}

/// What a territory says to a non-owner, with why each override on offer was refused.
/// `subagent`: the agent is not one of the config's `[[agent]]`s, so the override command it is
/// told to ask for carries `--subagent` (without it, `override grant` refuses the name).
pub fn territory(
    t: &Territory,
    agent: &AgentId,
    rel: &str,
    no_override: Option<&OverrideError>,
    max_ttl: Duration,
    subagent: bool,
    passing: Passing,
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
        &t.id(),
        reason,
        format!(
            "leave the change to {owner}: {}, saying exactly what to change and why; or ask a person for a one-shot override (loopward override grant --agent {agent}{} --path {} --reason \"<why>\" --ttl {}) and make the same call again",
            passing.pass_to(owner),
            if subagent { " --subagent" } else { "" },
            show(rel),
            humantime::format_duration(max_ttl.min(SUGGESTED_TTL))
        ),
    )
}

/// A path that would have gone through on an override, in a call another gate refused: the
/// override is left for the next try.
pub fn unused_override(gate: &GateId, rel: &str, id: &str, refused_by: &GateId) -> Refusal {
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
pub fn sprawl(
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
        GateKind::Sprawl,
        format!(
            "this call would start unit of work #{n} since the last human message ({}) with no plan since then; files touched so far: {}",
            files.join(", "),
            touched.join(", ")
        ),
        format!("{way}. A plan written after the last human message clears this gate; then make the same call again. This gate refuses once per turn."),
    )
}

/// A call whose effects could not be worked out (too many paths, an unreadable folder).
pub fn undecidable(why: &str) -> Refusal {
    Refusal::new(
        GateKind::Policy,
        format!("could not tell what this call would change: {why}"),
        "act on fewer paths at once, or on files rather than large folders",
    )
}

/// A path outside the workspace, which no gate can judge.
pub fn outside(why: &str) -> Refusal {
    Refusal::new(
        GateKind::Workspace,
        why,
        "write inside the project; loopward cannot judge a path outside it, so it refuses",
    )
}

/// A shell command that was not run because its changes could not have been checked.
pub fn unwatchable(why: &str, host: Host) -> Refusal {
    Refusal::new(
        GateKind::ShellWatch,
        format!("not run: the workspace could not be recorded before the command, so its changes could not be checked ({why})"),
        format!("use {} instead, or ask a person to list big generated folders under [gates.shell] skip", host.file_tools()),
    )
}

/// A shell command that was not run because it could not be put in its kernel sandbox.
pub fn not_contained(why: &str, host: Host) -> Refusal {
    Refusal::new(
        GateKind::Sandbox,
        format!("not run: {why}"),
        format!(
            "use {} instead; a person can fix the sandbox as the reason says",
            host.file_tools()
        ),
    )
}

/// The warning on every command whose network is the host's (`[net] isolate = false`).
pub fn network_open() -> Refusal {
    Refusal::new(
        GateKind::Sandbox,
        "network: this command reaches any host; its connections are neither limited nor recorded",
        "remove `isolate = false` from [net] to send commands out only through the egress proxy",
    )
}

/// What a command run without the kernel sandbox is told (`watch-only`).
pub fn watch_only() -> Refusal {
    Refusal::new(
        GateKind::Sandbox,
        "watch-only: this command runs without a kernel sandbox; its changes are only compared and reverted afterwards",
        "remove `sandbox = \"watch-only\"` from [gates.shell] to contain commands",
    )
}

/// What the model reads when a command ran but its changes could not be compared afterwards.
pub fn blinded(why: &str) -> String {
    format!(
        "the command ran, but the workspace could not be compared afterwards ({why}); its changes are unchecked and were reported, and they will be compared with the workspace as it was before the command (what may not stand put back) as soon as it can be; until then commands and writes are refused"
    )
}

/// The gate name of a read refused because it reaches loopward's state.
pub const READ_GATE: &str = "unreadable";

/// The gate that refuses a read reaching loopward's state: a control gate called [`READ_GATE`]
/// (its name made once).
pub fn read_gate() -> GateId {
    static GATE: LazyLock<GateId> = LazyLock::new(|| GateId::new(GateKind::Control, READ_GATE));
    GATE.clone()
}

/// A read by a host's own tool (`tool`, of `raw`) whose target cannot be judged (`why`).
pub fn read_unjudged(tool: &str, raw: &str, why: &str) -> Refusal {
    Refusal::new(
        &read_gate(),
        format!("{tool} of {raw:?} not run: {why}, so whether it reaches loopward's state cannot be judged"),
        "name what to read by its absolute path (a file or folder of the workspace), with no `~` and no `..` after a wildcard",
    )
}

/// A read by a host's own tool that reaches loopward's state: `target` lies `inside` the state
/// folder `folder`, or (a search) holds it.
pub fn read_unreadable(tool: &str, raw: &str, target: &str, folder: &str, inside: bool) -> Refusal {
    let (what, hint) = if inside {
        (
            format!("reaches {target}, inside loopward's state ({folder})"),
            "leave it: nothing there is yours to read; work from the workspace, and if a person wants you to see something from loopward's state, they will show it to you",
        )
    } else {
        (
            format!("would search {target}, which holds loopward's state ({folder})"),
            "search a folder that does not hold it (the workspace, or one of its folders)",
        )
    };
    Refusal::new(
        &read_gate(),
        format!("{tool} of {raw:?} {what}: ledger keys, session state, approvals and overrides are never readable by agents, by any tool"),
        hint,
    )
}

/// A change made while commands of `me` and `who` overlapped, which `me` may not make
/// (`rule`) and `who` may: it cannot be attributed, so it stands (a warning).
pub fn unattributable(path: &str, me: &AgentId, who: &str, rule: &str) -> Refusal {
    Refusal::new(
        GateKind::ShellWatch,
        format!(
            "{path} changed while commands of {me} and {who} overlapped; {me} may not change it ({rule}), {who} may: who made the change cannot be told, so it stands and is not counted against {me}"
        ),
        "nothing to do; a person can check the change in the ledger",
    )
}

/// A host's own file write that was not allowed before it ran (no decision was asked for) and
/// breaks `rule`: what the model reads.
pub fn written_unasked(rule: &Refusal) -> String {
    format!(
        "refused by loopward: {}; this write was not allowed before it ran.\nWhat to do: undo it, and leave the file to its owner.",
        rule.reason
    )
}

/// A host's own file write not made because the workspace could not be recorded before it.
/// The way out depends on why: a file that changed while it was recorded (a parallel
/// subagent writing) settles, so the same call made again goes through; a size or path limit
/// needs a person.
///
/// ```
/// let r = loopward_runner::gates::refusals::write_unrecorded("plans/a.md is watched and changed while it was being recorded");
/// assert!(r.hint.contains("make the same call again") && r.hint.contains("[gates.shell] skip"));
/// ```
pub fn write_unrecorded(why: &str) -> Refusal {
    Refusal::new(
        GateKind::ShellWatch,
        format!("not written: the workspace could not be recorded before the write, so where it lands could not be checked ({why})"),
        "make the same call again once nothing else is writing the workspace; if the reason names a size or path limit, ask a person to raise it or to list big generated folders under [gates.shell] skip",
    )
}

/// A host's own file write (`tool`) whose landing could not be compared afterwards.
pub fn write_blinded(tool: &str, why: &str) -> String {
    format!(
        "the {tool} ran, but the workspace could not be compared afterwards ({why}), so where it landed is unchecked; this was reported, and it is compared (what may not stand put back) as soon as the workspace can be. What to do: check that the write landed where you meant it to"
    )
}

/// A host's own file write (`tool`) that landed on `paths` the caller may not change (a link
/// on its way changed after it was allowed); `reason`: the first rule it broke.
pub fn write_landed_elsewhere(tool: &str, paths: &[String], reason: &str) -> String {
    format!(
        "refused by loopward: this {tool} landed on paths you may not change (a link on its way was changed after the write was allowed): {}. {reason}\nWhat to do: write only to the path you named, and remove links that point into other agents' files.",
        paths.join(", ")
    )
}

/// A tool a host's hook does not know, so what it would change cannot be judged (`host_name`:
/// the host as people call it). On Claude Code, whose hook sees every tool, the remedy is the
/// person's `[hooks] allow_tools`, and the refusal names the client version the hook's list of
/// tools was made for.
///
/// ```
/// use loopward_runner::gates::{refusals, Host};
/// let r = refusals::unknown_tool("mcp__github__create_issue", "Claude Code", Host::ClaudeCode);
/// assert!(r.reason.contains("made for Claude Code 2.1.332"), "{r}");
/// assert!(r.hint.contains(r#"[hooks] allow_tools = ["mcp__github__*"]"#), "{r}");
/// ```
pub fn unknown_tool(tool: &str, host_name: &str, host: Host) -> Refusal {
    if host == Host::ClaudeCode {
        return Refusal::new(
            GateKind::Policy,
            format!(
                "{tool} is neither a tool loopward's Claude Code hook judges nor one it knows to change nothing it judges (its list is made for Claude Code {}), so what it would change cannot be judged",
                crate::cli_agent::CLAUDE_CODE_VERSION
            ),
            format!(
                "use {} for files and Bash for commands; if {tool} must run, say so in your reply: a person can accept it unjudged in loopward.toml ([hooks] allow_tools = [\"{}\"])",
                host.file_tools(),
                allow_entry(tool)
            ),
        );
    }
    Refusal::new(
        GateKind::Policy,
        format!("{tool} is not a tool loopward's {host_name} hook knows, so what it would change cannot be judged"),
        format!(
            "use {} for files and the shell for commands; if this tool must run, a person installs the hook for the tools it is meant for (loopward hook install)",
            host.file_tools()
        ),
    )
}

/// The `allow_tools` entry that accepts `tool`: an MCP tool's whole server (`mcp__github__*`),
/// else the tool.
fn allow_entry(tool: &str) -> String {
    match tool
        .strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
    {
        Some((server, _)) if !server.is_empty() => format!("mcp__{server}__*"),
        _ => tool.to_string(),
    }
}

/// Another host's tool (`tool`, of `owner`) reaching the hook of `host_name`: the hook was
/// installed in `owner`'s settings under the wrong host; `install`: the `--host` it needs.
pub fn other_hosts_tool(tool: &str, owner: &str, host_name: &str, install: &str) -> Refusal {
    Refusal::new(
        GateKind::Policy,
        format!("{tool} is {owner}'s tool, but this is loopward's {host_name} hook: the hook was installed in {owner}'s settings for another host, so the call cannot be judged"),
        format!("say in your reply that the hook is installed for the wrong host; a person runs `loopward hook install --host {install}`"),
    )
}
