//! A Restate worker serving the team of a `loopward.toml`: each run is a `LoopwardRun` workflow.
//!
//! ```sh
//! cargo run -p loopward-restate --example worker -- loopward.toml 127.0.0.1:9080
//! ```
//!
//! Start as many as you like behind one address and register that address with Restate once.

#![allow(clippy::print_stdout)]

use anyhow::{bail, Context, Result};
use loopward_restate::{LoopwardRunService, Restate};
use loopward_runner::audit::LedgerOptions;
use restate_sdk::prelude::{Endpoint, HttpServer};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [config, listen] = args.as_slice() else {
        bail!("usage: worker <loopward.toml> <HOST:PORT>");
    };
    let team = loopward::Team::from_config(config)?;
    let workspace = team.config().workspace_dir(config.as_ref());
    let runs = workspace.join(&team.config().run.runs_dir);
    let runner = team.durable(Arc::new(Restate)).build()?;
    let service = LoopwardRunService::new(runner, &runs, LedgerOptions::default());
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    println!(
        "serving LoopwardRun on {listen} (ledgers in {}); register it: \
         curl -X POST http://127.0.0.1:9070/deployments -H 'content-type: application/json' -d '{{\"uri\": \"http://{listen}\"}}'",
        runs.display()
    );
    HttpServer::new(Endpoint::builder().bind(service).build())
        .serve(listener)
        .await;
    Ok(())
}
