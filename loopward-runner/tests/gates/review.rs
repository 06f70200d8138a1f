//! Review gates (armed by evidence) and one handoff per turn.

use super::support::*;
use loopward_core::{AuditEvent, Handoff};
use loopward_runner::gates::APPEAL;
use loopward_runner::tool::ToolError;

#[tokio::test]
async fn a_builder_that_changed_src_must_hand_off_to_the_auditor() {
    let (room, builder) = Room::with_turn(REVIEWED_BY_AUDITOR, "builder");
    room.write_ok(&builder, "src/lib.rs", "fn main() {}").await;
    room.write_ok(&builder, "README.md", "hi").await;
    let err = room.handoff(&builder, "planner").await.unwrap_err();
    let ToolError::Refused(r) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(r.gate, "review:builder->auditor");
    let text = err.to_string();
    assert_says(
        &text,
        &[
            "this turn you changed src/lib.rs, which auditor must review",
            "hand off to auditor instead",
            APPEAL,
        ],
    );
    assert!(builder.state().handoff.is_none());
    // The way out: hand off to the auditor.
    room.handoff(&builder, "auditor").await.unwrap();
    assert_handed_to(&builder, "auditor");
}

#[tokio::test]
async fn the_gate_is_not_armed_without_matching_successful_effects() {
    let (room, builder) = Room::with_turn(REVIEWED_BY_AUDITOR, "builder");
    room.write_ok(&builder, "README.md", "hi").await;
    // A failed edit of src/ is not evidence.
    room.edit_file(&builder, "src/missing.rs", "a", "b")
        .await
        .unwrap_err();
    room.handoff(&builder, "planner").await.unwrap();
    // Other agents are not bound by the builder's gate.
    let scribe = room.turn("scribe");
    room.write_ok(&scribe, "src/x.rs", "x").await;
    room.handoff(&scribe, "planner").await.unwrap();
}

#[tokio::test]
async fn an_empty_when_arms_on_every_handoff() {
    let (room, builder) = Room::with_turn(ALWAYS_REVIEWED_BY_AUDITOR, "builder");
    let text = room.handoff_refused(&builder, "planner").await;
    assert!(text.contains("auditor"), "{text}");
    room.handoff(&builder, "auditor").await.unwrap();
}

#[tokio::test]
async fn advisory_review_warns_and_lets_the_handoff_through() {
    let (room, builder) = Room::with_turn("[[gates.review]]\nfrom = \"builder\"\nvia = \"auditor\"\nmode = \"advisory\"\n[gates.sprawl]\nenabled = false", "builder");
    room.handoff(&builder, "planner").await.unwrap();
    assert_eq!(room.decisions()[0].1, "warn");
}

#[tokio::test]
async fn a_second_handoff_in_a_turn_is_refused_by_the_one_handoff_gate_and_audited() {
    let (room, planner) = Room::with_turn("[gates.sprawl]\nenabled = false", "planner");
    room.handoff(&planner, "builder").await.unwrap();
    let err = room.handoff(&planner, "auditor").await.unwrap_err();
    let ToolError::Refused(r) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(r.gate, "one_handoff");
    assert!(
        r.reason.contains("a handoff to builder already stands"),
        "{}",
        r.reason
    );
    assert_handed_to(&planner, "builder");
    let events = room.events();
    assert!(events
        .iter()
        .any(|e| matches!(e, AuditEvent::HandoffRefused { to, standing }
        if to.as_str() == "auditor" && standing.as_str() == "builder")));
    assert!(room
        .decisions()
        .iter()
        .any(|(g, d, _)| g == "one_handoff" && *d == "deny"));
}

#[test]
fn under_concurrent_registrations_exactly_one_handoff_stands() {
    let room = Room::new("");
    let turn = room.turn("planner");
    let targets = ["builder", "auditor", "scribe"];
    let wins = std::thread::scope(|s| {
        let hs: Vec<_> = (0..30)
            .map(|i| {
                let turn = turn.clone();
                s.spawn(move || {
                    turn.register_handoff(Handoff {
                        from: agent("planner"),
                        to: agent(targets[i % 3]),
                        message: String::new(),
                    })
                    .is_ok()
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .filter(|w| *w)
            .count()
    });
    assert_eq!(wins, 1);
}

#[tokio::test]
async fn two_armed_review_gates_are_satisfied_by_a_handoff_to_either_reviewer() {
    for reviewer in ["auditor", "scribe"] {
        let (room, builder) = Room::having_written(TWO_REVIEWERS, "builder", "src/lib.rs").await;
        room.handoff(&builder, reviewer).await.unwrap();
        assert_handed_to(&builder, reviewer);
        // Both gates recorded an allow for the handoff.
        let allows: Vec<_> = room
            .decisions()
            .into_iter()
            .filter(|(g, d, _)| g.starts_with("review:") && *d == "allow")
            .collect();
        assert_eq!(allows.len(), 2, "{allows:?}");
    }
    // Anyone else is still refused, and the refusal names both reviewers.
    let (room, builder) = Room::having_written(TWO_REVIEWERS, "builder", "src/lib.rs").await;
    let text = room.handoff_refused(&builder, "planner").await;
    assert!(
        text.contains("hand off to auditor or scribe instead"),
        "{text}"
    );
    assert!(builder.state().handoff.is_none());
}

#[tokio::test]
async fn an_exclusive_review_gate_is_satisfied_only_by_its_own_reviewer() {
    let (room, builder) = Room::with_turn(
        &TWO_REVIEWERS.replacen(
            "via = \"auditor\"",
            "via = \"auditor\"\nexclusive = true",
            1,
        ),
        "builder",
    );
    room.write_ok(&builder, "src/lib.rs", "x").await;
    let err = room.handoff(&builder, "scribe").await.unwrap_err();
    let ToolError::Refused(r) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(r.gate, "review:builder->auditor");
    assert!(r.hint.contains("hand off to auditor instead"), "{}", r.hint);
    // The exclusive gate's reviewer satisfies the other gate as well.
    room.handoff(&builder, "auditor").await.unwrap();
}

#[test]
fn review_gates_that_would_deadlock_do_not_load() {
    let both = TWO_REVIEWERS.replace(
        "when = [\"src/**\"]",
        "when = [\"src/**\"]\nexclusive = true",
    );
    let err = loopward_runner::gates::PolicyConfig::from_toml(&both).unwrap_err();
    let text = err.to_string();
    assert_says(
        &text,
        &[
            "gates.review[0] and gates.review[1]",
            "every handoff by builder is refused",
            "Drop `exclusive` from one of them",
        ],
    );
    // One exclusive gate, or two with the same reviewer, load.
    let one = TWO_REVIEWERS.replacen(
        "when = [\"src/**\"]",
        "when = [\"src/**\"]\nexclusive = true",
        1,
    );
    loopward_runner::gates::PolicyConfig::from_toml(&one).unwrap();
}

#[tokio::test]
async fn a_handoff_to_an_unknown_agent_or_to_itself_is_not_a_review_decision() {
    let (room, builder) = Room::having_written(REVIEWED_BY_AUDITOR, "builder", "src/lib.rs").await;
    for to in ["nobody", "builder"] {
        let err = room.handoff(&builder, to).await.unwrap_err();
        assert!(!matches!(err, ToolError::Refused(_)), "{err:?}");
    }
    assert!(
        room.decisions()
            .iter()
            .all(|(g, _, _)| !g.starts_with("review:")),
        "{:?}",
        room.decisions()
    );
}

#[tokio::test]
async fn a_review_gate_without_when_says_so_in_its_refusal() {
    let (room, builder) = Room::with_turn(ALWAYS_REVIEWED_BY_AUDITOR, "builder");
    let text = room.handoff_refused(&builder, "planner").await;
    assert!(
        text.contains("every handoff by builder goes to auditor for review"),
        "{text}"
    );
    assert!(!text.contains("you changed"), "{text}");
}

#[tokio::test]
async fn a_file_written_through_shell_arms_the_review_gate_as_a_file_tool_write_does() {
    let (room, builder) = Room::builder_in(REVIEWED_BY_AUDITOR, &[("src/keep.txt", "")]);
    let out = room
        .shell(&builder, "echo 'fn main() {}' > src/main.rs && echo ok")
        .await
        .unwrap();
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(room.read("src/main.rs").as_deref(), Some("fn main() {}\n"));
    let text = room.handoff_refused(&builder, "scribe").await;
    assert_says(&text, &["src/main.rs", "auditor must review"]);
    room.handoff(&builder, "auditor").await.unwrap();
}

#[tokio::test]
async fn a_shell_command_that_only_reads_does_not_arm_the_review_gate() {
    let (room, builder) = Room::builder_in(REVIEWED_BY_AUDITOR, &[("src/keep.txt", "x")]);
    room.shell(&builder, "cat src/keep.txt").await.unwrap();
    room.handoff(&builder, "scribe").await.unwrap();
}
