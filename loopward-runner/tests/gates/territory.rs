//! Territories and control files: deny by default, judged at the canonical landing path.

use super::support::*;
use loopward_core::{AuditEvent, CallId, Decision, GateMode};
use loopward_runner::tool::ToolError;
use std::os::unix::fs::symlink;

/// The planner owns the plans, the builder the folder `src` (sprawl off).
const PLANS: &str = include_str!("policies/plans-and-src-folder.toml");

fn refusal_text(r: Result<loopward_runner::tool::ToolOutput, ToolError>) -> String {
    match r {
        Err(ToolError::Refused(r)) => r.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn owner_writes_its_territory_and_anyone_else_is_refused_with_a_way_out() {
    let (room, planner) = Room::with_turn(PLANS, "planner");
    room.write_ok(&planner, "plans/a.md", "# Plan").await;
    let builder = room.turn("builder");
    let text = refusal_text(room.write_file(&builder, "plans/a.md", "hijack").await);
    assert_says(
        &text,
        &[
            "plans/a.md belongs to planner (territory:planner); builder does not own it",
            "hand it to planner",
            "loopward override grant --agent builder --path plans/a.md",
        ],
    );
    assert_eq!(room.read("plans/a.md").unwrap(), "# Plan");
}

#[tokio::test]
async fn every_decision_allow_and_deny_is_recorded_with_raw_and_canonical_path() {
    let (room, builder) = Room::having_written(PLANS, "builder", "src/./lib.rs").await;
    room.write_file(&builder, "notes/../plan.md", "x")
        .await
        .unwrap_err();
    let raw: Vec<_> = room
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AuditEvent::GateDecision {
                path_raw,
                path,
                decision,
                gate,
                ..
            } => Some((
                gate.name.to_string(),
                path_raw.as_deref().unwrap_or_default().to_string(),
                path.as_deref().unwrap_or_default().to_string(),
                decision.label(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        raw,
        vec![
            (
                "territory:builder".to_string(),
                "src/./lib.rs".to_string(),
                "src/lib.rs".to_string(),
                "allow"
            ),
            (
                "territory:planner".to_string(),
                "notes/../plan.md".to_string(),
                "plan.md".to_string(),
                "deny"
            ),
        ]
    );
}

#[tokio::test]
async fn traversal_absolute_paths_and_prefix_siblings_are_judged_canonically() {
    let (room, planner) = Room::with_turn(PLANS, "planner");
    // `src` does not contain `srcevil/x`.
    room.write_ok(&planner, "srcevil/x.rs", "fine").await;
    // An absolute path inside the root lands in src/.
    let abs = format!("{}/src/x.rs", room.ws.root().display());
    refusal_text(room.write_file(&planner, &abs, "no").await);
    refusal_text(room.write_file(&planner, "docs/../src/y.rs", "no").await);
    // Escapes never reach a gate: the canonicaliser refuses them.
    assert!(matches!(
        room.write_file(&planner, "../outside.rs", "no").await,
        Err(ToolError::Path(_))
    ));
    assert!(!room.path("src").exists());
}

#[tokio::test]
async fn glob_star_does_not_cross_a_slash() {
    let (room, builder) = Room::with_turn("[[territory]]\npaths = [\"plans/*.md\"]\nowner = \"planner\"\n[gates.sprawl]\nenabled = false", "builder");
    refusal_text(room.write_file(&builder, "plans/a.md", "no").await);
    room.write_ok(&builder, "plans/sub/a.txt", "fine").await;
}

#[tokio::test]
async fn a_territory_covers_its_own_root_for_delete_and_rename() {
    let (room, builder) = Room::builder_in(PLANS, &[("plans/a.md", "keep")]);
    refusal_text(fs_op(&room, &builder, "delete", "plans", "").await);
    refusal_text(fs_op(&room, &builder, "rename", "plans", "old-plans").await);
    // Renaming a parent folder moves territory members: a write at both ends.
    room.write("docs/plan.md", "x");
    std::fs::create_dir_all(room.path("nest")).unwrap();
    room.write_ok(&room.turn("planner"), "plans/deep/b.md", "y")
        .await;
    refusal_text(fs_op(&room, &builder, "rename", "docs", "plans/docs").await);
    assert_eq!(room.read("plans/a.md").unwrap(), "keep");
    assert!(room.path("docs/plan.md").exists());
}

#[tokio::test]
async fn symlinks_are_judged_where_the_write_lands() {
    let room = Room::new(PLANS);
    room.write("plans/a.md", "keep");
    symlink("plans", room.path("notes")).unwrap();
    symlink("plan.md", room.path("innocent.txt")).unwrap(); // dangling
    symlink("plans/a.md", room.path("a-link.md")).unwrap();
    let builder = room.turn("builder");
    for p in ["notes/a.md", "innocent.txt", "a-link.md"] {
        let text = refusal_text(room.write_file(&builder, p, "no").await);
        assert!(text.contains("territory:planner"), "{p}: {text}");
    }
    assert_eq!(room.read("plans/a.md").unwrap(), "keep");
    assert!(!room.path("plan.md").exists());
}

#[tokio::test]
async fn creating_a_link_into_a_foreign_territory_is_a_write_there() {
    let (room, builder) = Room::builder_in(PLANS, &[("plans/a.md", "keep")]);
    refusal_text(fs_op(&room, &builder, "symlink", "mine.md", "plans/a.md").await);
    refusal_text(fs_op(&room, &builder, "hardlink", "mine.md", "plans/a.md").await);
    refusal_text(fs_op(&room, &builder, "symlink", "dir-link", "plans").await);
    assert!(!room.path("mine.md").exists());
}

#[tokio::test]
async fn writing_a_hard_link_alias_of_a_territory_file_is_refused() {
    let room = Room::new(PLANS);
    room.write("plans/a.md", "keep");
    std::fs::hard_link(room.path("plans/a.md"), room.path("alias.md")).unwrap();
    let builder = room.turn("builder");
    let text = refusal_text(room.write_file(&builder, "alias.md", "no").await);
    assert!(text.contains("plans/a.md"), "{text}");
    assert_eq!(room.read("plans/a.md").unwrap(), "keep");
}

#[tokio::test]
async fn control_files_are_never_writable_even_with_an_override() {
    let (room, planner) = Room::with_turn(PLANS, "planner");
    for p in [
        ".loopward/overrides/x.json",
        "loopward.toml",
        "runs/r1/events.jsonl",
        ".loopward",
    ] {
        let text = refusal_text(room.write_file(&planner, p, "{}").await);
        assert!(text.contains("refused by control"), "{p}: {text}");
    }
    // A person cannot grant one either.
    let store = room.policy.overrides();
    let cfg = room.ws.resolve("loopward.toml").unwrap();
    assert!(store
        .grant(
            &agent("planner"),
            &cfg,
            "please",
            std::time::Duration::from_secs(60),
            &*room.clock
        )
        .is_err());
    assert!(!room.path("loopward.toml").exists());
}

#[tokio::test]
async fn a_failed_ledger_write_stops_the_write() {
    let room = Room::new(PLANS);
    room.sink.fail_after(0);
    let builder = room.turn("builder");
    let err = room
        .write_file(&builder, "src/lib.rs", "x")
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Audit(_)), "{err:?}");
    assert!(!room.path("src/lib.rs").exists());
}

#[tokio::test]
async fn advisory_territory_warns_and_allows() {
    let (room, _) = Room::having_written(
        "[[territory]]\npaths = [\"plans/**\"]\nowner = \"planner\"\nmode = \"advisory\"\n[gates.sprawl]\nenabled = false",
        "builder",
        "plans/a.md",
    )
    .await;
    let d = room.events().into_iter().find_map(|e| match e {
        AuditEvent::GateDecision { decision, mode, .. } => Some((decision, mode)),
        _ => None,
    });
    let Some((Decision::Warn(r), GateMode::Advisory)) = d else {
        panic!("expected an advisory warning, got {d:?}")
    };
    assert!(r.reason.contains("builder does not own it"));
}

#[tokio::test]
async fn the_refusals_way_out_hand_off_to_the_owner_works_in_a_run() {
    use super::one_agent::{spec, Agents, Steps};
    use loopward_core::RunStatus;
    use loopward_runner::model::{
        fake::{FakeModel, Script},
        BoxModelService,
    };
    use loopward_runner::{tools, BoxTurnService, LlmAgent, Runner};
    let room = Room::new(PLANS);
    let (planner, builder) = (agent("planner"), agent("builder"));
    let mut s = Script::default();
    s.write(&builder, "plan.md", "# Plan\n- step");
    s.handoff(&builder, "planner", "please write plan.md: # Plan / - step");
    s.write(&planner, "plan.md", "# Plan\n- step");
    s.say(&planner, "Written.");
    let model = BoxModelService::new(FakeModel::new(s));
    let team = [planner.clone(), builder.clone()];
    let runner = Runner::builder(room.ws.clone()).agents(&team, |name| {
        let a = LlmAgent::builder(name.clone(), model.clone())
            .tools(tools::builtin(&team))
            .tool_stack(room.stack.clone())
            .build();
        BoxTurnService::new(a)
    });
    let spec = spec("r2", &builder, "plan it", room.sink.clone());
    let report = runner.build().unwrap().run(spec).await;
    assert_eq!(report.status, RunStatus::Completed);
    assert_eq!(room.read("plan.md").unwrap(), "# Plan\n- step");
    let labels: Vec<_> = room
        .decisions()
        .into_iter()
        .map(|(g, d, _)| (g, d))
        .collect();
    assert_eq!(
        labels,
        vec![
            ("territory:planner".to_string(), "deny"),
            ("territory:planner".to_string(), "allow")
        ]
    );
}

#[tokio::test]
async fn a_control_folder_that_is_a_link_is_protected_where_it_lands() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("stuff/overrides")).unwrap();
    std::os::unix::fs::symlink("stuff", dir.path().join(".loopward")).unwrap();
    let ws = loopward_runner::Workspace::new(dir.path()).unwrap();
    let policy =
        loopward_runner::gates::Policy::from_config(&Default::default(), ws.clone()).unwrap();
    let room = Room::with_policy(dir, ws, policy);
    let planner = room.turn("planner");
    let text = refusal_text(
        room.write_file(&planner, "stuff/overrides/x.json", "{}")
            .await,
    );
    assert!(text.contains("refused by control"), "{text}");
}

#[test]
fn control_files_can_be_named_by_their_place_on_disk() {
    use loopward_runner::gates::ControlFiles;
    let dir = tempfile::tempdir().unwrap();
    let ws = loopward_runner::Workspace::new(dir.path()).unwrap();
    let c = ControlFiles::in_workspace(
        &ws,
        &ws.root().join("conf/team.toml"),
        std::path::Path::new("/elsewhere/runs"),
    );
    assert!(c.covers("conf/team.toml") && c.covers(".loopward/x"));
    assert!(!c.covers("runs/x"));
}

#[test]
fn a_calls_decisions_share_its_id_action_and_paths_and_a_gate_its_name() {
    use loopward_core::{Action, AgentId};
    use loopward_runner::gates::{Ask, Policy, PolicyConfig, SprawlTracker};
    use loopward_runner::tool::Access;
    use loopward_runner::{ManualClock, Workspace};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let policy = Policy::from_config(&PolicyConfig::from_toml(PLANS).unwrap(), ws.clone()).unwrap();
    let builder = AgentId::new("builder").unwrap();
    let clock = ManualClock::new(0);
    let action = Action::tool("move_file");
    let accesses = [Access::Rename {
        from: ws.resolve("src/a.rs").unwrap(),
        to: ws.resolve("src/b.rs").unwrap(),
    }];
    let c1 = CallId::from("c1");
    let decide = || {
        let mut ask = Ask::new(&builder, &action, &accesses, &clock);
        ask.call_id = Some(&c1);
        let j = policy.judge(&ask, &mut SprawlTracker::default());
        assert!(j.permits(), "{:?}", j.denial);
        j.events
            .into_iter()
            .map(|e| match e {
                AuditEvent::GateDecision {
                    action,
                    call_id,
                    gate,
                    path,
                    path_raw,
                    ..
                } => (
                    action,
                    call_id.unwrap(),
                    gate.name,
                    path.unwrap(),
                    path_raw.unwrap(),
                ),
                other => panic!("{other:?}"),
            })
            .collect::<Vec<_>>()
    };
    let (first, again) = (decide(), decide());
    let [(a1, id1, gate1, path1, raw1), (a2, id2, gate2, path2, _)] = &first[..] else {
        panic!("one decision per end of the rename: {first:?}");
    };
    let name = |a: &Action| match a {
        Action::Tool(name) => name.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        std::ptr::eq(name(a1).as_str(), name(a2).as_str()),
        "one action per call"
    );
    assert!(std::ptr::eq(id1.as_str(), id2.as_str()), "one id per call");
    assert!(
        Arc::ptr_eq(gate1, gate2) && Arc::ptr_eq(gate1, &again[0].2),
        "one name per gate"
    );
    assert_eq!((&**path1, &**path2), ("src/a.rs", "src/b.rs"));
    assert!(
        Arc::ptr_eq(path1, raw1),
        "a canonical path given is its own raw text"
    );
}
