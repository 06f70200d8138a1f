//! A run moves between workers and each effect happens once.
//!
//! Starts a Restate server and two workers (this binary, started again with `worker`) behind a
//! proxy; starts a run; kills the worker running it mid-turn (by PID); the run goes on on the
//! other worker. At a stop-gate the run waits for a person: both workers are killed, the gate is
//! approved through the ingress, a fresh worker starts, and the run finishes there. Then: each
//! shell effect is on disk once, no recorded model reply was asked for again, the ledger
//! verifies and holds each call once, and the repeat and sprawl bounds held across the move.
//!
//! Needs the Restate server: `bash scripts/restate-install.sh` (what `.ci/run` does).

// Without the libtest harness this binary is its own test runner: printing is its report.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "../../../loopward-cli/tests/support/browser.rs"]
mod browser;
mod console;
mod proxy;
mod quota;
mod scripted;
mod server;
mod team;
mod toolgate;
mod worker;

use loopward_core::{AgentId, AuditEvent, RunId, RunStatus};
use loopward_restate::ingress::Ingress;
use loopward_restate::{LoopwardRunService, RunSummary, StartRun};
use loopward_runner::audit::{KeyRing, Record, EVENTS_FILE};
use restate_sdk::prelude::Endpoint;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use worker::Worker;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("worker") => return worker(&args[2..]),
        Some("worker-quota") => return quota::worker(&args[2..]),
        Some("worker-gated") => return toolgate::worker(&args[2..]),
        _ => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // `cargo test -p loopward-restate --test restate -- console`: that scenario alone.
    if args.get(1).is_some_and(|a| a == "console") {
        let result = rt.block_on(console::scenario(dir.path())).map(|shown| {
            println!("{shown}");
            println!("restate: a_wait_answered_from_the_console_resumes_the_run ... ok");
        });
        return report(dir, result, 1);
    }
    let quota_dir = tempfile::tempdir().unwrap();
    let result = rt.block_on(scenario(dir.path())).and_then(|()| {
        println!("restate: a_run_moves_between_workers_and_each_effect_happens_once ... ok");
        let shown = rt
            .block_on(quota::scenario(quota_dir.path()))
            .inspect_err(|_| keep_logs(quota_dir.path(), dir.path(), "quota"))?;
        println!("{shown}");
        println!("restate: two_workers_together_hold_one_provider_quota ... ok");
        let gated_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let shown = rt
            .block_on(toolgate::scenario(gated_dir.path()))
            .inspect_err(|_| keep_logs(gated_dir.path(), dir.path(), "gated"))?;
        println!("{shown}");
        println!(
            "restate: a_tool_stop_gate_approved_with_no_worker_running_resumes_the_run ... ok"
        );
        let console_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let shown = rt
            .block_on(console::scenario(console_dir.path()))
            .inspect_err(|_| keep_logs(console_dir.path(), dir.path(), "console"))?;
        println!("{shown}");
        println!("restate: a_wait_answered_from_the_console_resumes_the_run ... ok");
        Ok(())
    });
    report(dir, result, 4);
}

/// Copies the logs of a failed scenario (its server's, its workers' `worker-<name>-a|b.log`)
/// to where the failure report reads them.
/// The layers `toml` configures, their interactive stop-gates asking a person through Restate.
fn restate_stack(toml: &str) -> loopward_runner::layers::stack::Stack {
    let config: loopward_runner::layers::stack::LayersConfig = toml::from_str(toml).unwrap();
    loopward_runner::layers::stack::Stack::new(&config)
        .unwrap()
        .with_approver(std::sync::Arc::new(loopward_restate::RestateApprover))
}

fn keep_logs(from: &Path, to: &Path, name: &str) {
    let logs = [
        "restate-server.log".to_string(),
        format!("worker-{name}-a.log"),
        format!("worker-{name}-b.log"),
    ];
    for log in logs {
        let _ = std::fs::copy(from.join(&log), to.join(&log));
    }
}

/// Prints how the scenarios went (the logs of a failure) and exits 1 on a failure.
fn report(dir: tempfile::TempDir, result: Result<(), String>, scenarios: usize) {
    match result {
        Ok(()) => println!("{scenarios} passed, 0 failed"),
        Err(e) => {
            eprintln!("FAILED: {e}");
            for log in [
                "restate-server.log",
                "worker-a.log",
                "worker-b.log",
                "worker-c.log",
                "worker-quota-a.log",
                "worker-quota-b.log",
                "worker-gated-a.log",
                "worker-gated-b.log",
                "worker-console-a.log",
                "worker-console-b.log",
            ] {
                if let Ok(text) = std::fs::read_to_string(dir.path().join(log)) {
                    let tail: Vec<&str> = text.lines().rev().take(40).collect();
                    eprintln!("--- {log} (last lines) ---");
                    for l in tail.into_iter().rev() {
                        eprintln!("{l}");
                    }
                }
            }
            eprintln!("(kept for inspection: {})", dir.keep().display());
            println!("0 passed, 1 failed");
            std::process::exit(1);
        }
    }
}

/// The evidence custody every worker shares: the state directory beside `runs` (outside the
/// workspace), its keys made by the test before any worker starts.
fn custody(runs: &Path) -> loopward::state::Custody {
    let state = loopward_runner::StateDir::at(runs.parent().unwrap().join("state")).unwrap();
    let keys = KeyRing::load_or_create(&state.root().join("keys")).unwrap();
    loopward::state::Custody::new(state, keys, loopward::config::ChainKind::HmacSha256)
}

/// `worker <workspace> <runs> <ctl> <port>`: serves the team until killed.
fn worker(args: &[String]) {
    worker::serve("worker", args, |ws, runs, ctl| {
        let service = LoopwardRunService::keyed(team::runner(ws, ctl), runs, custody(runs));
        Endpoint::builder().bind(service).build()
    });
}

/// A person approves `gate` of `run` from elsewhere, through the CLI:
/// `loopward approve <run> <gate> --restate <ingress> --restate-admin <admin>`.
async fn approve_with_cli(server: &server::Server, run: &RunId, gate: &str) -> Result<(), String> {
    let cli = <loopward_cli::cli::Cli as clap::Parser>::try_parse_from([
        "loopward",
        "approve",
        run.as_str(),
        gate,
        "--restate",
        server.ingress.as_str(),
        "--restate-admin",
        server.admin.as_str(),
        "--by",
        "a person, from elsewhere",
    ])
    .map_err(|e| e.to_string())?;
    let code = loopward_cli::cli::dispatch(cli)
        .await
        .map_err(|e| format!("loopward approve: {e:#}"))?;
    if code != std::process::ExitCode::SUCCESS {
        return Err(format!("loopward approve exited {code:?}"));
    }
    Ok(())
}

/// How `run` ended, within `secs` of now.
async fn outcome(ingress: &Ingress, run: &RunId, secs: u64) -> Result<RunSummary, String> {
    tokio::time::timeout(Duration::from_secs(secs), ingress.outcome(run))
        .await
        .map_err(|_| format!("run {run} did not end within {secs}s"))?
        .map_err(|e| e.to_string())
}

async fn wait_for<T, F, Fut>(what: &str, secs: u64, mut probe: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = probe().await {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(format!("timed out after {secs}s waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn scenario(dir: &Path) -> Result<(), String> {
    // The shell's sandbox lets a command write only in folders that exist and hold nothing
    // protected (never directly in the workspace root).
    for d in ["ws/out", "runs", "ctl"] {
        std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
    }
    let ctl = dir.join("ctl");
    let custody = custody(&dir.join("runs"));
    let server = server::Server::start(dir)?;
    let (port_a, port_b) = (server::free_port(), server::free_port());
    let a = Worker::start("a", dir, port_a)?;
    let b = Worker::start("b", dir, port_b)?;
    let front = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let front_port = front.local_addr().map_err(|e| e.to_string())?.port();
    tokio::spawn(proxy::serve(front, vec![port_a, port_b]));
    server.register(front_port).await?;

    let run = RunId::new("moves-1").unwrap();
    let ingress = Ingress::new(&server.ingress, &server.admin).map_err(|e| e.to_string())?;
    ingress
        .start(
            &run,
            &StartRun {
                task: "Append one, two and three to out/effects.log, then review it.".into(),
                first: AgentId::new("builder").unwrap(),
            },
        )
        .await
        .map_err(|e| e.to_string())?;

    // Mid-turn: the builder's second model call holds; kill the worker that is making it.
    let pid: u32 = wait_for("the builder's second model call", 90, || async {
        std::fs::read_to_string(ctl.join(team::HOLDING))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    })
    .await?;
    let (victim, survivor) = if pid == a.child.id() {
        (a, b)
    } else if pid == b.child.id() {
        (b, a)
    } else {
        return Err(format!(
            "the run is held by pid {pid}, which is not a worker"
        ));
    };
    let killed = victim.name;
    victim.kill();
    std::fs::write(ctl.join(team::RELEASE), "").map_err(|e| e.to_string())?;

    // The other worker takes the run over and reaches the reviewer's stop-gate.
    let pending = wait_for("the stop-gate's pending approval", 120, || async {
        ingress.pending(&run).await.ok().flatten()
    })
    .await?;
    if pending.gate.is_empty() || pending.agent.as_str() != "reviewer" {
        return Err(format!("unexpected pending approval {pending:?}"));
    }
    // No worker holds the run while the person thinks: stop them all.
    let survivor_name = survivor.name;
    survivor.kill();
    // The person approves from elsewhere, through the CLI: `loopward approve <run> <gate> --restate`.
    approve_with_cli(&server, &run, &pending.gate).await?;
    if ingress
        .pending(&run)
        .await
        .map_err(|e| e.to_string())?
        .is_none()
    {
        return Err("the approval was taken before any worker was up".into());
    }
    // A fresh worker, on the first worker's address: the run resumes there.
    let _c = Worker::start("c", dir, port_a)?;
    let summary = outcome(&ingress, &run, 180).await?;
    if summary.status != RunStatus::Completed {
        return Err(format!("the run ended {:?}", summary.status));
    }

    // Each effect once, on disk.
    let effects = std::fs::read_to_string(dir.join("ws/out/effects.log"))
        .map_err(|e| format!("ws/out/effects.log: {e}"))?;
    if effects != "one\ntwo\nthree\n" {
        return Err(format!(
            "effects.log is {effects:?}, expected each line once"
        ));
    }
    // Model calls: each recorded reply was asked for once; only the call in flight when the
    // worker died was asked for again.
    let calls = std::fs::read_to_string(ctl.join(team::CALLS))
        .map_err(|e| format!("{}: {e}", team::CALLS))?;
    let asked = |who: &str| calls.lines().filter(|l| l.starts_with(who)).count();
    let builder2 = calls
        .lines()
        .filter(|l| l.starts_with("builder 2 "))
        .count();
    if asked("builder ") != 4 || builder2 != 2 || asked("reviewer ") != 2 {
        return Err(format!(
            "model calls were repeated beyond the one in flight at the kill:\n{calls}"
        ));
    }
    // The ledger: one, verified, each call once.
    let run_dir = dir.join("runs").join(run.as_str());
    // Strictly: chained under the custody's key, anchored, the index head in the state dir.
    let strict = custody
        .verify_options(&dir.join("runs"))
        .map_err(|e| format!("{e:#}"))?;
    let verified =
        loopward_runner::audit::verify(&run_dir, &strict).map_err(|e| format!("verify: {e}"))?;
    let key = custody.keys().current().map(|k| k.id().clone());
    if verified.key != key || !verified.anchored {
        return Err(format!(
            "not verified, anchored, under key {key:?}: {verified:?}"
        ));
    }
    check_ledger(&run_dir.join(EVENTS_FILE), summary.records)?;
    println!(
        "restate: killed worker {killed} mid-turn, the run went on on worker {survivor_name}; \
         approved with no worker running; finished on worker c ({} records)",
        summary.records
    );
    Ok(())
}

fn check_ledger(path: &PathBuf, records: u64) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let mut events = vec![];
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        let (r, _) = Record::parse_line(line).map_err(|e| e.0)?;
        events.push((r.scope(), r.event().map_err(|e| e.0)?));
    }
    if events.len() as u64 != records {
        return Err(format!(
            "the ledger has {} records, the run reported {records}",
            events.len()
        ));
    }
    let count = |f: &dyn Fn(&AuditEvent) -> bool| events.iter().filter(|(_, e)| f(e)).count();
    let runs = count(&|e| matches!(e, AuditEvent::RunStarted { .. }));
    let ends = count(&|e| matches!(e, AuditEvent::RunEnded { .. }));
    let models = count(&|e| matches!(e, AuditEvent::ModelCall { .. }));
    let tools = count(&|e| matches!(e, AuditEvent::ToolRequested { .. }));
    let done = count(&|e| matches!(e, AuditEvent::ToolFinished { .. }));
    let approvals = count(
        &|e| matches!(e, AuditEvent::LayerDecision { layer, decision, .. } if *layer == loopward_core::LayerId::StopGate && *decision == loopward_core::LayerVerdict::Approved),
    );
    if (runs, ends, models, tools, done, approvals) != (1, 1, 5, 8, 8, 1) {
        return Err(format!(
            "the ledger holds {runs} starts, {ends} ends, {models} model calls, {tools} tool requests, \
             {done} tool results, {approvals} approvals; expected 1, 1, 5, 8, 8, 1"
        ));
    }
    // The repeat bound held across the move: the read made before the kill was counted on the
    // worker that took the run over (which read it back from Restate's journal, never ran it),
    // so the same read after the kill was the second and was refused.
    let repeats = |verdict: loopward_core::LayerVerdict| {
        count(
            &|e| matches!(e, AuditEvent::LayerDecision { layer, decision, .. } if *layer == loopward_core::LayerId::Repeat && *decision == verdict),
        )
    };
    let (allowed, refused) = (
        repeats(loopward_core::LayerVerdict::Allow),
        repeats(loopward_core::LayerVerdict::Refused),
    );
    // The sprawl bound held across the move too: the builder's units of work before the kill
    // (out/effects.log, out/u1.md) were in the tracker of the worker that took the run over,
    // so out/u2.md, its third, was refused there (it asks for a plan).
    let sprawl: Vec<String> = events
        .iter()
        .filter_map(|(_, e)| match e {
            AuditEvent::GateDecision {
                gate,
                decision,
                path,
                ..
            } if gate.to_string() == "sprawl" && *decision != loopward_core::Decision::Allow => {
                Some(format!(
                    "{} {}",
                    decision.label(),
                    path.as_deref().unwrap_or("")
                ))
            }
            _ => None,
        })
        .collect();
    if sprawl != ["deny out/u2.md"] {
        return Err(format!(
            "the sprawl gate refused {sprawl:?}; expected only out/u2.md (the builder's third \
             unit of work, written on the worker the run moved to)"
        ));
    }
    if (allowed, refused) != (6, 1) {
        return Err(format!(
            "the repeat layer allowed {allowed} calls and refused {refused}; expected 6 and 1 \
             (the builder's second identical read, made on the worker the run moved to)"
        ));
    }
    Ok(())
}
