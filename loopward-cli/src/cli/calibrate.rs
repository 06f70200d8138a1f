//! `loopward calibrate --config <candidate.toml> <sources…>`: how often the candidate's gates
//! would have fired on recorded history (loopward ledgers, Claude Code transcripts), in shadow
//! mode: nothing is executed and nothing is written but the report.

use anyhow::{Context, Result};
use loopward::config::Config;
use loopward_calibrate::{render_index_with_calibration, Calibrator};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Re-judges recorded history with a candidate config, before it is enforced.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward calibrate --config candidate.toml runs
  loopward calibrate --config candidate.toml ~/.claude/projects/my-project --json
  loopward calibrate --config candidate.toml --current loopward.toml runs --html runs")]
pub struct Args {
    /// The candidate config (a loopward.toml with the gates to try; required).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The config in force, to say what would change (default: ./loopward.toml when present).
    #[arg(long)]
    pub current: Option<PathBuf>,
    /// The name Claude Code's main agent goes by in territories.
    #[arg(long, default_value = "root")]
    pub main_agent: String,
    /// A ledger key file to verify keyed ledgers with (repeatable: old keys too). Keyless
    /// ledgers are read as well, and counted as such in the report.
    #[arg(long, value_name = "FILE")]
    pub key: Vec<PathBuf>,
    /// Print stable JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write DIR/index.html: the runs of DIR with this report after them.
    #[arg(long, value_name = "DIR")]
    pub html: Option<PathBuf>,
    /// Sources: a runs/ folder, a run's folder, Claude Code transcripts (*.jsonl) or folders of
    /// them (`~/.claude/projects/<project>`).
    #[arg(required = true)]
    pub sources: Vec<PathBuf>,
}

pub(super) fn run(args: &Args) -> Result<ExitCode> {
    let candidate_path = args.config.as_ref().context(
        "calibrate needs the candidate config: pass --config <candidate.toml> (a loopward.toml with the gates to try)",
    )?;
    let candidate = Config::load(candidate_path)?;
    let current_path = args.current.clone().or_else(|| {
        let p = PathBuf::from("loopward.toml");
        p.is_file().then_some(p)
    });
    let current = current_path.as_ref().map(|p| Config::load(p)).transpose()?;
    // Keyed ledgers are read with the keys of the state directory (of ./loopward.toml, or of
    // the workspace holding the first source) and the --key files.
    let verify = super::state::history_options(
        current_path
            .as_deref()
            .unwrap_or(std::path::Path::new("loopward.toml")),
        args.sources
            .first()
            .map_or(std::path::Path::new("runs"), |s| s.as_path()),
        &args.key,
    )?;
    let started = Instant::now();
    let mut cal = Calibrator::new(
        &candidate.policy(),
        current.as_ref().map(Config::policy).as_ref(),
        &args.main_agent,
    )
    .and_then(|c| {
        c.with_layers(
            &candidate.layers(),
            current.as_ref().map(Config::layers).as_ref(),
        )
    })
    .with_context(|| candidate_path.display().to_string())?
    .with_verify(verify.clone());
    for s in &args.sources {
        cal.add_path(s)?;
    }
    let report = cal.finish();
    let took = started.elapsed();
    let mut out = loopward_term::render::Printer::stdout();
    if args.json {
        out.block(loopward_term::render::Tone::Plain, &report.to_json());
    } else {
        out.block(loopward_term::render::Tone::Plain, &report.to_table());
        out.line(
            loopward_term::render::Tone::Dim,
            format!(
                "{} action(s) ({} record(s)) in {} session(s) re-judged in {:.2} s ({:.0} actions/s, {:.0} records/s){}",
                report.actions,
                report.records,
                report.sessions,
                took.as_secs_f64(),
                report.actions as f64 / took.as_secs_f64().max(1e-9),
                report.records as f64 / took.as_secs_f64().max(1e-9),
                current_path.map_or_else(String::new, |p| format!(
                    "; current config: {}",
                    p.display()
                ))
            ),
        );
    }
    if let Some(dir) = &args.html {
        let page = render_index_with_calibration(dir, &verify, &report)?;
        let path = dir.join("index.html");
        std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
        if !args.json {
            out.line(
                loopward_term::render::Tone::Dim,
                format!("wrote {}", path.display()),
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
