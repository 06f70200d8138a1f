//! A config that would not load: refused before any run starts, naming the file, the key and
//! what to do.

use super::*;

/// Writes a config made of the starter with `edit` applied, runs it, and checks that the error
/// says each of `said`.
fn bad_config(edit: impl Fn(String) -> String, said: &[&str]) {
    let dir = initialised_with(edit);
    let d = dir.path();
    let o = loopward(d, &["run"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        !d.join("runs").exists(),
        "a bad config must stop before any run starts"
    );
    let t = text(&o);
    assert!(t.contains("loopward.toml"), "names the file: {t}");
    assert!(t.contains("what to do:"), "says what to do: {t}");
    for s in said {
        assert_says(&t, s);
    }
}

#[test]
fn bad_config_invalid_glob_names_the_pattern() {
    bad_config(
        |c| c.replace("paths = [\"src/**\"]", "paths = [\"src/[\"]"),
        &["territory[1]", "src/["],
    );
}

#[test]
fn bad_config_overlapping_territories_with_different_owners() {
    bad_config(
        |c| c.replace("paths = [\"src/**\"]", "paths = [\"src/**\", \"plan.md\"]"),
        &["overlap", "plan.md"],
    );
}

#[test]
fn bad_config_unknown_key_is_named_with_its_line() {
    bad_config(
        |c| c.replace("[run]\n", "[run]\nfirts = \"root\"\n"),
        &["firts (line"],
    );
}

#[test]
fn bad_config_unknown_tool_lists_the_tools() {
    bad_config(
        |c| {
            c.replace(
                "tools = [\"read_file\", \"list_dir\", \"handoff\"]",
                "tools = [\"read_file\", \"teleport\"]",
            )
        },
        &["agent[0].tools[1]", "teleport", "write_file"],
    );
}

#[test]
fn bad_config_unknown_agent_lists_the_team() {
    bad_config(
        |c| c.replace("via = \"auditor\"", "via = \"reviewer\""),
        &["gates.review[0].via", "reviewer", "auditor"],
    );
}

#[test]
fn bad_config_a_phase_stop_gate_is_refused_because_a_configured_team_has_no_phases() {
    bad_config(
        |c| c + "\n[[stopgate]]\npoint = \"phase\"\nphase = \"deploy\"\nmode = \"deny\"\n",
        &["stopgate[0].point", "never fire", "point = \"turn\""],
    );
}

#[test]
fn bad_config_a_class_jump_threshold_the_repeat_limit_blocks_is_refused() {
    bad_config(
        |c| {
            c + "\n[class_jump]\nstrategies = [\"patch\", \"rewrite\"]\nfailures_per_strategy = 5\n"
        },
        &[
            "class_jump.failures_per_strategy",
            "repeat.max_identical is 3",
            "raise [repeat] max_identical to at least 5",
        ],
    );
}

#[test]
fn bad_config_review_gates_that_would_deadlock_are_refused() {
    bad_config(
        |c| {
            c.replace(
                "when = [\"src/**\"]",
                "when = [\"src/**\"]\nexclusive = true",
            ) + "\n[[gates.review]]\nfrom = \"builder\"\nvia = \"planner\"\nexclusive = true\n"
        },
        &["every handoff by builder is refused", "Drop `exclusive`"],
    );
}

#[test]
fn bad_config_zero_cap_names_the_field() {
    bad_config(
        |c| c.replace("turns_per_run = 12", "turns_per_run = 0"),
        &["limits.turns_per_run"],
    );
}
