//! The one duration format and the one path format of `loopward.toml`, as a user meets them.

use super::{Config, ConfigError};
use std::time::Duration;

const TEAM: &str =
    "[run]\nfirst = \"planner\"\n\n[[agent]]\nname = \"planner\"\ntools = [\"write_file\"]\n";

fn parse(extra: &str) -> Result<Config, ConfigError> {
    Config::parse("loopward.toml", &format!("{TEAM}{extra}"))
}

#[test]
fn every_duration_key_takes_a_humantime_string() {
    let cfg = parse(
        r#"
[limits]
wall_time = "2h"

[timeout]
model = "90s"
tool = "30s"
turn = "15m"

[rate.backend]
requests = 10
per = "1m"

[[stopgate]]
point = "turn"
agent = "planner"
mode = "interactive"
ask_timeout = "10m"

[overrides]
max_ttl = "1h"
"#,
    )
    .unwrap();
    assert_eq!(cfg.limits.wall_time, Some(Duration::from_secs(7200)));
    assert_eq!(cfg.timeout.model, Some(Duration::from_secs(90)));
    assert_eq!(cfg.timeout.tool, Some(Duration::from_secs(30)));
    assert_eq!(cfg.timeout.turn, Some(Duration::from_secs(900)));
    assert_eq!(
        cfg.rate.backend.as_ref().map(|q| q.per),
        Some(Duration::from_secs(60))
    );
    assert_eq!(cfg.stopgates[0].ask_timeout, Some(Duration::from_secs(600)));
    assert_eq!(cfg.overrides.max_ttl, Duration::from_secs(3600));
}

/// Each old `*_secs` key is refused (not read as an alias), naming the key, its line and the
/// new spelling of the value it held.
#[test]
fn old_seconds_keys_are_refused_with_the_new_spelling() {
    let cases = [
        ("[limits]\nwall_time_secs = 600\n", "limits.wall_time_secs", "wall_time = \"600s\""),
        ("[timeout]\nmodel_secs = 30\n", "timeout.model_secs", "model = \"30s\""),
        ("[timeout]\ntool_secs = 10\n", "timeout.tool_secs", "tool = \"10s\""),
        ("[timeout]\nturn_secs = 1_200\n", "timeout.turn_secs", "turn = \"1200s\""),
        ("[rate.backend]\nrequests = 1\nper_secs = 60\n", "rate.backend.per_secs", "per = \"60s\""),
        (
            "[[stopgate]]\npoint = \"turn\"\nagent = \"planner\"\nmode = \"interactive\"\nask_timeout_secs = 300\n",
            "stopgate[0].ask_timeout_secs",
            "ask_timeout = \"300s\"",
        ),
    ];
    for (text, key, spelling) in cases {
        let err = parse(text).unwrap_err();
        let shown = err.to_string();
        // The key once, at its own line in the whole file.
        let line = TEAM.lines().count() + text.lines().count();
        assert_eq!(
            err.key(),
            format!("{key} (line {line}, column 1)"),
            "{shown}"
        );
        assert!(shown.contains(spelling), "{spelling}: {shown}");
    }
}

#[test]
fn a_bare_number_for_a_duration_is_refused_naming_the_key() {
    for (text, key) in [
        ("[limits]\nwall_time = 600\n", "limits.wall_time"),
        ("[timeout]\nmodel = \"30\"\n", "timeout.model"),
        ("[overrides]\nmax_ttl = 900\n", "overrides.max_ttl"),
    ] {
        let err = parse(text).unwrap_err();
        assert!(err.key().starts_with(key), "{err}");
        assert!(err.to_string().contains("a duration with a unit"), "{err}");
    }
}

#[test]
fn a_duration_out_of_range_names_the_key_and_the_bounds() {
    let err = parse("[timeout]\ntool = \"500ms\"\n").unwrap_err();
    assert_eq!(err.key(), "timeout.tool");
    assert!(err.to_string().contains("\"1s\" to \"1day\""), "{err}");
    let err = parse("[limits]\nwall_time = \"30days\"\n").unwrap_err();
    assert_eq!(err.key(), "limits.wall_time");
}

#[test]
fn workspace_paths_are_relative_slash_separated_and_stay_inside() {
    for bad in [
        "/var/runs",
        "../runs",
        "runs/../x",
        "./runs",
        "runs\\\\x",
        "",
    ] {
        let err = Config::parse(
            "loopward.toml",
            &TEAM.replace("[run]\n", &format!("[run]\nruns_dir = \"{bad}\"\n")),
        )
        .unwrap_err();
        assert_eq!(err.key(), "run.runs_dir", "{bad}: {err}");
        assert!(
            err.to_string().contains("relative to the workspace"),
            "{err}"
        );
    }
    let ok = Config::parse(
        "loopward.toml",
        &TEAM.replace("[run]\n", "[run]\nruns_dir = \"out/runs\"\n"),
    )
    .unwrap();
    assert_eq!(ok.run.runs_dir, std::path::Path::new("out/runs"));
}

#[test]
fn a_write_stop_gate_takes_the_same_globs_as_territories() {
    for bad in ["/etc/**", "../x/**", "src/["] {
        let err = parse(&format!(
            "[[stopgate]]\npoint = \"write\"\nglob = \"{bad}\"\nmode = \"deny\"\n"
        ))
        .unwrap_err();
        assert_eq!(err.key(), "stopgate[0].glob", "{bad}: {err}");
    }
    parse("[[stopgate]]\npoint = \"write\"\nglob = \"src/**/*.rs\"\nmode = \"deny\"\n").unwrap();
}

#[test]
fn a_review_gate_from_an_agent_without_handoff_is_refused_at_load() {
    let team = "[[agent]]\nname = \"auditor\"\ntools = [\"read_file\"]\n\n[[gates.review]]\nfrom = \"planner\"\nvia = \"auditor\"\n";
    let err = parse(team).unwrap_err();
    assert_eq!(err.key(), "gates.review[0].from", "{err}");
    let text = err.to_string();
    assert!(
        text.contains("planner has no handoff tool") && text.contains("add \"handoff\""),
        "{text}"
    );
    // The way out the message names loads.
    Config::parse(
        "loopward.toml",
        &format!(
            "{}{team}",
            TEAM.replace("[\"write_file\"]", "[\"write_file\", \"handoff\"]")
        ),
    )
    .unwrap();
}

#[test]
fn a_cli_agent_needs_a_verifier_and_lists_only_loopwards_own_tools_and_only_it_takes_one() {
    let agent = |body: &str| parse(&format!("\n[[agent]]\nname = \"cc\"\n{body}\n"));
    let ok = agent("kind = \"claude-code\"\nverify = \"cargo test\"").unwrap();
    let cc = ok.agents.iter().find(|a| a.name.as_str() == "cc").unwrap();
    assert_eq!(cc.kind, super::AgentKind::ClaudeCode);
    // loopward's own tools, served to its sessions over MCP.
    for kind in ["claude-code", "codex", "gemini"] {
        agent(&format!(
            "kind = \"{kind}\"\nverify = \"true\"\ntools = [\"handoff\"]"
        ))
        .unwrap();
    }
    let cx = agent("kind = \"codex\"\nverify = \"true\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"gpt-5.5\"").unwrap();
    let cx = cx.agents.iter().find(|a| a.name.as_str() == "cc").unwrap();
    assert_eq!(
        (cx.kind, cx.model.as_deref()),
        (super::AgentKind::Codex, Some("gpt-5.5"))
    );
    for (body, key, says) in [
        (
            "kind = \"claude-code\"",
            "verify",
            "its work would end on its word",
        ),
        (
            "kind = \"claude-code\"\nverify = \" \"",
            "verify",
            "no verify command",
        ),
        (
            "kind = \"claude-code\"\nverify = \"true\"\ntools = [\"handoff\", \"shell\"]",
            "tools",
            "its tools are the client's, governed by the hook; shell is not one",
        ),
        (
            "tools = []\nverify = \"true\"",
            "verify",
            "verify is for coding-CLI agents",
        ),
        (
            "kind = \"gemini\"",
            "verify",
            "is a gemini agent with no verify",
        ),
        (
            "kind = \"gemini\"\nverify = \"true\"\ntools = [\"handoff\", \"write_file\"]",
            "tools",
            "a gemini agent may list only loopward's own tools (handoff, report_attempt, say)",
        ),
        ("base_url = \"http://x\"", "base_url", "is a model agent"),
        ("model = \"m\"", "model", "is a model agent"),
    ] {
        let e = agent(body).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(says), "{body}: {e}");
    }
}
