//! The demo's whole output, and the report over the runs it leaves (the code behind
//! `loopward report --json`), as snapshots; the interactive stop-gate on a real terminal pipe.
//! The demo is deterministic (fixed run ids, a fixed clock); only the scratch path varies.

use loopward_demo::demo::{self, Options};
use std::process::{Command, Output};
use support::play_with;

mod support;

fn play() -> (String, tempfile::TempDir) {
    play_with(Options {
        // Chapter 9 runs the demo binary as its stand-in coding agent and its hook.
        stand_in: Some(env!("CARGO_BIN_EXE_loopward-demo").into()),
        ..Options::default()
    })
}

#[test]
fn demo_output_and_report_json_are_computed_from_the_ledgers() {
    let (text, scratch) = play();
    // The lessons' figures, as a reader sees them.
    assert!(
        text.contains("advisory: root wrote plan.md itself in 3 runs out of 3"),
        "{text}"
    );
    assert!(
        text.contains(
            "enforced: 2 refusals, root routed the work to the planner; 0 unauthorised writes"
        ),
        "{text}"
    );
    assert!(text.contains("↪ handoff → planner"));
    assert!(text.contains("run ended: exhausted"));
    assert!(text.contains("Audit files: <scratch>/runs"));
    assert!(
        text.contains("sprawl at threshold 3 would have fired in 1 of 12 turns"),
        "{text}"
    );
    // Chapter 9: a loop over the stand-in coding agent, its figures from the loop's ledger
    // (the hook's decisions inside each session among them).
    assert!(
        text.contains("2 sessions; 1 completion claim refused by the verifier; inside the sessions the hook refused 1 write and let 1 through; the loop ended completed only when `verify` passed"),
        "{text}"
    );
    assert!(
        text.contains(
            "· Write plan.md → ✗ refused by territory:planner: plan.md belongs to planner"
        ),
        "{text}"
    );
    assert!(
        text.contains("4 sessions, 4 of them claiming done; 3 counted as repeats by evidence"),
        "{text}"
    );
    assert!(
        text.contains("run ended: cap_reached (no progress"),
        "{text}"
    );
    insta::assert_snapshot!("demo_output", text);

    // The loops' ledgers verify under the demo key: 2 loops, and no ledger of a session's own
    // (the hook's decisions are the loops').
    let loops = loopward::ledger::report(
        &demo::loop_runs_dir(scratch.path()),
        &demo::loop_verify_options(scratch.path()).unwrap(),
    )
    .unwrap();
    let loops: serde_json::Value = serde_json::from_str(&loops.to_json()).unwrap();
    assert_eq!(loops["runs"], 2, "{loops:#}");
    // The refusal inside session 2 is a gate decision of the loop's own ledger.
    assert_eq!(
        loops["gates"]["territory:planner"]["denied"], 1,
        "{loops:#}"
    );

    // The same code as `loopward report --json`.
    let report = loopward::ledger::report(
        &scratch.path().join("runs"),
        &demo::verify_options(scratch.path()).unwrap(),
    )
    .unwrap();
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["runs"], 12);
    insta::assert_json_snapshot!("demo_report_json", json);
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `loopward-demo` chapter 8 with the stop-gate asked on the terminal, answering `answer`.
fn demo_gate(answer: &str) -> String {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopward-demo"))
        .args(["--chapter", "8", "--gate", "interactive", "--dir"])
        .arg(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    text(&out)
}

#[test]
fn chapter_9_without_the_demo_binary_says_it_is_skipped() {
    let (text, scratch) = play_with(Options {
        chapters: vec![9],
        ..Options::default()
    });
    assert!(
        text.contains("Chapter 9 · A loop over a coding agent"),
        "{text}"
    );
    assert!(
        text.contains("skipped: this chapter runs the demo binary as its stand-in"),
        "{text}"
    );
    assert!(!demo::loop_runs_dir(scratch.path()).exists());
}

#[test]
fn demo_interactive_stop_gate_asks_on_the_terminal() {
    let yes = demo_gate("y\n");
    assert!(yes.contains("? approve once? [y/N] y\n"), "{yes}");
    assert!(yes.contains("stopgate: approved"), "{yes}");
    assert!(yes.contains("CHANGELOG.md published"), "{yes}");
    let no = demo_gate("n\n");
    assert!(no.contains("stopgate: denied"), "{no}");
    assert!(no.contains("run ended: stopped"), "{no}");
    assert!(no.contains("CHANGELOG.md not published"), "{no}");
}

#[test]
fn demo_pages_are_deterministic_snapshots() {
    let (_, scratch) = play();
    let runs = scratch.path().join("runs");
    for run in [
        "ch1-enforced",
        "ch2-override",
        "ch4-review",
        "ch7-anti-loop",
        "ch8-stop-gate",
    ] {
        let page = std::fs::read_to_string(runs.join(run).join("audit.html")).unwrap();
        insta::assert_snapshot!(format!("audit_html_{run}"), page);
    }
    let index =
        loopward::pages::render_index(&runs, &demo::verify_options(scratch.path()).unwrap())
            .unwrap();
    assert_eq!(index.matches("<tr class=\"run\"").count(), 12);
    insta::assert_snapshot!("index_html", index);
}
