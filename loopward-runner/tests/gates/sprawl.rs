//! The sprawl gate: a third unit of work with no plan since the last human message is refused
//! once; writing the plan really clears it; only a human message resets it.

use super::support::*;
use loopward_runner::tool::ToolError;
use loopward_runner::TurnContext;

/// Writes the first two `files` in `turn`, then the third: the refusal of that unit of work.
async fn third_refused(room: &Room, turn: &TurnContext, files: [&str; 3]) -> String {
    for f in &files[..2] {
        room.write_ok(turn, f, "x").await;
    }
    sprawl_refusal(room.write_file(turn, files[2], "x").await)
}

fn sprawl_refusal(r: Result<loopward_runner::tool::ToolOutput, ToolError>) -> String {
    match r {
        Err(ToolError::Refused(r)) if r.gate == "sprawl" => r.to_string(),
        other => panic!("expected a sprawl refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn sprawl_gate_refuses_the_third_unit_once_naming_the_files() {
    let room = Room::new("");
    let b = room.turn("builder");
    let text = third_refused(&room, &b, ["src/a.rs", "src/b.rs", "src/c.rs"]).await;
    assert_says(
        &text,
        &[
            "would start unit of work #3 since the last human message (src/c.rs)",
            "files touched so far: src/a.rs, src/b.rs",
            "write your plan to plan.md",
            "first line starting with \"# Plan\"",
        ],
    );
    assert!(!room.path("src/c.rs").exists());
    // Then it stays out of the way for the rest of the turn.
    room.write_ok(&b, "src/c.rs", "c").await;
    room.write_ok(&b, "src/d.rs", "d").await;
}

#[tokio::test]
async fn a_file_with_its_test_and_doc_siblings_is_one_unit() {
    let room = Room::new("");
    let b = room.turn("builder");
    for p in [
        "src/gates/foo.rs",
        "tests/foo.rs",
        "docs/foo.md",
        "src/bar.rs",
        "tests/bar.rs",
    ] {
        room.write_ok(&b, p, "x").await;
    }
    sprawl_refusal(room.write_file(&b, "src/baz.rs", "x").await);
}

#[tokio::test]
async fn a_mechanical_rename_across_files_is_one_unit() {
    let room = Room::new("");
    for p in ["a.rs", "b.rs", "c.rs", "d.rs"] {
        room.write(p, "old_name();");
    }
    let b = room.turn("builder");
    for p in ["a.rs", "b.rs", "c.rs", "d.rs"] {
        room.edit_file(&b, p, "old_name", "new_name").await.unwrap();
    }
    // A shell command's changes are one unit too.
    room.shell(&b, "sed -i s/new_name/newer/ a.rs b.rs c.rs")
        .await
        .unwrap();
    room.write_ok(&b, "x.rs", "x").await;
    let text = sprawl_refusal(room.write_file(&b, "e.rs", "x").await);
    assert!(text.contains("unit of work #3"), "{text}");
}

#[tokio::test]
async fn the_way_out_writing_the_plan_clears_the_gate() {
    let room = Room::new("");
    let b = room.turn("builder");
    third_refused(&room, &b, ["src/a.rs", "src/b.rs", "src/c.rs"]).await;
    room.write_ok(&b, "plan.md", "# Plan\n1. a\n2. b\n3. c")
        .await;
    room.write_ok(&b, "src/c.rs", "c").await;
    // After a new human message the plan is stale; with the plan written first, no refusal.
    room.person_says("also do d, e, f");
    let b2 = room.turn("builder");
    room.write_ok(&b2, "plan.md", "# Plan\n1. d\n2. e\n3. f")
        .await;
    for p in ["src/d.rs", "src/e.rs", "src/f.rs", "src/g.rs"] {
        room.write_ok(&b2, p, "x").await;
    }
    assert!(room.denials().len() == 1, "{:?}", room.denials());
}

#[tokio::test]
async fn a_plan_from_before_the_last_human_message_does_not_count() {
    let room = Room::new("");
    let b = room.turn("builder");
    room.write_ok(&b, "plan.md", "# Plan\nold").await;
    room.person_says("new request");
    let b = room.turn("builder");
    third_refused(&room, &b, ["src/a.rs", "src/b.rs", "src/c.rs"]).await;
}

#[tokio::test]
async fn a_plan_on_disk_with_a_future_mtime_or_without_the_marker_does_not_count() {
    let room = Room::new("");
    room.write("plan.md", "# Plan\nwritten before the run");
    let future = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(room.path("plan.md"))
        .unwrap()
        .set_modified(future)
        .unwrap();
    let b = room.turn("builder");
    room.write_ok(&b, "src/a.rs", "a").await;
    room.write_ok(&b, "plan.md", "Plan: do stuff").await; // no marker
    room.write_ok(&b, "src/b.rs", "b").await;
    sprawl_refusal(room.write_file(&b, "src/c.rs", "c").await);
}

#[tokio::test]
async fn handoffs_and_notices_do_not_reset_the_count_only_a_human_message_does() {
    let room = Room::new("");
    let b1 = room.turn("builder");
    room.write_ok(&b1, "src/a.rs", "a").await;
    room.write_ok(&b1, "src/b.rs", "b").await;
    // A later runner turn of the same agent, with no human message in between.
    let b2 = room.turn("builder");
    sprawl_refusal(room.write_file(&b2, "src/c.rs", "c").await);
    room.person_says("carry on");
    let b3 = room.turn("builder");
    third_refused(&room, &b3, ["src/c.rs", "src/d.rs", "src/e.rs"]).await;
}

#[tokio::test]
async fn when_the_plan_is_in_a_foreign_territory_the_refusal_points_to_its_owner() {
    let room = Room::new("[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"");
    let b = room.turn("builder");
    let text = third_refused(&room, &b, ["src/a.rs", "src/b.rs", "src/c.rs"]).await;
    assert!(
        text.contains("hand the work to planner and ask for a plan"),
        "{text}"
    );
    // The way out: the planner writes the plan; the builder's next unit is no longer refused
    // (in a fresh human turn, so the once-per-turn rule cannot be what lets it through).
    room.person_says("next");
    let p = room.turn("planner");
    room.write_ok(&p, "plan.md", "# Plan\n1. c\n2. d\n3. e")
        .await;
    let b = room.turn("builder");
    for f in ["src/c.rs", "src/d.rs", "src/e.rs"] {
        room.write_ok(&b, f, "x").await;
    }
}

#[tokio::test]
async fn threshold_is_configurable_and_the_gate_can_be_disabled() {
    let room =
        Room::new("[gates.sprawl]\nthreshold = 2\nplan_path = \"PLAN.md\"\nmarker = \"PLAN:\"");
    let b = room.turn("builder");
    room.write_ok(&b, "a.txt", "a").await;
    let text = sprawl_refusal(room.write_file(&b, "b.txt", "b").await);
    assert!(
        text.contains("PLAN.md") && text.contains("\"PLAN:\""),
        "{text}"
    );
    let off = Room::new("[gates.sprawl]\nenabled = false");
    let b = off.turn("builder");
    for p in ["a", "b", "c", "d"] {
        off.write_ok(&b, p, "x").await;
    }
}

#[tokio::test]
async fn advisory_sprawl_warns_and_lets_the_call_through() {
    let room = Room::new("[gates.sprawl]\nmode = \"advisory\"");
    let b = room.turn("builder");
    for p in ["a.rs", "b.rs", "c.rs"] {
        room.write_ok(&b, p, "x").await;
    }
    assert!(room.path("c.rs").exists());
    let warns: Vec<_> = room
        .decisions()
        .into_iter()
        .filter(|(g, d, _)| g == "sprawl" && *d == "warn")
        .collect();
    assert_eq!(warns.len(), 1);
}

#[tokio::test]
async fn runs_sharing_one_policy_do_not_share_sprawl_state() {
    use loopward_core::{RunId, TurnNumber};
    use loopward_runner::RunContext;
    let room = Room::new("");
    let b = room.turn("builder");
    room.write_ok(&b, "src/a.rs", "a").await;
    room.write_ok(&b, "src/b.rs", "b").await;
    let other = RunContext::new(
        RunId::new("r2").unwrap(),
        vec![agent("builder")],
        room.ws.clone(),
        room.sink.clone(),
        room.clock.clone(),
    );
    let b2 = TurnContext::new(other, agent("builder"), TurnNumber(1));
    room.write_ok(&b2, "src/c.rs", "c").await;
    room.write_ok(&b2, "src/d.rs", "d").await;
    sprawl_refusal(room.write_file(&b, "src/e.rs", "e").await);
}
