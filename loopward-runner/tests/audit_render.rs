//! `audit.md` and `audit.json` of a fixed scripted run, rendered from `events.jsonl` alone.

mod audit_support;

use audit_support::{plan_and_build, Rule, SteppingClock};
use loopward_core::{Decision, GateMode, Refusal, RunStatus};
use loopward_runner::audit::{render_json, render_markdown, LedgerOptions, Record};
use std::path::Path;
use std::sync::Arc;

/// planner owns plan.md: builder's overwrite is denied, its later edit goes through on a
/// consumed override.
pub fn enforced_territory() -> Rule {
    Arc::new(|agent, tool, path| {
        if tool != "write_file" && tool != "edit_file" {
            return None;
        }
        Some(match (agent, tool, path) {
            ("builder", "write_file", Some("plan.md")) => Decision::Deny(Refusal::new(
                loopward_core::GateKind::Territory,
                "plan.md belongs to planner; builder may not write it",
                "hand the change to planner, or ask a person for a one-shot override",
            )),
            ("builder", "edit_file", Some("plan.md")) => Decision::Override {
                id: "ov-1".into(),
                reason: "planner is away; the wording fix was approved by Ana".into(),
            },
            _ => Decision::Allow,
        })
    })
}

fn records(run_dir: &Path) -> Vec<Record> {
    std::fs::read_to_string(run_dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| Record::parse_line(l.as_bytes()).unwrap().0)
        .collect()
}

#[tokio::test]
async fn audit_md_of_a_scripted_run_shows_turns_handoffs_gates_and_overrides() {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let clock = SteppingClock::new();
    let opts = LedgerOptions {
        clock: clock.clone(),
        ..LedgerOptions::default()
    };
    let (report, fin) = plan_and_build(
        ws.path(),
        runs.path(),
        "r1",
        clock,
        Some((GateMode::Enforce, enforced_territory())),
        opts,
    )
    .await;
    assert_eq!(report.status, RunStatus::Completed);
    let fin = fin.unwrap();
    let md = std::fs::read_to_string(&fin.audit_md).unwrap();
    assert!(
        md.contains("↪ handoff → builder: plan is in plan.md"),
        "{md}"
    );
    assert!(md.contains("**deny** tool:write_file `plan.md`"), "{md}");
    insta::assert_snapshot!("audit_md_scripted_run", md);

    // Both files are a function of events.jsonl alone.
    let recs = records(&runs.path().join("r1"));
    assert_eq!(render_markdown(&recs), md);
    let json = std::fs::read_to_string(&fin.audit_json).unwrap();
    assert_eq!(render_json(&recs, "sha256"), json);

    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["run"], "r1");
    assert_eq!(v["status"]["status"], "completed");
    assert_eq!(v["turns"], 2);
    assert_eq!(v["handoffs"][0]["to"], "builder");
    assert_eq!(v["gates"]["territory"]["allowed"], 2);
    assert_eq!(v["gates"]["territory"]["denied"], 1);
    assert_eq!(v["gates"]["territory"]["overridden"], 1);
    assert_eq!(
        v["overrides"][0]["reason"],
        "planner is away; the wording fix was approved by Ana"
    );
    assert_eq!(v["unauthorised_writes"].as_array().unwrap().len(), 0);
    assert_eq!(v["ledger"]["records"], recs.len());
    assert_eq!(v["ledger"]["final_hash"], fin.final_hash);
    assert_eq!(v["events"].as_array().unwrap().len(), recs.len());
    assert_eq!(v["usage"], serde_json::to_value(report.usage).unwrap());
}

#[test]
fn audit_md_states_one_cost_in_its_header_and_its_end_line() {
    use loopward_core::{AgentId, AuditEvent, RunId, Scope, TurnNumber, Usage};
    use loopward_runner::audit::{Chain, GENESIS};
    let run = RunId::new("r1").unwrap();
    let builder = AgentId::new("builder").unwrap();
    let at = |turn: Option<u32>| Scope {
        run: run.clone(),
        turn: turn.map(TurnNumber),
        agent: turn.map(|_| builder.clone()),
    };
    let usage = Usage {
        input_tokens: 1000,
        output_tokens: 200,
        cached_tokens: 0,
        calls: 1,
    };
    let events = [
        (
            at(None),
            AuditEvent::RunStarted {
                task: "t".into(),
                agent: builder.clone(),
            },
        ),
        (
            at(Some(1)),
            AuditEvent::TurnStarted {
                agent: builder.clone(),
            },
        ),
        (
            at(Some(1)),
            AuditEvent::ModelCall {
                model: "m".into(),
                usage,
                cost_micros: Some(1_500),
                tool_calls: 0,
            },
        ),
        (
            at(Some(1)),
            AuditEvent::ModelCall {
                model: "m".into(),
                usage,
                cost_micros: Some(2_500),
                tool_calls: 0,
            },
        ),
        // The runner knows no prices: the run's end carries no cost of its own.
        (
            at(None),
            AuditEvent::RunEnded {
                status: RunStatus::Completed,
                usage,
                cost_micros: None,
            },
        ),
    ];
    let mut prev = GENESIS.to_string();
    let mut recs = vec![];
    for (i, (scope, e)) in events.iter().enumerate() {
        let (rec, _) = Record::seal(
            &Chain::Sha256,
            i as u64 + 1,
            "2026-01-01T00:00:00.000Z",
            scope,
            e,
            &prev,
        )
        .unwrap();
        prev.clone_from(&rec.hash);
        recs.push(rec);
    }
    let md = render_markdown(&recs);
    let header = md.lines().find(|l| l.starts_with("- Cost: ")).unwrap();
    let end = md.lines().find(|l| l.contains("run ended")).unwrap();
    let cost = header.trim_start_matches("- Cost: ");
    assert!(
        end.ends_with(&format!("cost {cost}")),
        "header {header:?}, end {end:?}"
    );
    assert!(!md.contains("cost unknown"), "{md}");
}
