//! `run --resume`: the script the run started with, and a damaged record of it refused.

use super::*;

/// A starter folder whose run `id` was started with its own script at `script` (the root hands
/// off to a planner that says "Planned by own.toml."), stopped at a durable gate on `plan` and
/// approved there.
fn approved_with_own_script(script: &str, id: &str) -> tempfile::TempDir {
    let dir = initialised();
    let d = dir.path();
    append(d, "loopward.toml", &durable_gate("plan", "planner"));
    let path = d.join(script);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        "[[agents.root]]\ntool_calls = [{ name = \"handoff\", arguments = { to = \"planner\", message = \"go\" } }]\n\n[[agents.planner]]\ntext = \"Planned by own.toml.\"\n",
    )
    .unwrap();
    let o = loopward(d, &["run", "--script", script, "--id", id]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    assert!(loopward(d, &["approve", id, "plan"]).status.success());
    dir
}

#[test]
fn a_resumed_run_plays_the_script_it_was_started_with() {
    let dir = approved_with_own_script("scripts/own.toml", "rs");
    let d = dir.path();
    // The script is remembered, so a second one is refused as a usage error (as `--task` is).
    let o = loopward(
        d,
        &["run", "--resume", "rs", "--script", "scripts/own.toml"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    // Resumed from another folder, without --script: the run's own script, not the config's.
    let elsewhere = d.join("scripts");
    let o = loopward(
        &elsewhere,
        &["--config", "../loopward.toml", "run", "--resume", "rs"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    crate::support::assert_prints(&o, "planner: Planned by own.toml.");
    assert!(
        !d.join("plan.md").exists(),
        "the starter script did not play"
    );
}

#[test]
fn a_damaged_record_of_the_script_refuses_the_resume_and_its_way_out_works() {
    let dir = approved_with_own_script("own.toml", "rd");
    let d = dir.path();
    let kept = d.join("runs/rd/started_with.json");
    std::fs::write(&kept, "not json").unwrap();

    // Refused, naming the file and the two ways out.
    let o = loopward(d, &["run", "--resume", "rd"]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("started_with.json")
            && text(&o).contains("restore it, or delete it to resume with the config's script"),
        "{}",
        text(&o)
    );
    assert!(
        !text(&o).contains("Planned by own.toml."),
        "nothing ran: {}",
        text(&o)
    );

    // Deleted: the run resumes with the config's script (the starter's, whose planner writes
    // plan.md), as promised.
    std::fs::remove_file(&kept).unwrap();
    let o = loopward(d, &["run", "--resume", "rd"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        !text(&o).contains("Planned by own.toml.") && d.join("plan.md").exists(),
        "{}",
        text(&o)
    );
}
