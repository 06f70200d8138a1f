//! The real Gemini CLI, run headless (`gemini -p`) against a scripted Gemini API server of this
//! test's own on 127.0.0.1 (`GOOGLE_GEMINI_BASE_URL`), with the hook installed by `loopward hook
//! install --host gemini`: what the "model" tries is decided by the script, what happens is
//! decided by Gemini CLI, the hook and the kernel. Asserted on disk, on what the "model" was
//! sent back, and in the hook's ledger.
//!
//! Gemini CLI runs a project's hooks only in a trusted folder; the test trusts the project in
//! its scratch home (`~/.gemini/trustedFolders.json`), as a person would once. Tools run
//! unasked (`--yolo`): what contains the commands here is loopward's.
//!
//! Needs the client: `scripts/gemini-install.sh` (run by `.ci/run`) puts the pinned version in
//! `.gemini-cli/`; `LOOPWARD_GEMINI` names another binary. Without one the test says so loudly
//! and passes.

use crate::support::clients::{self, Client, ROADMAP};
use crate::support::gemini_server::{self, Call};
use serde_json::json;
use std::path::Path;
use std::process::Command;

/// One headless Gemini CLI session in `root` against the server on `port`: its exit status and
/// output. A client still running after two minutes is ended (by its PID) and fails.
fn session(gemini: &Path, root: &Path, home: &Path, port: u16) -> (bool, String) {
    std::fs::write(
        home.join(".gemini/settings.json"),
        json!({"security": {"auth": {"selectedType": "gemini-api-key"}}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        home.join(".gemini/trustedFolders.json"),
        json!({ root.to_str().unwrap(): "TRUST_FOLDER" }).to_string(),
    )
    .unwrap();
    crate::support::run_client(
        Command::new(gemini)
            .current_dir(root)
            .args(["-p", "write the plan", "--yolo", "-m", "gemini-2.5-flash"])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", home)
            .env("XDG_STATE_HOME", home.join("state"))
            .env("GEMINI_API_KEY", "test")
            .env("GOOGLE_GEMINI_BASE_URL", format!("http://127.0.0.1:{port}")),
        home,
        "gemini",
    )
}

#[test]
fn real_gemini_cli_sessions_are_held_by_the_hook_and_the_sandbox() {
    let Some((gemini, _dir, root, home)) = Client::Gemini.hooked() else {
        return;
    };
    clients::grant_roadmap_once(&root, &home);
    let p = |rel: &str| root.join(rel).to_str().unwrap().to_string();
    let step2 = "# Roadmap\n1. greeting\n2. farewell\n";
    let script = vec![
        // A territory write with the file tool: refused by the hook.
        Call::write(p("plans/mine.md"), "# mine\n"),
        // The model's correction: the request goes where it may write.
        Call::write(p("notes/for-planner.md"), "please add step 2\n"),
        // The one-shot override: one write of the roadmap goes through, the next does not.
        Call::write(p("plans/roadmap.md"), step2),
        Call::write(p("plans/roadmap.md"), "# gone\n"),
        // A command writing into the territory: refused by the kernel.
        Call::shell("echo pwned > plans/roadmap.md"),
        Call::Text("done".into()),
    ];
    let (port, server) = gemini_server::start(script);
    let (ok, out) = session(&gemini, &root, &home, port);
    assert!(ok, "{out}");
    let responses = server.responses();
    assert_eq!(responses.len(), 5, "{responses:#?}\n{out}");
    // 1: refused, with a remedy Gemini CLI has.
    assert!(
        responses[0].1.contains("plans/mine.md belongs to planner"),
        "{responses:#?}"
    );
    assert!(responses[0].1.contains("in your reply"), "{responses:#?}");
    assert!(!root.join("plans/mine.md").exists());
    // 2: the correction went through.
    crate::support::assert_file(&root, "notes/for-planner.md", "please add step 2\n");
    // 3 and 4: the override let exactly one write through.
    assert!(
        !responses[2].1.contains("belongs to planner"),
        "{responses:#?}"
    );
    assert!(
        responses[3].1.contains("belongs to planner"),
        "{responses:#?}"
    );
    // 5: the kernel refused the command's write; the file is as the override left it.
    assert!(
        responses[4].1.contains("Permission denied"),
        "{responses:#?}"
    );
    crate::support::assert_file(&root, "plans/roadmap.md", step2);
    clients::assert_override_consumed_once(&root, &home);
}

/// A hook that cannot start (a bare `loopward` not on Gemini CLI's `PATH`: exit 127): Gemini CLI
/// 0.61.0 blocks the agent at `BeforeAgent`, so nothing is written — it fails closed, unlike
/// Codex. `hook doctor` still flags the bare command.
#[test]
fn a_hook_gemini_cannot_start_blocks_the_session_and_doctor_flags_it() {
    let Some((gemini, _dir, root, home)) = Client::Gemini.hooked() else {
        return;
    };
    let target = root.join("plans/roadmap.md");
    let write = || {
        vec![Call::tool(
            "write_file",
            json!({"file_path": target, "content": "# mine\n"}),
        )]
    };
    let (port, _server) = gemini_server::start(write());
    let (ok, out) = session(&gemini, &root, &home, port);
    assert!(ok, "{out}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), ROADMAP, "{out}");
    clients::make_hook_bare(&root, &home, ".gemini/settings.json", "gemini");
    let (port, _server) = gemini_server::start(write());
    let (_, out) = session(&gemini, &root, &home, port);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), ROADMAP, "{out}");
    assert!(out.contains("Agent execution blocked"), "{out}");
    assert!(out.contains("loopward-hook: command not found"), "{out}");
}
