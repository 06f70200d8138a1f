//! The ledger as a user checks it: the round trip, `verify` and `replay` finding what changed.

use super::*;

#[test]
fn init_run_verify_report_replay_round_trip() {
    let dir = initialised();
    let d = dir.path();
    let run = loopward(d, &["run", "--id", "r1"]);
    let out = text(&run);
    assert_eq!(run.status.code(), Some(0), "{out}");
    crate::support::assert_says_all(
        &out,
        &[
            "turn 1 · root",
            "↪ handoff → planner",
            "✓ wrote plan.md",
            "✓ wrote src/hello.txt",
            "↪ handoff → auditor",
            "completed: 4 turns, 3 handoffs",
        ],
    );
    crate::support::assert_file(d, "src/hello.txt", "hello\n");

    let verify = loopward(d, &["verify", "runs/r1"]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
    crate::support::assert_prints(&verify, "r1: verified by key k");

    let report = loopward(d, &["report", "--json"]);
    assert!(report.status.success(), "{}", text(&report));
    let json: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(json["runs"], 1);
    assert_eq!(json["statuses"]["completed"], 1);
    assert_eq!(json["unauthorised_writes"]["total"], 0);
    let table = loopward(d, &["report"]);
    crate::support::assert_prints(&table, "territory:planner");

    let html = loopward(d, &["report", "--html"]);
    crate::support::assert_prints(&html, "wrote runs/index.html");
    let index = std::fs::read_to_string(d.join("runs/index.html")).unwrap();
    assert!(index.contains("href=\"r1/audit.html\""));
    assert!(d.join("runs/r1/audit.html").is_file());

    let replay = loopward(d, &["replay", "runs/r1"]);
    assert_eq!(replay.status.code(), Some(0), "{}", text(&replay));
    assert!(text(&replay).contains("all the same"));
}

#[test]
fn verify_names_the_first_bad_record_of_an_edited_ledger() {
    let dir = initialised();
    let d = dir.path();
    assert!(loopward(d, &["run", "--id", "r1"]).status.success());
    let ledger = d.join("runs/r1/events.jsonl");
    let edited =
        std::fs::read_to_string(&ledger)
            .unwrap()
            .replacen("src/hello.txt", "src/hellO.txt", 1);
    std::fs::write(&ledger, edited).unwrap();
    let o = loopward(d, &["verify", "runs/r1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "first bad sequence number");
}

#[test]
fn replay_fails_when_a_decision_comes_out_differently() {
    let dir = initialised();
    let d = dir.path();
    assert!(loopward(d, &["run", "--id", "r1"]).status.success());
    // The same recorded outputs under a config where plan.md belongs to the builder instead.
    let cfg = std::fs::read_to_string(d.join("runs/r1/loopward.toml"))
        .unwrap()
        .replace(
            "paths = [\"plan.md\", \"plans/**\"]\nowner = \"planner\"",
            "paths = [\"plan.md\", \"plans/**\"]\nowner = \"builder\"",
        );
    std::fs::write(d.join("other.toml"), cfg).unwrap();
    let o = loopward(d, &["replay", "runs/r1", "--config", "other.toml"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "differs");
}

#[test]
fn the_run_banner_names_the_backend_actually_used() {
    let dir = initialised_with(|c| c.replace("kind = \"fake\"", "kind = \"llama\""));
    let d = dir.path();
    let o = loopward(d, &["run", "--backend", "fake", "--id", "b1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    crate::support::assert_prints(&o, "run b1 · fake");
}

#[test]
fn the_summary_of_a_stopped_run_agrees_with_report() {
    // A turn gate that denies the auditor: the run stops after the builder's handoff.
    let (o, dir) = run_with(
        "\n[[stopgate]]\nname = \"no-audit\"\npoint = \"turn\"\nagent = \"auditor\"\nmode = \"deny\"\n",
        &std::fs::read_to_string(initialised().path().join("loopward.script.toml")).unwrap(),
        "stop",
    );
    assert_eq!(o.status.code(), Some(6), "{}", text(&o));
    let t = text(&o);
    let summary = t
        .lines()
        .find(|l| l.starts_with("stopped: "))
        .unwrap_or_else(|| panic!("no summary in {t}"));
    let report = loopward(dir.path(), &["report", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let row = &json["per_run"][0];
    let expected = format!(
        "stopped: {} turns, {} handoffs, {} tokens",
        row["turns"], row["handoffs"], row["tokens"]
    );
    assert_eq!(summary, expected, "{t}");
    // The auditor never ran: no words under its name.
    assert!(!t.contains("auditor: "), "{t}");
}

/// `loopward verify runs/*`, as a shell expands it: every run folder is verified, and the runs
/// folder's own index files are skipped, not refused as a usage error.
#[test]
fn verify_takes_what_a_shell_glob_of_runs_gives() {
    let dir = initialised();
    let d = dir.path();
    for id in ["r1", "r2"] {
        let run = loopward(d, &["run", "--id", id]);
        assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    }
    assert!(loopward(d, &["report", "--html"]).status.success());
    let mut glob: Vec<String> = std::fs::read_dir(d.join("runs"))
        .unwrap()
        .map(|e| format!("runs/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    glob.sort();
    assert!(glob.iter().any(|g| g == "runs/index.jsonl"), "{glob:?}");
    let args: Vec<&str> = ["verify"]
        .into_iter()
        .chain(glob.iter().map(String::as_str))
        .collect();
    let o = loopward(d, &args);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("r1: verified") && t.contains("r2: verified"),
        "{t}"
    );
    assert_says(&t, "runs/index.jsonl: the runs folder's index");
    // One bad run among them fails the whole, and names it.
    std::fs::remove_file(d.join("runs/r2/events.jsonl")).unwrap();
    let o = loopward(d, &args);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "r1: verified");
}
