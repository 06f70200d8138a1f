//! `loopward run` for scripts and for people: `--json` (one object per event, schema
//! `loopward.run/1`), `--quiet` (the outcome only), no spinner where nobody watches, and the
//! starter team's first run showing one refusal with its way out.

use super::assert_says;
use super::{append, durable_gate, initialised, initialised_with, loopward};

#[test]
fn json_is_one_object_per_ledger_record_between_start_and_end() {
    let dir = initialised();
    let d = dir.path();
    let o = loopward(d, &["run", "--id", "r1", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let stdout = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(lines.iter().all(|l| l["schema"] == "loopward.run/1"));
    assert!(stdout
        .lines()
        .all(|l| l.starts_with("{\"schema\":\"loopward.run/1\",\"type\":")));
    assert_eq!(lines[0]["type"], "start");
    assert_eq!(lines[0]["run"], "r1");
    let end = lines.last().unwrap();
    assert_eq!(end["type"], "end");
    assert_eq!(end["exit_code"], 0);
    assert_eq!(end["status"]["status"], "completed");
    let events: Vec<&serde_json::Value> = lines.iter().filter(|l| l["type"] == "event").collect();
    assert_eq!(
        events.len(),
        lines.len() - 2,
        "nothing but start, events, end"
    );
    // The same events, in the same order, as the ledger holds.
    let ledger = std::fs::read_to_string(d.join("runs/r1/events.jsonl")).unwrap();
    let kinds: Vec<String> = ledger
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|r| r["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    let streamed: Vec<String> = events
        .iter()
        .map(|e| e["event"]["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        streamed,
        kinds[..streamed.len()],
        "the stream follows the ledger"
    );
    assert!(streamed.iter().any(|k| k == "gate_decision"));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("waiting for the model"));
    // The end line's shape, pinned.
    insta::assert_snapshot!("json_end", stdout.lines().last().unwrap());
}

#[test]
fn json_end_names_the_commands_that_answer_a_waiting_stop_gate() {
    let dir = initialised();
    let d = dir.path();
    append(d, "loopward.toml", &durable_gate("build", "builder"));
    let o = loopward(d, &["run", "--id", "r7", "--json"]);
    assert_eq!(o.status.code(), Some(7));
    let stdout = String::from_utf8(o.stdout).unwrap();
    let end: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(end["exit_code"], 7);
    assert_eq!(end["approve"]["approve"], "loopward approve r7 build");
    assert_eq!(end["approve"]["then"], "loopward run --resume r7");
}

#[test]
fn quiet_prints_the_outcome_only() {
    let dir = initialised();
    let o = loopward(dir.path(), &["run", "--id", "r1", "--quiet"]);
    assert_eq!(o.status.code(), Some(0));
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.starts_with("completed: 4 turns, 3 handoffs, "),
        "{stdout}"
    );
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let both = loopward(dir.path(), &["run", "--json", "--quiet"]);
    assert_eq!(both.status.code(), Some(2), "--json and --quiet conflict");
}

#[test]
fn no_spinner_where_stderr_is_not_a_terminal() {
    let dir = initialised();
    let o = loopward(dir.path(), &["run", "--id", "r1"]);
    assert!(o.status.success());
    assert!(
        o.stderr.is_empty(),
        "a pipe gets no spinner: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A newcomer's first run governs something: the builder's write to the planner's plan is
/// refused, the refusal says what to do, the run goes on and completes.
#[test]
fn the_starter_run_shows_one_refusal_and_its_way_out() {
    let dir = initialised();
    let d = dir.path();
    let o = loopward(d, &["run", "--id", "r1"]);
    assert_eq!(o.status.code(), Some(0));
    let stdout = String::from_utf8(o.stdout).unwrap();
    let refusals: Vec<&str> = stdout.lines().filter(|l| l.contains("✗")).collect();
    assert_eq!(refusals.len(), 1, "{stdout}");
    assert!(
        refusals[0].contains("refused by territory:planner: plan.md belongs to planner"),
        "{stdout}"
    );
    assert!(
        stdout.contains("what to do: leave the change to planner")
            && stdout.contains("loopward override grant --agent builder --path plan.md"),
        "{stdout}"
    );
    // The way out works: with the override it names, the same call goes through.
    let grant = loopward(
        d,
        &[
            "override",
            "grant",
            "--agent",
            "builder",
            "--path",
            "plan.md",
            "--reason",
            "tick step 1",
            "--ttl",
            "10m",
        ],
    );
    assert!(
        grant.status.success(),
        "{}",
        String::from_utf8_lossy(&grant.stderr)
    );
    let o = loopward(d, &["run", "--id", "r2"]);
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(!stdout.contains("✗"), "{stdout}");
    assert_says(&stdout, "allowed by one-shot override");
    assert!(std::fs::read_to_string(d.join("plan.md"))
        .unwrap()
        .contains("1. [x] write src/hello.txt"));
}

/// A hosted agent's `say` (the fake backend's script calls it): the terminal, `audit.md` and
/// `audit.html` show what it said, with a secret masked and markup as text; the ledger
/// verifies and `replay` comes out the same.
#[test]
fn an_agents_say_is_shown_masked_verified_and_replayed() {
    let dir = initialised_with(|c| {
        c.replace(
            "tools = [\"read_file\", \"list_dir\", \"handoff\"]",
            "tools = [\"read_file\", \"list_dir\", \"handoff\", \"say\"]",
        ) + "\n[secrets.DEPLOY]\nenv = \"SAY_DEPLOY\"\n"
    });
    let d = dir.path();
    std::fs::write(
        d.join("s.toml"),
        "[[agents.root]]\ntool_calls = [{ name = \"say\", arguments = { text = \"key s3cr3t-value-xyz is set; <b>ready</b>\" } }]\n[[agents.root]]\ntext = \"Done.\"\n",
    )
    .unwrap();
    let with_secret = |args: &[&str]| {
        super::loopward_cmd(d, args)
            .env("SAY_DEPLOY", "s3cr3t-value-xyz")
            .output()
            .unwrap()
    };
    let o = with_secret(&["run", "--script", "s.toml", "--id", "r1"]);
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert_says(
        &stdout,
        "    » root said: key [secret:DEPLOY] is set; <b>ready</b>\n",
    );
    let run = d.join("runs/r1");
    for f in ["events.jsonl", "audit.md", "audit.html", "audit.json"] {
        let text = std::fs::read_to_string(run.join(f)).unwrap();
        assert!(!text.contains("s3cr3t-value-xyz"), "{f} holds the secret");
    }
    let md = std::fs::read_to_string(run.join("audit.md")).unwrap();
    assert_says(
        &md,
        "**root said:** key [secret:DEPLOY] is set; <b>ready</b>\n",
    );
    let page = std::fs::read_to_string(run.join("audit.html")).unwrap();
    assert!(page.contains("root said: key [secret:DEPLOY] is set; &lt;b&gt;ready&lt;/b&gt;"));
    assert!(!page.contains("<b>ready"));
    let verified = loopward(d, &["verify", "runs/r1"]);
    assert!(verified.status.success(), "{verified:?}");
    let replayed = with_secret(&["replay", "runs/r1"]);
    let said = String::from_utf8_lossy(&replayed.stdout);
    assert!(replayed.status.success(), "{said}");
    assert_says(&said, "all the same");
}
