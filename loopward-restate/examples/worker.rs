//! A Restate worker serving the team of a `loopward.toml`: each run is a `LoopwardRun` workflow.
//!
//! ```sh
//! cargo run -p loopward-restate --example worker -- loopward.toml 127.0.0.1:9080 [openai=500]
//! ```
//!
//! Start as many as you like behind one address and register that address with Restate once.
//! With `<provider>=<calls-per-minute>`, the model calls of all of them together are held to
//! that rate (a `LoopwardQuota` virtual object keyed by the provider; give every worker the same).

#![allow(clippy::print_stdout)]

use anyhow::{bail, Context, Result};
use loopward_restate::{LoopwardRunService, ProviderQuota, Restate, SharedQuota};
use restate_sdk::prelude::{Endpoint, HttpServer};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (config, listen, quota) = match args.as_slice() {
        [config, listen] => (config, listen, None),
        [config, listen, quota] => {
            let Some((provider, rate)) = quota.split_once('=') else {
                bail!("the quota {quota:?} is not <provider>=<calls-per-minute> (e.g. openai=500)");
            };
            let rate = rate.parse().with_context(|| {
                format!("the quota's rate {rate:?} is not a number of calls a minute")
            })?;
            (config, listen, Some(SharedQuota::new(provider, rate)?))
        }
        _ => bail!("usage: worker <loopward.toml> <HOST:PORT> [<provider>=<calls-per-minute>]"),
    };
    let team = loopward::Team::from_config(config)?.env(|name| std::env::var(name).ok());
    // The ledgers are keyed as `loopward run` keys them: every worker must see the same state
    // directory (set [state] dir in the config when they run on different machines).
    let custody = team.find_custody()?.context(
        "no state directory for the ledger key: set $XDG_STATE_HOME or $HOME, or [state] dir in the config",
    )?;
    let workspace = team.config().workspace_dir(config.as_ref());
    let runs = workspace.join(&team.config().run.runs_dir);
    let runner = match quota {
        Some(q) => team.durable(Arc::new(Restate.with_quota(q))).build()?,
        None => team.durable(Arc::new(Restate)).build()?,
    };
    let service = LoopwardRunService::keyed(runner, &runs, custody);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    println!(
        "serving LoopwardRun on {listen} (ledgers in {}); register it: \
         curl -X POST http://127.0.0.1:9070/deployments -H 'content-type: application/json' -d '{{\"uri\": \"http://{listen}\"}}'",
        runs.display()
    );
    let endpoint = Endpoint::builder()
        .bind(service)
        .bind(ProviderQuota::default())
        .build();
    HttpServer::new(endpoint).serve(listener).await;
    Ok(())
}
