//! The demo's whole output, and `loopward report --json` over the runs it leaves, as snapshots.
//! The demo is deterministic (fixed run ids, a fixed clock); only the scratch path varies.

use loopward_demo::demo::{self, Options};
use loopward_demo::render::Printer;
use std::process::Command;

fn play() -> (String, tempfile::TempDir) {
    let scratch = tempfile::tempdir().unwrap();
    let out = demo::shared(Printer::plain(Vec::new()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(demo::run(
        Options {
            dir: Some(scratch.path().to_path_buf()),
            ..Options::default()
        },
        out.clone(),
    ))
    .unwrap();
    let bytes = out.lock().unwrap().get_ref().clone();
    let text = String::from_utf8(bytes)
        .unwrap()
        .replace(&scratch.path().display().to_string(), "<scratch>");
    (text, scratch)
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
    insta::assert_snapshot!("demo_output", text);

    let report = Command::new(env!("CARGO_BIN_EXE_loopward"))
        .arg("report")
        .arg(scratch.path().join("runs"))
        .arg("--json")
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");
    let json: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(json["runs"], 12);
    insta::assert_json_snapshot!("demo_report_json", json);
}

#[test]
fn every_demo_run_verifies_and_replays_to_the_same_decisions() {
    let (_, scratch) = play();
    let runs = scratch.path().join("runs");
    let mut n = 0;
    for entry in std::fs::read_dir(&runs).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("events.jsonl").is_file() {
            continue;
        }
        n += 1;
        for cmd in ["verify", "replay"] {
            let out = Command::new(env!("CARGO_BIN_EXE_loopward"))
                .arg(cmd)
                .arg(&dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{cmd} {}: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
    assert_eq!(n, 12);
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
    let index = loopward_runner::audit::render_index(&runs, None).unwrap();
    assert_eq!(index.matches("<tr class=\"run\"").count(), 12);
    insta::assert_snapshot!("index_html", index);
}
