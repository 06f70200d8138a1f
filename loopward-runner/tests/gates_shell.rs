//! Effects, not tool names: shell writes are judged by comparing the workspace before and after,
//! and forbidden changes are reverted and recorded as violations. These tests run the watch
//! alone (`sandbox = "watch-only"`), as the second line it is behind the kernel sandbox (see
//! `sandbox_shell.rs`).

mod gates_support;

use gates_support::*;
use loopward_core::{AuditEvent, EffectKind, EffectStatus};

const ROOM: &str = r#"
[[territory]]
paths = ["plan.md", "plans/**"]
owner = "planner"

[gates.sprawl]
enabled = false

[gates.shell]
sandbox = "watch-only"
"#;

fn violations(room: &Room) -> Vec<(String, String)> {
    room.events()
        .into_iter()
        .filter_map(|e| match e {
            AuditEvent::Violation { path, remedy, .. } => Some((path, remedy.to_string())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn shell_writes_into_a_foreign_territory_are_reverted_and_named() {
    let room = Room::new(ROOM);
    room.write("plan.md", "original plan");
    room.write("plans/old.md", "old");
    let builder = room.turn("builder");
    let out = room
        .shell(
            &builder,
            "echo hijack > plan.md; sed -i s/old/new/ plans/old.md 2>/dev/null || true; \
             echo new > plans/new.md; echo ok > mine.txt; rm -f plans/old.md",
        )
        .await
        .unwrap();
    assert!(out.is_error);
    assert!(
        out.content.contains("refused by territory:planner"),
        "{}",
        out.content
    );
    assert!(
        out.content
            .contains("reverted: plan.md, plans/new.md, plans/old.md"),
        "{}",
        out.content
    );
    assert_eq!(room.read("plan.md").unwrap(), "original plan");
    assert_eq!(room.read("plans/old.md").unwrap(), "old");
    assert!(!room.path("plans/new.md").exists());
    // The caller's own change stands.
    assert_eq!(room.read("mine.txt").unwrap(), "ok\n");
    assert_eq!(
        violations(&room),
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
    let room = Room::new(ROOM);
    room.write("loopward.toml", "[agents]");
    let builder = room.turn("builder");
    let out = room
        .shell(
            &builder,
            "mkdir -p .loopward/overrides && echo '{}' > .loopward/overrides/x.json; echo evil >> loopward.toml",
        )
        .await
        .unwrap();
    assert!(out.is_error);
    assert!(
        out.content.contains("refused by control"),
        "{}",
        out.content
    );
    assert_eq!(room.read("loopward.toml").unwrap(), "[agents]");
    assert!(!room.path(".loopward").exists());
}

#[tokio::test]
async fn shell_through_interpreters_and_symlinks_is_caught_by_effects() {
    let room = Room::new(ROOM);
    room.write("plans/a.md", "keep");
    std::os::unix::fs::symlink("plans", room.path("notes")).unwrap();
    let builder = room.turn("builder");
    let out = room
        .shell(
            &builder,
            "python3 -c \"open('notes/a.md','w').write('x')\" 2>/dev/null || printf x > notes/a.md",
        )
        .await
        .unwrap();
    assert!(out.is_error, "{}", out.content);
    assert_eq!(room.read("plans/a.md").unwrap(), "keep");
}

#[tokio::test]
async fn the_owner_s_shell_changes_stand_and_are_reported_as_effects() {
    let room = Room::new(ROOM);
    let planner = room.turn("planner");
    let out = room
        .shell(&planner, "mkdir plans && echo '# Plan' > plans/p.md")
        .await
        .unwrap();
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(room.read("plans/p.md").unwrap(), "# Plan\n");
    let paths: Vec<_> = out.effects.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, vec!["plans", "plans/p.md"]);
    assert!(violations(&room).is_empty());
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
    let room = Room::new(ROOM);
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
    let out = room.shell(&builder, "echo v2 > plan.md").await.unwrap();
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(room.read("plan.md").unwrap(), "v2\n");
    let out = room.shell(&builder, "echo v3 > plan.md").await.unwrap();
    assert!(out.is_error);
    assert_eq!(room.read("plan.md").unwrap(), "v2\n");
}

#[tokio::test]
async fn a_workspace_too_big_to_watch_fails_closed() {
    let room = Room::new("[gates.shell]\nmax_snapshot_bytes = 10\n[gates.sprawl]\nenabled = false");
    room.write("big.txt", "more than ten bytes");
    let builder = room.turn("builder");
    let err = room.shell(&builder, "echo hi > x").await.unwrap_err();
    assert!(
        err.to_string().contains("refused by shell_watch: not run"),
        "{err}"
    );
    assert!(!room.path("x").exists());
}

#[tokio::test]
async fn skipped_folders_are_not_watched() {
    let room = Room::new(
        "[gates.shell]\nskip = [\"target\"]\nsandbox = \"watch-only\"\n[gates.sprawl]\nenabled = false",
    );
    let builder = room.turn("builder");
    let out = room
        .shell(&builder, "mkdir target && echo x > target/a && echo y > b")
        .await
        .unwrap();
    let paths: Vec<_> = out.effects.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, vec!["b"]);
}

#[tokio::test]
async fn links_made_by_shell_into_a_territory_are_writes_there_and_reverted() {
    let room = Room::new(ROOM);
    room.write("plans/a.md", "keep");
    let builder = room.turn("builder");
    let out = room
        .shell(
            &builder,
            "ln plans/a.md alias.md; ln -s plans/a.md soft.md; ln -s plans dir-link",
        )
        .await
        .unwrap();
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content
            .contains("reverted: alias.md, dir-link, soft.md"),
        "{}",
        out.content
    );
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
    let out = room
        .shell(&builder, "echo no > old-alias.md")
        .await
        .unwrap();
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
    use loopward_runner::audit::{verify, Ledger, LedgerOptions};
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
    let first = room.shell(&builder, "true").await.unwrap();
    assert!(!first.is_error, "{sandbox}: {}", first.content);
    let second = room
        .shell(&builder, "echo mine > notes/mine.txt")
        .await
        .unwrap();
    assert!(!second.is_error, "{sandbox}: {}", second.content);
    room.write_file(&builder, "notes.md", "more\n")
        .await
        .unwrap();
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
    let ok = verify(&room.path("runs/r1"), None).unwrap();
    assert_eq!(ok.final_seq, finished.final_seq);
    assert!(ok.anchored);
    assert_eq!(room.read("notes/mine.txt").unwrap(), "mine\n");
}
