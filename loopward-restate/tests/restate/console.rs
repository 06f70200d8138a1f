//! A run on Restate waiting at a stop-gate is answered from the console: `loopward serve
//! --restate` lists the wait beside the local ones, refuses what it must (no token, another
//! action than the one waiting, a replayed answer, a wait that is over) changing nothing, and
//! its Approve resolves the run's awakeable with no worker running; the run goes on on the next
//! worker and its ledger names who approved. A second run is denied in headless Chromium, on
//! the runs page at a phone's width.

use super::worker::Worker;
use loopward_core::{RunId, RunStatus};
use loopward_restate::ingress::Ingress;
use loopward_runner::audit::EVENTS_FILE;
use serde_json::Value;
use std::path::Path;

struct Console {
    base: String,
    token: String,
    http: reqwest::Client,
    /// The Restate server's ingress and admin API.
    restate: (String, String),
}

impl Console {
    async fn runs(&self) -> Result<Value, String> {
        let r = self
            .http
            .get(format!("{}/api/runs", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        r.json().await.map_err(|e| e.to_string())
    }

    /// The wait of `run` on Restate, as the console lists it.
    async fn waiting(&self, run: &str) -> Option<Value> {
        let runs = self.runs().await.ok()?;
        runs["runs"].as_array()?.iter().find(|r| r["run"] == run)?["waiting"]
            .as_array()?
            .iter()
            .find(|w| {
                w["on"]
                    .as_str()
                    .is_some_and(|o| o.starts_with("Restate at"))
            })
            .cloned()
    }

    /// POSTs an answer; returns the status and the JSON body.
    async fn answer(
        &self,
        id: &str,
        verb: &str,
        action: &str,
        by: &str,
        token: Option<&str>,
    ) -> Result<(u16, Value), String> {
        let mut req = self
            .http
            .post(format!("{}/gates/{id}/{verb}", self.base))
            .header("accept", "application/json")
            .form(&[("action", action), ("by", by)]);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.map_err(|e| e.to_string())?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }
}

fn expect(what: &str, got: (u16, Value), status: u16) -> Result<(), String> {
    if got.0 == status {
        Ok(())
    } else {
        Err(format!(
            "{what}: expected {status}, got {} {}",
            got.0, got.1
        ))
    }
}

pub(crate) async fn scenario(dir: &Path) -> Result<String, String> {
    for d in ["ws/out", "runs", "ctl"] {
        std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
    }
    // The console's workspace holds the runs the workers write; its state lies outside it.
    let state = tempfile::tempdir().map_err(|e| e.to_string())?;
    let config = dir.join("loopward.toml");
    std::fs::write(
        &config,
        format!(
            "[run]\nfirst = \"builder\"\nruns_dir = \"runs\"\n[state]\ndir = \"{}\"\n[[agent]]\nname = \"builder\"\ntools = []\n",
            state.path().display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let (server, restate, a, port) = super::toolgate::serve_gated(dir, "console-a").await?;
    let run = RunId::new("console-1").unwrap();
    super::toolgate::start(&restate, &run).await?;

    // `loopward serve --restate`, in this process.
    let console_port = super::server::free_port();
    let cli = <loopward_cli::cli::Cli as clap::Parser>::try_parse_from([
        "loopward",
        "serve",
        "--config",
        &config.display().to_string(),
        "--port",
        &console_port.to_string(),
        "--no-resume",
        "--restate",
        server.ingress.as_str(),
        "--restate-admin",
        server.admin.as_str(),
    ])
    .map_err(|e| e.to_string())?;
    let serving = tokio::spawn(loopward_cli::cli::dispatch(cli));
    let token_file = state.path().join("console/token");
    let token = super::wait_for("the console's token", 30, || async {
        std::fs::read_to_string(&token_file).ok()
    })
    .await?;
    let console = Console {
        base: format!("http://127.0.0.1:{console_port}"),
        token: token.trim().to_string(),
        http: reqwest::Client::new(),
        restate: (server.ingress.clone(), server.admin.clone()),
    };
    let shown = super::wait_for("the console to list the Restate run's wait", 120, || {
        console.waiting(run.as_str())
    })
    .await;
    let result = answer_from_the_console(dir, &console, &restate, &run, port, a, shown).await;
    serving.abort();
    result
}

async fn answer_from_the_console(
    dir: &Path,
    console: &Console,
    restate: &Ingress,
    run: &RunId,
    port: u16,
    a: Worker,
    shown: Result<Value, String>,
) -> Result<String, String> {
    let shown = shown?;
    let id = shown["id"].as_str().unwrap_or_default().to_string();
    let action = shown["action"].as_str().unwrap_or_default().to_string();
    if shown["gate"] != "shell-needs-a-person" || !action.starts_with("tool:shell:") {
        return Err(format!("the console shows {shown}"));
    }
    // No worker holds the run while the person thinks.
    a.kill();
    let token = Some(console.token.as_str());
    let wrong = "0".repeat(64);
    // Ana approves the action shown, with `token`.
    let approve = |token| console.answer(&id, "approve", &action, "ana", token);
    expect("an answer with no token", approve(None).await?, 401)?;
    expect(
        "an answer with a wrong token",
        approve(Some(&wrong)).await?,
        401,
    )?;
    expect(
        "an approval of another action",
        console
            .answer(&id, "approve", "tool:shell:0000", "ana", token)
            .await?,
        409,
    )?;
    let still = console.waiting(run.as_str()).await;
    if still.as_ref().is_none_or(|w| !w["answered"].is_null()) {
        return Err(format!("a refused answer changed the wait: {still:?}"));
    }
    expect("the approval", approve(token).await?, 200)?;
    let replay = approve(token).await?;
    let deny_after = console.answer(&id, "deny", &action, "bo", token).await?;
    expect("a replayed approval", replay.clone(), 409)?;
    expect("a deny after the approval", deny_after, 409)?;
    if !replay.1["error"]
        .as_str()
        .is_some_and(|e| e.contains("approved by ana (console)"))
    {
        return Err(format!(
            "the replay's refusal does not say what stands: {}",
            replay.1
        ));
    }
    // The verdict is Restate's now; the run still shows waiting until a worker takes it.
    let pending = restate.pending(run).await.map_err(|e| e.to_string())?;
    let Some(pending) = pending else {
        return Err("the approval was taken before any worker was up".into());
    };
    // A deny from elsewhere (`loopward deny --restate`) is refused too: Restate's journal holds
    // the first verdict (Restate itself would take a second one and ignore it).
    let cli = <loopward_cli::cli::Cli as clap::Parser>::try_parse_from([
        "loopward",
        "deny",
        run.as_str(),
        pending.gate.as_str(),
        "--restate",
        console.restate.0.as_str(),
        "--restate-admin",
        console.restate.1.as_str(),
        "--by",
        "someone late",
    ])
    .map_err(|e| e.to_string())?;
    match loopward_cli::cli::dispatch(cli).await {
        Err(e) if format!("{e:#}").contains("answered already") => {}
        other => {
            return Err(format!(
                "a late `loopward deny --restate` was not refused: {other:?}"
            ))
        }
    }
    let b = Worker::start_as("worker-gated", "console-b", dir, port)?;
    let summary = super::outcome(restate, run, 120).await?;
    if summary.status != RunStatus::Completed {
        return Err(format!("the run ended {:?}", summary.status));
    }
    let effects = dir.join("ws/out/effects.log");
    let text = std::fs::read_to_string(&effects).map_err(|e| format!("effects.log: {e}"))?;
    if text != "gated\n" {
        return Err(format!(
            "effects.log is {text:?}, expected the gated line once"
        ));
    }
    let approved = decisions(dir, run, "approved")?;
    if approved.len() != 1 || !approved[0].contains("ana (console)") {
        return Err(format!(
            "the ledger's approvals do not name the approver: {approved:?}"
        ));
    }
    // The wait is over: answering it again is refused, saying what stands.
    expect(
        "an approval after the run went on",
        approve(token).await?,
        409,
    )?;

    // Deny, the same way: a second run, its wait denied from the console.
    let second = RunId::new("console-2").unwrap();
    super::toolgate::start(restate, &second).await?;
    let w = super::wait_for("the second run's wait in the console", 120, || {
        console.waiting(second.as_str())
    })
    .await?;
    let (id2, action2) = (
        w["id"].as_str().unwrap_or_default(),
        w["action"].as_str().unwrap_or_default(),
    );
    if id2 == id {
        return Err("two waits share one console id".into());
    }
    // In a real browser at a phone's width: signed in with the link, Deny on the runs page.
    deny_in_a_browser(console, second.as_str(), id2, action2).await?;
    let summary2 = super::outcome(restate, &second, 120).await?;
    drop(b);
    if !matches!(&summary2.status, RunStatus::Stopped { reason } if reason.contains("denied by bo (console)"))
    {
        return Err(format!("the denied run ended {:?}", summary2.status));
    }
    let text = std::fs::read_to_string(&effects).map_err(|e| format!("effects.log: {e}"))?;
    if text != "gated\n" {
        return Err(format!("the denied command ran: effects.log is {text:?}"));
    }
    let denied = decisions(dir, &second, "denied")?;
    if denied.len() != 1 || !denied[0].contains("denied by bo (console)") {
        return Err(format!(
            "the ledger's denials do not name who denied: {denied:?}"
        ));
    }
    Ok(format!(
        "restate: approved from the console with no worker running, {} records, approver in the ledger; \
         refused no token, a wrong token, another action, a replay, a late CLI deny; a second run denied in Chromium and stopped",
        summary.records
    ))
}

/// Signs in with the token's link in headless Chromium, sees the wait `id` of `run` with its
/// exact `action`, denies it as `bo` on the runs page, and sees the run's page say so.
async fn deny_in_a_browser(
    console: &Console,
    run: &str,
    id: &str,
    action: &str,
) -> Result<(), String> {
    use super::browser::{answer, browser, until};
    let (_driver, c) = browser().await;
    let login = format!("{}/login?token={}", console.base, console.token);
    c.goto(&login).await.map_err(|e| e.to_string())?;
    let card =
        format!("const g = document.getElementById('gate-{id}'); return g ? g.dataset.run : null;");
    until(&c, &card, run).await;
    let shown = format!(
        "return document.getElementById('gate-{id}').querySelector('code.action').textContent;"
    );
    until(&c, &shown, action).await;
    answer(&c, run, "deny", "bo").await;
    let flash = "const f = document.querySelector('.flash'); return f ? f.textContent : null;";
    until(
        &c,
        flash,
        "Denied. The run is refused that action when it goes on.",
    )
    .await;
    let _ = c.close().await;
    Ok(())
}

/// The stop-gate decisions `what` (`approved`, `denied`) in the ledger of `run`, as lines.
fn decisions(dir: &Path, run: &RunId, what: &str) -> Result<Vec<String>, String> {
    let path = dir.join("runs").join(run.as_str()).join(EVENTS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter(|l| {
            l.contains("\"layer_decision\"")
                && l.contains("\"stopgate\"")
                && l.contains(&format!("\"{what}\""))
        })
        .map(str::to_string)
        .collect())
}
