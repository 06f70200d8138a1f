//! Effects, not tool names: shell writes are judged by comparing the workspace before and after,
//! and forbidden changes are reverted and recorded as violations. These tests run the watch
//! alone (`sandbox = "watch-only"`), as the second line it is behind the kernel sandbox (see
//! `sandbox_shell.rs`).

use super::support::*;
use loopward_core::{AuditEvent, EffectKind, EffectStatus};

#[tokio::test]
async fn shell_writes_into_a_foreign_territory_are_reverted_and_named() {
    let (room, _, out) = Room::builder_ran(
        PLANS_WATCHED,
        &[("plan.md", "original plan"), ("plans/old.md", "old")],
        "echo hijack > plan.md; sed -i s/old/new/ plans/old.md 2>/dev/null || true; \
         echo new > plans/new.md; echo ok > mine.txt; rm -f plans/old.md",
    )
    .await;
    assert_refused(
        &out,
        &[
            "refused by territory:planner",
            "reverted: plan.md, plans/new.md, plans/old.md",
        ],
    );
    assert_eq!(room.read("plan.md").unwrap(), "original plan");
    assert_eq!(room.read("plans/old.md").unwrap(), "old");
    assert!(!room.path("plans/new.md").exists());
    // The caller's own change stands.
    assert_eq!(room.read("mine.txt").unwrap(), "ok\n");
    assert_eq!(
        room.violations(),
        vec![
            ("plan.md".to_string(), "reverted".to_string()),
            ("plans/new.md".to_string(), "reverted".to_string()),
            ("plans/old.md".to_string(), "reverted".to_string()),
        ]
    );
    // The call's effects are the diff, with what was reverted marked so.
    let effects: Vec<_> = out
        .effects
        .iter()
        .map(|e| (e.path.as_str(), e.kind.clone(), e.status))
        .collect();
    assert_eq!(
        effects,
        vec![
            ("mine.txt", EffectKind::Create, EffectStatus::Ok),
            ("plan.md", EffectKind::Modify, EffectStatus::Reverted),
            ("plans/new.md", EffectKind::Create, EffectStatus::Reverted),
            ("plans/old.md", EffectKind::Delete, EffectStatus::Reverted),
        ]
    );
}

#[tokio::test]
async fn shell_writes_to_control_files_are_reverted() {
    let (room, _, out) = Room::builder_ran(
        PLANS_WATCHED,
        &[("loopward.toml", "[agents]")],
        "mkdir -p .loopward/overrides && echo '{}' > .loopward/overrides/x.json; echo evil >> loopward.toml",
    )
    .await;
    assert_refused(&out, &["refused by control"]);
    assert_eq!(room.read("loopward.toml").unwrap(), "[agents]");
    assert!(!room.path(".loopward").exists());
}

#[tokio::test]
async fn shell_through_interpreters_and_symlinks_is_caught_by_effects() {
    let room = Room::new(PLANS_WATCHED);
    room.write("plans/a.md", "keep");
    std::os::unix::fs::symlink("plans", room.path("notes")).unwrap();
    let builder = room.turn("builder");
    let out = room
        .sh(
            &builder,
            "python3 -c \"open('notes/a.md','w').write('x')\" 2>/dev/null || printf x > notes/a.md",
        )
        .await;
    assert!(out.is_error, "{}", out.content);
    assert_eq!(room.read("plans/a.md").unwrap(), "keep");
}

#[tokio::test]
async fn the_owner_s_shell_changes_stand_and_are_reported_as_effects() {
    let (room, planner) = Room::with_turn(PLANS_WATCHED, "planner");
    let out = room
        .sh(&planner, "mkdir plans && echo '# Plan' > plans/p.md")
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(room.read("plans/p.md").unwrap(), "# Plan\n");
    let paths: Vec<_> = out.effects.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, vec!["plans", "plans/p.md"]);
    assert!(room.violations().is_empty());
    // Census: the exec and each change were decided and recorded.
    let gates: Vec<_> = room
        .decisions()
        .into_iter()
        .map(|(g, d, _)| format!("{g}:{d}"))
        .collect();
    assert_eq!(
        gates,
        vec![
            "sandbox:warn",
            "shell_watch:allow",
            "territory:planner:allow",
            "territory:planner:allow"
        ]
    );
}

#[tokio::test]
async fn a_shell_change_with_a_valid_override_stands_and_consumes_it() {
    let room = Room::new(PLANS_WATCHED);
    room.write("plan.md", "v1");
    let p = room.ws.resolve("plan.md").unwrap();
    room.policy
        .overrides()
        .grant(
            &agent("builder"),
            &p,
            "typo fix",
            std::time::Duration::from_secs(60),
            &*room.clock,
        )
        .unwrap();
    let builder = room.turn("builder");
    let out = room.sh(&builder, "echo v2 > plan.md").await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(room.read("plan.md").unwrap(), "v2\n");
    let out = room.sh(&builder, "echo v3 > plan.md").await;
    assert!(out.is_error);
    assert_eq!(room.read("plan.md").unwrap(), "v2\n");
}

#[tokio::test]
async fn a_watched_file_too_big_to_keep_fails_closed_naming_it() {
    let (room, builder) = Room::builder_in(
        "[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"\n\
         [gates.shell]\nmax_snapshot_bytes = 10\nsandbox = \"watch-only\"\n[gates.sprawl]\nenabled = false", &[("plan.md", "more than ten bytes")]);
    let err = room.shell(&builder, "echo hi > x").await.unwrap_err();
    assert!(
        err.to_string().contains("refused by shell_watch: not run"),
        "{err}"
    );
    assert!(err.to_string().contains("plan.md is watched"), "{err}");
    assert!(!room.path("x").exists());
}

/// The config of the blinding tests: a territory, a small snapshot budget, the watch alone.
fn small() -> String {
    format!("{PLANS_WATCHED}max_snapshot_bytes = 4096\n")
}

fn mode(room: &Room, rel: &str) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(room.path(rel))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[tokio::test]
async fn a_huge_file_in_a_free_folder_does_not_blind_the_watch_to_a_mode_change_and_a_link() {
    let room = Room::new(&small());
    room.write("plan.md", "the plan");
    room.write("free/small.txt", "small");
    let before_mode = mode(&room, "plan.md");
    let builder = room.turn("builder");
    let out = room
        .sh(
            &builder,
            "chmod 777 plan.md; ln -s ../plan.md free/link.md; truncate -s 300M free/huge.bin; \
             echo more >> free/small.txt",
        )
        .await;
    assert_refused(&out, &["reverted: free/link.md, plan.md"]);
    assert_eq!(mode(&room, "plan.md"), before_mode);
    assert!(std::fs::symlink_metadata(room.path("free/link.md")).is_err());
    // The free changes stand and are the call's effects, the huge file among them.
    let paths: Vec<_> = out.effects.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        ["free/huge.bin", "free/link.md", "free/small.txt", "plan.md"]
    );
    assert!(
        room.violations().iter().all(|(p, _)| !p.is_empty()),
        "{:?}",
        room.violations()
    );
    // The next call sees the huge file as unchanged, and nothing else.
    let out = room.sh(&builder, "true").await;
    assert!(!out.is_error && out.effects.is_empty(), "{out:?}");
}

/// A folder nested deeper than a path can name (`PATH_MAX`): no record of the workspace can be
/// taken while it is there, whoever runs the watch.
fn too_deep() -> String {
    let name = "d".repeat(200);
    format!("mkdir -p free/deep && cd free/deep && for i in $(seq 1 25); do mkdir {name} && cd {name}; done")
}

#[tokio::test]
async fn a_blinded_call_moves_no_baseline_and_is_judged_once_the_workspace_can_be_compared() {
    let room = Room::new(&small());
    room.write("plan.md", "the plan");
    let before_mode = mode(&room, "plan.md");
    let builder = room.turn("builder");
    let err = room
        .shell(
            &builder,
            &format!(
                "chmod 777 plan.md; ln -s plan.md link.md; echo hijack > plans.txt; {}",
                too_deep()
            ),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("could not be compared"), "{err}");
    // The violation names what blinded the watch and what is unchecked, never an empty path.
    let blind = room.violations();
    assert_eq!(blind.len(), 1, "{blind:?}");
    assert!(blind[0].0.starts_with("free/deep/ddd"), "{blind:?}");
    let reason = room
        .events()
        .into_iter()
        .find_map(|e| match e {
            AuditEvent::Violation { reason, .. } => Some(reason),
            _ => None,
        })
        .unwrap();
    assert!(
        reason.contains("unchecked until then") && reason.contains("plan.md"),
        "{reason}"
    );
    // While it cannot be compared, nothing that writes runs: not a command, not a file tool.
    let refused = room.shell(&builder, "echo x > x.txt").await.unwrap_err();
    assert!(refused.to_string().contains("still unchecked"), "{refused}");
    assert!(!room.path("x.txt").exists());
    assert!(room.write_file(&builder, "y.txt", "y").await.is_err());
    assert!(!room.path("y.txt").exists());
    assert_eq!(mode(&room, "plan.md"), 0o777, "nothing was judged yet");
    // A person removes what blinds it: the next call first judges the blinded call's changes.
    std::fs::remove_dir_all(room.path("free/deep")).unwrap();
    let out = room.sh(&builder, "echo x > x.txt").await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(mode(&room, "plan.md"), before_mode);
    assert!(std::fs::symlink_metadata(room.path("link.md")).is_err());
    assert_eq!(room.read("plans.txt").as_deref(), Some("hijack\n"));
    let settled: Vec<_> = room.violations().into_iter().skip(1).collect();
    assert_eq!(
        settled,
        [
            ("link.md".to_string(), "reverted".to_string()),
            ("plan.md".to_string(), "reverted".to_string())
        ]
    );
    // And what the next call did is its own.
    assert_eq!(room.read("x.txt").as_deref(), Some("x\n"));
}

#[tokio::test]
async fn skipped_folders_are_not_watched() {
    let (_room, _, out) = Room::builder_ran(
        "[gates.shell]\nskip = [\"target\"]\nsandbox = \"watch-only\"\n[gates.sprawl]\nenabled = false",
        &[],
        "mkdir target && echo x > target/a && echo y > b",
    )
    .await;
    let paths: Vec<_> = out.effects.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, vec!["b"]);
}

#[tokio::test]
async fn a_git_commit_through_shell_counts_no_work_and_reports_no_git_effects() {
    // The sprawl gate on (threshold 3): every `.git/objects` file a commit writes would be a unit
    // of work of its own if the watch compared `.git`.
    let (room, builder, out) = Room::builder_ran(
        "[gates.shell]\nsandbox = \"watch-only\"",
        &[("notes.txt", "n")],
        "git init -q . && git add -A && git -c user.email=a@b.c -c user.name=a commit -qm one",
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(room.path(".git/HEAD").exists());
    let paths: Vec<_> = out.effects.iter().map(|e| e.path.as_str()).collect();
    assert!(paths.is_empty(), "{paths:?}");
    // The commit started no unit of work: the next two files are units 1 and 2.
    room.write_ok(&builder, "a.rs", "a").await;
    room.write_ok(&builder, "b.rs", "b").await;
}

#[tokio::test]
async fn links_made_by_shell_into_a_territory_are_writes_there_and_reverted() {
    let (room, builder, out) = Room::builder_ran(
        PLANS_WATCHED,
        &[("plans/a.md", "keep")],
        "ln plans/a.md alias.md; ln -s plans/a.md soft.md; ln -s plans dir-link",
    )
    .await;
    assert_refused(&out, &["reverted: alias.md, dir-link, soft.md"]);
    for p in ["alias.md", "soft.md", "dir-link"] {
        assert!(
            std::fs::symlink_metadata(room.path(p)).is_err(),
            "{p} still exists"
        );
    }
    // A hard link made before the gate existed still cannot be used to write the file.
    std::fs::hard_link(room.path("plans/a.md"), room.path("old-alias.md")).unwrap();
    assert!(room
        .write_file(&builder, "old-alias.md", "no")
        .await
        .is_err());
    let out = room.sh(&builder, "echo no > old-alias.md").await;
    assert!(out.is_error, "{}", out.content);
    assert_eq!(room.read("plans/a.md").unwrap(), "keep");
}

/// The `loopward init` layout: the runs directory (the ledger) is inside the workspace. The watch
/// must neither see loopward's own appends as the command's changes nor "revert" them; with the
/// sandbox or without.
#[tokio::test]
async fn shell_in_the_init_layout_leaves_the_ledger_whole_and_verifying() {
    for sandbox in ["kernel", "watch-only"] {
        init_layout_ledger_stays_whole(sandbox).await;
    }
}

async fn init_layout_ledger_stays_whole(sandbox: &str) {
    use loopward_runner::audit::{verify, Ledger, LedgerOptions, VerifyOptions};
    use loopward_runner::gates::{Policy, PolicyConfig};
    use loopward_runner::Workspace;
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    std::fs::write(dir.path().join("loopward.toml"), "# config\n").unwrap();
    std::fs::create_dir(dir.path().join("notes")).unwrap();
    let toml = format!(
        "[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"\n[gates.sprawl]\nenabled = false\n[gates.shell]\nsandbox = \"{sandbox}\"\n"
    );
    let cfg = PolicyConfig::from_toml(&toml).unwrap();
    let policy = Policy::from_config(&cfg, ws.clone()).unwrap();
    let runs = dir.path().join("runs");
    let ledger = Ledger::create(
        &runs,
        &loopward_core::RunId::new("r1").unwrap(),
        LedgerOptions::default(),
    )
    .unwrap();
    let room = Room::with_sink(dir, ws, policy, Some(ledger.clone()));
    let builder = room.turn("builder");
    let first = room.sh(&builder, "true").await;
    assert!(!first.is_error, "{sandbox}: {}", first.content);
    let second = room.sh(&builder, "echo mine > notes/mine.txt").await;
    assert!(!second.is_error, "{sandbox}: {}", second.content);
    room.write_ok(&builder, "notes.md", "more\n").await;
    let path = room.path("runs/r1/events.jsonl");
    let before_finish = std::fs::read_to_string(&path).unwrap().lines().count();
    let finished = ledger.finish().unwrap();
    // Every record reached the one file on disk: none went to a deleted inode.
    assert_eq!(finished.final_seq as usize, before_finish, "{sandbox}");
    assert!(
        before_finish >= 6,
        "{sandbox}: only {before_finish} records"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("\"violation\""), "{sandbox}: {text}");
    let ok = verify(&room.path("runs/r1"), &VerifyOptions::keyless()).unwrap();
    assert_eq!(ok.final_seq, finished.final_seq);
    assert!(ok.anchored);
    assert_eq!(room.read("notes/mine.txt").unwrap(), "mine\n");
}

/// Names are bytes: a link whose target is not UTF-8, and a file whose name is not, made in a
/// free folder stand and stop no other write; made in (or pointing into) a territory they are
/// judged by their bytes and put back.
#[tokio::test]
async fn names_that_are_not_utf8_are_judged_by_their_bytes_and_stop_no_other_write() {
    let (room, builder, out) = Room::builder_ran(
        PLANS_WATCHED,
        &[("plans/a.md", "keep")],
        "mkdir -p free && ln -s \"$(printf '\\377')\" free/odd && touch \"free/$(printf '\\376')\"",
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let paths: Vec<_> = out.effects.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["free", "free/odd", "free/\u{fffd}fe"]);
    let out = room.write_file(&builder, "notes.txt", "still writes").await;
    assert!(out.is_ok(), "{out:?}");
    let out = room.sh(&builder, "echo ok > free/ok.txt").await;
    assert!(!out.is_error, "{}", out.content);
    // Inside a territory, or a link into one: refused and put back, named in the ledger.
    let out = room
        .sh(
            &builder,
            "touch \"plans/$(printf '\\377')\"; ln -s \"../plans/$(printf '\\375')\" free/into",
        )
        .await;
    assert_refused(&out, &["reverted: free/into, plans/\u{fffd}ff"]);
    assert_eq!(names_in(&room.path("plans")), ["a.md"]);
    assert!(std::fs::symlink_metadata(room.path("free/into")).is_err());
    assert!(std::fs::symlink_metadata(room.path("free/odd")).is_ok());
}
