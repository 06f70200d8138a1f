//! Durability of the embedded journal, shown on the real binary: a scripted multi-turn run with
//! shell effects is killed (`SIGKILL`, by its PID) at random moments until 100 kills landed
//! mid-run; `loopward run --resume` then completes every run with each effect on disk once, no
//! model call repeated for a step the ledger recorded, and a ledger that verifies.
//!
//! The same kills, at four fixed points around one command, are then replayed
//! (`loopward replay`): each replay must come out the same.
//!
//! Wall time: about 10 s on 2 cores for ~150 kills (four trials at a time; the kill moments
//! follow how long the runs take), about 15 s for the 12 replayed kills.

mod support;

use loopward_core::{AuditEvent, CallId};
use loopward_runner::audit::Record;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};
use support::{loopward_cmd, text};

const TRIALS: u64 = 100;
/// Held by every test here, so none runs beside another: the 100-kill test places its kills
/// by how long whole runs take, and a run timed beside another test's runs is slower than the
/// runs it then kills (most kills would land after the end).
static KILLS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds `KILLS` until dropped (a test that failed while holding it does not stop the others).
fn alone() -> std::sync::MutexGuard<'static, ()> {
    KILLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
const WORKERS: u64 = 4;

const CONFIG: &str = r#"
[run]
first = "planner"
task = "Count the effects in out/effects.log."
runs_dir = "runs"

[backend]
kind = "fake"
script = "script.toml"
call_log = "calls.log"

[[agent]]
name = "planner"
role = "You plan."
tools = ["shell", "write_file", "handoff"]

[[agent]]
name = "builder"
role = "You build."
tools = ["shell", "handoff"]
"#;

/// Three turns, five shell effects (two in one reply), one file write, two handoffs.
const SCRIPT: &str = r##"
[[agents.planner]]
tool_calls = [{ name = "shell", arguments = { command = "echo p1 >> out/effects.log" } }]
[[agents.planner]]
tool_calls = [{ name = "write_file", arguments = { path = "out/plan.md", content = "# Plan" } }]
[[agents.planner]]
tool_calls = [{ name = "handoff", arguments = { to = "builder", message = "build" } }]
[[agents.builder]]
text = "two at once"
tool_calls = [
  { name = "shell", arguments = { command = "echo b1 >> out/effects.log" } },
  { name = "shell", arguments = { command = "echo b2 >> out/effects.log" } },
]
[[agents.builder]]
tool_calls = [{ name = "shell", arguments = { command = "echo b3 >> out/effects.log" } }]
[[agents.builder]]
tool_calls = [{ name = "handoff", arguments = { to = "planner", message = "built" } }]
[[agents.planner]]
tool_calls = [{ name = "shell", arguments = { command = "echo p2 >> out/effects.log" } }]
[[agents.planner]]
text = "Done."
"##;

const EFFECTS: [&str; 5] = ["b1", "b2", "b3", "p1", "p2"];
/// The script's replies, per agent.
const REPLIES: usize = 8;

fn loopward(dir: &Path, args: &[&str]) -> Output {
    loopward_cmd(dir, args).output().unwrap()
}

/// `loopward run --resume r`, again while the ledger is still locked: a child forked at the
/// kill holds the ledger's lock until it has exec'd (microseconds, but under heavy load a forked
/// child may wait long for a core: up to 10 s here).
fn resume(d: &Path) -> Output {
    let mut out = loopward(d, &["run", "--resume", "r"]);
    for _ in 0..200 {
        if !text(&out).contains("open in another writer") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        out = loopward(d, &["run", "--resume", "r"]);
    }
    out
}

/// `loopward run --id r` started in `d`, its output dropped.
fn start_run(d: &Path) -> Child {
    loopward_cmd(d, &["run", "--id", "r"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `child` killed (`SIGKILL`, to its PID only) and reaped: its status, and the ledger's records
/// at the kill.
fn kill(mut child: Child, d: &Path) -> (ExitStatus, Vec<AuditEvent>) {
    let _ = child.kill();
    let status = child.wait().unwrap();
    (status, events(d))
}

/// Whether the run's end is among `events`.
fn ended(events: &[AuditEvent]) -> bool {
    events
        .iter()
        .any(|e| matches!(e, AuditEvent::RunEnded { .. }))
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("loopward.toml"), CONFIG).unwrap();
    std::fs::write(dir.path().join("script.toml"), SCRIPT).unwrap();
    // Shell commands write into a folder (the workspace root holds the control files).
    std::fs::create_dir(dir.path().join("out")).unwrap();
    dir
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The ledger's records, a torn last line (a kill mid-write) left out.
fn events(dir: &Path) -> Vec<AuditEvent> {
    let bytes = std::fs::read(dir.join("runs/r/events.jsonl")).unwrap_or_default();
    bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| Record::parse_line(l).ok())
        .filter_map(|(r, _)| r.event().ok())
        .collect()
}

/// xorshift64*: the kill moments, reproducible from the seed printed on failure.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// The middle of the run times seen so far.
fn median(spans: &[Duration]) -> Duration {
    let mut sorted = spans.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// What one trial saw.
#[derive(Debug, Default)]
struct Trial {
    /// The kill landed before the run finished.
    killed_mid_run: bool,
    /// How long the run took, when it finished before the kill.
    finished_in: Option<Duration>,
    /// Calls the resumed run found interrupted (started, never finished).
    interrupted: usize,
}

/// One trial: start the run, kill it after `delay`, resume it to the end, check the outcome.
fn trial(seed: u64, delay: Duration) -> Trial {
    let dir = workspace();
    let d = dir.path();
    let mut child = start_run(d);
    // Wait out the delay, noting when the run ends on its own first: that tells the other
    // trials how long a run takes under the load they share.
    let start = Instant::now();
    let mut finished_in = None;
    while start.elapsed() < delay {
        if child.try_wait().unwrap().is_some() {
            finished_in = Some(start.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(1).min(delay.saturating_sub(start.elapsed())));
    }
    // What the ledger held at the kill: those replies must not be asked for again.
    let (status, at_kill) = kill(child, d);
    let ended_before_kill = ended(&at_kill);
    let killed_mid_run = !status.success() && !ended_before_kill;
    let replied_before = at_kill
        .iter()
        .filter(|e| matches!(e, AuditEvent::ModelReply { .. }))
        .count();
    let calls_before = lines(&d.join("calls.log")).len();
    let mut out = resume(d);
    if text(&out).contains("nothing to resume") {
        // Killed before its first record: started again under its id.
        out = loopward(d, &["run", "--id", "r"]);
    }
    let ctx = format!("seed {seed}, kill after {delay:?}:\n{}", text(&out));
    if ended_before_kill {
        // Its end was recorded before the kill: resuming is refused, saying how it finished.
        assert!(text(&out).contains("finished (completed)"), "{ctx}");
    } else {
        assert_eq!(out.status.code(), Some(0), "{ctx}");
    }
    // Each effect on disk once, but an interrupted call's, whose effect may or may not have
    // happened (the kill can land after the call was recorded started and before its command
    // ran: the contained start, namespaces and proxy, widened that window), and which is never
    // run again: at most once. A command that did start runs on after the kill and under load
    // may land after the resumed run ended: wait for it (bounded).
    let evs = events(d);
    let interrupted: Vec<CallId> = evs
        .iter()
        .filter_map(|e| match e {
            AuditEvent::RunResumed { interrupted, .. } => Some(interrupted.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    let maybe: Vec<&str> = EFFECTS
        .iter()
        .copied()
        .filter(|effect| {
            evs.iter().any(|e| {
                matches!(e, AuditEvent::ToolRequested { call_id, arguments, .. }
                    if interrupted.contains(call_id)
                        && arguments.to_string().contains(&format!("echo {effect} ")))
            })
        })
        .collect();
    let t0 = Instant::now();
    while lines(&d.join("out/effects.log")).len() < EFFECTS.len() - maybe.len()
        && t0.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut effects = lines(&d.join("out/effects.log"));
    effects.sort();
    let surely: Vec<&str> = effects
        .iter()
        .map(String::as_str)
        .filter(|e| !maybe.contains(e))
        .collect();
    let expected: Vec<&str> = EFFECTS
        .iter()
        .copied()
        .filter(|e| !maybe.contains(e))
        .collect();
    assert_eq!(
        surely, expected,
        "{ctx}\nledger says interrupted: {interrupted:?}"
    );
    for m in &maybe {
        assert!(
            effects.iter().filter(|e| e == m).count() <= 1,
            "{ctx}\nthe interrupted call's effect {m} landed twice"
        );
    }
    assert_eq!(lines(&d.join("out/plan.md")), ["# Plan"], "{ctx}");
    // No model call repeated for a recorded step: the calls made after the kill are exactly
    // the replies the ledger did not hold.
    let calls = lines(&d.join("calls.log"));
    let mut per_agent: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for c in &calls {
        let (agent, n) = c.split_once(' ').unwrap();
        per_agent.entry(agent).or_default().push(n);
    }
    let replies = evs
        .iter()
        .filter(|e| matches!(e, AuditEvent::ModelReply { .. }))
        .count();
    assert_eq!(replies, REPLIES, "{ctx}: each reply recorded once");
    let repeated = calls.len() - REPLIES;
    assert!(
        repeated <= 1 && calls.len() - calls_before == REPLIES - replied_before,
        "{ctx}: {} call(s) before the kill, {} after; the ledger held {} replies",
        calls_before,
        calls.len() - calls_before,
        replied_before
    );
    // The ledger verifies.
    let v = loopward(d, &["verify", "runs/r"]);
    assert_eq!(v.status.code(), Some(0), "{ctx}\n{}", text(&v));
    Trial {
        killed_mid_run,
        finished_in,
        interrupted: interrupted.len(),
    }
}

#[test]
fn a_run_killed_at_100_random_points_resumes_with_each_effect_once() {
    let _alone = alone();
    // How long a whole run takes here, under the load of the trials (WORKERS at once), so the
    // kills land inside it. The trials add the runs that ended before their kill, so the
    // estimate follows the machine's speed as it changes (a cold start, another test binary).
    let whole: Vec<_> = (0..WORKERS)
        .map(|_| {
            std::thread::spawn(|| {
                let dir = workspace();
                let t0 = Instant::now();
                let whole = loopward(dir.path(), &["run", "--id", "r"]);
                let span = t0.elapsed();
                assert_eq!(whole.status.code(), Some(0), "{}", text(&whole));
                assert_eq!(lines(&dir.path().join("calls.log")).len(), REPLIES);
                span
            })
        })
        .collect();
    let spans = std::sync::Arc::new(std::sync::Mutex::new(
        whole
            .into_iter()
            .map(|w| w.join().unwrap())
            .collect::<Vec<_>>(),
    ));

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    // Trials go on until TRIALS kills landed mid-run (a kill after the run's end shows
    // nothing); more than three tries a landed kill fails the test, as kills placed so badly
    // test little.
    let landed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let tries = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (spans, landed, tries) = (spans.clone(), landed.clone(), tries.clone());
            std::thread::spawn(move || {
                use std::sync::atomic::Ordering::SeqCst;
                let mut state = seed ^ (w + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let mut seen = Vec::new();
                while landed.load(SeqCst) < TRIALS && tries.fetch_add(1, SeqCst) < 3 * TRIALS {
                    let s = next(&mut state);
                    let span = median(&spans.lock().unwrap());
                    // Uniform over the run's span, with room for a slower start.
                    let micros = s % (span.as_micros() as u64 * 5 / 4 + 1);
                    let t = trial(seed, Duration::from_micros(micros));
                    if let Some(took) = t.finished_in {
                        spans.lock().unwrap().push(took);
                    }
                    if t.killed_mid_run {
                        landed.fetch_add(1, SeqCst);
                    }
                    seen.push(t);
                }
                seen
            })
        })
        .collect();
    let trials: Vec<Trial> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let mid = trials.iter().filter(|t| t.killed_mid_run).count();
    let interrupted: usize = trials.iter().map(|t| t.interrupted).sum();
    assert!(
        mid as u64 >= TRIALS,
        "only {mid} of {} kills landed mid-run",
        trials.len()
    );
    eprintln!(
        "{mid} of {} kills landed mid-run; {interrupted} call(s) interrupted mid-effect, every effect once (seed {seed})",
        trials.len()
    );
}

#[test]
fn replay_runs_no_command_on_the_host_and_rejudges_from_the_ledger() {
    let _alone = alone();
    let dir = workspace();
    let d = dir.path();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("outside.log");
    // Without the kernel sandbox a command can write outside the workspace: the live run does,
    // once; its replay must not.
    let cfg = format!("{CONFIG}\n[gates.shell]\nsandbox = \"watch-only\"\n");
    std::fs::write(d.join("loopward.toml"), cfg).unwrap();
    let script = SCRIPT.replace(
        "echo p2 >> out/effects.log",
        &format!(
            "echo p2 >> out/effects.log; echo once >> {}",
            target.display()
        ),
    );
    std::fs::write(d.join("script.toml"), script).unwrap();
    let o = loopward(d, &["run", "--id", "r"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(lines(&target), ["once"]);
    let o = loopward(d, &["replay", "runs/r"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    crate::support::assert_prints(&o, "all the same");
    assert_eq!(lines(&target), ["once"], "replay ran a command on the host");
    assert_eq!(lines(&d.join("out/effects.log")).len(), 5);
    assert_eq!(
        lines(&d.join("calls.log")).len(),
        REPLIES,
        "replay called no model"
    );
}

/// The call id of the shell call whose command contains `needle`, once it is requested.
fn call_of(evs: &[AuditEvent], needle: &str) -> Option<CallId> {
    evs.iter().find_map(|e| match e {
        AuditEvent::ToolRequested {
            call_id, arguments, ..
        } if arguments["command"]
            .as_str()
            .is_some_and(|c| c.contains(needle)) =>
        {
            Some(call_id.clone())
        }
        _ => None,
    })
}

/// Where, around the builder's first command (`b1`), a kill landed: read from the ledger as it
/// stood at the kill.
fn landing(evs: &[AuditEvent]) -> &'static str {
    let Some(id) = call_of(evs, "echo b1") else {
        return "before b1 was requested";
    };
    let has = |f: &dyn Fn(&AuditEvent) -> bool| evs.iter().any(f);
    if has(&|e| matches!(e, AuditEvent::ToolFinished { call_id, .. } if *call_id == id)) {
        "after b1 finished"
    } else if has(
        &|e| matches!(e, AuditEvent::GateDecision { call_id: Some(c), path: Some(_), .. } if *c == id),
    ) {
        "b1 judged by the watch, not finished"
    } else if has(&|e| matches!(e, AuditEvent::ToolStarted { call_id, .. } if *call_id == id)) {
        "inside b1's command"
    } else {
        "b1 requested, not started"
    }
}

/// A run killed (`SIGKILL`, by its PID) as soon as its ledger satisfies `at`, then resumed to
/// its end. Returns where the kill landed.
fn kill_and_resume(d: &Path, at: &dyn Fn(&[AuditEvent]) -> bool) -> &'static str {
    let child = start_run(d);
    let t0 = Instant::now();
    while !at(&events(d)) && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (_, at_kill) = kill(child, d);
    assert!(
        !ended(&at_kill),
        "the kill landed after the run's end: nothing to resume"
    );
    // No settling: a command released before the kill runs on in its own process group and may
    // land while the resumed run's watch compares a later command. The ledger then records that
    // change on the later call, and the replay judges it there too.
    let out = resume(d);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    landing(&at_kill)
}

#[test]
fn a_killed_and_resumed_run_replays_part_by_part() {
    let _alone = alone();
    // `b1` takes a moment, so a kill can land inside its command.
    let script = SCRIPT.replace("echo b1 >>", "sleep 0.5; echo b1 >>");
    type At = fn(&[AuditEvent]) -> bool;
    let points: [(&str, At); 4] = [
        // Between the builder's reply and its first call's start: the calls of that reply run
        // only in the resumed part (the replay of the killed part must not take their results).
        ("the builder's reply", |evs| {
            evs.iter()
                .filter(|e| matches!(e, AuditEvent::ModelReply { .. }))
                .count()
                >= 4
        }),
        ("b1's start", |evs| {
            call_of(evs, "echo b1").is_some_and(|id| {
                evs.iter()
                    .any(|e| matches!(e, AuditEvent::ToolStarted { call_id, .. } if *call_id == id))
            })
        }),
        ("b1's watch", |evs| {
            call_of(evs, "echo b1").is_some_and(|id| {
                evs.iter().any(|e| {
                    matches!(e, AuditEvent::GateDecision { call_id: Some(c), path: Some(_), .. } if *c == id)
                })
            })
        }),
        ("the first handoff", |evs| {
            evs.iter()
                .any(|e| matches!(e, AuditEvent::HandoffRegistered(_)))
        }),
    ];
    let rounds = 3;
    let workers: Vec<_> = points
        .into_iter()
        .map(|(name, at)| {
            let script = script.clone();
            std::thread::spawn(move || {
                (0..rounds)
                    .map(|_| {
                        let dir = workspace();
                        let d = dir.path();
                        std::fs::write(d.join("script.toml"), &script).unwrap();
                        let landed = kill_and_resume(d, &at);
                        let o = loopward(d, &["replay", "runs/r"]);
                        let ctx = format!("killed at {name} (landed: {landed}):\n{}", text(&o));
                        assert_eq!(o.status.code(), Some(0), "{ctx}");
                        assert!(text(&o).contains("all the same"), "{ctx}");
                        landed
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let landed: Vec<&str> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    eprintln!("kills landed: {landed:?}; every replay the same");
    // The kills that matter most landed at least once: inside b1, and before it started.
    assert!(landed.contains(&"inside b1's command"), "{landed:?}");
    assert!(
        landed
            .iter()
            .any(|l| matches!(*l, "before b1 was requested" | "b1 requested, not started")),
        "{landed:?}"
    );
}

#[test]
fn an_interactively_approved_run_replays_with_its_recorded_answers() {
    let _alone = alone();
    let dir = workspace();
    let d = dir.path();
    // Every `write_file` asks a person: approved here (the answer is read from stdin).
    let cfg = format!(
        "{CONFIG}\n[[stopgate]]\nname = \"ask\"\npoint = \"tool\"\ntool = \"write_file\"\nmode = \"interactive\"\n"
    );
    std::fs::write(d.join("loopward.toml"), cfg).unwrap();
    let mut child = loopward_cmd(d, &["run", "--id", "r"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"y\n").unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(lines(&d.join("out/plan.md")), ["# Plan"]);
    let o = loopward(d, &["replay", "runs/r"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    crate::support::assert_prints(&o, "all the same");
}
