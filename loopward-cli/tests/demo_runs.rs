//! The demo's twelve runs through the `loopward` binary: each verifies and replays to the same
//! decisions.

use loopward_demo::demo::{self, Options};
use loopward_term::render::Printer;
use std::process::Command;

fn play() -> tempfile::TempDir {
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
        out,
    ))
    .unwrap();
    scratch
}

#[test]
fn every_demo_run_verifies_and_replays_to_the_same_decisions() {
    let scratch = play();
    let runs = scratch.path().join("runs");
    // The demo chains its ledgers under its fixed key, kept as a file in its state folder.
    let key = std::fs::read_dir(runs.parent().unwrap().join("state/keys"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "key"))
        .unwrap();
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
                .arg("--key")
                .arg(&key)
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
