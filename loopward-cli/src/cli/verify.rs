//! `loopward verify <run-dir>`: checks a run's ledger, strictly: its key, every record, and
//! every anchor it has; or every run under a runs folder.

use super::state::{verify_options, CheckArgs};
use anyhow::Result;
use loopward::config::CONFIG_FILE;
use loopward_runner::audit::{read_index, verify, verify_all, VerifyError, VerifyOk, EVENTS_FILE};
use loopward_term::render::{Printer, Tone};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Check that a run's ledger is intact, keyed and anchored.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward verify runs/run-20261130T052616Z-123
  loopward verify runs                       # every run, and anchored runs whose folder is gone
  loopward verify runs/*                     # each run folder given (runs/index.* are skipped)
  loopward verify runs/r1 --key /media/usb/k0123456789abcdef.key --witness /mnt/log/anchors.jsonl
  loopward verify runs/r1 --unfinished       # a run still going

A run verifies when its ledger is chained under a key this machine holds (the state directory's,
or --key), every record checks, and every anchor it has in runs/index.jsonl matches. A keyless
ledger, a run with no anchor, records after the last anchor or an anchored run whose folder is
gone are NOT verified unless --allow-keyless / --unfinished say so. docs/ledger.md says what
each level proves.

Exit status: 0 verified; 1 not verified (what is wrong is named, with the first bad sequence
number), or no run folder there.")]
pub struct Args {
    /// Run folders (each holding events.jsonl), or runs folders (every run in each); the runs
    /// folder's own index files, as a shell's `runs/*` lists them, are skipped.
    #[arg(required = true, value_name = "RUN_DIR")]
    pub run_dirs: Vec<PathBuf>,
    /// The config file: its state directory holds the keys (default: the workspace holding the
    /// runs folder).
    #[arg(long, default_value = CONFIG_FILE)]
    pub config: PathBuf,
    /// What is accepted, and the keys and witness to check with.
    #[command(flatten)]
    pub check: CheckArgs,
}

pub(super) fn run(args: &Args) -> Result<ExitCode> {
    let mut out = Printer::stdout();
    let mut code = ExitCode::SUCCESS;
    for path in &args.run_dirs {
        if is_index_file(path) {
            out.line(
                Tone::Plain,
                format!(
                    "{}: the runs folder's index, checked with each run's anchors (skipped)",
                    path.display()
                ),
            );
            continue;
        }
        if verify_path(&mut out, args, path)? != ExitCode::SUCCESS {
            code = ExitCode::FAILURE;
        }
    }
    Ok(code)
}

/// A runs folder's own file (`index.jsonl`, `index.html`…), as `runs/*` expands to.
fn is_index_file(path: &Path) -> bool {
    path.is_file()
        && path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("index."))
}

fn verify_path(out: &mut Printer<std::io::Stdout>, args: &Args, path: &Path) -> Result<ExitCode> {
    let one = path.join(EVENTS_FILE).is_file();
    let runs_dir = if one {
        path.canonicalize()?
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    } else {
        path.to_path_buf()
    };
    if !one && !path.is_dir() {
        return gone(out, args, path);
    }
    let opts = verify_options(&args.config, &runs_dir, &args.check)?;
    if one {
        let result = verify(path, &opts);
        let name = path
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| path.display().to_string());
        return Ok(say(out, &name, &result));
    }
    let all = verify_all(path, &opts)?;
    if all.is_empty() {
        out.line(
            Tone::Refusal,
            format!(
                "no run folder at {} (no folder with an {EVENTS_FILE} in it, and no anchored run)",
                path.display()
            ),
        );
        return Ok(ExitCode::FAILURE);
    }
    let mut code = ExitCode::SUCCESS;
    for v in &all {
        if say(out, &v.run, &v.result) != ExitCode::SUCCESS {
            code = ExitCode::FAILURE;
        }
    }
    Ok(code)
}

/// The folder is not there: an anchored run whose folder is gone is not verified; anything
/// else is just not a run folder.
fn gone(out: &mut Printer<std::io::Stdout>, args: &Args, path: &Path) -> Result<ExitCode> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let runs_dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if let (Some(name), true) = (&name, runs_dir.is_dir()) {
        let opts = verify_options(&args.config, runs_dir, &args.check)?;
        if let Ok(index) = read_index(runs_dir, &opts.keys, true) {
            if let Some(e) = index.iter().rev().find(|e| &e.anchor.run == name) {
                let err = VerifyError::FolderGone {
                    path: path.to_path_buf(),
                    run: name.clone(),
                    line: e.seq,
                };
                out.line(Tone::Refusal, format!("NOT verified: {err}"));
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    out.line(
        Tone::Refusal,
        format!(
            "no run folder at {}: give a run's folder (runs/<run-id>, holding {EVENTS_FILE}) or a runs folder",
            path.display()
        ),
    );
    Ok(ExitCode::FAILURE)
}

fn say(
    out: &mut Printer<std::io::Stdout>,
    run: &str,
    result: &Result<VerifyOk, VerifyError>,
) -> ExitCode {
    match result {
        Ok(ok) => {
            out.line(
                Tone::Ok,
                format!("{run}: verified by {} — {}", by(ok), detail(ok)),
            );
            if ok.key.is_none() {
                out.line(
                    Tone::Warn,
                    "  KEYLESS (accepted with --allow-keyless): it proves only that nobody edited the ledger carelessly; anyone who can write the file can rewrite it",
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            out.line(Tone::Refusal, format!("{run}: NOT verified: {e}"));
            if let Some(seq) = e.first_bad_seq() {
                out.line(Tone::Plain, format!("  first bad sequence number: {seq}"));
            }
            ExitCode::FAILURE
        }
    }
}

fn by(ok: &VerifyOk) -> String {
    ok.verified_by()
}

fn detail(ok: &VerifyOk) -> String {
    let anchor = if ok.anchored {
        format!(
            "anchored in index.jsonl ({} anchor{} checked)",
            ok.anchors,
            if ok.anchors == 1 { "" } else { "s" }
        )
    } else {
        "NOT anchored (accepted with --unfinished: truncation cannot be ruled out)".into()
    };
    let mut parts = vec![
        format!("{} records", ok.final_seq),
        format!("final hash {}", ok.final_hash),
        anchor,
    ];
    if ok.head_checked {
        parts.push("index head checked".into());
    }
    if ok.witnessed {
        parts.push("witnessed".into());
    }
    parts.join(", ")
}
