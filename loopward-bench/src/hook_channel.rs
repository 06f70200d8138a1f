//! Part 10's hook channel: a Claude Code hook call answered by `loopward contain`'s supervisor.
//!
//! A real `loopward contain` (the release `loopward` binary beside the bench's) supervises a
//! `sleep` in a scratch project (its shell first hands the bench the hooks' token); each sample
//! starts `loopward-hook hook claude-code` (what `hook install` writes) with the supervisor's
//! socket and token in `LOOPWARD_SUPERVISOR` and `LOOPWARD_SUPERVISOR_TOKEN`, writes a
//! `PreToolUse` event of a `Read` on its stdin and waits for its answer: the hook process's
//! start, the channel, the supervisor's judgement and its ledger record. The floor beside it: a
//! no-op binary (`true`) started and waited for the same way, and the hook binary's own start
//! (`--version`).

use crate::harness::{Effort, Stats};
use anyhow::{bail, Context as _, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What was measured: the hook call, the no-op floor, the hook binary's start.
pub struct HookChannel {
    /// A hook call through the supervisor channel.
    pub call: Stats,
    /// `true` started and waited for.
    pub noop: Stats,
    /// `loopward-hook --version` started and waited for.
    pub start: Stats,
}

/// loopward's binary `name` beside this one (`cargo xtask bench` builds them).
fn beside(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .context("the bench binary has no folder")?
        .join(name);
    if !bin.is_file() {
        bail!(
            "no `{name}` binary beside {} (cargo build --release -p loopward-cli --bins)",
            exe.display()
        );
    }
    Ok(bin)
}

/// Starts `program` with `args` and `stdin` on its stdin, waits; the time and its status.
fn timed(cmd: &mut Command, stdin: &[u8]) -> Result<(u64, std::process::Output)> {
    let t = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut i) = child.stdin.take() {
        i.write_all(stdin)?;
    }
    let out = child.wait_with_output()?;
    Ok((t.elapsed().as_nanos() as u64, out))
}

/// Measures the hook channel; `Err` says why it cannot be measured here.
pub fn measure(effort: Effort) -> Result<HookChannel> {
    let (bin, hook) = (beside("loopward")?, beside("loopward-hook")?);
    let dir = tempfile::tempdir()?;
    let (project, state, tmp) = (
        dir.path().join("p"),
        dir.path().join("state"),
        dir.path().join("tmp"),
    );
    for d in [&project, &state, &tmp] {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(
        project.join("loopward.toml"),
        "[run]\nfirst = \"builder\"\n\n[[agent]]\nname = \"builder\"\ntools = [\"read_file\"]\n",
    )?;
    std::fs::write(project.join("a.txt"), "a\n")?;
    let mut contain = Command::new(&bin)
        .args([
            "contain",
            "--agent",
            "builder",
            "--id",
            "bench",
            "--",
            "sh",
            "-c",
            // The contained program hands the bench its hooks' token (its own to give).
            "echo \"$LOOPWARD_SUPERVISOR_TOKEN\" && exec sleep 600",
        ])
        .current_dir(&project)
        .env("XDG_STATE_HOME", &state)
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting loopward contain")?;
    let pid = contain.id();
    // Its first line (empty when contain could not start the program).
    let mut token = String::new();
    if let Some(out) = contain.stdout.take() {
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut token)?;
    }
    let result = calls(
        &hook,
        token.trim(),
        &project,
        &tmp.join(format!("loopward-contain-{pid}")),
        effort,
    );
    // Ended by its recorded PID: asked to stop, it ends the contained `sleep` with it.
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let ended = contain.wait_with_output()?;
    result.with_context(|| String::from_utf8_lossy(&ended.stderr).into_owned())
}

fn calls(
    hook_bin: &Path,
    token: &str,
    project: &Path,
    hooks_dir: &Path,
    effort: Effort,
) -> Result<HookChannel> {
    if token.is_empty() {
        bail!("the contained program handed over no token");
    }
    let socket = hooks_dir.join("hooks.sock");
    let mut waited = Duration::ZERO;
    while !socket.exists() {
        if waited > Duration::from_secs(20) {
            bail!("loopward contain did not open {}", socket.display());
        }
        std::thread::sleep(Duration::from_millis(20));
        waited += Duration::from_millis(20);
    }
    let event = serde_json::json!({
        "session_id": "bench", "transcript_path": "/t.jsonl", "cwd": project,
        "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_use_id": "toolu_1",
        "tool_input": {"file_path": project.join("a.txt")},
    })
    .to_string();
    let hook = || {
        let mut c = Command::new(hook_bin);
        c.args(["hook", "claude-code", "--config", "loopward.toml"])
            .current_dir(project)
            .env("LOOPWARD_SUPERVISOR", &socket)
            .env("LOOPWARD_SUPERVISOR_TOKEN", token);
        c
    };
    let (rounds, per_round) = (effort.pick(10, 2), effort.pick(20, 5));
    let (mut call, mut noop, mut start) = (vec![], vec![], vec![]);
    for round in 0..=rounds {
        for _ in 0..per_round {
            let (ns, out) = timed(&mut hook(), event.as_bytes())?;
            if out.status.code() != Some(0) {
                bail!(
                    "the hook call failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let (nn, _) = timed(&mut Command::new("true"), b"")?;
            let (nv, _) = timed(Command::new(hook_bin).arg("--version"), b"")?;
            if round > 0 {
                call.push(ns);
                noop.push(nn);
                start.push(nv);
            }
        }
    }
    Ok(HookChannel {
        call: Stats::from_samples(&mut call),
        noop: Stats::from_samples(&mut noop),
        start: Stats::from_samples(&mut start),
    })
}
