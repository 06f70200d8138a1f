//! The real coding clients the tests drive (installed pinned by `scripts/*-install.sh`, run by
//! `.ci/run`, or named by a variable), and the scratch project they share: a team whose
//! planner owns `plans/`, a roadmap there, and a `notes/` folder anyone may write.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The team: `root` (the main agent) and `planner`, who alone writes `plans/`.
pub const CONFIG: &str = r#"
[run]
first = "root"

[[agent]]
name = "root"
tools = ["read_file", "write_file", "edit_file", "shell"]

[[agent]]
name = "planner"
tools = ["read_file", "write_file", "edit_file"]

# Only the planner writes plans/.
[[territory]]
paths = ["plans/**"]
owner = "planner"
"#;

/// The roadmap in the planner's territory.
pub const ROADMAP: &str = "# Roadmap\n1. greeting\n";

/// A coding client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    ClaudeCode,
    Codex,
    Gemini,
}

impl Client {
    /// The variable that names another binary, the install script, the binary in its folder.
    fn where_(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Self::ClaudeCode => (
                "LOOPWARD_CLAUDE",
                "claude-code-install.sh",
                ".claude-code/node_modules/.bin/claude",
            ),
            Self::Codex => (
                "LOOPWARD_CODEX",
                "codex-install.sh",
                ".codex-cli/node_modules/.bin/codex",
            ),
            Self::Gemini => (
                "LOOPWARD_GEMINI",
                "gemini-install.sh",
                ".gemini-cli/node_modules/.bin/gemini",
            ),
        }
    }

    /// The installed client; without one, says loudly that the test is skipped.
    #[allow(clippy::print_stderr)]
    pub fn find(self) -> Option<PathBuf> {
        let (var, script, path) = self.where_();
        let found = match std::env::var_os(var) {
            Some(p) => Some(PathBuf::from(p)),
            None => Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(path)
                .canonicalize()
                .ok()
                .filter(|p| p.is_file()),
        };
        if found.is_none() {
            eprintln!("\n\n*** SKIPPED: {self:?} is not installed. Run scripts/{script} (CI does) or set {var}. ***\n\n");
        }
        found
    }

    /// The installed client and a [`hooked_project`] for it in its config folder (`codex`,
    /// `.gemini`, `.claude`): `(client, dir, root, home)`. `None`, said loudly, without the
    /// client.
    pub fn hooked(self) -> Option<(PathBuf, tempfile::TempDir, PathBuf, PathBuf)> {
        let (host, config) = match self {
            Self::ClaudeCode => ("claude-code", ".claude"),
            Self::Codex => ("codex", "codex"),
            Self::Gemini => ("gemini", ".gemini"),
        };
        let client = self.find()?;
        let (dir, root, home) = hooked_project(host, config);
        Some((client, dir, root, home))
    }
}

/// An empty scratch project `<dir>/project` with `folders` in it, and a home `<dir>/home`:
/// `(dir, root, home)`.
pub fn scratch(folders: &[&str]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    let home = dir.path().join("home");
    for f in folders {
        std::fs::create_dir_all(root.join(f)).unwrap();
    }
    std::fs::create_dir_all(&home).unwrap();
    (dir, root, home)
}

/// A scratch project (the team's config, the roadmap, an empty `notes/`) and a home beside
/// it: `(dir, root, home)`, both canonical.
pub fn project() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (dir, root, home) = scratch(&["plans", "notes"]);
    std::fs::write(root.join("loopward.toml"), CONFIG).unwrap();
    std::fs::write(root.join("plans/roadmap.md"), ROADMAP).unwrap();
    let root = root.canonicalize().unwrap();
    let home = home.canonicalize().unwrap();
    (dir, root, home)
}

/// A [`project`] whose home has the client's config folder `config` (`codex`, `.gemini`), the
/// hook installed for `host` by `loopward hook install --host <host>`.
pub fn hooked_project(host: &str, config: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (dir, root, home) = project();
    std::fs::create_dir_all(home.join(config)).unwrap();
    install_hook(&root, &home, host);
    (dir, root, home)
}

/// `loopward <args>` in `root`, with loopward's state under `home`.
pub fn loopward(root: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopward"))
        .args(args)
        .current_dir(root)
        .env("XDG_STATE_HOME", home.join("state"))
        .output()
        .unwrap()
}

/// `loopward hook install --host <host>` in `root`, asserted.
pub fn install_hook(root: &Path, home: &Path, host: &str) {
    let install = loopward(root, home, &["hook", "install", "--host", host]);
    assert!(install.status.success(), "hook install: {install:?}");
}

/// `loopward override grant` for `root` on `plans/roadmap.md`, before its `--reason`.
pub const GRANT_ROADMAP: &[&str] = &[
    "override",
    "grant",
    "--agent",
    "root",
    "--path",
    "plans/roadmap.md",
];

/// The one-shot override a session's second roadmap write consumes: `root` may write
/// `plans/roadmap.md` once, for ten minutes.
pub fn grant_roadmap_once(root: &Path, home: &Path) {
    let reason = ["--reason", "the planner approved step 2", "--ttl", "10m"];
    let grant = loopward(root, home, &[GRANT_ROADMAP, &reason].concat());
    assert!(grant.status.success(), "override grant: {grant:?}");
}

/// Rewrites the hook `hook install --host <host>` wrote in `file` as a bare `loopward-hook`, a
/// command the client cannot start off its `PATH`; `hook doctor` flags it.
pub fn make_hook_bare(root: &Path, home: &Path, file: &str, host: &str) {
    let file = root.join(file);
    let text = std::fs::read_to_string(&file).unwrap().replace(
        &format!("'{}'", env!("CARGO_BIN_EXE_loopward-hook")),
        "loopward-hook",
    );
    std::fs::write(&file, text).unwrap();
    let doctor = loopward(root, home, &["hook", "doctor", "--host", host]);
    assert_eq!(doctor.status.code(), Some(1), "{doctor:?}");
}

/// The session's ledger consumed the override exactly once and verifies; its records.
pub fn assert_override_consumed_once(root: &Path, home: &Path) -> Vec<serde_json::Value> {
    let records = super::ledger(root);
    let consumed = records
        .iter()
        .filter(|r| r["kind"] == "override_consumed")
        .count();
    assert_eq!(consumed, 1, "{records:#?}");
    let verify = loopward(root, home, &["verify", "--unfinished", "runs"]);
    assert!(
        verify.status.success(),
        "the session ledger verifies: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    records
}

/// A mixed team: the model agent `planner` (the fake backend, [`TEAM_SCRIPT`]) writes a plan
/// and hands off to `builder`, a coding-CLI agent owning `src/`, whose `[[agent]]` table goes
/// on with `builder` (its `kind`, `verify`, …).
pub fn team(builder: &str) -> String {
    format!(
        r#"
[run]
first = "planner"
task = "Plan it, then build it."

[backend]
kind = "fake"
script = "loopward.script.toml"

[[agent]]
name = "planner"
tools = ["write_file", "handoff"]

[[agent]]
name = "builder"
{builder}

[[territory]]
paths = ["src/**"]
owner = "builder"
"#
    )
}

/// The planner's script in [`team`].
pub const TEAM_SCRIPT: &str = r##"
[[agents.planner]]
tool_calls = [{ name = "write_file", arguments = { path = "plan.md", content = "# Plan\n1. src/done.txt\n" } }]

[[agents.planner]]
tool_calls = [{ name = "handoff", arguments = { to = "builder", message = "Write src/done.txt." } }]
"##;

/// A `PATH` whose first folder holds `program` as `name` (the folder is removed when the
/// first value is dropped).
pub fn path_with(program: &Path, name: &str) -> (tempfile::TempDir, std::ffi::OsString) {
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(program, bin.path().join(name)).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin.path().to_path_buf())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    (bin, path)
}
