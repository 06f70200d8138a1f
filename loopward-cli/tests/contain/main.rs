//! What an agent reads, sends and holds: secrets kept out of commands and masked in every
//! record, reads by allow-list, the environment by allow-list.

use std::path::Path;
use std::process::{Command, Output};

mod contain_cmd;
mod network;
mod reads;
mod sandbox_exec;
mod secrets;

#[path = "../support/mod.rs"]
mod support;
use support::{http_server, text};

const SECRET: &str = "s3cr3t-TOKEN-value-8842";

fn loopward(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_loopward"));
    cmd.args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        // Beside the project, outside its workspace.
        .env("XDG_STATE_HOME", state_of(dir))
        .env_remove("SECRET_TOKEN");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// `loopward run --id r1 --json` of `dir`, the secret in its environment: it ends completed;
/// what it printed on stdout.
fn run_json(dir: &Path) -> String {
    let run = loopward(
        dir,
        &["run", "--id", "r1", "--json"],
        &[("SECRET_TOKEN", SECRET)],
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    String::from_utf8_lossy(&run.stdout).into_owned()
}

/// `loopward run --id r1` of `dir`, the secret in its environment: refused at load (exit
/// status 1), saying each of `said`.
fn assert_refused_at_load(dir: &Path, said: &[&str]) {
    let run = loopward(dir, &["run", "--id", "r1"], &[("SECRET_TOKEN", SECRET)]);
    let out = text(&run);
    assert_eq!(run.status.code(), Some(1), "{out}");
    crate::support::assert_says_all(&out, said);
}

fn state_of(dir: &Path) -> std::path::PathBuf {
    let name = dir.file_name().unwrap().to_string_lossy();
    dir.with_file_name(format!("{name}-state"))
}

/// A project in a temporary folder; the state folder beside it (`state_of`) goes with it.
struct Project(tempfile::TempDir);

impl Project {
    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(state_of(self.0.path()));
    }
}

fn project(script: &str) -> Project {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("loopward.toml"),
        r#"
[run]
first = "builder"
task = "print the token"

[backend]
script = "script.toml"

[[agent]]
name = "builder"
tools = ["shell"]

[secrets.SECRET_TOKEN]
env = "SECRET_TOKEN"
hosts = ["deploy.example.com"]
"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("script.toml"), script).unwrap();
    Project(dir)
}

/// Every file below `dir`, with its bytes.
fn files(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out
}

fn holds(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

fn with_net(dir: &Path, net: &str, extra: &str) {
    let cfg = dir.join("loopward.toml");
    let text_cfg = std::fs::read_to_string(&cfg).unwrap().replace(
        "tools = [\"shell\"]",
        &format!("tools = [\"shell\"]\nnet = {net}"),
    );
    std::fs::write(&cfg, format!("{text_cfg}\n{extra}")).unwrap();
}

/// `loopward contain` in `dir`, with a home of the test's own holding an SSH key.
fn contain(dir: &Path, home: &Path, args: &[&str]) -> Output {
    let mut all = vec!["contain", "--agent", "builder", "--id", "s1", "--"];
    all.extend_from_slice(args);
    let home = home.to_str().unwrap();
    loopward(
        dir,
        &all,
        &[
            ("SECRET_TOKEN", SECRET),
            ("OPENAI_API_KEY", "sk-user-key-that-must-stay-out"),
            ("HOME", home),
        ],
    )
}
