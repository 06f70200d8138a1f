//! Claude Code `Bash` calls: the workspace is compared before and after; a change inside a
//! territory the caller does not own is put back and reported to the model as a blocking reason.
//! These tests run the watch alone (`sandbox = "watch-only"`), as the second line behind the
//! sandbox the hook wraps commands in (see `hook_sandbox` below and `loopward-cli/tests/hooks/claude_code.rs`).

use crate::gates_support::PLANS_WATCHED as POLICY;
use crate::support::{
    assert_blocks, assert_not_recorded, assert_recorded, assert_tells, shown, Project, SESSION,
};

/// What `plan.md` holds before a command, and again once a change to it is put back.
const PLAN: &str = "# Plan\n1. greet\n";

/// A project under `policy` whose `plan.md` holds [`PLAN`].
fn planned(p: Project) -> Project {
    p.write("plan.md", PLAN);
    p
}

/// `command` run in the project the way Claude Code would, between the two hook events.
fn sh(p: &Project, command: &str) -> std::process::ExitStatus {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(&p.root)
        .status()
        .unwrap()
}

/// Runs the fixture's command, which must succeed.
fn run_bash(p: &Project, command: &str) {
    assert!(sh(p, command).success(), "{command}");
}

/// The fixture's `Bash` call around `command`: `PreToolUse`, the command run, `PostToolUse`;
/// the answer to the last.
fn bash_between(p: &Project, command: &str) -> loopward_hooks::HookAnswer {
    bash_call(p, "toolu_01J", command)
}

/// The fixture's `Bash` call as call `id` around `command`, as [`bash_between`].
fn bash_call(p: &Project, id: &str, command: &str) -> loopward_hooks::HookAnswer {
    p.send(&bash(p, "pre_bash_into_plan.json", id));
    run_bash(p, command);
    p.send(&bash(p, "post_bash_into_plan.json", id))
}

#[test]
fn a_bash_write_into_a_territory_is_reverted_and_reported_as_blocking() {
    let p = planned(Project::new(POLICY));
    let pre = p.send_fixture("pre_bash_into_plan.json");
    assert_eq!(
        shown(&pre),
        "exit 0\nstdout: \nstderr: \n",
        "Claude Code's own permission flow decides on Bash"
    );
    run_bash(&p, "echo '# Plan: mine' > plan.md && echo hi > notes.txt");
    let post = p.send_fixture("post_bash_into_plan.json");
    insta::assert_snapshot!(shown(&post));
    assert_eq!(
        p.read("plan.md").as_deref(),
        Some(PLAN),
        "the territory file is put back"
    );
    assert_eq!(
        p.read("notes.txt").as_deref(),
        Some("hi\n"),
        "changes outside territories stand"
    );
    insta::assert_snapshot!(p.ledger(SESSION).join("\n"));
}

#[test]
fn a_file_created_in_a_territory_by_bash_is_removed() {
    let p = Project::new(POLICY);
    let post = bash_between(&p, "mkdir -p plans && echo x > plans/new.md");
    assert_tells(&post, r#""decision":"block""#);
    assert_tells(&post, "plans/new.md");
    assert!(p.read("plans/new.md").is_none());
}

#[test]
fn a_symlink_made_by_bash_that_points_into_a_territory_is_removed() {
    let p = Project::new(POLICY);
    p.write("plan.md", "# Plan\n");
    let post = bash_between(&p, "ln -s plan.md innocent.txt");
    assert_tells(&post, "innocent.txt is a link to plan.md");
    assert!(std::fs::symlink_metadata(p.path("innocent.txt")).is_err());
}

#[test]
fn bash_changes_by_the_owner_stand() {
    let p = Project::new(POLICY);
    p.write("plan.md", "# Plan\n");
    let owned = |f: &str| {
        p.fixture(f).replace(
            r#""hook_event_name""#,
            r#""agent_type": "planner", "hook_event_name""#,
        )
    };
    p.send(&owned("pre_bash_into_plan.json"));
    run_bash(&p, "echo '# Plan: mine' > plan.md");
    let post = p.send(&owned("post_bash_into_plan.json"));
    assert_eq!(shown(&post), "exit 0\nstdout: \nstderr: \n");
    assert_eq!(p.read("plan.md").as_deref(), Some("# Plan: mine\n"));
    assert!(p
        .ledger(SESSION)
        .last()
        .unwrap()
        .contains("plan.md modify ok"));
}

#[test]
fn bash_editing_loopward_control_files_is_reverted() {
    let p = Project::new(POLICY);
    let post = bash_between(&p, "echo '[gates.sprawl]' >> loopward.toml && mkdir -p .loopward/overrides && echo '{}' > .loopward/overrides/x.json");
    assert_tells(&post, "loopward.toml");
    assert_tells(&post, ".loopward/overrides/x.json");
    assert_eq!(p.read("loopward.toml").as_deref(), Some(POLICY));
    assert!(p.read(".loopward/overrides/x.json").is_none());
}

#[test]
fn a_post_bash_without_its_snapshot_blocks() {
    let p = Project::new(POLICY);
    let post = p.send_fixture("post_bash_into_plan.json");
    assert_blocks(&post, "no workspace snapshot was taken");
}

#[test]
fn a_failing_bash_command_that_wrote_first_is_still_reverted() {
    let p = planned(Project::new(POLICY));
    p.send_fixture("pre_bash_into_plan.json");
    assert!(!sh(&p, "echo '# Plan: mine' > plan.md && false").success());
    let post = p.send_fixture("post_bash_failure.json");
    insta::assert_snapshot!(shown(&post));
    assert_eq!(p.read("plan.md").as_deref(), Some(PLAN));
    assert!(p.ledger(SESSION).last().unwrap().contains("error=true"));
}

/// The hook's session ledgers here are keyless, and a session never finishes.
fn session_check() -> loopward_runner::audit::VerifyOptions {
    loopward_runner::audit::VerifyOptions::keyless().unfinished(true)
}

#[test]
fn the_session_ledger_verifies_reports_and_catches_an_edit() {
    let p = planned(Project::new(POLICY));
    p.send_fixture("user_prompt.json");
    p.send_fixture("pre_write_plan_root.json");
    p.send_fixture("pre_write_plan_planner.json");
    p.send_fixture("pre_bash_into_plan.json");
    run_bash(&p, "echo '# Plan: mine' > plan.md && echo hi > notes.txt");
    p.send_fixture("post_bash_into_plan.json");
    let run_dir = p.path(&format!("runs/claude-code-{SESSION}"));
    let ok = loopward_runner::audit::verify(&run_dir, &session_check()).unwrap();
    assert!(
        !ok.anchored,
        "a session never finishes, so it is not anchored"
    );
    let report = loopward_runner::audit::report(&p.path("runs"), &session_check()).unwrap();
    assert_eq!(report.runs, 1);
    let territory = &report.gates["territory:planner"];
    // Allowed: the planner's write. Denied: the main agent's write, and its shell change.
    assert_eq!((territory.allowed, territory.denied), (1, 2));
    assert_eq!(report.violations, 1);
    assert_eq!(
        report.unauthorised_writes.total, 0,
        "the shell write was reverted"
    );
    assert_eq!(report.turns, 1);
    // Any edit of the ledger is caught.
    let events = run_dir.join("events.jsonl");
    let text = std::fs::read_to_string(&events).unwrap();
    std::fs::write(&events, text.replacen("\"deny\"", "\"allow\"", 1)).unwrap();
    assert!(loopward_runner::audit::verify(&run_dir, &session_check()).is_err());
    // The hook reopens the ledger at its head: what it appends chains to the head, so the edit
    // before it stays caught.
    let a = p.send_fixture("pre_read.json");
    assert_eq!(a.exit_code, 0, "{a:?}");
    assert!(loopward_runner::audit::verify(&run_dir, &session_check()).is_err());
    // Undone, the chain holds again, the hook's records included.
    let text = std::fs::read_to_string(&events).unwrap();
    std::fs::write(&events, text.replacen("\"allow\"", "\"deny\"", 1)).unwrap();
    loopward_runner::audit::verify(&run_dir, &session_check()).unwrap();
    // An edit of the head itself: the hook checks the whole chain, finds the damage and blocks.
    let text = std::fs::read_to_string(&events).unwrap();
    let head = text.lines().last().unwrap();
    assert!(head.contains("\"tool_requested\""), "{head}");
    let forged = head.replacen("\"tool_requested\"", "\"tool_started\"", 1);
    std::fs::write(&events, text.replace(head, &forged)).unwrap();
    let a = p.send_fixture("pre_read.json");
    assert_blocks(&a, "events.jsonl");
}

#[test]
fn a_bash_write_covered_by_a_one_shot_override_stands_and_consumes_it() {
    let p = planned(Project::new(POLICY));
    p.grant("root", "plan.md", "regenerate the plan with the script");
    let post = bash_between(&p, "echo '# Plan: mine' > plan.md && echo hi > notes.txt");
    assert_eq!(shown(&post), "exit 0\nstdout: \nstderr: \n");
    assert_eq!(p.read("plan.md").as_deref(), Some("# Plan: mine\n"));
    insta::assert_snapshot!(p.ledger(SESSION).join("\n"));
}

#[test]
fn a_watched_file_too_big_to_record_denies_the_command_naming_it() {
    let p = Project::new(
        "[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"\n\
         [gates.sprawl]\nenabled = false\n[gates.shell]\nmax_snapshot_bytes = 512\nsandbox = \"watch-only\"\n",
    );
    p.write("plan.md", &"x".repeat(1000));
    let pre = p.send_fixture("pre_bash_into_plan.json");
    assert_eq!(pre.exit_code, 0);
    assert_tells(&pre, r#""permissionDecision":"deny""#);
    assert_tells(&pre, "max_snapshot_bytes");
    assert_tells(&pre, "plan.md is watched");
}

#[test]
fn a_change_that_cannot_be_put_back_is_recorded_as_such_and_named() {
    let p = Project::new(POLICY);
    p.write("plan.md", "# Plan\n");
    p.write("innocent.txt", "an ordinary file, not watched");
    let post = bash_between(&p, "rm innocent.txt && ln -s plan.md innocent.txt");
    assert_tells(&post, "could not be put back");
    let ledger = p.ledger(SESSION);
    assert_recorded(&ledger, "violation innocent.txt not reverted");
    let report = loopward_runner::audit::report(&p.path("runs"), &session_check()).unwrap();
    assert_eq!(report.unauthorised_writes.unreverted_violations, 1);
}

/// With the kernel sandbox (the default), `PreToolUse` answers with the command wrapped in
/// `loopward sandbox exec` for the calling agent; the rest of the input is kept, and no
/// permission decision is given: whether it runs stays Claude Code's own decision.
#[test]
fn a_bash_command_is_rewritten_to_run_in_the_agent_s_sandbox() {
    let policy = POLICY.replace("sandbox = \"watch-only\"", "");
    let p = Project::with_sandbox(&policy, Some("/opt/loop ward/loopward"));
    let pre = p.send_fixture("pre_bash_into_plan.json");
    assert_eq!(pre.exit_code, 0, "{}", pre.stderr);
    let v: serde_json::Value = serde_json::from_str(&pre.stdout).unwrap();
    let out = &v["hookSpecificOutput"];
    assert!(out.get("permissionDecision").is_none(), "{out}");
    assert_eq!(out["updatedInput"]["description"], "Write the plan");
    let cfg = p.path("loopward.toml");
    assert_eq!(
        out["updatedInput"]["command"].as_str().unwrap(),
        format!(
            "'/opt/loop ward/loopward' sandbox exec --config '{}' --agent 'root' --session '{SESSION}' -- bash -c 'echo '\\''# Plan: mine'\\'' > plan.md && echo hi > notes.txt'",
            cfg.display()
        )
    );
    assert!(p
        .ledger(SESSION)
        .iter()
        .any(|l| l.contains("gate_decision sandbox allow")));
}

/// A hook that cannot wrap the command (it was not told the loopward binary) denies it: an
/// unwrapped command would run unconfined.
#[test]
fn a_bash_command_that_cannot_be_wrapped_is_denied() {
    let policy = POLICY.replace("sandbox = \"watch-only\"", "");
    let p = Project::new(&policy);
    let pre = p.send_fixture("pre_bash_into_plan.json");
    assert_eq!(pre.exit_code, 0);
    let v: serde_json::Value = serde_json::from_str(&pre.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
    let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("loopward hook install"), "{reason}");
}

#[test]
fn with_a_state_directory_the_hook_keeps_nothing_in_the_workspace() {
    let p = planned(Project::with_state_dir(POLICY));
    p.send_fixture("pre_bash_into_plan.json");
    let sessions = p
        .state
        .as_ref()
        .unwrap()
        .1
        .root()
        .join("sessions")
        .join(SESSION);
    // The snapshot taken before the command, and the territory file's content, are kept there.
    let snapshots: Vec<_> = std::fs::read_dir(sessions.join("shell")).unwrap().collect();
    assert_eq!(snapshots.len(), 1);
    assert!(std::fs::read_dir(sessions.join("blobs")).unwrap().count() >= 1);
    assert!(
        !p.path(".loopward").exists(),
        "nothing of the hook's in the workspace"
    );
    run_bash(&p, "echo '# Plan: mine' > plan.md");
    let post = p.send_fixture("post_bash_into_plan.json");
    assert_tells(&post, r#""decision":"block""#);
    assert_eq!(p.read("plan.md").as_deref(), Some(PLAN));
    assert!(sessions.join("state.json").is_file());
}

/// The blinding tests' config: [`POLICY`] with a small snapshot budget (its last section is
/// `[gates.shell]`).
fn small() -> String {
    format!("{POLICY}max_snapshot_bytes = 4096\n")
}

/// The recorded `Bash` event `name` as call `id`.
fn bash(p: &Project, name: &str, id: &str) -> String {
    p.fixture(name).replace("toolu_01J", id)
}

fn mode(p: &Project, rel: &str) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p.path(rel)).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_huge_file_in_a_free_folder_does_not_blind_the_bash_watch_to_a_mode_change_and_a_link() {
    let p = Project::new(&small());
    p.write("plan.md", "# Plan\n");
    p.write("free/small.txt", "small");
    let before_mode = mode(&p, "plan.md");
    let post = bash_call(
        &p,
        "toolu_b1",
        "chmod 777 plan.md && ln -s ../plan.md free/link.md && truncate -s 300M free/huge.bin",
    );
    assert!(
        post.stdout.contains(r#""decision":"block""#)
            && post.stdout.contains("reverted: free/link.md, plan.md"),
        "{}",
        post.stdout
    );
    assert_eq!(mode(&p, "plan.md"), before_mode);
    assert!(std::fs::symlink_metadata(p.path("free/link.md")).is_err());
    let ledger = p.ledger(SESSION);
    assert_recorded(&ledger, "free/huge.bin create ok");
    assert_not_recorded(&ledger, "violation :");
}

/// A folder nested deeper than a path can name (`PATH_MAX`): no record of the workspace can be
/// taken while it is there, whoever runs the hook.
fn too_deep() -> String {
    let name = "d".repeat(200);
    // bash: dash's `cd` refuses a path longer than `PATH_MAX`.
    format!("bash -c 'mkdir -p free/deep && cd free/deep && for i in $(seq 1 25); do mkdir {name} && cd {name}; done'")
}

#[test]
fn a_blinded_bash_call_moves_no_baseline_and_is_judged_once_the_workspace_can_be_compared() {
    let p = Project::new(&small());
    p.write("plan.md", "# Plan\n");
    let before_mode = mode(&p, "plan.md");
    let blinding = format!(
        "chmod 777 plan.md && ln -s plan.md link.md && {}",
        too_deep()
    );
    let post = bash_call(&p, "toolu_b1", &blinding);
    assert!(
        post.stdout.contains(r#""decision":"block""#)
            && post.stdout.contains("could not be compared"),
        "{}",
        post.stdout
    );
    // Named: what blinded the watch, and what is unchecked; never an empty path.
    let ledger = p.ledger(SESSION);
    let blind: Vec<_> = ledger.iter().filter(|l| l.contains("violation")).collect();
    assert_eq!(blind.len(), 1, "{ledger:#?}");
    assert!(blind[0].contains("violation free/deep/ddd"), "{blind:?}");
    assert!(blind[0].contains("unchecked until then"), "{blind:?}");
    // While it cannot be compared, neither a command nor a write runs.
    let pre = p.send(&bash(&p, "pre_bash_into_plan.json", "toolu_b2"));
    assert!(
        pre.stdout.contains(r#""permissionDecision":"deny""#)
            && pre.stdout.contains("still unchecked"),
        "{}",
        pre.stdout
    );
    let pre = p.send(&p.write_event("PreToolUse", "toolu_w1", "notes.txt", "x", true));
    assert_tells(&pre, r#""permissionDecision":"deny""#);
    assert_eq!(mode(&p, "plan.md"), 0o777, "nothing was judged yet");
    // A person removes what blinds it: the next call first judges the blinded call's changes.
    std::fs::remove_dir_all(p.path("free/deep")).unwrap();
    let pre = p.send(&bash(&p, "pre_bash_into_plan.json", "toolu_b3"));
    assert!(
        !pre.stdout.contains(r#""permissionDecision":"deny""#),
        "{}",
        pre.stdout
    );
    assert_eq!(mode(&p, "plan.md"), before_mode);
    assert!(std::fs::symlink_metadata(p.path("link.md")).is_err());
    let ledger = p.ledger(SESSION);
    for path in ["link.md", "plan.md"] {
        assert!(
            ledger
                .iter()
                .any(|l| l.contains(&format!("violation {path} reverted"))),
            "{path}: {ledger:#?}"
        );
    }
}

/// Names are bytes: an odd link and an odd name made by `Bash` in a free folder stop no write;
/// made in a territory, an odd name is put back.
#[test]
fn names_that_are_not_utf8_made_by_bash_stop_no_write_and_are_judged_by_their_bytes() {
    let p = Project::new(POLICY);
    p.write("plans/a.md", "keep");
    let post = bash_call(
        &p,
        "toolu_b1",
        "mkdir -p free && ln -s \"$(printf '\\377')\" free/odd && touch \"free/$(printf '\\376')\"",
    );
    assert_eq!(shown(&post), "exit 0\nstdout: \nstderr: \n");
    let pre = p.send(&p.write_event("PreToolUse", "toolu_w1", "notes.txt", "x", true));
    assert_tells(&pre, r#""permissionDecision":"allow""#);
    let post = p.send(&p.write_event("PostToolUse", "toolu_w1", "notes.txt", "x", true));
    assert_eq!(post.exit_code, 0, "{}", post.stderr);
    assert!(!post.stdout.contains("block"), "{}", post.stdout);
    assert_eq!(p.read("notes.txt").as_deref(), Some("x"));
    let post = bash_call(
        &p,
        "toolu_b2",
        "touch \"plans/$(printf '\\377')\" && ln -s \"../plans/$(printf '\\375')\" free/into",
    );
    assert!(
        post.stdout
            .contains("reverted: free/into, plans/\u{fffd}ff"),
        "{}",
        post.stdout
    );
    assert_eq!(crate::gates_support::names_in(&p.path("plans")), ["a.md"]);
    assert!(std::fs::symlink_metadata(p.path("free/into")).is_err());
    // The ledger names the odd name in its lossless text: U+FFFD and the byte in hex.
    let ledger = p.ledger(SESSION);
    assert_recorded(&ledger, "violation plans/\u{fffd}ff reverted");
    assert_recorded(&ledger, "free/\u{fffd}fe create ok");
}
