//! A config that would not load: refused before any run starts, naming the file, the key and
//! what to do.

use super::*;

/// Writes a config made of the starter with `edit` applied, runs it, and returns the error text.
fn bad_config(edit: impl Fn(String) -> String) -> String {
    let dir = initialised();
    let d = dir.path();
    let cfg = edit(std::fs::read_to_string(d.join("loopward.toml")).unwrap());
    std::fs::write(d.join("loopward.toml"), cfg).unwrap();
    let o = loopward(d, &["run"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        !d.join("runs").exists(),
        "a bad config must stop before any run starts"
    );
    let t = text(&o);
    assert!(t.contains("loopward.toml"), "names the file: {t}");
    assert!(t.contains("what to do:"), "says what to do: {t}");
    t
}

#[test]
fn bad_config_invalid_glob_names_the_pattern() {
    let t = bad_config(|c| c.replace("paths = [\"src/**\"]", "paths = [\"src/[\"]"));
    assert!(t.contains("territory[1]") && t.contains("src/["), "{t}");
}

#[test]
fn bad_config_overlapping_territories_with_different_owners() {
    let t = bad_config(|c| c.replace("paths = [\"src/**\"]", "paths = [\"src/**\", \"plan.md\"]"));
    assert!(t.contains("overlap") && t.contains("plan.md"), "{t}");
}

#[test]
fn bad_config_unknown_key_is_named_with_its_line() {
    let t = bad_config(|c| c.replace("[run]\n", "[run]\nfirts = \"root\"\n"));
    assert_says(&t, "firts (line");
}

#[test]
fn bad_config_unknown_tool_lists_the_tools() {
    let t = bad_config(|c| {
        c.replace(
            "tools = [\"read_file\", \"list_dir\", \"handoff\"]",
            "tools = [\"read_file\", \"teleport\"]",
        )
    });
    assert!(
        t.contains("agent[0].tools[1]") && t.contains("teleport") && t.contains("write_file"),
        "{t}"
    );
}

#[test]
fn bad_config_unknown_agent_lists_the_team() {
    let t = bad_config(|c| c.replace("via = \"auditor\"", "via = \"reviewer\""));
    assert!(
        t.contains("gates.review[0].via") && t.contains("reviewer") && t.contains("auditor"),
        "{t}"
    );
}

#[test]
fn bad_config_a_phase_stop_gate_is_refused_because_a_configured_team_has_no_phases() {
    let t = bad_config(|c| {
        c + "\n[[stopgate]]\npoint = \"phase\"\nphase = \"deploy\"\nmode = \"deny\"\n"
    });
    assert!(
        t.contains("stopgate[0].point")
            && t.contains("never fire")
            && t.contains("point = \"turn\""),
        "{t}"
    );
}

#[test]
fn bad_config_a_class_jump_threshold_the_repeat_limit_blocks_is_refused() {
    let t = bad_config(|c| {
        c + "\n[class_jump]\nstrategies = [\"patch\", \"rewrite\"]\nfailures_per_strategy = 5\n"
    });
    assert!(
        t.contains("class_jump.failures_per_strategy")
            && t.contains("repeat.max_identical is 3")
            && t.contains("raise [repeat] max_identical to at least 5"),
        "{t}"
    );
}

#[test]
fn bad_config_review_gates_that_would_deadlock_are_refused() {
    let t = bad_config(|c| {
        c.replace(
            "when = [\"src/**\"]",
            "when = [\"src/**\"]\nexclusive = true",
        ) + "\n[[gates.review]]\nfrom = \"builder\"\nvia = \"planner\"\nexclusive = true\n"
    });
    assert!(
        t.contains("every handoff by builder is refused") && t.contains("Drop `exclusive`"),
        "{t}"
    );
}

#[test]
fn bad_config_zero_cap_names_the_field() {
    let t = bad_config(|c| c.replace("turns_per_run = 12", "turns_per_run = 0"));
    assert_says(&t, "limits.turns_per_run");
}
