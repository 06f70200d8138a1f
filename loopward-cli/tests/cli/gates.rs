//! Gates changed from the command line: one-use overrides and `gates add`.

use super::*;
use loopward_core::{AuditEvent, GateDefinition, GateKind, GateRules, ShownGate, TerritoryRules};
use loopward_runner::audit::Record;

#[test]
fn override_grant_is_used_once_and_listed_until_then() {
    let dir = initialised();
    let d = dir.path();
    let o = loopward(
        d,
        &[
            "override", "grant", "--agent", "builder", "--path", "plan.md", "--reason", "typo fix",
            "--ttl", "10m",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let list = text(&loopward(d, &["override", "list"]));
    assert_says(&list, "builder → plan.md  usable  (typo fix)");
    let o = loopward(
        d,
        &[
            "override", "grant", "--agent", "builder", "--path", "plan.md", "--reason", " ",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    crate::support::assert_prints(&o, "non-empty reason");
    let id = list.split_whitespace().next().unwrap().to_string();
    assert!(loopward(d, &["override", "revoke", &id]).status.success());
    assert!(text(&loopward(d, &["override", "list"])).contains("no overrides"));
}

#[test]
fn gates_add_refuses_a_change_that_would_not_load_and_leaves_the_file_alone() {
    let dir = initialised();
    let d = dir.path();
    let before = std::fs::read_to_string(d.join("loopward.toml")).unwrap();
    let o = loopward(
        d,
        &[
            "gates",
            "add",
            "territory",
            "--paths",
            "src/main.rs",
            "--owner",
            "planner",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "nothing was written");
    crate::support::assert_file(d, "loopward.toml", &before);
    let o = loopward(
        d,
        &[
            "gates",
            "add",
            "territory",
            "--paths",
            "docs/**",
            "--owner",
            "auditor",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&loopward(d, &["gates", "list"])).contains("territory:auditor"));
    assert!(loopward(d, &["gates", "rm", "territory:auditor"])
        .status
        .success());
    assert!(!text(&loopward(d, &["gates", "list"])).contains("territory:auditor"));
    // Each change is recorded, and its gate reads back in the ledger's words.
    let mut gates: Vec<GateDefinition> = std::fs::read_dir(d.join(".loopward/changes"))
        .unwrap()
        .flat_map(|run| std::fs::read(run.unwrap().path().join("events.jsonl")))
        .flat_map(|text| {
            text.split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| Record::parse_line(l).unwrap().0.event().unwrap())
                .collect::<Vec<_>>()
        })
        .filter_map(|e| match e {
            AuditEvent::GateChanged { gate, .. } => Some(gate),
            _ => None,
        })
        .collect();
    gates.sort_by_key(|g| matches!(g, GateDefinition::Rules(_)));
    assert!(
        matches!(&gates[..], [
            GateDefinition::Shown(ShownGate { gate, kind: GateKind::Territory }),
            GateDefinition::Rules(GateRules::Territory(TerritoryRules { owner: Some(o), paths, .. })),
        ] if gate == "territory of auditor: docs/**" && o == "auditor" && paths == &["docs/**"]),
        "{gates:?}"
    );
}
