//! Gates as data: strict config, the runtime API (each change audited), modes, and properties
//! that hold for any rule set.

use super::support::*;
use loopward_core::{AuditEvent, GateMode};
use loopward_runner::gates::{GateSpec, Policy, PolicyConfig, PolicyError, TerritoryConfig};
use loopward_runner::Workspace;
use proptest::prelude::*;

fn config_error(toml: &str) -> String {
    PolicyConfig::from_toml(toml).unwrap_err().to_string()
}

#[test]
fn bad_configs_fail_with_a_precise_message() {
    let cases = [
        ("[[territory]]\npaths = [\"src/[\"]\nowner = \"b\"", "territory[0]: invalid glob \"src/[\""),
        ("[[territory]]\npaths = [\"src\"]", "territory[0]: no owner"),
        ("[[territory]]\npaths = [\"src\"]\nowners = []", "no owner"),
        ("[[territory]]\npaths = []\nowner = \"b\"", "paths is empty"),
        ("[[territory]]\npaths = [\"../x\"]\nowner = \"b\"", "workspace-relative"),
        ("[[territory]]\npaths = [\"src\"]\nowner = \"Bad Name\"", "invalid agent name"),
        ("[[territory]]\npaths = [\"src\"]\nowner = \"b\"\ncolour = \"red\"", "unknown field `colour`"),
        (
            "[[territory]]\npaths = [\"src/**\"]\nowner = \"a\"\n[[territory]]\npaths = [\"src/gates/*.rs\"]\nowner = \"b\"",
            "territories territory[1] and territory[0] overlap at \"src/gates/x.rs\"",
        ),
        ("[gates.sprawl]\nthreshold = 0", "gates.sprawl.threshold: 0 must be between 2 and 100"),
        ("[gates.sprawl]\nthreshold = 1000", "gates.sprawl.threshold: 1000"),
        ("[gates.sprawl]\nsiblings = [[\"src/*.rs\"]]", "needs exactly one {stem}"),
        ("[[gates.review]]\nfrom = \"b\"\nvia = \"b\"", "an agent cannot review itself"),
        ("[[gates.review]]\nfrom = \"b\"\nvia = \"a\"\nwhen = [\"{\"]", "invalid glob"),
        ("[gates.shell]\nskip = [\"src\"]\n[[territory]]\npaths = [\"src/**\"]\nowner = \"b\"", "a territory must be watched"),
        ("[gates.stop]\nx = 1", "unknown field `stop`"),
        (
            "[[territory]]\npaths = [\"**/*.rs\"]\nowner = \"a\"\n[[territory]]\npaths = [\"src/**\"]\nowner = \"b\"",
            "overlap at \"src/x.rs\"",
        ),
        ("[gates.shell]\nskip = [\"runs\"]", "not a control path"),
    ];
    for (toml, expected) in cases {
        let e = config_error(toml);
        assert!(
            e.contains(expected),
            "{toml}\n=> {e}\nexpected {expected:?}"
        );
    }
    // Same owners may overlap.
    PolicyConfig::from_toml("[[territory]]\npaths = [\"src/**\"]\nowner = \"a\"\n[[territory]]\npaths = [\"src/x.rs\"]\nowners = [\"a\"]").unwrap();
}

#[tokio::test]
async fn the_runtime_api_lists_adds_removes_and_changes_modes_each_audited() {
    let room = Room::new("[gates.sprawl]\nenabled = false");
    let names = |p: &Policy| p.list().into_iter().map(|g| g.name).collect::<Vec<_>>();
    assert_eq!(names(&room.policy), vec!["control"]);
    let t = TerritoryConfig {
        name: Some("plans".into()),
        paths: vec!["plans/**".into()],
        owner: Some("planner".into()),
        ..Default::default()
    };
    room.policy
        .add(GateSpec::Territory(t), "ana", &room.run)
        .unwrap();
    assert_eq!(names(&room.policy), vec!["control", "plans"]);
    let b = room.turn("builder");
    assert!(room.write_file(&b, "plans/a.md", "x").await.is_err());
    room.policy
        .set_mode("plans", GateMode::Advisory, "ana", &room.run)
        .unwrap();
    room.write_ok(&b, "plans/a.md", "x").await;
    room.policy.remove("plans", "ana", &room.run).unwrap();
    assert_eq!(names(&room.policy), vec!["control"]);
    let changes: Vec<_> = room
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AuditEvent::GateChanged { by, change, gate } => {
                Some((by, change, gate.name().map(String::from)))
            }
            _ => None,
        })
        .collect();
    assert_eq!(changes.len(), 3);
    assert_eq!(changes[0].0, "ana");
    assert_eq!(changes[0].2.as_deref(), Some("plans"));
    assert_eq!(changes[2].2.as_deref(), Some("plans"));
    assert_eq!(
        changes.iter().map(|c| c.1.as_str()).collect::<Vec<_>>(),
        vec!["add", "mode", "remove"]
    );
    // The control gate is permanent; unknown names and invalid gates are refused, unrecorded.
    assert_eq!(
        room.policy.remove("control", "ana", &room.run),
        Err(PolicyError::Permanent("control".into()))
    );
    assert!(matches!(
        room.policy.remove("nope", "ana", &room.run),
        Err(PolicyError::NoSuchGate(_))
    ));
    let bad = TerritoryConfig {
        paths: vec!["x".into()],
        ..Default::default()
    };
    assert!(matches!(
        room.policy.add(GateSpec::Territory(bad), "ana", &room.run),
        Err(PolicyError::Config(_))
    ));
    assert_eq!(
        room.events()
            .iter()
            .filter(|e| e.kind() == "gate_changed")
            .count(),
        3
    );
}

#[tokio::test]
async fn a_gate_change_that_cannot_be_recorded_is_not_made() {
    let room = Room::new("");
    room.sink.fail_after(0);
    let t = TerritoryConfig {
        paths: vec!["x".into()],
        owner: Some("planner".into()),
        ..Default::default()
    };
    assert!(matches!(
        room.policy.add(GateSpec::Territory(t), "ana", &room.run),
        Err(PolicyError::Audit(_))
    ));
    assert_eq!(room.policy.list().len(), 2); // control + sprawl
}

// ---- properties ----

const AGENTS: [&str; 3] = ["planner", "builder", "scribe"];
const PATHS: [&str; 8] = [
    "src/a.rs",
    "src",
    "plans/x.md",
    "plan.md",
    "docs/y.md",
    "srcevil/z",
    "a/b/c",
    "tests/a.rs",
];
const GLOBS: [&str; 8] = [
    "src",
    "src/**",
    "plans/*.md",
    "plan.md",
    "docs/**",
    "a/*/c",
    "*.md",
    "tests/*.rs",
];

fn territory_strategy() -> impl Strategy<Value = TerritoryConfig> {
    (
        proptest::sample::subsequence(GLOBS.to_vec(), 1..3),
        proptest::sample::subsequence(AGENTS.to_vec(), 1..3),
        any::<bool>(),
    )
        .prop_map(|(paths, owners, _)| TerritoryConfig {
            paths: paths.into_iter().map(String::from).collect(),
            owners: owners.into_iter().map(String::from).collect(),
            ..Default::default()
        })
}

/// Decisions of every (agent, path) pair under `territories`, or `None` when the set is invalid.
fn decide_all(territories: &[TerritoryConfig]) -> Option<Vec<bool>> {
    let cfg = PolicyConfig {
        territory: territories.to_vec(),
        gates: loopward_runner::gates::GatesConfig {
            sprawl: loopward_runner::gates::SprawlConfig {
                enabled: false,
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    };
    cfg.validate().ok()?;
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let policy = Policy::from_config(&cfg, ws.clone()).unwrap();
    let room = Room::with_policy(dir, ws, policy);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for a in AGENTS {
        for p in PATHS {
            let t = room.turn(a);
            let probe = format!("{p}/probe");
            // Probe a file at the path (or inside it when it is a folder name).
            let target = if p == "src" { probe.as_str() } else { p };
            let ok = rt.block_on(room.write_file(&t, target, "x")).is_ok();
            out.push(ok);
            let _ = std::fs::remove_dir_all(room.path(p));
            let _ = std::fs::remove_file(room.path(p));
        }
    }
    Some(out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// A path in a territory is denied to every agent that does not own it: deny by default.
    #[test]
    fn writes_into_a_territory_by_non_owners_are_denied(t in territory_strategy()) {
        let cfg = PolicyConfig { territory: vec![t.clone()], ..Default::default() };
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let policy = Policy::from_config(&cfg, ws.clone()).unwrap();
        let room = Room::with_policy(dir, ws, policy);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let set = loopward_runner::gates::Territory::from_config(&t).unwrap();
        for a in AGENTS {
            for p in PATHS {
                let target = format!("{p}/f");
                if !set.covers(&target) || set.owned_by(&agent(a)) { continue; }
                let turn = room.turn(a);
                prop_assert!(rt.block_on(room.write_file(&turn, &target, "x")).is_err(), "{a} wrote {target}");
                prop_assert!(!room.path(&target).exists());
            }
        }
    }

    /// Adding a territory (a deny rule) never turns a deny into an allow.
    #[test]
    fn adding_a_rule_never_turns_a_deny_into_an_allow(
        base in proptest::collection::vec(territory_strategy(), 0..3),
        extra in territory_strategy(),
        at in 0usize..4,
    ) {
        let Some(before) = decide_all(&base) else { return Ok(()) };
        let mut more = base.clone();
        more.insert(at.min(base.len()), extra);
        let Some(after) = decide_all(&more) else { return Ok(()) };
        for (i, (b, a)) in before.iter().zip(&after).enumerate() {
            prop_assert!(*b || !*a, "case {i}: denied before, allowed after");
        }
    }

    /// The order in which gates are declared does not change any decision.
    #[test]
    fn declaration_order_does_not_change_decisions(
        rules in proptest::collection::vec(territory_strategy(), 1..4),
    ) {
        let Some(forward) = decide_all(&rules) else { return Ok(()) };
        let mut reversed = rules.clone();
        reversed.reverse();
        prop_assert_eq!(Some(forward), decide_all(&reversed));
    }
}

/// The policy's versions a run's ledger noted, in order.
fn versions(room: &Room) -> Vec<String> {
    room.sink
        .events()
        .into_iter()
        .filter_map(|(_, e)| match e {
            AuditEvent::LayerDecision {
                layer: loopward_core::LayerId::Policy,
                detail,
                ..
            } => detail.to_json()["version"].as_str().map(String::from),
            _ => None,
        })
        .collect()
}

/// Every decision is made under a noted policy version: before the run's first judged call,
/// and again after a change at run time, never twice for the same one.
#[tokio::test]
async fn the_policy_version_is_noted_once_per_run_and_again_when_it_changes() {
    const TOML: &str = "[[territory]]\npaths = [\"plans/**\"]\nowner = \"planner\"";
    let room = Room::new(TOML);
    let b = room.turn("builder");
    room.write_ok(&b, "src/a.rs", "x").await;
    assert!(room.write_file(&b, "plans/a.md", "x").await.is_err());
    let first = PolicyConfig::from_toml(TOML).unwrap().version();
    assert_eq!(versions(&room), vec![first.clone()]);
    assert_eq!(&*room.policy.version(), first);
    room.policy
        .remove("territory:planner", "ana", &room.run)
        .unwrap();
    room.write_ok(&b, "plans/a.md", "x").await;
    let now = versions(&room);
    assert_eq!(now.len(), 2, "{now:?}");
    assert_ne!(now[1], first);
    assert_eq!(*now[1], *room.policy.version());
}

/// A decision records where its rule is written: the line of its `[[territory]]`,
/// `[[gates.review]]` or `[gates.sprawl]` in the named file; a built-in gate records none.
#[tokio::test]
async fn a_decision_records_the_line_of_the_rule_that_made_it() {
    let text = "# rules\n\n[[territory]]\npaths = [\"notes/**\"]\nowner = \"scribe\"\n\n[[territory]]\npaths = [\"plans/**\"]\nowner = \"planner\"\n";
    let cfg = PolicyConfig::from_toml_in("loopward.toml", text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let policy = Policy::from_config(&cfg, ws.clone()).unwrap();
    let room = Room::with_policy(dir, ws, policy);
    let b = room.turn("builder");
    assert!(room.write_file(&b, "plans/a.md", "x").await.is_err());
    assert!(room.write_file(&b, ".loopward/x", "x").await.is_err());
    let sources: Vec<_> = room
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AuditEvent::GateDecision { gate, source, .. } => {
                Some((gate.name.to_string(), source.map(|s| s.to_string())))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        sources,
        vec![
            ("territory:planner".into(), Some("loopward.toml:7".into())),
            ("control".into(), None),
        ]
    );
}
