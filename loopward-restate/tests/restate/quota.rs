//! Two workers, one provider quota: the model calls of runs on both workers together are held
//! to the quota's rate (a `LoopwardQuota` virtual object keyed by provider), not each worker to
//! its own.

use super::scripted::{call, scripted, step};
use super::worker::Worker;
use loopward_core::{AgentId, RunId, RunStatus, ToolCall, Usage};
use loopward_restate::ingress::Ingress;
use loopward_restate::{
    JournaledModelLayer, JournaledToolLayer, LoopwardRunService, ProviderQuota, SharedQuota,
    SharedQuotaLayer, StartRun,
};
use loopward_runner::audit::LedgerOptions;
use loopward_runner::model::{BoxModelService, ChatRequest};
use loopward_runner::tool::{BoxToolService, ToolExecutor};
use loopward_runner::{tools, BoxTurnService, LlmAgent, Runner, Workspace};
use restate_sdk::prelude::Endpoint;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tower::Layer;

/// The quota: one call a second, to provider `scripted`, for every worker.
const PER_MINUTE: u32 = 60;
/// Model calls per run.
const CALLS_PER_RUN: usize = 4;
/// The file each live model call is logged in: `<pid> <unix ms>`.
const CALLS: &str = "quota-calls.log";
/// Holds the pid of the worker whose run waits for the other run at its second call.
const HOLD: &str = "quota-hold";
/// Lets it go on.
const GO: &str = "quota-go";

fn runner(ws: &Path, ctl: &Path) -> Runner {
    let caller = AgentId::new("caller").unwrap();
    let quota = SharedQuotaLayer::new(SharedQuota::new("scripted", PER_MINUTE).unwrap());
    let ctl = ctl.to_path_buf();
    let model = scripted(move |req| reply(ctl.clone(), req), Usage::default());
    let model = BoxModelService::new(quota.layer(JournaledModelLayer.layer(model)));
    let agent = LlmAgent::builder(caller.clone(), model)
        .tools(tools::builtin(std::slice::from_ref(&caller)))
        .tool_stack(BoxToolService::new(JournaledToolLayer.layer(ToolExecutor)))
        .build();
    Runner::builder(Workspace::new(ws).unwrap())
        .agent(caller, BoxTurnService::new(agent))
        .unwrap()
        .build()
        .unwrap()
}

/// `worker-quota <workspace> <runs> <ctl> <port>`: serves the quota team until killed.
pub(crate) fn worker(args: &[String]) {
    super::worker::serve("worker-quota", args, |ws, runs, ctl| {
        let service = LoopwardRunService::new(runner(ws, ctl), runs, LedgerOptions::default());
        Endpoint::builder()
            .bind(service)
            .bind(ProviderQuota::default())
            .build()
    });
}

/// Lists the workspace three times, then says it is done; logs each live call in `ctl`.
async fn reply(ctl: PathBuf, req: ChatRequest) -> (String, Vec<ToolCall>) {
    let step = step(&req);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    super::team::append(&ctl.join(CALLS), &format!("{} {now}\n", std::process::id()));
    // The first run holds its second call until the second run has made its first, so
    // the two runs overlap however slowly the second one starts.
    let me = std::process::id().to_string();
    if step == 2 && std::fs::read_to_string(ctl.join(HOLD)).ok().as_deref() == Some(&me) {
        while !ctl.join(GO).exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    if step < CALLS_PER_RUN {
        let list = call(format!("c{step}"), "list_dir", json!({"path": "."}));
        (String::new(), vec![list])
    } else {
        ("done".to_string(), vec![])
    }
}

pub(crate) async fn scenario(dir: &Path) -> Result<String, String> {
    for d in ["ws", "runs", "ctl"] {
        std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
    }
    let server = super::server::Server::start(dir)?;
    let ingress = Ingress::new(&server.ingress, &server.admin).map_err(|e| e.to_string())?;
    let start = |port: u16, name: &'static str| Worker::start_as("worker-quota", name, dir, port);
    // Worker a takes the first run: Restate keeps an invocation on the deployment it began on.
    let port_a = super::server::free_port();
    let a = start(port_a, "quota-a")?;
    let ctl = dir.join("ctl");
    std::fs::write(ctl.join(HOLD), a.child.id().to_string()).map_err(|e| e.to_string())?;
    server.register(port_a).await?;
    let task = |n: u32| StartRun {
        task: format!("List the workspace three times ({n})."),
        first: AgentId::new("caller").unwrap(),
    };
    let (q1, q2) = (
        RunId::new("quota-1").unwrap(),
        RunId::new("quota-2").unwrap(),
    );
    ingress
        .start(&q1, &task(1))
        .await
        .map_err(|e| e.to_string())?;
    // Worker b, registered next, takes the second run while the first still runs on a.
    let port_b = super::server::free_port();
    let b = start(port_b, "quota-b")?;
    server.register(port_b).await?;
    ingress
        .start(&q2, &task(2))
        .await
        .map_err(|e| e.to_string())?;
    let pid_b = b.child.id().to_string();
    super::wait_for("the second run's first call, on worker b", 90, || async {
        let log = std::fs::read_to_string(ctl.join(CALLS)).unwrap_or_default();
        log.lines()
            .any(|l| l.starts_with(&format!("{pid_b} ")))
            .then_some(())
    })
    .await?;
    std::fs::write(ctl.join(GO), "").map_err(|e| e.to_string())?;
    for run in [&q1, &q2] {
        let summary = super::outcome(&ingress, run, 120).await?;
        if summary.status != RunStatus::Completed {
            return Err(format!("run {run} ended {:?}", summary.status));
        }
    }
    let log = std::fs::read_to_string(dir.join("ctl").join(CALLS)).map_err(|e| e.to_string())?;
    let calls: Vec<(u32, u128)> = log
        .lines()
        .filter_map(|l| {
            let (pid, at) = l.split_once(' ')?;
            Some((pid.parse().ok()?, at.parse().ok()?))
        })
        .collect();
    let on = |pid: u32| calls.iter().filter(|(p, _)| *p == pid).count();
    let (pid_a, pid_b) = (a.child.id(), b.child.id());
    if calls.len() != 2 * CALLS_PER_RUN || on(pid_a) == 0 || on(pid_b) == 0 {
        return Err(format!(
            "expected {} calls, made by both workers (a: pid {pid_a}, b: pid {pid_b}):\n{log}",
            2 * CALLS_PER_RUN
        ));
    }
    // The runs overlapped: a call of one worker falls between two calls of the other.
    let mut order: Vec<(u128, u32)> = calls.iter().map(|(p, t)| (*t, *p)).collect();
    order.sort_unstable();
    let switches = order.windows(2).filter(|w| w[0].1 != w[1].1).count();
    if switches < 2 {
        return Err(format!(
            "the two runs did not overlap, so the test shows nothing:\n{log}"
        ));
    }
    // Together, one call a second: no two calls closer than half the interval (without the
    // shared quota, the two workers' calls come milliseconds apart), and the whole span at
    // least the intervals it holds (less that slack).
    let interval = 60_000 / u128::from(PER_MINUTE);
    let closest = order.windows(2).map(|w| w[1].0 - w[0].0).min().unwrap_or(0);
    let span = order.last().unwrap().0 - order[0].0;
    if closest < interval / 2 || span + interval / 2 < interval * (order.len() as u128 - 1) {
        return Err(format!(
            "the quota of one call every {interval} ms did not hold across the workers \
             (closest two calls {closest} ms apart, {} calls in {span} ms):\n{log}",
            order.len()
        ));
    }
    drop((a, b));
    Ok(format!(
        "restate: two workers, one quota of {PER_MINUTE}/min: {} calls, {switches} switches \
         between workers, closest two {closest} ms apart",
        order.len()
    ))
}
