//! `cargo xtask calibrate-corpus <dir>`: a deterministic corpus for `loopward calibrate`'s
//! throughput figure — Claude Code transcripts in the real format (user prompts, assistant
//! `tool_use` blocks, `tool_result` lines, sidechain subagent lines, meta lines, summaries) and
//! copies of the demo's fake-backend runs.

use anyhow::{Context, Result};
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// A small linear congruential generator: the same corpus every time, no dependency.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

const SESSIONS: u64 = 450;
const PROMPTS: u64 = 6;
const DEMO_COPIES: u64 = 600;

pub(crate) fn run(root: &Path, dir: &Path) -> Result<()> {
    // Start clean: the corpus is regenerated, never appended to.
    for sub in ["claude-code", "demo", "ledgers"] {
        let p = dir.join(sub);
        if p.exists() {
            std::fs::remove_dir_all(&p).with_context(|| format!("removing {}", p.display()))?;
        }
    }
    let transcripts = dir.join("claude-code");
    std::fs::create_dir_all(&transcripts)?;
    let mut rng = Lcg(16);
    let mut writes = 0u64;
    for s in 0..SESSIONS {
        let sid = format!("00000000-0000-4000-8000-{s:012}");
        let path = transcripts.join(format!("{sid}.jsonl"));
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
        let line = |f: &mut dyn Write, v: serde_json::Value| writeln!(f, "{v}");
        let base = |kind: &str, side: bool| {
            json!({"type": kind, "sessionId": sid, "cwd": "/work/project", "isSidechain": side,
                   "userType": "external", "version": "2.0.0", "gitBranch": "main"})
        };
        line(
            &mut f,
            json!({"type": "summary", "summary": format!("session {s}"), "leafUuid": sid}),
        )?;
        for p in 0..PROMPTS {
            let mut v = base("user", false);
            v["message"] = json!({"role": "user", "content": format!("task {p} of session {s}")});
            line(&mut f, v)?;
            let mut meta = base("user", false);
            meta["isMeta"] = json!(true);
            meta["message"] = json!({"role": "user", "content": "<local-command-caveat>…</local-command-caveat>"});
            line(&mut f, meta)?;
            let planned = rng.next(5) == 0;
            let n = rng.next(9);
            for w in 0..n {
                let id = format!("toolu_{s:04}{p:02}{w:02}");
                let side = rng.next(6) == 0;
                let (name, input) = if planned && w == 0 {
                    (
                        "Write",
                        json!({"file_path": "/work/project/notes/plan.md",
                                     "content": "# Plan\n1. the units in order\n"}),
                    )
                } else {
                    let file = format!(
                        "/work/project/{}/{}.rs",
                        ["src/api", "src/db", "src/ui", "tests", "docs", "plan.md"]
                            [rng.next(6) as usize],
                        rng.next(4)
                    )
                    .replace("/plan.md/", "/plan.md.");
                    match rng.next(3) {
                        0 => (
                            "Write",
                            json!({"file_path": file, "content": "fn x() {}\n"}),
                        ),
                        1 => (
                            "Edit",
                            json!({"file_path": file, "old_string": "a", "new_string": format!("b{}", rng.next(3))}),
                        ),
                        _ => (
                            "MultiEdit",
                            json!({"file_path": file, "edits": [{"old_string": "x", "new_string": "y"}]}),
                        ),
                    }
                };
                let mut a = base("assistant", side);
                if side {
                    a["agentType"] = json!("planner");
                }
                a["message"] = json!({"id": format!("msg_{id}"), "type": "message", "role": "assistant",
                    "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
                    "content": [{"type": "text", "text": "Working on it."},
                                {"type": "tool_use", "id": id, "name": name, "input": input}]});
                line(&mut f, a)?;
                let err = rng.next(20) == 0;
                let mut r = base("user", side);
                r["message"] = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id,
                    "is_error": err, "content": if err { "PreToolUse:Write hook error: blocked" } else { "The file has been updated." }}]});
                line(&mut f, r)?;
                writes += 1;
            }
        }
        f.flush()?;
    }
    println!(
        "{}: {SESSIONS} Claude Code sessions, {writes} writes",
        transcripts.display()
    );

    // The demo's runs (fake backend), copied: each copy keeps its own index.jsonl, so it verifies.
    let demo = dir.join("demo");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .args(["run", "--quiet", "-p", "loopward-demo", "--", "--dir"])
        .arg(&demo)
        .stdout(std::process::Stdio::null())
        .status()
        .context("running the demo")?;
    anyhow::ensure!(status.success(), "the demo failed ({status})");
    let ledgers = dir.join("ledgers");
    std::fs::create_dir_all(&ledgers)?;
    for c in 0..DEMO_COPIES {
        let to = ledgers.join(format!("runs-{c:04}"));
        let st = Command::new("cp")
            .arg("-r")
            .arg(demo.join("runs"))
            .arg(&to)
            .status()?;
        anyhow::ensure!(st.success(), "cp failed");
    }
    println!(
        "{}: {DEMO_COPIES} copies of the demo's 12 runs",
        ledgers.display()
    );
    Ok(())
}
