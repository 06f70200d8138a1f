//! The `init` layout as tools meet it: the ledger and the fake script inside the workspace stay
//! out of the agents' reach.

use super::*;

/// In the `init` layout, gives the builder `shell` and puts `replies` (its scripted replies, as
/// TOML) before its first `times` scripted writes; returns the script written.
pub(super) fn builder_first(d: &Path, replies: &str, times: usize) -> String {
    edit_config(d, |c| {
        c.replace(
            r#"tools = ["read_file", "write_file", "edit_file", "list_dir", "handoff"]"#,
            r#"tools = ["read_file", "write_file", "edit_file", "list_dir", "shell", "handoff"]"#,
        )
    });
    let write = "[[agents.builder]]\ntool_calls = [{ name = \"write_file\"";
    let script = std::fs::read_to_string(d.join("loopward.script.toml"))
        .unwrap()
        .replacen(write, &format!("{replies}{write}"), times);
    std::fs::write(d.join("loopward.script.toml"), &script).unwrap();
    script
}

/// The issue that made the watch skip the runs directory: `loopward init`, the builder given
/// `shell`, a harmless `shell "true"` and then writes. The ledger (inside the workspace in this
/// layout) stays whole and verifying, and the builder's shell write to plan.md is refused by
/// the sandbox.
#[test]
fn shell_in_the_init_layout_leaves_the_ledger_whole_and_verifying() {
    let dir = initialised();
    let d = dir.path();
    builder_first(
        d,
        "[[agents.builder]]\ntool_calls = [{ name = \"shell\", arguments = { command = \"true\" } }]\n\n\
         [[agents.builder]]\ntool_calls = [{ name = \"shell\", arguments = { command = \"echo mine > src/own.txt; echo hijack > plan.md\" } }]\n\n",
        usize::MAX,
    );
    let run = loopward(d, &["run", "--id", "r1"]);
    let out = text(&run);
    assert_eq!(run.status.code(), Some(0), "{out}");
    assert_says(&out, "completed: 4 turns");
    crate::support::assert_file(d, "src/own.txt", "mine\n");
    assert!(std::fs::read_to_string(d.join("plan.md"))
        .unwrap()
        .starts_with("# Plan"));
    let verify = loopward(d, &["verify", "runs/r1"]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
    let ledger = std::fs::read_to_string(d.join("runs/r1/events.jsonl")).unwrap();
    // Every record of the run is there, the last one the run's end.
    assert!(ledger.lines().count() > 40, "{ledger}");
    assert!(
        ledger.lines().last().unwrap().contains("\"run_ended\""),
        "{ledger}"
    );
    assert!(!ledger.contains("\"violation\""), "{ledger}");
}

/// The fake backend's script sits in the workspace in the `init` layout: an agent that rewrote it
/// would choose its own next replies. It is a control file, to the file tools and to commands.
#[test]
fn the_fake_script_in_the_workspace_is_a_control_file_to_tools_and_commands() {
    let dir = initialised();
    let d = dir.path();
    let script = builder_first(
        d,
        "[[agents.builder]]\ntool_calls = [{ name = \"shell\", arguments = { command = \"echo '# rewritten' >> loopward.script.toml\" } }]\n\n\
         [[agents.builder]]\ntool_calls = [{ name = \"write_file\", arguments = { path = \"loopward.script.toml\", content = \"# mine\" } }]\n\n",
        1,
    );
    let run = loopward(d, &["run", "--id", "r1"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert_eq!(
        std::fs::read_to_string(d.join("loopward.script.toml")).unwrap(),
        script,
        "the script was rewritten"
    );
    let ledger = std::fs::read_to_string(d.join("runs/r1/events.jsonl")).unwrap();
    assert_says(&ledger, "loopward.script.toml is a control file");
    assert_says(&ledger, "Permission denied");
}
