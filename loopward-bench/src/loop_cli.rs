//! Part 8: loopward's own cost per session of a loop over a CLI agent.
//!
//! The subject is a loop of N sessions ([`CliAgent`] in a [`Runner`], audited to a ledger on
//! disk): each session starts a scripted stand-in client (a shell script that prints a session's
//! `stream-json` and changes one file) and then the verifier (`test -f done.txt`, in the
//! Landlock sandbox), the last session making the verifier pass. Each session's time is taken
//! between the runner's turn observations. The baseline, interleaved round by round, does what
//! no loop can skip: the same script started bare and read to its end, then the same verifier
//! command started bare. What is left is loopward's: settings file, process group, stream
//! parsing, the ledger records and their syncs, the two workspace fingerprints, the sandbox
//! planning, the judgement.

use crate::harness::{elapsed_ns, runtime, Effort, Stats};
use crate::report::{fmt_ns, Section, Target};
use anyhow::{Context as _, Result};
use loopward_core::{AgentId, Person, RunId};
use loopward_runner::audit::{Ledger, LedgerOptions};
use loopward_runner::cli_agent::{ClaudeCode, CliAgent, Verifier, CLAUDE_CODE_VERSION};
use loopward_runner::gates::ControlFiles;
use loopward_runner::sandbox::Protected;
use loopward_runner::{BoxTurnService, RunSpec, Runner, Workspace};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The target: loopward's own cost per session, median.
pub const TARGET_NS: f64 = 50e6;

/// The stand-in client: a session's stream, one changed file, `done.txt` at session `$LAST`.
const FAKE: &str = r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "VERSION (Claude Code)"; exit 0; fi
n=$(cat "$STATE/count" 2>/dev/null || echo 0)
echo $((n + 1)) > "$STATE/count"
echo "$n" > progress.txt
[ "$n" -ge "$LAST" ] && echo yes > done.txt
cat "$STATE/stream.jsonl"
"#;

fn stream() -> String {
    [
        json!({"type":"system","subtype":"init","session_id":"s","model":"claude-test"}),
        json!({"type":"assistant","message":{"id":"msg_1","model":"claude-test",
            "content":[{"type":"text","text":"working"}],"usage":{"input_tokens":10,"output_tokens":2}}}),
        json!({"type":"result","subtype":"success","is_error":false,"result":"done",
            "num_turns":1,"total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":2}}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect()
}

/// A workspace (with `files` files of 1 KiB beside the loop's), the stand-in and its state.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    program: PathBuf,
}

impl Fixture {
    fn new(files: usize) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("ws");
        let state = dir.path().join("state");
        std::fs::create_dir_all(root.join("src"))?;
        std::fs::create_dir_all(&state)?;
        for i in 0..files {
            std::fs::write(root.join(format!("src/f{i}.txt")), vec![b'x'; 1024])?;
        }
        std::fs::write(state.join("stream.jsonl"), stream())?;
        let program = dir.path().join("claude");
        std::fs::write(&program, FAKE.replace("VERSION", CLAUDE_CODE_VERSION))?;
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )?;
        Ok(Self {
            root: root.canonicalize()?,
            _dir: dir,
            state,
            program,
        })
    }

    fn reset(&self) -> Result<()> {
        for p in [self.state.join("count"), self.root.join("done.txt")] {
            match std::fs::remove_file(p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }

    /// One loop of `n` sessions; the time of each session.
    async fn subject(&self, n: u32, round: usize) -> Result<Vec<u64>> {
        self.reset()?;
        let ws = Workspace::new(&self.root)?;
        let host = ClaudeCode {
            program: self.program.clone(),
            hook: loopward_runner::cli_agent::HookCommand::new("true", [""; 0]),
            args: vec![],
            env: vec![
                ("STATE".into(), self.state.clone().into()),
                ("LAST".into(), (n - 1).to_string().into()),
            ],
        };
        let protected = Protected::new(ControlFiles::default().resolved(&ws), vec![]);
        let verifier = Verifier::new("test -f done.txt", Duration::from_secs(30), protected);
        let a = AgentId::new("coder").context("agent")?;
        let agent =
            CliAgent::builder(a.clone(), host, verifier, self.state.join("scratch")).build();
        let runner = Runner::builder(ws)
            .max_turns(n + 1)
            .agent(a.clone(), BoxTurnService::new(agent))?
            .build()?;
        let runs = self.state.join("runs");
        let id = RunId::new(format!("loop-{n}-{round}")).context("run id")?;
        let ledger = Ledger::create(&runs, &id, LedgerOptions::default())?;
        let mut times = Vec::with_capacity(n as usize);
        let mut last = Instant::now();
        let report = runner
            .run_observed(
                RunSpec::new(
                    id,
                    Person::at_the_keyboard().says("write done.txt"),
                    a,
                    ledger.clone(),
                ),
                |_| {
                    times.push(elapsed_ns(last));
                    last = Instant::now();
                },
            )
            .await;
        ledger.finish()?;
        anyhow::ensure!(
            report.status == loopward_core::RunStatus::Completed && times.len() == n as usize,
            "the loop ended {:?} after {} sessions",
            report.status,
            times.len()
        );
        Ok(times)
    }

    /// What a session costs without loopward: the script and the verifier, started bare.
    async fn baseline(&self, n: u32) -> Result<Vec<u64>> {
        self.reset()?;
        let mut times = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let start = Instant::now();
            let out = tokio::process::Command::new(&self.program)
                .args(["-p", "write done.txt"])
                .env("STATE", &self.state)
                .env("LAST", (n - 1).to_string())
                .current_dir(&self.root)
                .output()
                .await?;
            anyhow::ensure!(out.status.success(), "the stand-in failed");
            tokio::process::Command::new("sh")
                .args(["-c", "test -f done.txt"])
                .current_dir(&self.root)
                .status()
                .await?;
            times.push(elapsed_ns(start));
        }
        Ok(times)
    }
}

/// One configuration: sessions per loop, files in the workspace.
struct Case {
    sessions: u32,
    files: usize,
}

/// Runs part 9.
pub fn run(effort: Effort) -> Result<Section> {
    let rounds = effort.pick(5, 1);
    let cases = [
        Case {
            sessions: 10,
            files: 0,
        },
        Case {
            sessions: 100,
            files: 0,
        },
        Case {
            sessions: 10,
            files: 1_000,
        },
    ];
    let rt = runtime()?;
    let mut rows = vec![];
    let mut data = vec![];
    let mut headline = None;
    for c in &cases {
        let fx = Fixture::new(c.files)?;
        let (mut s, mut b) = (vec![], vec![]);
        rt.block_on(async {
            for round in 0..rounds {
                s.extend(fx.subject(c.sessions, round).await?);
                b.extend(fx.baseline(c.sessions).await?);
            }
            anyhow::Ok(())
        })?;
        let (s, b) = (Stats::from_samples(&mut s), Stats::from_samples(&mut b));
        let own = (s.median_ns - b.median_ns).max(0.0);
        headline.get_or_insert(own);
        rows.push(vec![
            format!("{} sessions, {} extra files", c.sessions, c.files),
            fmt_ns(s.median_ns),
            fmt_ns(b.median_ns),
            fmt_ns(own),
            format!("{:.0} %", 100.0 * own / s.median_ns.max(1.0)),
            fmt_ns(s.p99_ns),
        ]);
        data.push(
            json!({"sessions": c.sessions, "files": c.files, "subject": s, "baseline": b,
                         "own_ns": own}),
        );
    }
    let own10 = headline.unwrap_or(f64::NAN);
    let per = |i: usize| data[i]["subject"]["median_ns"].as_f64().unwrap_or(f64::NAN);
    let proportional = per(1) / per(0);
    Ok(Section {
        part: 9,
        title: "Loop over a CLI agent".into(),
        method: format!(
            "Per session of a loop over a scripted stand-in client (`CliAgent` in a `Runner`, a \
             ledger on disk, the verifier in the Landlock sandbox) against the same script and \
             verifier command started bare; medians over {rounds} round(s) of each loop, \
             interleaved. `own` is the difference of the medians."
        ),
        columns: ["loop", "session", "bare", "own", "own share", "session p99"]
            .map(String::from)
            .to_vec(),
        rows,
        targets: vec![
            Target::at_most(
                "loopward's own cost per session (10 sessions, small workspace)",
                own10,
                TARGET_NS,
                fmt_ns,
            ),
            Target::met_if(
                "session time at 100 sessions against 10 (proportional)",
                "≤ 1.5",
                format!("{proportional:.2}"),
                proportional <= 1.5,
            ),
        ],
        notes: vec![
            "The workspace fingerprint (taken before and after each session) reads every file \
             outside `.git`, `target`, `runs`, `.loopward` and `node_modules`: its cost grows with \
             the workspace, as the 1,000-file row shows."
                .into(),
        ],
        data: json!(data),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quick_run_measures_every_case() {
        let section = run(Effort::Quick).unwrap();
        assert_eq!(section.rows.len(), 3);
        assert_eq!(section.targets.len(), 2);
    }

    #[test]
    fn the_stand_in_speaks_the_parsed_stream() {
        let mut p = loopward_runner::cli_agent::StreamParser::new();
        let mut n = 0;
        for l in stream().lines() {
            n += p.line(l).unwrap().len();
        }
        assert_eq!(n + usize::from(p.finish().is_some()), 3);
    }
}
