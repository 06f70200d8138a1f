//! A governed team from its `loopward.toml`, embedded in a few lines: every concern the config
//! names (territories, gates, caps, the ledger) is on.
//!
//! Run it with `cargo run -p loopward-examples --example from_config`.
#![allow(clippy::print_stdout)]

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?; // the team works in a scratch copy of examples/team/
    for f in ["loopward.toml", "script.toml"] {
        std::fs::copy(
            format!("{}/team/{f}", env!("CARGO_MANIFEST_DIR")),
            dir.path().join(f),
        )?;
    }
    // The environment lookup finds API keys and loopward's state directory (the ledger key).
    let team = loopward::Team::from_config(dir.path().join("loopward.toml"))?
        .env(|k| std::env::var(k).ok());
    // The task is what the person at the keyboard asked for (only a `Person` makes their words).
    let task = loopward::core::Person::at_the_keyboard().says("Write a hello file under src/");
    let report = team.run(task).await?;
    println!(
        "{}: {} turns, last word: {}",
        report.status.label(),
        report.turns,
        report.final_text
    );
    Ok(())
}
