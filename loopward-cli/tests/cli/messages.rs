//! What a newcomer reads when something is wrong: each message names the file, the key and the
//! fix, says its cause once, and every command it suggests is one the CLI has. Snapshotted, so a
//! change to a message is a reviewed change.

use super::assert_says;
use super::{edit_config, initialised, initialised_with, loopward, text};

/// The starter with its config edited by `edit`, refused by `loopward <args>` (exit status
/// 1): what it said.
fn refused(edit: impl Fn(String) -> String, args: &[&str]) -> String {
    let dir = initialised_with(edit);
    let o = loopward(dir.path(), args);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    text(&o)
}

/// One test per config the starter's becomes when `from` in it (its first place) is replaced by
/// `to`, written `fn test() -> "snapshot" { from => to, args }`: `loopward <args>` refuses it, and
/// what it said is the snapshot `snapshot`.
macro_rules! refused_config {
    ($(
        $(#[$doc:meta])*
        fn $test:ident() -> $snapshot:literal { $from:literal => $to:literal, $args:expr }
    )*) => {$(
        $(#[$doc])*
        #[test]
        fn $test() {
            let said = refused(|c| c.replacen($from, $to, 1), $args);
            insta::assert_snapshot!($snapshot, said);
        }
    )*};
}

refused_config! {
    fn a_wrong_type_names_the_key_its_line_and_what_to_write() -> "wrong_type" {
        "turns_per_run = 12" => "turns_per_run = \"twelve\"", &["run"]
    }

    fn a_wrong_type_inside_a_list_of_tables_names_the_entry() -> "wrong_type_in_agent" {
        "name = \"planner\"" => "name = \"planner\"\nmax_steps = true", &["gates", "list"]
    }

    /// Durations are strings with a unit; a key from before (`wall_time_secs = 600`) is refused,
    /// not read as an alias, with its line and the new spelling of its own value.
    fn an_old_seconds_key_is_refused_with_its_line_and_the_new_spelling() -> "old_seconds_key" {
        "turns_per_run = 12" => "wall_time_secs = 600\nturns_per_run = 12", &["run"]
    }

    fn a_duration_without_a_unit_is_refused_naming_the_format() -> "duration_without_unit" {
        "turns_per_run = 12" => "wall_time = 600\nturns_per_run = 12", &["gates", "list"]
    }
}

/// The bug: a second review gate between the same two agents was written, and then no command
/// could load the file (`two gates are named "review:builder->auditor"`).
#[test]
fn gates_add_never_writes_a_second_review_gate_with_the_same_name() {
    let dir = initialised();
    let d = dir.path();
    let before = std::fs::read_to_string(d.join("loopward.toml")).unwrap();
    let args = [
        "gates", "add", "review", "--from", "builder", "--via", "auditor", "--when", "docs/**",
    ];
    let o = loopward(d, &args);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    insta::assert_snapshot!("gates_add_same_review", text(&o));
    assert_eq!(
        std::fs::read_to_string(d.join("loopward.toml")).unwrap(),
        before,
        "nothing was written"
    );
    // The way out it names works: with its own name the gate is added, and the file loads.
    let o = loopward(d, &[&args[..], &["--name", "docs-review"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let list = loopward(d, &["gates", "list"]);
    assert!(list.status.success(), "{}", text(&list));
    crate::support::assert_prints(&list, "docs-review");
    assert!(loopward(d, &["run", "--id", "after"]).status.success());
    // So does the other: replace the gate with one armed on both.
    let o = loopward(d, &["gates", "rm", "review:builder->auditor"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = loopward(
        d,
        &[
            "gates", "add", "review", "--from", "builder", "--via", "auditor", "--when", "src/**",
            "docs/**",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(loopward(d, &["gates", "list"]).status.success());
}

/// A file written by hand with the same mistake is refused at load, with the merge spelled out.
#[test]
fn two_review_gates_with_one_name_are_refused_with_the_merge_spelled_out() {
    let said = refused(
        |c| c + "\n[[gates.review]]\nfrom = \"builder\"\nvia = \"auditor\"\nwhen = [\"docs/**\"]\n",
        &["run"],
    );
    insta::assert_snapshot!("two_review_gates_one_name", said);
}

#[test]
fn a_reused_run_id_names_the_cli_command_not_an_api() {
    let dir = initialised();
    let d = dir.path();
    assert!(loopward(d, &["run", "--id", "r1"]).status.success());
    let o = loopward(d, &["run", "--id", "r1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(!t.contains("open_existing"), "{t}");
    insta::assert_snapshot!("reused_run_id", t);
}

#[test]
fn a_cause_is_said_once() {
    // `runs` is a file: the ledger's folder cannot be made, and the IO error (which the ledger
    // error quotes and also carries as its source) is said once.
    let dir = initialised();
    let d = dir.path();
    std::fs::write(d.join("runs"), "not a folder").unwrap();
    let o = loopward(d, &["run", "--id", "r1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert_eq!(t.matches("Not a directory").count(), 1, "{t}");
    insta::assert_snapshot!("ledger_folder_is_a_file", t);
}

#[test]
fn report_without_a_runs_folder_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let o = loopward(dir.path(), &["report", "no-such-folder"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    insta::assert_snapshot!("report_missing_folder", text(&o));
}

#[test]
fn unknown_cost_is_unknown_not_zero_dollars() {
    let dir = initialised();
    let d = dir.path();
    // The starter's pretend prices gone: nothing says what a token costs.
    edit_config(d, |c| {
        let start = c.find("[prices").expect("the starter has prices");
        let end = c[start..].find("\n\n").map_or(c.len(), |i| start + i + 2);
        format!("{}{}", &c[..start], &c[end..])
    });
    let o = loopward(d, &["run", "--id", "r1"]);
    assert!(o.status.success(), "{}", text(&o));
    let report = text(&loopward(d, &["report"]));
    assert!(!report.contains("$0.000000"), "{report}");
    assert_says(&report, "cost: unknown (no prices)");
}

#[test]
fn config_comes_before_or_after_the_command_and_report_reads_its_runs_dir() {
    let dir = initialised();
    let d = dir.path();
    std::fs::create_dir(d.join("team")).unwrap();
    for f in ["loopward.toml", "loopward.script.toml"] {
        std::fs::rename(d.join(f), d.join("team").join(f)).unwrap();
    }
    edit_config(&d.join("team"), |c| {
        c.replace("runs_dir = \"runs\"", "runs_dir = \"ledgers\"")
    });
    let o = loopward(d, &["--config", "team/loopward.toml", "run", "--id", "r1"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(d.join("team/ledgers/r1/events.jsonl").is_file());
    let o = loopward(d, &["run", "--config", "team/loopward.toml", "--id", "r2"]);
    assert!(o.status.success(), "{}", text(&o));
    // `report` finds the config's runs folder, given the config either way.
    for args in [
        &["--config", "team/loopward.toml", "report", "--json"][..],
        &["report", "--config", "team/loopward.toml", "--json"],
    ] {
        let o = loopward(d, args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(json["runs"], 2, "{args:?}: {json}");
    }
    // And from the config's own folder, with no flag at all.
    let o = loopward(&d.join("team"), &["report", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["runs"], 2, "{json}");
}

#[test]
fn hook_help_lists_the_four_events_the_install_needs() {
    let dir = tempfile::tempdir().unwrap();
    let o = loopward(dir.path(), &["hook", "claude-code", "--help"]);
    let t = text(&o);
    crate::support::assert_says_all(
        &t,
        &[
            "PreToolUse",
            "PostToolUse,",
            "PostToolUseFailure",
            "UserPromptSubmit",
        ],
    );
}
