//! `loopward calibrate` on Claude Code transcripts the real client wrote: a committed fixture
//! (captured by the live test below) and, where the client is installed, a fresh session.
//!
//! The live test drives the real client headless against the scripted Messages API server (the
//! script decides which Writes, Edits and Bash calls the "model" makes; no hook is installed, so
//! every call stands), reads the transcript it wrote under `$HOME/.claude/projects/…`, and
//! calibrates it. `LOOPWARD_CAPTURE_TO=<dir>` copies the transcript there (how the fixture in
//! `tests/fixtures/claude-code/` was made). Without a client the live test says so and passes.

use crate::support::anthropic_server::{self, Reply};
use crate::support::clients::{Client, CONFIG};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The candidate: the team's config (plans/ is the planner's), sprawl at 2 units, one
/// identical Bash call twice.
fn candidate() -> String {
    format!("{CONFIG}\n[gates.sprawl]\nthreshold = 2\n")
}

const FIXTURE: &str = "tests/fixtures/claude-code";

fn calibrate(config: &Path, source: &Path) -> Value {
    crate::support::json_out(
        Command::new(env!("CARGO_BIN_EXE_loopward"))
            .arg("calibrate")
            .arg("--config")
            .arg(config)
            .arg(source)
            .arg("--json"),
    )
}

/// What the capture's script does, and so what calibrating it must find: one session, two
/// prompts; the first writes src/greet.rs, edits it, writes src/farewell.rs (the second unit:
/// sprawl at 2 fires) and plans/roadmap.md (the planner's), runs `ls`; the second prompt
/// rewrites plans/roadmap.md and runs `ls` again.
fn assert_calibrated(r: &Value) {
    assert_eq!(r["sessions"], 1, "{r:#}");
    assert_eq!(r["turns"], 2, "{r:#}");
    assert_eq!(r["writes"], 5, "{r:#}");
    assert_eq!(r["unjudged"], 0, "{r:#}");
    let g = |name: &str| r["gates"][name].clone();
    let territory = g("territory:planner");
    assert_eq!(territory["denied"], 2, "{territory:#}");
    assert_eq!(territory["turns_fired"], 2);
    assert_eq!(territory["turn_rate"], 1.0);
    // The first roadmap write was written again in the next turn (reworked: right); the second
    // is in the last turn (unclear).
    assert_eq!(territory["aftermath"]["reworked"], 1, "{territory:#}");
    assert_eq!(territory["aftermath"]["unclear"], 1, "{territory:#}");
    assert!(territory["examples"][0]["text"]
        .as_str()
        .unwrap()
        .contains("plans/roadmap.md belongs to planner"));
    let sprawl = g("sprawl");
    assert_eq!(sprawl["turns_fired"], 1, "{sprawl:#}");
    assert_eq!(sprawl["turn_rate"], 0.5);
    assert!(sprawl["examples"][0]["action"]
        .as_str()
        .unwrap()
        .contains("src/farewell.rs"));
    // The runner's layers do not stand in a Claude Code session.
    assert!(r["gates"]
        .as_object()
        .unwrap()
        .keys()
        .all(|k| !k.starts_with("caps")));
}

#[test]
fn a_captured_claude_code_transcript_is_calibrated_per_gate() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("candidate.toml");
    std::fs::write(&config, candidate()).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    assert!(
        std::fs::read_dir(&fixture).unwrap().count() > 0,
        "no fixture in {}",
        fixture.display()
    );
    assert_calibrated(&calibrate(&config, &fixture));
}

/// One headless prompt in `root` (continuing the last session when `resume`); ended by its PID
/// after two minutes.
fn prompt(claude: &Path, root: &Path, home: &Path, port: u16, text: &str, resume: bool) {
    let mut cmd = super::claude_in(claude, root, home, port);
    cmd.arg("-p").arg(text);
    if resume {
        cmd.arg("--continue");
    }
    let mut child = cmd
        .args(["--output-format", "stream-json", "--verbose"])
        .args(["--permission-mode", "bypassPermissions"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(home.join("claude.stdout")).unwrap())
        .stderr(std::fs::File::create(home.join("claude.stderr")).unwrap())
        .spawn()
        .expect("starting claude");
    let status = crate::support::wait_up_to(&mut child, Duration::from_secs(120));
    let read = |f: &str| std::fs::read_to_string(home.join(f)).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()),
        "claude: {status:?}\nstdout: {}\nstderr: {}",
        read("claude.stdout"),
        read("claude.stderr")
    );
}

/// Every transcript file under `home/.claude/projects`.
fn transcripts(home: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let projects = home.join(".claude/projects");
    for p in std::fs::read_dir(&projects).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(p.path()).into_iter().flatten().flatten() {
            if f.path().extension().is_some_and(|e| e == "jsonl") {
                out.push(f.path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_fresh_real_claude_code_transcript_is_calibrated_per_gate() {
    let Some(claude) = Client::ClaudeCode.find() else {
        return;
    };
    let (dir, root, home) = crate::support::clients::scratch(&["plans", "src"]);
    std::fs::write(root.join("plans/roadmap.md"), "# Roadmap\n").unwrap();
    std::fs::write(root.join("src/greet.rs"), "").unwrap();
    let root = root.canonicalize().unwrap();
    let p = |rel: &str| root.join(rel).to_str().unwrap().to_string();
    let ls = json!({"command": "ls src", "description": "list"});
    let script = vec![
        Reply::write(p("src/greet.rs"), "pub fn greet() {}\n"),
        Reply::tool(
            "Edit",
            json!({"file_path": p("src/greet.rs"), "old_string": "greet()", "new_string": "greet(name: &str)"}),
        ),
        Reply::write(p("src/farewell.rs"), "pub fn bye() {}\n"),
        Reply::write(p("plans/roadmap.md"), "# Roadmap\n1. greet\n"),
        Reply::tool("Bash", ls.clone()),
        Reply::text("Done."),
        Reply::write(p("plans/roadmap.md"), "# Roadmap\n1. greet\n2. bye\n"),
        Reply::tool("Bash", ls),
        Reply::text("Done again."),
    ];
    let (port, server) = anthropic_server::start(script);
    prompt(
        &claude,
        &root,
        &home,
        port,
        "Add a greeting and a farewell",
        false,
    );
    prompt(
        &claude,
        &root,
        &home,
        port,
        "Also note the farewell in the roadmap",
        true,
    );
    assert_eq!(server.served(), 9, "every scripted reply was asked for");
    let files = transcripts(&home);
    assert_eq!(files.len(), 1, "one session: {files:?}");
    if let Some(to) = std::env::var_os("LOOPWARD_CAPTURE_TO") {
        let to = PathBuf::from(to);
        std::fs::create_dir_all(&to).unwrap();
        for f in &files {
            std::fs::copy(f, to.join(f.file_name().unwrap())).unwrap();
        }
    }
    let config = dir.path().join("candidate.toml");
    std::fs::write(&config, candidate()).unwrap();
    assert_calibrated(&calibrate(&config, &home.join(".claude/projects")));
}
