//! The demo's twelve runs through the `loopward` binary: each verifies and replays to the same
//! decisions.

use super::assert_says;
use loopward_demo::demo::Options;
use std::process::Command;

/// The demo played as its own tests play it.
#[path = "../../../loopward-demo/tests/support/mod.rs"]
mod demo_support;

fn play() -> tempfile::TempDir {
    demo_support::play_with(Options::default()).1
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

/// The demo's fixed ledger key, kept as a file in its state folder.
fn demo_key(scratch: &std::path::Path) -> std::path::PathBuf {
    std::fs::read_dir(scratch.join("state/keys"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "key"))
        .unwrap()
}

fn calibrate(args: &[&std::ffi::OsStr]) -> serde_json::Value {
    // The runs are keyed under the demo key: calibrate reads them with it.
    let runs = std::path::Path::new(args.last().unwrap());
    let scratch = runs
        .ancestors()
        .find(|a| a.join("state/keys").is_dir())
        .unwrap();
    crate::support::json_out(
        Command::new(env!("CARGO_BIN_EXE_loopward"))
            .arg("calibrate")
            .args(args)
            .arg("--key")
            .arg(demo_key(scratch))
            .arg("--json"),
    )
}

#[test]
fn calibrate_reproduces_each_demo_run_under_its_own_config_and_judges_a_stricter_one() {
    let scratch = play();
    let runs = scratch.path().join("runs");
    // Each run under the config it was recorded with: every refusal, stop and forced jump the
    // ledger recorded, the shadow judge makes again. Where it makes more, the ledger shows why:
    // a person's override (ch2-override), or an advisory chapter's warning.
    let mut reproduced = 0;
    for entry in std::fs::read_dir(&runs).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("events.jsonl").is_file() {
            continue;
        }
        let cfg = dir.join("loopward.toml");
        let r = calibrate(&[
            "--config".as_ref(),
            cfg.as_os_str(),
            "--current".as_ref(),
            cfg.as_os_str(),
            dir.as_os_str(),
        ]);
        assert_eq!(r["changed"], 0, "{}", dir.display());
        for (gate, g) in r["gates"].as_object().unwrap() {
            let fired = g["denied"].as_u64().unwrap() + g["warned"].as_u64().unwrap();
            let recorded = g["recorded_refusals"].as_u64().unwrap();
            assert!(fired >= recorded, "{} {gate}: {g}", dir.display());
            reproduced += recorded;
        }
    }
    assert_eq!(
        reproduced, 10,
        "the demo's recorded refusals, stops and jumps"
    );

    // A stricter candidate against the sprawl chapter's config, on all runs.
    let current = runs.join("ch3-sprawl").join("loopward.toml");
    let text = std::fs::read_to_string(&current).unwrap();
    let strict = scratch.path().join("strict.toml");
    std::fs::write(
        &strict,
        text.replace("threshold = 3", "threshold = 2").replace(
            "turns_per_run = 12",
            "turns_per_run = 2\nsteps_per_turn = 4",
        ) + "\n[[stopgate]]\npoint = \"tool\"\ntool = \"shell\"\nmode = \"interactive\"\n",
    )
    .unwrap();
    let r = calibrate(&[
        "--config".as_ref(),
        strict.as_os_str(),
        "--current".as_ref(),
        current.as_os_str(),
        "--html".as_ref(),
        runs.as_os_str(),
        runs.as_os_str(),
    ]);
    assert_eq!(r["sessions"], 12);
    let gate = |name: &str| r["gates"][name].clone();
    assert_eq!(gate("caps:turns_per_run")["turns_fired"], 1);
    assert_eq!(gate("caps:turns_per_run")["current_turns_fired"], 0);
    assert!(gate("stopgate:tool:shell")["denied"].as_u64().unwrap() > 0);
    assert_eq!(gate("sprawl")["turns_fired"], 1);
    assert!(r["changed"].as_u64().unwrap() > 0);
    // Every run verified under the demo key, none as a keyless chain.
    let by = r["verified_by"].as_object().unwrap();
    assert_eq!(by.len(), 1, "{by:?}");
    let (key, n) = by.iter().next().unwrap();
    assert!(key.starts_with("key k"), "{key}");
    assert_eq!(n, 12);
    // The same report in the runs' index page, after the runs.
    let page = std::fs::read_to_string(runs.join("index.html")).unwrap();
    let section = &page[page
        .find("id=\"calibration\"")
        .expect("calibration section")..];
    assert_says(section, "<td>stopgate:tool:shell</td>");
    assert!(section.contains("<td>caps:turns_per_run</td>"));
    assert!(
        section.contains(&format!("Ledgers verified by {key}: 12.")),
        "{section}"
    );
    assert!(section.contains("likely false positives"));
}
