//! The real Codex CLI, run headless (`codex exec`) against a scripted Responses API server of
//! this test's own on 127.0.0.1 (a custom provider), with the hook installed by `loopward hook
//! install --host codex`: what the "model" tries is decided by the script, what happens is
//! decided by Codex, the hook and the kernel. Asserted on disk, on what the "model" was sent
//! back, and in the hook's ledger.
//!
//! Codex runs a project's hooks only once a person trusted them (`/hooks`); a headless test
//! cannot, so it passes `--trust --dangerously-bypass-hook-trust` (docs/hosts.md says what that
//! leaves to a person). Codex's own sandbox and approvals are off
//! (`--dangerously-bypass-approvals-and-sandbox`): what contains the commands here is
//! loopward's.
//!
//! Needs the client: `scripts/codex-install.sh` (run by `.ci/run`) puts the pinned version in
//! `.codex-cli/`; `LOOPWARD_CODEX` names another binary. Without one the test says so loudly
//! and passes.

use crate::support::clients::{self, loopward, Client, ROADMAP};
use crate::support::responses_server::{self, Step};
use std::path::Path;
use std::process::Command;

/// One headless Codex session in `root` against the server on `port`, with `path` as its
/// `PATH`: its exit status and output. A client still running after two minutes is ended (by
/// its PID) and fails.
fn session(codex: &Path, root: &Path, home: &Path, port: u16, path: &str) -> (bool, String) {
    std::fs::write(
        home.join("codex/config.toml"),
        format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nwire_api = \"responses\"\nenv_key = \"FAKE_API_KEY\"\n"
        ),
    )
    .unwrap();
    crate::support::run_client(
        Command::new(codex)
            .current_dir(root)
            .args(["exec", "--skip-git-repo-check", "--trust"])
            .args(["--dangerously-bypass-hook-trust"])
            .args(["--dangerously-bypass-approvals-and-sandbox"])
            .arg("write the plan")
            .env_clear()
            .env("PATH", path)
            .env("HOME", home)
            .env("CODEX_HOME", home.join("codex"))
            .env("XDG_STATE_HOME", home.join("state"))
            .env("FAKE_API_KEY", "test"),
        home,
        "codex",
    )
}

#[test]
fn real_codex_sessions_are_held_by_the_hook_and_the_sandbox() {
    let Some((codex, _dir, root, home)) = Client::Codex.hooked() else {
        return;
    };
    let grant = loopward(&root, &home, clients::GRANT_ROADMAP);
    assert!(!grant.status.success(), "a grant needs a reason");
    clients::grant_roadmap_once(&root, &home);
    let script = vec![
        // A territory write with the file tool: refused by the hook.
        Step::Patch(
            "*** Begin Patch\n*** Add File: plans/mine.md\n+# mine\n*** End Patch\n".into(),
        ),
        // The model's correction: the request goes where it may write.
        Step::Patch(
            "*** Begin Patch\n*** Add File: notes/for-planner.md\n+please add step 2\n*** End Patch\n"
                .into(),
        ),
        // The one-shot override: one patch of the roadmap goes through, the next does not.
        Step::update("plans/roadmap.md", "1. greeting", "1. greeting\n+2. farewell"),
        Step::update("plans/roadmap.md", "2. farewell", "2. goodbye"),
        // A command writing into the territory: refused by the kernel.
        Step::Exec("echo pwned > plans/roadmap.md".into()),
        Step::Text("done".into()),
    ];
    let (port, server) = responses_server::start(script);
    let (ok, out) = session(&codex, &root, &home, port, "/usr/bin:/bin");
    assert!(ok, "{out}");
    let outputs = server.outputs();
    let said = |id: &str| {
        outputs
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, t)| t.clone())
            .unwrap_or_else(|| panic!("no output for {id}: {outputs:?}\n{out}"))
    };
    // 1: refused, with a remedy Codex has.
    let refused = said("call_1");
    crate::support::assert_says(&refused, "plans/mine.md belongs to planner");
    assert!(refused.contains("in your reply"), "{refused}");
    assert!(!root.join("plans/mine.md").exists());
    // 2: the correction went through.
    crate::support::assert_file(&root, "notes/for-planner.md", "please add step 2\n");
    // 3 and 4: the override let exactly one patch through.
    assert!(
        !said("call_3").contains("blocked by PreToolUse"),
        "{}",
        said("call_3")
    );
    assert!(
        said("call_4").contains("belongs to planner"),
        "{}",
        said("call_4")
    );
    crate::support::assert_file(
        &root,
        "plans/roadmap.md",
        "# Roadmap\n1. greeting\n2. farewell\n",
    );
    // 5: the kernel refused the command's write; the file is as the override left it.
    assert!(
        said("call_5").contains("Permission denied"),
        "{}",
        said("call_5")
    );
    let records = clients::assert_override_consumed_once(&root, &home);
    assert!(records
        .iter()
        .any(|r| r["kind"] == "gate_decision" && r["data"]["gate"] == "sandbox"));
}

/// Codex reads a hook that cannot start (a bare `loopward` not on its `PATH`: exit 127) as "go
/// ahead". The installed hook names the binary by its absolute path, so it runs whatever the
/// session's `PATH`; a bare one lets the write through, and `hook doctor` says so.
#[test]
fn a_hook_codex_cannot_start_lets_the_write_through_so_install_never_writes_one() {
    let Some((codex, _dir, root, home)) = Client::Codex.hooked() else {
        return;
    };
    let patch = || vec![Step::update("plans/roadmap.md", "1. greeting", "1. mine")];
    // Installed: refused, with a PATH that has no loopward on it.
    let (port, server) = responses_server::start(patch());
    let (ok, out) = session(&codex, &root, &home, port, "/usr/bin:/bin");
    assert!(ok, "{out}");
    assert!(
        server.outputs()[0].1.contains("belongs to planner"),
        "{:?}",
        server.outputs()
    );
    crate::support::assert_file(&root, "plans/roadmap.md", ROADMAP);
    // The same hook as a bare `loopward-hook`: it cannot start, and Codex goes ahead.
    clients::make_hook_bare(&root, &home, ".codex/hooks.json", "codex");
    let (port, _server) = responses_server::start(patch());
    let (ok, out) = session(&codex, &root, &home, port, "/usr/bin:/bin");
    assert!(ok, "{out}");
    assert_eq!(
        std::fs::read_to_string(root.join("plans/roadmap.md")).unwrap(),
        "# Roadmap\n1. mine\n",
        "Codex went ahead on a hook that could not start\n{out}"
    );
}
