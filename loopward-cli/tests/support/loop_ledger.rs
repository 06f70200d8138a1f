//! Reading a loop's ledger in the tests of `loopward loop`: its records, by kind and by layer,
//! its sessions, and `loopward verify`/`replay` of it.

#![allow(dead_code, unreachable_pub)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The verifier of the loop tests' task: `notes/done.txt` written.
pub const VERIFY: &str = "test -f notes/done.txt";

/// The clients' scratch project ([`super::clients::project`]) with the loop's task in
/// `PROMPT.md` and `notes/stall.sh <seconds>`, a command that takes its time (the clients refuse
/// a bare long `sleep`): `(dir, root, home)`.
pub fn project() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (dir, root, home) = super::clients::project();
    std::fs::write(
        root.join("PROMPT.md"),
        "Take notes, then write notes/done.txt.\n",
    )
    .unwrap();
    std::fs::write(root.join("notes/stall.sh"), "sleep \"$1\"\n").unwrap();
    (dir, root, home)
}

/// A loop's arguments: loop `id` on the task in `PROMPT.md`, checked by `verify`, then `more`.
pub fn task<'a>(verify: &'a str, id: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    [
        &["--prompt", "PROMPT.md", "--verify", verify, "--id", id],
        more,
    ]
    .concat()
}

/// Writes the mixed team ([`super::clients::team`], the `builder`'s table going on with
/// `builder`) and the planner's script into `root`, with the builder's empty `src/`.
pub fn write_team(root: &Path, builder: &str) {
    use super::clients::{team, TEAM_SCRIPT};
    std::fs::write(root.join("loopward.toml"), team(builder)).unwrap();
    std::fs::write(root.join("loopward.script.toml"), TEAM_SCRIPT).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
}

/// The team's run `team` went as planned: the planner's turn, then the builder's two sessions
/// of client `tool`, the first refused by its verifier; both files written; the run replays
/// to the same decisions.
pub fn assert_team_built(root: &Path, home: &Path, tool: &str) {
    let rs = records(root, "team");
    let turns: Vec<&str> = kind(&rs, "turn_started")
        .map(|r| r["data"]["agent"].as_str().unwrap())
        .collect();
    assert_eq!(turns, ["planner", "builder", "builder"]);
    assert_eq!(sessions(&rs, tool), 2);
    let verdicts: Vec<&Value> = decisions(&rs, "verify")
        .iter()
        .map(|d| &d["data"]["decision"])
        .collect();
    assert_eq!(
        verdicts,
        [&serde_json::json!("refused"), &serde_json::json!("allow")]
    );
    assert!(root.join("plan.md").is_file() && root.join("src/done.txt").is_file());
    assert_replays_the_same(root, home, "team");
}

/// The loop's two sessions of client `tool`: the first one's claim of done refused by the
/// verifier, the second verified, and the run completed.
pub fn assert_verified_in_two_sessions(rs: &[Value], tool: &str) {
    assert_eq!(sessions(rs, tool), 2);
    let verdicts = decisions(rs, "verify");
    assert_eq!(verdicts.len(), 2, "{verdicts:#?}");
    assert_eq!(verdicts[0]["data"]["decision"], "refused");
    assert_eq!(verdicts[0]["data"]["detail"]["claimed_done"], true);
    assert_eq!(verdicts[1]["data"]["decision"], "allow");
    let finishes: Vec<&Value> = kind(rs, "turn_ended")
        .map(|r| &r["data"]["finish"])
        .collect();
    assert_eq!(
        finishes,
        [&serde_json::json!("unverified"), &serde_json::json!("done")]
    );
    let end = kind(rs, "run_ended").next().unwrap();
    assert_eq!(end["data"]["status"]["status"], "completed");
}

/// `loopward replay` of run `run` comes out the same as the ledger says it went.
pub fn assert_replays_the_same(root: &Path, home: &Path, run: &str) {
    let r = replay_run(root, home, run);
    let said = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success() && said.contains("all the same"), "{r:?}");
}

/// Kills `child` (a loop; SIGKILL, by its PID) once its session runs the command `argv`
/// (within a minute); the command outlives it.
pub fn kill_mid_command(child: &mut std::process::Child, argv: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !running(argv) {
        assert!(
            std::time::Instant::now() < deadline,
            "the session never reached its command"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(running(argv), "the session outlives a killed loop");
}

/// `loopward <args>` in `root`, its home `home` (the caller's environment otherwise).
pub fn loopward_in(root: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopward"))
        .current_dir(root)
        .args(args)
        .env("HOME", home)
        .output()
        .unwrap()
}

/// A run's ledger, one JSON record a line.
pub fn records(root: &Path, run: &str) -> Vec<Value> {
    std::fs::read_to_string(root.join("runs").join(run).join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Its records of kind `k`.
pub fn kind<'a>(rs: &'a [Value], k: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    rs.iter().filter(move |r| r["kind"] == k)
}

/// Its decisions of `layer`.
pub fn decisions<'a>(rs: &'a [Value], layer: &'a str) -> Vec<&'a Value> {
    kind(rs, "layer_decision")
        .filter(|r| r["data"]["layer"] == layer)
        .collect()
}

/// How many sessions of the client recorded as `tool` (`claude_code`, `codex`, `gemini`).
pub fn sessions(rs: &[Value], tool: &str) -> usize {
    kind(rs, "tool_requested")
        .filter(|r| r["data"]["tool"] == tool)
        .count()
}

/// `loopward verify runs/<run>`.
pub fn verify_run(root: &Path, home: &Path, run: &str) -> Output {
    checked(root, home, "verify", run)
}

/// `loopward replay runs/<run>`: re-judged offline from the ledger, no client, no verifier.
pub fn replay_run(root: &Path, home: &Path, run: &str) -> Output {
    checked(root, home, "replay", run)
}

fn checked(root: &Path, home: &Path, command: &str, run: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopward"))
        .current_dir(root)
        .arg(command)
        .arg(root.join("runs").join(run))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .output()
        .unwrap()
}

/// Runs `c` (a `loopward loop`) and shows what it printed, for a failing test's output.
#[allow(clippy::print_stderr)]
pub fn shown(c: &mut Command) -> Output {
    let out = c.output().unwrap();
    eprintln!(
        "loop: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Whether a process whose command line is exactly `argv` is running.
pub fn running(argv: &[&str]) -> bool {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .any(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want))
}
