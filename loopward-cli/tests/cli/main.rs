//! The `loopward` binary as a new user meets it: init → run → verify → report → replay, bad
//! config messages, exit codes, and `--help` everywhere; the README followed to the letter,
//! `policy explain|lint`, evidence and keys, the demo's runs, observability and the heartbeat.
//! One binary for the commands' own tests (one link on each change).

use std::path::Path;
use std::process::{Command, Output};

mod bad_config;
mod demo_runs;
mod evidence;
mod exit_status;
mod gates;
#[cfg(feature = "http")]
mod heartbeat_tty;
mod help;
mod ledger;
mod messages;
mod observe;
mod person;
mod policy;
mod readme_first_run;
mod resume;
mod run_output;
mod workspace;

#[path = "../support/mod.rs"]
mod support;
use support::{assert_says, loopward_cmd, text};

fn loopward(dir: &Path, args: &[&str]) -> Output {
    loopward_cmd(dir, args).output().unwrap()
}

fn initialised() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let o = loopward(dir.path(), &["init"]);
    assert!(o.status.success(), "{}", text(&o));
    dir
}

/// Edits the config, `loopward.toml`, in `d` with `edit`.
fn edit_config(d: &Path, edit: impl FnOnce(String) -> String) {
    let cfg = std::fs::read_to_string(d.join("loopward.toml")).unwrap();
    std::fs::write(d.join("loopward.toml"), edit(cfg)).unwrap();
}

/// The starter (`loopward init`) with its config edited by `edit`.
fn initialised_with(edit: impl FnOnce(String) -> String) -> tempfile::TempDir {
    let dir = initialised();
    edit_config(dir.path(), edit);
    dir
}

/// Appends `text` to the file `rel` in `d`.
fn append(d: &Path, rel: &str, text: &str) {
    let mut was = std::fs::read_to_string(d.join(rel)).unwrap();
    was.push_str(text);
    std::fs::write(d.join(rel), was).unwrap();
}

/// A durable stop-gate `name` at the start of `agent`'s turns, as a `loopward.toml` table: the
/// run waits there for `loopward approve`.
fn durable_gate(name: &str, agent: &str) -> String {
    format!("\n[[stopgate]]\nname = \"{name}\"\npoint = \"turn\"\nagent = \"{agent}\"\nmode = \"durable\"\n")
}

/// The starter with `extra` appended to its config, run with `script` (TOML) as the fake script.
fn run_with(extra: &str, script: &str, id: &str) -> (Output, tempfile::TempDir) {
    run_with_edit(extra, script, id, |c| c)
}

fn run_with_edit(
    extra: &str,
    script: &str,
    id: &str,
    edit: impl Fn(String) -> String,
) -> (Output, tempfile::TempDir) {
    let dir = initialised_with(|c| edit(c) + extra);
    let d = dir.path();
    std::fs::write(d.join("s.toml"), script).unwrap();
    let o = loopward(d, &["run", "--script", "s.toml", "--id", id]);
    (o, dir)
}
