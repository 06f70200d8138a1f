//! Claude Code's own `Write` and `Edit` run in Claude Code's process and follow links, so a link
//! swapped in after `PreToolUse` judged the path can carry the write into a territory. The hook
//! records the workspace at `PreToolUse` and compares at `PostToolUse`: a territory changed
//! through the link is put back, the violation recorded, and the model told. These tests play
//! the client: `PreToolUse`, then the write through the (swapped) link, then `PostToolUse`.

use crate::support::{assert_not_recorded, assert_recorded, assert_tells, Project, SESSION};
use loopward_hooks::{handle, HookAnswer};
use serde_json::{json, Value};
use std::os::unix::fs::symlink;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const POLICY: &str = include_str!("policies/plans-folder-watched.toml");

/// A `Write` event of `file` (an update of a file that was there).
fn event(p: &Project, name: &str, id: &str, file: &str, content: &str) -> String {
    p.write_event(name, id, file, content, false)
}

/// The planner's `plans/a.md` and a draft `scratch/a.md`; a `Write` of the draft (call `id`) is
/// checked and allowed, then, before it lands, `scratch/` is swapped for a link into `plans/`.
fn allowed_then_swapped_for_a_link(p: &Project, id: &str) {
    p.write("plans/a.md", "# the planner's plan\n");
    p.write("scratch/a.md", "draft\n");
    let pre = handle(&event(p, "PreToolUse", id, "scratch/a.md", "mine"), &p.ctx);
    assert_tells(&pre, r#""permissionDecision":"allow""#);
    std::fs::remove_dir_all(p.path("scratch")).unwrap();
    symlink(p.path("plans"), p.path("scratch")).unwrap();
}

#[test]
fn a_write_whose_folder_became_a_link_into_a_territory_is_put_back() {
    let p = Project::new(POLICY);
    // Between the check and the write, something swaps the folder for a link into plans/.
    allowed_then_swapped_for_a_link(&p, "toolu_w1");
    // Claude Code writes, following the link.
    std::fs::write(p.path("scratch/a.md"), "mine").unwrap();
    assert_eq!(p.read("plans/a.md").as_deref(), Some("mine"));
    let post = handle(
        &event(&p, "PostToolUse", "toolu_w1", "scratch/a.md", "mine"),
        &p.ctx,
    );
    assert_eq!(post.exit_code, 0);
    assert_tells(&post, r#""decision":"block""#);
    assert!(
        post.stdout.contains("plans/a.md (reverted)") && post.stdout.contains("belongs to planner"),
        "{}",
        post.stdout
    );
    assert_eq!(
        p.read("plans/a.md").as_deref(),
        Some("# the planner's plan\n"),
        "the territory file is restored"
    );
    let ledger = p.ledger(SESSION);
    assert_recorded(&ledger, "violation plans/a.md reverted");
    assert!(
        ledger
            .iter()
            .any(|l| l.contains("tool_finished Write toolu_w1 error=true")
                && l.contains("plans/a.md modify reverted")),
        "{ledger:#?}"
    );
}

#[test]
fn a_new_file_landed_in_a_territory_through_a_link_is_removed_and_a_plain_write_stands() {
    let p = Project::new(POLICY);
    p.write("plans/a.md", "# plan\n");
    p.write("scratch/keep.md", "k\n");
    // A plain write: nothing else changed, nothing judged, the write stands.
    handle(
        &event(&p, "PreToolUse", "toolu_1", "scratch/b.md", "b"),
        &p.ctx,
    );
    std::fs::write(p.path("scratch/b.md"), "b").unwrap();
    let post = handle(
        &event(&p, "PostToolUse", "toolu_1", "scratch/b.md", "b"),
        &p.ctx,
    );
    assert_eq!((post.exit_code, post.stdout.as_str()), (0, ""));
    assert_eq!(p.read("scratch/b.md").as_deref(), Some("b"));
    // Swapped: the new file lands in plans/ and is removed.
    handle(
        &event(&p, "PreToolUse", "toolu_2", "scratch/new.md", "x"),
        &p.ctx,
    );
    std::fs::rename(p.path("scratch"), p.path("moved")).unwrap();
    symlink(p.path("plans"), p.path("scratch")).unwrap();
    std::fs::write(p.path("scratch/new.md"), "x").unwrap();
    let post = handle(
        &event(&p, "PostToolUse", "toolu_2", "scratch/new.md", "x"),
        &p.ctx,
    );
    assert_tells(&post, "plans/new.md (reverted)");
    assert!(!p.path("plans/new.md").exists());
    assert_eq!(p.read("plans/a.md").as_deref(), Some("# plan\n"));
}

#[test]
fn a_link_flipped_in_a_loop_while_many_writes_run_leaves_the_territory_untouched() {
    let p = Project::new(POLICY);
    let plan = "# the planner's plan\n";
    for i in 0..4 {
        p.write(&format!("plans/p{i}.md"), plan);
    }
    std::fs::create_dir_all(p.path("scratch")).unwrap();
    symlink(p.path("scratch"), p.path("free")).unwrap();
    // Another process flips `free` between scratch/ and plans/, atomically, as fast as it can.
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        let (root, free) = (p.root.clone(), p.path("free"));
        std::thread::spawn(move || {
            let mut n = 0u64;
            let tmp = root.join("free.tmp");
            while !stop.load(Ordering::Relaxed) {
                let to = if n & 1 == 0 { "plans" } else { "scratch" };
                let _ = std::fs::remove_file(&tmp);
                symlink(root.join(to), &tmp).unwrap();
                std::fs::rename(&tmp, &free).unwrap();
                n += 1;
            }
            n
        })
    };
    let (mut landed, mut blocked) = (0, 0);
    for i in 0..60 {
        let id = format!("toolu_{i}");
        let file = format!("free/p{}.md", i % 4);
        let pre = handle(&event(&p, "PreToolUse", &id, &file, "mine"), &p.ctx);
        assert_eq!(pre.exit_code, 0, "{pre:?}");
        if pre.stdout.contains(r#""permissionDecision":"deny""#) {
            continue; // judged while the link pointed into plans/: not written
        }
        if std::fs::write(p.path(&file), "mine").is_err() {
            continue;
        }
        if p.read(&file.replace("free/", "plans/")).as_deref() == Some("mine") {
            landed += 1;
        }
        let post = handle(&event(&p, "PostToolUse", &id, &file, "mine"), &p.ctx);
        assert_eq!(post.exit_code, 0, "{post:?}");
        if post.stdout.contains(r#""decision":"block""#) {
            blocked += 1;
        }
        for j in 0..4 {
            assert_eq!(
                p.read(&format!("plans/p{j}.md")).as_deref(),
                Some(plan),
                "after call {i}: pre {pre:?} post {post:?} ledger {:#?}",
                p.ledger(SESSION).iter().rev().take(12).collect::<Vec<_>>()
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    assert!(flips > 60, "the link flipped {flips} times");
    assert!(
        landed > 0,
        "no write went through the swapped link; the race was not exercised"
    );
    assert!(
        blocked >= landed,
        "{blocked} blocked, {landed} landed in plans/"
    );
    let violations = p
        .ledger(SESSION)
        .iter()
        .filter(|l| l.contains(" violation plans/"))
        .count();
    assert!(
        violations >= landed,
        "{violations} violations, {landed} landed"
    );
}

#[test]
fn a_file_tool_that_failed_after_writing_through_a_link_is_compared_too() {
    let p = Project::new(POLICY);
    // Between the check and the write, something swaps the folder for a link into plans/.
    allowed_then_swapped_for_a_link(&p, "toolu_f1");
    // The write lands through the link, then the tool reports a failure (Claude Code sends
    // PostToolUseFailure instead of PostToolUse).
    std::fs::write(p.path("scratch/a.md"), "mine").unwrap();
    let mut failed: serde_json::Value = serde_json::from_str(&event(
        &p,
        "PostToolUseFailure",
        "toolu_f1",
        "scratch/a.md",
        "mine",
    ))
    .unwrap();
    failed["error"] = json!("the write was interrupted");
    let post = handle(&failed.to_string(), &p.ctx);
    assert_eq!(post.exit_code, 0, "{post:?}");
    assert_tells(&post, "plans/a.md (reverted)");
    assert_eq!(
        p.read("plans/a.md").as_deref(),
        Some("# the planner's plan\n"),
        "the territory file is restored"
    );
    assert_recorded(&p.ledger(SESSION), "violation plans/a.md reverted");
}

/// `agent_event`'s event handled by the hook: its answer.
fn sent_by(p: &Project, name: &str, agent: &str, id: &str, tool: Value) -> HookAnswer {
    handle(&agent_event(p, name, agent, id, tool), &p.ctx)
}

/// A Claude Code event of a subagent (`agent_type`): a `Write` of `file`, or a `Bash` command.
fn agent_event(p: &Project, name: &str, agent: &str, id: &str, tool: Value) -> String {
    let (tool_name, input) = match &tool {
        Value::String(command) => ("Bash", json!({"command": command})),
        other => ("Write", other.clone()),
    };
    let mut v = json!({
        "session_id": SESSION, "transcript_path": "/t.jsonl", "cwd": p.root,
        "hook_event_name": name, "tool_name": tool_name, "tool_use_id": id,
        "agent_id": format!("a-{agent}"), "agent_type": agent, "tool_input": input,
    });
    if name == "PostToolUse" {
        v["tool_response"] = if tool_name == "Write" {
            json!({"type": "create", "filePath": input["file_path"]})
        } else {
            json!({"stdout": "", "stderr": "", "interrupted": false})
        };
    }
    v.to_string()
}

const TWO_TEAMS: &str = r#"
[[territory]]
paths = ["plans/**"]
owner = "planner"

[[territory]]
paths = ["src/**"]
owner = "builder"

[gates.sprawl]
enabled = false

[gates.shell]
sandbox = "watch-only"
"#;

/// The planner's write of its `plans/a.md` and the builder's of its `src/b.rs`: `(agent, call
/// id, file)`.
const OVERLAPPING: [(&str, &str, &str); 2] = [
    ("planner", "toolu_p1", "plans/a.md"),
    ("builder", "toolu_b1", "src/b.rs"),
];

/// The input of a `Write` of `file` in `p`.
fn write(p: &Project, file: &str) -> Value {
    json!({"file_path": p.path(file), "content": "x"})
}

/// A [`TWO_TEAMS`] project in which both [`OVERLAPPING`] writes have begun (`PreToolUse`, each
/// file's [`write`]): each was allowed.
fn both_begun() -> Project {
    let p = Project::new(TWO_TEAMS);
    for (agent, id, file) in OVERLAPPING {
        let pre = sent_by(&p, "PreToolUse", agent, id, write(&p, file));
        assert_tells(&pre, r#""permissionDecision":"allow""#);
    }
    p
}

/// The hook let the call stand without a word.
#[track_caller]
fn assert_silent(answer: &HookAnswer) {
    assert_eq!(
        (answer.exit_code, answer.stdout.as_str()),
        (0, ""),
        "{answer:?}"
    );
}

/// Two subagents in the background, each writing its own territory while the other's write is
/// between its `PreToolUse` and `PostToolUse`: both writes stand, nothing is blamed on anyone.
#[test]
fn two_subagents_writing_their_own_territories_at_once_both_stand() {
    let p = both_begun();
    p.write("plans/a.md", "the planner's\n");
    p.write("src/b.rs", "the builder's\n");
    for (agent, id, file) in OVERLAPPING {
        assert_silent(&sent_by(&p, "PostToolUse", agent, id, write(&p, file)));
    }
    assert_eq!(p.read("plans/a.md").as_deref(), Some("the planner's\n"));
    assert_eq!(p.read("src/b.rs").as_deref(), Some("the builder's\n"));
    let ledger = p.ledger(SESSION);
    assert_not_recorded(&ledger, "violation");
}

/// Claude Code writes through a temporary sibling (`<target>.tmp.<pid>.<hex>`) renamed over the
/// target: the planner's write, judged while the builder's is still mid-write, sees the
/// builder's temporary file, which is the builder's: not blamed on the planner, not removed.
#[test]
fn another_subagents_write_in_flight_through_its_temporary_file_is_not_blamed() {
    let p = both_begun();
    p.write("plans/a.md", "the planner's\n");
    p.write("src/b.rs.tmp.4242.67b378408600", "the builder's\n");
    let (planner, id, file) = OVERLAPPING[0];
    assert_silent(&sent_by(&p, "PostToolUse", planner, id, write(&p, file)));
    assert_eq!(
        p.read("src/b.rs.tmp.4242.67b378408600").as_deref(),
        Some("the builder's\n"),
        "the builder's write in flight is left alone"
    );
    // Its rename lands; its own PostToolUse judges it.
    std::fs::rename(p.path("src/b.rs.tmp.4242.67b378408600"), p.path("src/b.rs")).unwrap();
    let (builder, id, file) = OVERLAPPING[1];
    assert_silent(&sent_by(&p, "PostToolUse", builder, id, write(&p, file)));
    assert_eq!(p.read("src/b.rs").as_deref(), Some("the builder's\n"));
    assert_not_recorded(&p.ledger(SESSION), "violation");
}

/// While the planner's write is live, the builder's command writes into the planner's
/// territory: only that change is put back, and the ledger names the builder, not the planner.
#[test]
fn a_subagent_writing_the_others_territory_during_an_overlap_is_put_back_and_named() {
    let p = Project::new(TWO_TEAMS);
    let write = json!({"file_path": p.path("plans/a.md"), "content": "the planner's\n"});
    let cmd = Value::String("echo evil > plans/evil.md".into());
    let pre = sent_by(&p, "PreToolUse", "planner", "toolu_p1", write.clone());
    assert_tells(&pre, r#""permissionDecision":"allow""#);
    let pre = sent_by(&p, "PreToolUse", "builder", "toolu_b1", cmd.clone());
    assert_eq!(pre.exit_code, 0, "{pre:?}");
    p.write("plans/a.md", "the planner's\n");
    p.write("plans/evil.md", "evil\n");
    // The planner's write ends first: the command's change is not its to answer for.
    let post = sent_by(&p, "PostToolUse", "planner", "toolu_p1", write);
    assert_silent(&post);
    let post = sent_by(&p, "PostToolUse", "builder", "toolu_b1", cmd);
    assert_tells(&post, r#""decision":"block""#);
    assert_eq!(p.read("plans/a.md").as_deref(), Some("the planner's\n"));
    assert_eq!(
        p.read("plans/evil.md"),
        None,
        "the builder's change is put back"
    );
    let ledger = p.ledger(SESSION);
    let blamed: Vec<&String> = ledger.iter().filter(|l| l.contains("violation")).collect();
    assert_eq!(blamed.len(), 1, "{ledger:#?}");
    assert!(
        blamed[0].starts_with("[builder") && blamed[0].contains("plans/evil.md"),
        "{ledger:#?}"
    );
}
