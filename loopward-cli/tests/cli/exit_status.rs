//! The exit status says how a run ended, one number per ending.

use super::*;

#[test]
fn exit_status_says_how_the_run_ended() {
    // A cap: the starter's team with a two-turn limit.
    let dir = initialised_with(|c| c.replace("turns_per_run = 12", "turns_per_run = 2"));
    let d = dir.path();
    let o = loopward(d, &["run", "--id", "capped"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("cap_reached"));

    // A script that runs out: the run fails.
    let dir = initialised();
    let d = dir.path();
    std::fs::write(d.join("short.toml"), "[[agents.root]]\ntext = \"\"\ntool_calls = [{ name = \"handoff\", arguments = { to = \"planner\", message = \"go\" } }]\n").unwrap();
    let o = loopward(d, &["run", "--script", "short.toml", "--id", "short"]);
    assert_eq!(o.status.code(), Some(9), "{}", text(&o));
    crate::support::assert_prints(&o, "no reply for agent planner");

    // A durable stop-gate: the run waits (7), `approve` answers, `--resume` completes (0).
    let dir = initialised();
    let d = dir.path();
    append(d, "loopward.toml", &durable_gate("build", "builder"));
    let o = loopward(d, &["run", "--id", "r7"]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    // The hint names the gate: the printed command works as printed.
    crate::support::assert_prints(&o, "`loopward approve r7 build`");
    assert!(!d.join("src/hello.txt").exists());
    let o = loopward(d, &["approve", "r7", "build"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = loopward(d, &["run", "--resume", "r7"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(d.join("src/hello.txt").exists());
    let o = loopward(d, &["replay", "runs/r7"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn exit_status_4_exhausted_5_budget_6_stopped_by_a_tool_gate() {
    // 4: every strategy spent (class-jump), through report_attempt.
    let report = |s: &str| {
        format!("[[agents.root]]\ntool_calls = [{{ name = \"report_attempt\", arguments = {{ subtask = \"t\", strategy = \"{s}\", outcome = \"failed\" }} }}]\n")
    };
    let script = report("a") + &report("b") + "[[agents.root]]\ntext = \"Both failed.\"\n";
    let extra = "\n[class_jump]\nstrategies = [\"a\", \"b\"]\nfailures_per_strategy = 1\n";
    let extra = extra.to_string() + "\n# root may report attempts\n";
    let (o, _dir) = run_with_edit(&extra, &script, "ex", |c| {
        c.replace(
            "tools = [\"read_file\", \"list_dir\", \"handoff\"]",
            "tools = [\"read_file\", \"list_dir\", \"handoff\", \"report_attempt\"]",
        )
    });
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    crate::support::assert_prints(&o, "exhausted");
    crate::support::assert_prints(&o, "root: Both failed.");

    // 5: a token budget smaller than the first reply.
    let (o, _dir) = run_with("\n[budget]\nmax_tokens = 5\n", "[[agents.root]]\ntext = \"a long enough answer to pass five tokens of budget\"\n[[agents.root]]\ntext = \"more\"\n", "bu");
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));

    // 6: a denying stop-gate on a handoff ends the run stopped, not completed.
    let (o, _dir) = run_with(
        "\n[[stopgate]]\nname = \"no-planner\"\npoint = \"handoff\"\nto = \"planner\"\nmode = \"deny\"\n",
        "[[agents.root]]\ntool_calls = [{ name = \"handoff\", arguments = { to = \"planner\", message = \"go\" } }]\n[[agents.root]]\ntext = \"I may not hand off to the planner.\"\n",
        "st",
    );
    assert_eq!(o.status.code(), Some(6), "{}", text(&o));
    let t = text(&o);
    assert_says(&t, "stopped");
    assert_says(&t, "root: I may not hand off to the planner.");
    // The stop-gate's refusal is shown whole, not cut off.
    assert_says(
        &t,
        "the run stops after this reply; say in your reply what you were doing",
    );

    // 9: an empty answer fails the run (it is not a completed task).
    let (o, _dir) = run_with("", "[[agents.root]]\ntext = \"  \"\n", "em");
    assert_eq!(o.status.code(), Some(9), "{}", text(&o));
    crate::support::assert_prints(&o, "answered with nothing");

    // 9: an answer cut off at its token limit (finish_reason "length") fails the run too, and
    // replaying the ledger reaches the same end.
    let (o, dir) = run_with(
        "",
        "[[agents.root]]\ntext = \"The plan has three\"\nstop = \"token_limit\"\n",
        "cut",
    );
    assert_eq!(o.status.code(), Some(9), "{}", text(&o));
    crate::support::assert_prints(&o, "cut off at its token limit");
    let o = loopward(dir.path(), &["replay", "runs/cut"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// 8: the ledger cannot be written mid-run. A real OS write failure, made deterministic and
/// unprivileged (it binds root too): the process's file-size limit (`prlimit --fsize`, with
/// `SIGXFSZ` ignored so the write returns `EFBIG` like a full disk) is set inside the
/// `tool_started` record of a first, unlimited run of the same script. The second run cannot
/// record that the write is starting, so the write must not happen, and the run exits 8. Its
/// summary counts the tokens the ledger recorded and says the count may be short.
#[test]
fn exit_status_8_when_the_ledger_cannot_be_written_and_the_action_does_not_run() {
    let script = "[[agents.root]]\ntool_calls = [{ name = \"write_file\", arguments = { path = \"out/x.txt\", content = \"hi\" } }]\n[[agents.root]]\ntext = \"Wrote it.\"\n";
    let edit = |c: String| {
        c.replacen(
            "tools = [\"read_file\", \"list_dir\", \"handoff\"]",
            "tools = [\"read_file\", \"list_dir\", \"handoff\", \"write_file\"]",
            1,
        )
    };
    let (o, dir) = run_with_edit("", script, "full", edit);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(dir.path().join("out/x.txt").exists());
    let ledger = std::fs::read_to_string(dir.path().join("runs/full/events.jsonl")).unwrap();
    let start = ledger
        .find("{\"seq\":12,")
        .expect("record 12 in the unlimited run");
    let line = ledger[start..].lines().next().unwrap();
    assert_says(line, "\"kind\":\"tool_started\"");
    // Half-way into the record: the records before it fit whatever their timings' digits.
    let limit = start + line.len() / 2;

    let dir = initialised_with(edit);
    let d = dir.path();
    std::fs::write(d.join("s.toml"), script).unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; exec prlimit --fsize={limit} -- \"$0\" run --script s.toml --id full"
        ))
        .arg(env!("CARGO_BIN_EXE_loopward"))
        .current_dir(d)
        .env("NO_COLOR", "1")
        .env(
            "XDG_STATE_HOME",
            std::env::temp_dir().join("loopward-test-state"),
        )
        .output()
        .expect("sh and prlimit (util-linux) on PATH");
    let t = text(&o);
    assert_eq!(o.status.code(), Some(8), "{t}");
    assert_says(&t, "audit_failed");
    // The records on the way to the write go out together at its commit: the failed `write`
    // ends with record 12, `tool_started` (11 is the policy's version, noted before the run's
    // first judged call).
    assert!(
        t.lines()
            .any(|l| l.contains("writing seq") && l.contains("12: File too large")),
        "{t}"
    );
    // The action the failed record was to record did not run.
    assert!(!d.join("out/x.txt").exists(), "{t}");
    // The summary counts the model call the ledger recorded before it failed (not a torn
    // record's "0"), and says the figure may be short: a call whose record was lost is not in it.
    let tokens = t
        .lines()
        .find_map(|l| l.strip_prefix("audit_failed: 1 turn, 0 handoffs, at least "))
        .and_then(|rest| rest.strip_suffix(" tokens (the ledger stopped recording)"))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(tokens.is_some_and(|n| n > 0), "{t}");
}
