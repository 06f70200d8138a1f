//! Part 8: containment — a command started in its sandbox (Landlock, its own network
//! namespace), and HTTP through the egress proxy.
//!
//! Contained start: [`Confinement::plan`] of a small workspace, then `true` started by
//! [`spawn_contained`] (a sandbox thread, a network namespace with loopback up, the proxy's
//! listener, Landlock, the capabilities dropped) and waited for; the baseline starts and waits
//! for the same `true` bare. Proxy: one `GET` through [`egress::serve`] (the decision recorded
//! into memory through the recorder channel) to a server on loopback, against the same `GET`
//! sent to the server directly; and one large body through each, for throughput.

use crate::harness::{time_n, Effort, Stats};
use crate::report::{fmt_ns, fmt_ratio, Section, Target, Verdict};
use anyhow::{Context as _, Result};
use loopward_runner::egress::{self, EgressPolicy, Recorder};
use loopward_runner::gates::ControlFiles;
use loopward_runner::sandbox::{spawn_contained, Confinement, Protected};
use loopward_runner::Workspace;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The target: contained start over a bare start (median), in nanoseconds.
pub const TARGET_START_NS: f64 = 20_000_000.0;
/// The target: a request through the proxy over a direct one (median), in nanoseconds.
pub const TARGET_PROXY_NS: f64 = 1_000_000.0;
/// The target: bytes per second through the proxy.
pub const TARGET_MBPS: f64 = 100.0;
/// The target: a hook call through the supervisor channel (median), in nanoseconds, the hook
/// process's start included.
pub const TARGET_HOOK_NS: f64 = 2_000_000.0;

const BIG: usize = 64 * 1024 * 1024;

/// Serves `GET /small` (a few bytes) and `GET /big` ([`BIG`] bytes) on loopback.
async fn server() -> Result<SocketAddr> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let big = Arc::new(vec![b'x'; BIG]);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let big = big.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let body: &[u8] = if buf[..n].starts_with(b"GET /big") {
                    &big
                } else {
                    b"ok"
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body).await;
            });
        }
    });
    Ok(addr)
}

/// The egress proxy on loopback, allowing 127.0.0.1, its records acknowledged in memory.
async fn proxy() -> Result<SocketAddr> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let (recorder, mut records) = Recorder::channel();
    tokio::spawn(async move {
        while let Some(r) = records.recv().await {
            let _ = r.done.send(Ok(()));
        }
    });
    let policy = Arc::new(EgressPolicy::new(["127.0.0.1"]));
    tokio::spawn(egress::serve(listener, policy, recorder, None));
    Ok(addr)
}

/// One `GET` of `path` from `server`, through `via` when given; returns the bytes read.
async fn get(server: SocketAddr, via: Option<SocketAddr>, path: &str) -> Result<usize> {
    let (connect, target) = match via {
        Some(p) => (p, format!("http://{server}{path}")),
        None => (server, path.to_string()),
    };
    let mut s = TcpStream::connect(connect).await?;
    s.write_all(
        format!("GET {target} HTTP/1.1\r\nHost: {server}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0;
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        total += n;
    }
}

/// Runs part 8.
pub fn run(effort: Effort) -> Result<Section> {
    let rounds = effort.pick(10, 2);
    let per_round = effort.pick(20, 5);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;
    for d in ["src", "docs", "tests"] {
        std::fs::create_dir(dir.path().join(d))?;
    }
    let ws = Workspace::new(dir.path())?;
    let protected = Protected::new(ControlFiles::default().resolved(&ws), vec![]);
    let result = rt.block_on(async {
        // Can this machine make the sandbox at all?
        let plan = Confinement::plan(&ws, &protected)?;
        if let Err(e) = spawn_contained(tokio::process::Command::new("true"), &plan).await {
            return Ok::<_, anyhow::Error>(Err(e.to_string()));
        }
        let (mut s, mut b) = (vec![], vec![]);
        for round in 0..=rounds {
            let mut rs = Vec::new();
            let mut failed = None;
            time_n(per_round, &mut rs, async || {
                let r = async {
                    let plan = Confinement::plan(&ws, &protected)?;
                    let started =
                        spawn_contained(tokio::process::Command::new("true"), &plan).await?;
                    let mut child = started.child;
                    child.wait().await?;
                    Ok::<_, anyhow::Error>(())
                }
                .await;
                if let Err(e) = r {
                    failed.get_or_insert(e);
                }
            })
            .await;
            if let Some(e) = failed {
                return Err(e);
            }
            let mut rb = Vec::new();
            time_n(per_round, &mut rb, async || {
                if let Ok(mut c) = tokio::process::Command::new("true").spawn() {
                    let _ = c.wait().await;
                }
            })
            .await;
            if round > 0 {
                s.extend(rs);
                b.extend(rb);
            }
        }
        let server = server().await?;
        let via = proxy().await?;
        let (mut ps, mut pb) = (vec![], vec![]);
        let requests = effort.pick(200, 20);
        for round in 0..=rounds {
            let (mut rs, mut rb) = (vec![], vec![]);
            time_n(requests, &mut rs, async || {
                std::hint::black_box(get(server, Some(via), "/small").await.ok());
            })
            .await;
            time_n(requests, &mut rb, async || {
                std::hint::black_box(get(server, None, "/small").await.ok());
            })
            .await;
            if round > 0 {
                ps.extend(rs);
                pb.extend(rb);
            }
        }
        let t = Instant::now();
        let through = get(server, Some(via), "/big").await?;
        let proxied_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let direct = get(server, None, "/big").await?;
        let direct_s = t.elapsed().as_secs_f64();
        anyhow::ensure!(
            through >= BIG && direct >= BIG,
            "a big body came back short"
        );
        Ok(Ok((
            s,
            b,
            ps,
            pb,
            BIG as f64 / proxied_s / 1e6,
            BIG as f64 / direct_s / 1e6,
        )))
    });
    let (mut s, mut b, mut ps, mut pb, mbps, direct_mbps) = match result.context("part 8")? {
        Ok(v) => v,
        Err(why) => {
            return Ok(Section::skipped(
                8,
                "Containment",
                &format!("skipped: this machine cannot make the sandbox ({why})"),
            ))
        }
    };
    let hooks = crate::hook_channel::measure(effort);
    let (s, b) = (Stats::from_samples(&mut s), Stats::from_samples(&mut b));
    let (ps, pb) = (Stats::from_samples(&mut ps), Stats::from_samples(&mut pb));
    let start_over = s.median_ns - b.median_ns;
    let proxy_over = ps.median_ns - pb.median_ns;
    Ok(Section {
        part: 10,
        title: "Containment".into(),
        method: format!(
            "Contained start: `Confinement::plan` of a three-folder workspace, then `true` started by `spawn_contained` (sandbox thread, network namespace with loopback up, the proxy's listener, Landlock, capabilities dropped) and waited for, against `true` started bare; {per_round} of each per round, alternating, {rounds} rounds. Proxy: a `GET` of a 2-byte body through `egress::serve` on loopback (its decision acknowledged by an in-memory recorder) against the same `GET` sent directly, one connection each ({requests} per round); throughput: one {} MiB body through each. A release build on the machine below; the floor is the bare start and the direct request.",
            BIG / (1024 * 1024),
            requests = effort.pick(200, 20),
        ),
        columns: ["what", "median", "p99", "× baseline"].map(String::from).to_vec(),
        rows: vec![
            vec!["bare start of `true`".into(), fmt_ns(b.median_ns), fmt_ns(b.p99_ns), "1.00×".into()],
            vec!["contained start of `true`".into(), fmt_ns(s.median_ns), fmt_ns(s.p99_ns), fmt_ratio(s.median_ns / b.median_ns)],
            vec!["direct GET on loopback".into(), fmt_ns(pb.median_ns), fmt_ns(pb.p99_ns), "1.00×".into()],
            vec!["GET through the egress proxy".into(), fmt_ns(ps.median_ns), fmt_ns(ps.p99_ns), fmt_ratio(ps.median_ns / pb.median_ns)],
            vec![format!("{} MiB body: direct / proxied", BIG / (1024 * 1024)), format!("{direct_mbps:.0} MB/s"), format!("{mbps:.0} MB/s"), "".into()],
        ]
        .into_iter()
        .chain(hooks.as_ref().ok().into_iter().flat_map(|h| {
            [
                vec!["no-op binary start (`true`, stdin piped)".into(), fmt_ns(h.noop.median_ns), fmt_ns(h.noop.p99_ns), "1.00×".into()],
                vec!["`loopward-hook --version` start".into(), fmt_ns(h.start.median_ns), fmt_ns(h.start.p99_ns), fmt_ratio(h.start.median_ns / h.noop.median_ns)],
                vec!["hook call through the supervisor channel".into(), fmt_ns(h.call.median_ns), fmt_ns(h.call.p99_ns), fmt_ratio(h.call.median_ns / h.noop.median_ns)],
            ]
        }))
        .collect(),
        targets: vec![
            Target::at_most("contained start over bare fork/exec (median)", start_over, TARGET_START_NS, fmt_ns),
            Target::at_most("proxy overhead per request on loopback (median)", proxy_over, TARGET_PROXY_NS, fmt_ns),
            Target::met_if(
                "throughput through the proxy",
                format!("≥ {TARGET_MBPS:.0} MB/s"),
                format!("{mbps:.0} MB/s"),
                mbps >= TARGET_MBPS,
            ),
            match &hooks {
                Ok(h) => Target::met_if(
                    "a hook call through the supervisor channel, hook process start included (median)",
                    format!("≤ {}", fmt_ns(TARGET_HOOK_NS)),
                    format!("{} (floor: `true` {})", fmt_ns(h.call.median_ns), fmt_ns(h.noop.median_ns)),
                    h.call.median_ns <= TARGET_HOOK_NS,
                ),
                Err(why) => Target {
                    what: "a hook call through the supervisor channel (median)".into(),
                    target: format!("≤ {}", fmt_ns(TARGET_HOOK_NS)),
                    measured: "—".into(),
                    verdict: Verdict::NotMeasured,
                    reason: Some(format!("{why:#}")),
                },
            },
        ],
        notes: vec![
            "The contained start includes planning the sandbox (a walk of the workspace) and making a network namespace, which the kernel does under a global lock: a busy machine making many namespaces at once pays more.".into(),
            "Hook channel: a real `loopward contain` supervises a `sleep`; each sample starts `loopward-hook hook claude-code` (what `hook install` writes: the release hook binary with its default features, as `cargo install --path loopward-cli` builds it, beside the bench) with the supervisor's socket and token (which the contained `sleep`'s shell hands over), sends a `PreToolUse` of a `Read` and waits for the answer — the hook's start, the channel, the supervisor's judgement (config, policy, session lock) and its ledger record. Beside it, the floor: `true` and `loopward-hook --version` started the same way.".into(),
            "Each proxied request is its own connection (the proxy forces `Connection: close` so that each request is judged), so the overhead includes a second connect on loopback.".into(),
        ],
        data: json!({
            "start": {"contained": s, "bare": b},
            "request": {"proxied": ps, "direct": pb},
            "throughput_mb_s": {"proxied": mbps, "direct": direct_mbps},
            "hook_channel": hooks.as_ref().ok().map(|h| json!({"call": h.call, "noop": h.noop, "hook_binary_start": h.start})),
        }),
    })
}
