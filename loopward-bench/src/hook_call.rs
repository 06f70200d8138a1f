//! Part 12: one hook call, measured from outside.
//!
//! The subject is what an agent host pays on every tool call: the release `loopward-hook`
//! binary (what `hook install` writes) started as `loopward-hook hook claude-code`, given a
//! `PreToolUse` event on stdin — the main agent
//! writing into one of 100 territories it does not own — and read to its end (process start,
//! config load and checks, the decision, the ledger append and its sync, the JSON answer). The
//! floor, interleaved call by call, is the same binary doing nothing: `loopward-hook
//! --version`. Every
//! call is one more in the same session, whose ledger grows as a long session's does.
//!
//! The binary is the `loopward-hook` next to this one (`cargo xtask bench` builds it); without
//! it the part is skipped, saying how to build it.

use crate::harness::{elapsed_ns, Effort, Stats};
use crate::report::{fmt_ns, fmt_ratio, Section, Target};
use anyhow::{bail, Context as _, Result};
use serde_json::json;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The target: a hook call's median over the floor's.
pub const TARGET_RATIO: f64 = 2.0;
/// The target: a hook call's median, in nanoseconds.
pub const TARGET_P50_NS: f64 = 5e6;
/// The target: a hook call's p99, in nanoseconds.
pub const TARGET_P99_NS: f64 = 20e6;
/// Territories in the config.
pub const TERRITORIES: usize = 100;

/// A project with `loopward.toml` (100 agents, each owning one territory) and a state folder.
struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
}

impl Project {
    fn new() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("project");
        let state = dir.path().join("state");
        std::fs::create_dir_all(&root)?;
        std::fs::create_dir_all(&state)?;
        let mut cfg = String::from(
            "[run]\nfirst = \"root\"\n\n[[agent]]\nname = \"root\"\ntools = [\"write_file\"]\n",
        );
        for i in 0..TERRITORIES {
            let _ = write!(
                cfg,
                "\n[[agent]]\nname = \"a{i}\"\ntools = [\"write_file\"]\n\n[[territory]]\npaths = [\"area{i}/**\", \"docs/area{i}.md\"]\nowner = \"a{i}\"\n"
            );
        }
        std::fs::write(root.join("loopward.toml"), cfg)?;
        Ok(Self {
            _dir: dir,
            root,
            state,
        })
    }

    /// The `PreToolUse` event of call `n`: the main agent writing into territory 42.
    fn event(&self, n: usize) -> String {
        json!({
            "session_id": "bench",
            "cwd": self.root,
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_use_id": format!("toolu_{n}"),
            "tool_input": {"file_path": self.root.join("area42/notes.md"), "content": "x"},
        })
        .to_string()
    }
}

/// The `loopward-hook` binary beside this one.
fn binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.join("loopward-hook");
    bin.is_file().then_some(bin)
}

/// A binary's size on disk, as the notes say it (`?` when it cannot be read).
fn size_of(bin: &Path) -> String {
    std::fs::metadata(bin).map_or("?".into(), |m| format!("{:.1} MB", m.len() as f64 / 1e6))
}

/// Runs `bin args` with `stdin`, to its end; its stdout.
fn call(bin: &Path, args: &[&str], stdin: &str, state: &Path) -> Result<Vec<u8>> {
    let mut child = Command::new(bin)
        .args(args)
        .env("XDG_STATE_HOME", state)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "{} {args:?} exited {}: {}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}

/// Measures the part.
pub fn run(effort: Effort) -> Result<Section> {
    let Some(bin) = binary() else {
        return Ok(Section::skipped(
            12,
            "One hook call",
            "skipped: no release `loopward-hook` beside this binary (`cargo xtask bench` builds \
             it; by hand: `cargo build --release -p loopward-cli --bin loopward-hook`)",
        ));
    };
    let p = Project::new()?;
    let config = p.root.join("loopward.toml");
    let config = config.to_string_lossy();
    let hook = ["hook", "claude-code", "--config", &config];
    let deny = |n: usize| -> Result<()> {
        let out = call(&bin, &hook, &p.event(n), &p.state)?;
        let text = String::from_utf8_lossy(&out);
        if !text.contains("\"deny\"") {
            bail!("the hook did not deny the write: {text}");
        }
        Ok(())
    };
    // The session's first call makes its ledger, the key and the session's state.
    for n in 0..3 {
        deny(n)?;
    }
    let calls = effort.pick(400, 30);
    let (mut subject, mut floor) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    // For comparison, not the floor: the whole CLI's start, which the hook paid before it had a
    // binary of its own.
    let whole = bin.with_file_name("loopward");
    let mut whole_start = Vec::with_capacity(calls);
    for n in 0..calls {
        let start = Instant::now();
        deny(n + 3)?;
        subject.push(elapsed_ns(start));
        let start = Instant::now();
        call(&bin, &["--version"], "", &p.state)?;
        floor.push(elapsed_ns(start));
        if whole.is_file() {
            let start = Instant::now();
            call(&whole, &["--version"], "", &p.state)?;
            whole_start.push(elapsed_ns(start));
        }
    }
    let (s, f) = (
        Stats::from_samples(&mut subject),
        Stats::from_samples(&mut floor),
    );
    let whole_start = (!whole_start.is_empty()).then(|| Stats::from_samples(&mut whole_start));
    let ratio = s.median_ns / f.median_ns.max(1.0);
    Ok(Section {
        part: 12,
        title: "One hook call".into(),
        method: format!(
            "The release `loopward-hook hook claude-code` (what `hook install` writes; default \
             features, as `cargo install` builds it) answering a `PreToolUse` deny of a territory write at {TERRITORIES} territories (process start, config load and checks, the \
             decision, the ledger append and its sync, the JSON answer), started and read to its \
             end {calls} times in one session, against the floor `loopward-hook --version`, \
             interleaved call by call."
        ),
        columns: ["", "p50", "p99", "p50 over the floor"]
            .map(String::from)
            .to_vec(),
        rows: vec![
            vec![
                "hook call (deny)".into(),
                fmt_ns(s.median_ns),
                fmt_ns(s.p99_ns),
                fmt_ratio(ratio),
            ],
            vec![
                "floor (`loopward-hook --version`)".into(),
                fmt_ns(f.median_ns),
                fmt_ns(f.p99_ns),
                fmt_ratio(1.0),
            ],
        ]
        .into_iter()
        .chain(whole_start.as_ref().map(|w| {
            vec![
                "for comparison: `loopward --version`".into(),
                fmt_ns(w.median_ns),
                fmt_ns(w.p99_ns),
                fmt_ratio(w.median_ns / f.median_ns.max(1.0)),
            ]
        }))
        .collect(),
        targets: vec![
            Target::at_most("hook call p50 over the floor's", ratio, TARGET_RATIO, fmt_ratio),
            Target::at_most("hook call p50", s.median_ns, TARGET_P50_NS, fmt_ns),
            Target::at_most("hook call p99", s.p99_ns, TARGET_P99_NS, fmt_ns),
        ],
        notes: vec![
            "Where a call's time goes beyond the floor (`perf` and `strace` over 300 calls, 100 \
             territories, when this note was last checked): the floor's start is paid alike \
             (exec, the loader binding symbols, the start's `cpuid` probes, which trap on a \
             VM); beyond it, about half is the kernel — some 200 more page faults than the \
             floor's 100 (the code a decision runs, the config's and the policy's memory) and \
             the file system calls (the config, the key, the session's lock and state, the \
             ledger's append) — and the rest is user code spread thin: parsing the TOML (101 \
             agents, 100 territories), compiling the gates, and the overlap check's samples \
             matched against the territory index (which compiles no glob a path does not \
             reach). A denial lets nothing happen, so it is not synced before the answer (its \
             record is, with the session's next commit): this figure has no `fdatasync`; a call \
             that allows adds one."
                .into(),
            "Cut on the way here: the session's state is written (two `fsync`s) only when a call \
             changed it, and a denial does not; the session's ledger is reopened at its head \
             (the last record checked and chained to) instead of checked whole, so a long \
             session costs no more per call; the config's check and the policy share one compile \
             of the gates; each territory's own glob set is compiled only when something asks \
             it (a decision uses the index)."
                .into(),
            "Every call is in the same session: a growing ledger must not make calls slower."
                .into(),
            format!(
                "The hook runs as `loopward-hook` ({}) since it got a binary of its own; before, \
                 the whole `loopward` ({}) was started on every call. The floor is that smaller \
                 binary's start, so the ratio is over a smaller floor; `loopward --version` \
                 stands beside it for comparison.",
                size_of(&bin),
                size_of(&whole)
            ),
        ],
        data: json!({"calls": calls, "territories": TERRITORIES, "subject": s, "floor": f, "loopward_start": whole_start,
            "ratio": ratio}),
    })
}
