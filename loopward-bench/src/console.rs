//! Part 8: the console (`loopward serve`) following live runs, and a big run's page.
//!
//! The console runs in a child process of the bench (`loopward-bench --console-child`), on a
//! current-thread runtime as `loopward serve` does, over a workspace where the bench keeps 100
//! ledgers growing by 10 records a second each (1,000 records a second in all, written through
//! the real `Ledger`), with one browser-like client following `/live`. Measured on the child only:
//! its CPU time (the sum over its threads of `/proc/<pid>/task/*/schedstat`) over the whole window,
//! as a share of one core, and its resident memory (`VmRSS`) sampled every 10 s after a warm-up.
//! Then a 10,000-record run's page is fetched from localhost: the time to its last byte (the page
//! is self-contained; its one script loads after it), median of 7.

use crate::harness::{runtime, Effort};
use crate::report::{Section, Target, Verdict};
use anyhow::{bail, Context as _, Result};
use loopward_core::{AgentId, AuditEvent, AuditSink, RunId, Scope, TurnNumber};
use loopward_runner::audit::{Ledger, LedgerOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 100;
const PER_SECOND: u64 = 10;
const BIG_RUN: u64 = 10_000;

const CONFIG: &str = "[run]\nfirst = \"builder\"\n[[agent]]\nname = \"builder\"\ntools = []\n";

/// The child: serves the console over `config` with state under `state`; prints the address
/// and the token on one line, then serves until killed.
pub fn child(config: &Path, state: &Path) -> Result<()> {
    let rt = runtime()?;
    rt.block_on(async {
        let console = loopward_console::Console::open(loopward_console::ConsoleOptions::new(
            config.to_path_buf(),
            Some(state.to_path_buf()),
        ))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let mut out = std::io::stdout();
        writeln!(out, "{addr} {}", console.token().secret())?;
        out.flush()?;
        console.serve(listener).await?;
        Ok(())
    })
}

fn event(i: u64) -> AuditEvent {
    AuditEvent::HumanMessage {
        content: (&loopward_core::Person::at_the_keyboard()
            .says(format!("record {i} of a run that goes on")))
            .into(),
    }
}

fn scope(run: &RunId) -> Scope {
    Scope {
        run: run.clone(),
        turn: Some(TurnNumber(1)),
        agent: AgentId::new("builder").ok(),
    }
}

/// CPU time of every thread of `pid`, in ns.
fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// A GET over a plain socket (no client library between the measure and the server).
fn get(addr: &str, path: &str, token: &str) -> Result<(Duration, usize)> {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr)?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )?;
    let mut body = Vec::new();
    s.read_to_end(&mut body)?;
    let took = start.elapsed();
    if !body.starts_with(b"HTTP/1.1 200") {
        bail!(
            "GET {path}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        );
    }
    Ok((took, body.len()))
}

/// Part 8.
pub fn run(effort: Effort) -> Result<Section> {
    let window = match effort {
        Effort::Full => Duration::from_secs(600),
        Effort::Quick => Duration::from_secs(15),
    };
    let ws = tempfile::tempdir()?;
    let state = tempfile::tempdir()?;
    let config = ws.path().join("loopward.toml");
    std::fs::write(&config, CONFIG)?;
    let runs_dir = ws.path().join("runs");
    // The big run, written before the console starts.
    let big = RunId::new("r-big").context("run id")?;
    {
        let ledger = Ledger::create(&runs_dir, &big, LedgerOptions::default())?;
        for i in 0..BIG_RUN {
            ledger.record(&scope(&big), &event(i))?;
        }
    }
    let mut child = Command::new(std::env::current_exe()?)
        .arg("--console-child")
        .arg(&config)
        .arg(state.path())
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()?;
    let pid = child.id();
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("child stdout")?).read_line(&mut line)?;
    let (addr, token) = line
        .trim()
        .split_once(' ')
        .context("the console child printed no address")?;
    let (addr, token) = (addr.to_string(), token.to_string());
    let result = measure(&runs_dir, &addr, &token, pid, window);
    // Ended by the PID the bench started it with.
    let _ = child.kill();
    let _ = child.wait();
    let (cpu_share, rss, page_ms, page_bytes) = result?;
    let first = rss.first().copied().unwrap_or(0);
    let last = rss.last().copied().unwrap_or(0);
    let peak = rss.iter().copied().max().unwrap_or(0);
    let growth = last.saturating_sub(first);
    let mut sorted = page_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    Ok(Section {
        part: 8,
        title: "The console following live runs".into(),
        method: format!(
            "`loopward serve`'s console in a child process (current-thread runtime, 250 ms tick) over {RUNS} runs each growing by {PER_SECOND} records a second (written by the bench through `Ledger`), one client following `/live`, for {} s. CPU: the child's threads' `schedstat` time over the window ÷ the window. Memory: the child's `VmRSS` every 10 s after a 10 s warm-up. Page: a {BIG_RUN}-record run's `/runs/<id>` from 127.0.0.1, time to the last byte, median of {}.",
            window.as_secs(),
            page_ms.len()
        ),
        columns: vec!["what".into(), "figure".into()],
        rows: vec![
            vec!["CPU, share of one core".into(), format!("{:.2} %", cpu_share * 100.0)],
            vec!["RSS first / last / peak".into(), format!("{first} / {last} / {peak} KiB")],
            vec![format!("{BIG_RUN}-record page, median"), format!("{median:.0} ms ({page_bytes} bytes)")],
        ],
        targets: vec![
            Target::met_if(
                format!("CPU following {RUNS} runs × {PER_SECOND} records/s"),
                "≤ 5 % of one core",
                format!("{:.2} %", cpu_share * 100.0),
                cpu_share <= 0.05,
            ),
            Target::met_if(
                "memory over the window",
                "flat",
                format!("+{growth} KiB from the first sample to the last"),
                // Flat: no more than 2 MiB (allocator noise) between the first and last sample.
                growth <= 2048,
            ),
            Target {
                what: format!("a {BIG_RUN}-record run's page from localhost"),
                target: "first paint < 300 ms".into(),
                measured: format!("{median:.0} ms to the last byte"),
                verdict: Verdict::met_if(median < 300.0),
                reason: Some("measured to the last byte of the HTML, not to paint: the page is self-contained (inline CSS and SVG), so a browser paints once it has it".into()),
            },
        ],
        notes: vec![],
        data: serde_json::json!({
            "window_s": window.as_secs(), "runs": RUNS, "records_per_second_each": PER_SECOND,
            "cpu_share": cpu_share, "rss_kib": rss, "page_ms": page_ms, "page_bytes": page_bytes,
        }),
    })
}

type Measured = (f64, Vec<u64>, Vec<f64>, usize);

fn measure(
    runs_dir: &Path,
    addr: &str,
    token: &str,
    pid: u32,
    window: Duration,
) -> Result<Measured> {
    let ledgers: Vec<(RunId, std::sync::Arc<Ledger>)> = (0..RUNS)
        .map(|i| {
            let id = RunId::new(format!("r-{i:03}")).context("run id")?;
            let l = Ledger::create(runs_dir, &id, LedgerOptions::default())?;
            Ok((id, l))
        })
        .collect::<Result<_>>()?;
    // A client following the live stream, as an open browser tab does.
    let mut follower = TcpStream::connect(addr)?;
    write!(
        follower,
        "GET /live HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )?;
    let drain = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while matches!(follower.read(&mut buf), Ok(n) if n > 0) {}
    });
    let warmup = Duration::from_secs(10).min(window / 3);
    let tick = Duration::from_millis(1000 / PER_SECOND);
    let start = Instant::now();
    let (mut cpu_start, mut measured_from) = (None, start);
    let mut rss = vec![];
    let mut next_sample = start + warmup;
    let mut n = 0u64;
    while start.elapsed() < warmup + window {
        let round = Instant::now();
        for (id, l) in &ledgers {
            l.record(&scope(id), &event(n))?;
        }
        n += 1;
        if cpu_start.is_none() && start.elapsed() >= warmup {
            cpu_start = Some(cpu_ns(pid));
            measured_from = Instant::now();
        }
        if Instant::now() >= next_sample {
            rss.push(rss_kib(pid));
            next_sample += Duration::from_secs(10).min(window / 3);
        }
        if let Some(rest) = tick.checked_sub(round.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    let cpu = cpu_ns(pid).saturating_sub(cpu_start.unwrap_or(0)) as f64;
    let cpu_share = cpu / measured_from.elapsed().as_nanos() as f64;
    rss.push(rss_kib(pid));
    drop(ledgers);
    let mut page_ms = vec![];
    let mut bytes = 0;
    for _ in 0..7 {
        let (took, b) = get(addr, "/runs/r-big", token)?;
        page_ms.push(took.as_secs_f64() * 1000.0);
        bytes = b;
    }
    drop(drain);
    Ok((cpu_share, rss, page_ms, bytes))
}
