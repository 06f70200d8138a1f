//! One-shot overrides: exactly one write, consumed atomically and logged before it runs; every
//! bad sentinel refused with a precise reason.

use super::support::*;
use loopward_core::{AuditEvent, Decision};
use loopward_runner::gates::{OverrideError, OverrideStore, PolicyConfig, Sentinel};
use loopward_runner::tool::ToolError;
use loopward_runner::{Clock, ManualClock, TurnContext};
use serde_json::json;
use std::time::Duration;

const PLANS: &str = "[[territory]]\npaths = [\"plans/**\"]\nowner = \"planner\"\n[gates.sprawl]\nenabled = false\n[overrides]\nmax_ttl = \"1h\"";

fn grant(room: &Room, who: &str, path: &str) -> String {
    let p = room.ws.resolve(path).unwrap();
    room.policy
        .overrides()
        .grant(
            &agent(who),
            &p,
            "hotfix approved by ana",
            Duration::from_secs(600),
            &*room.clock,
        )
        .unwrap()
        .id
}

/// The builder granted an override for `plans/a.md`, then writing `content` there: the room,
/// the grant's id and the builder's turn.
async fn granted_write(content: &str) -> (Room, String, TurnContext) {
    let room = Room::new(PLANS);
    let id = grant(&room, "builder", "plans/a.md");
    let builder = room.turn("builder");
    room.write_ok(&builder, "plans/a.md", content).await;
    (room, id, builder)
}

/// An override store for a fresh workspace, a clock at [`NOW`] and the path `plans/a.md`.
struct Grants {
    _dir: tempfile::TempDir,
    ws: loopward_runner::Workspace,
    store: OverrideStore,
    clock: ManualClock,
    plan: loopward_runner::WorkPath,
}

impl Grants {
    /// The store `open` makes for the workspace (in its folder, `dir`).
    fn new(
        open: impl FnOnce(&std::path::Path, &loopward_runner::Workspace) -> OverrideStore,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = loopward_runner::Workspace::new(dir.path()).unwrap();
        let store = open(dir.path(), &ws);
        let plan = ws.resolve("plans/a.md").unwrap();
        Self {
            _dir: dir,
            ws,
            store,
            clock: ManualClock::new(NOW),
            plan,
        }
    }

    /// The store kept in the workspace, as `loopward` keeps it by default.
    fn in_workspace() -> Self {
        Self::new(|_, ws| OverrideStore::for_workspace(ws))
    }

    /// Grants the builder an override for `plans/a.md` for a minute, for `reason`.
    fn grant_builder(&self, reason: &str) -> Result<Sentinel, OverrideError> {
        let ttl = Duration::from_secs(60);
        let b = agent("builder");
        self.store.grant(&b, &self.plan, reason, ttl, &self.clock)
    }
}

fn write_sentinel(room: &Room, id: &str, body: serde_json::Value) {
    room.write(&format!(".loopward/overrides/{id}.json"), &body.to_string());
}

fn why(room: &Room, who: &str, path: &str) -> String {
    match room
        .policy
        .overrides()
        .find(&agent(who), path, &*room.clock)
    {
        Err(e @ OverrideError::NoneValid { .. }) => e.to_string(),
        other => panic!("expected no valid override, got {other:?}"),
    }
}

#[tokio::test]
async fn an_override_authorises_exactly_one_write_and_is_logged_before_it() {
    let (room, id, builder) = granted_write("fixed").await;
    assert_eq!(room.read("plans/a.md").unwrap(), "fixed");
    // The consumption and its reason are in the ledger, before the decision that lets it run.
    let kinds: Vec<_> = room.events().iter().map(|e| e.kind()).collect();
    assert_eq!(
        kinds,
        vec!["override_consumed", "gate_decision", "tool_started"]
    );
    assert!(
        matches!(&room.events()[1], AuditEvent::GateDecision { decision: Decision::Override { id: i, reason }, .. }
        if *i == id && reason == "hotfix approved by ana")
    );
    assert!(room
        .path(&format!(".loopward/overrides/consumed/{id}.json"))
        .exists());
    // Exactly one: the next write is refused again.
    let err = room
        .write_file(&builder, "plans/a.md", "again")
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Refused(_)));
    assert_eq!(room.read("plans/a.md").unwrap(), "fixed");
}

#[tokio::test]
async fn the_override_way_out_advertised_by_the_refusal_works() {
    let (room, builder) = Room::with_turn(PLANS, "builder");
    let err = room
        .write_file(&builder, "plans/a.md", "x")
        .await
        .unwrap_err();
    assert!(err
        .to_string()
        .contains("loopward override grant --agent builder --path plans/a.md"));
    grant(&room, "builder", "plans/a.md");
    room.write_ok(&builder, "plans/a.md", "x").await;
    assert_eq!(room.read("plans/a.md").unwrap(), "x");
}

#[test]
fn many_concurrent_takers_exactly_one_wins() {
    let g = Grants::in_workspace();
    let (store, clock) = (&g.store, &g.clock);
    for round in 0..5 {
        g.grant_builder("once").unwrap();
        let wins = std::thread::scope(|s| {
            let handles: Vec<_> = (0..32)
                .map(|_| s.spawn(|| store.take(&agent("builder"), "plans/a.md", clock).is_ok()))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .filter(|w| *w)
                .count()
        });
        assert_eq!(wins, 1, "round {round}");
        clock.advance_millis(1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_tool_calls_consume_one_override_once() {
    let room = std::sync::Arc::new(Room::new(PLANS));
    grant(&room, "builder", "plans/a.md");
    let mut tasks = Vec::new();
    for i in 0..16 {
        let room = room.clone();
        tasks.push(tokio::spawn(async move {
            let t = room.turn("builder");
            room.write_file(&t, "plans/a.md", &format!("w{i}"))
                .await
                .is_ok()
        }));
    }
    let mut wins = 0;
    for t in tasks {
        wins += usize::from(t.await.unwrap());
    }
    assert_eq!(wins, 1);
    let consumed = room
        .events()
        .iter()
        .filter(|e| e.kind() == "override_consumed")
        .count();
    assert_eq!(consumed, 1);
}

#[tokio::test]
async fn a_consumed_sentinel_put_back_is_not_honoured_twice() {
    let (room, id, builder) = granted_write("one").await;
    std::fs::copy(
        room.path(&format!(".loopward/overrides/consumed/{id}.json")),
        room.path(&format!(".loopward/overrides/{id}.json")),
    )
    .unwrap();
    let err = room
        .write_file(&builder, "plans/a.md", "two")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("already consumed"), "{err}");
    assert_eq!(room.read("plans/a.md").unwrap(), "one");
}

#[test]
fn bad_sentinels_are_refused_with_a_precise_reason() {
    let room = Room::new(PLANS);
    let base = |id: &str| {
        json!({"id": id, "agent": "builder", "path": "plans/a.md", "reason": "why",
               "not_before": NOW - 1000, "expires": NOW + 60_000})
    };
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        ("exp", json!({"expires": NOW - 1}), "expired at"),
        ("future", json!({"not_before": NOW + 5000}), "not valid yet"),
        (
            "long",
            json!({"not_before": NOW - 1000, "expires": NOW + 10 * 3_600_000}),
            "exceeds the maximum TTL",
        ),
        ("noreason", json!({"reason": "  "}), "its reason is empty"),
        (
            "wrongagent",
            json!({"agent": "scribe"}),
            "it is for agent scribe, not builder",
        ),
        (
            "wrongpath",
            json!({"path": "plans/b.md"}),
            "it covers plans/b.md, not plans/a.md",
        ),
        (
            "idmismatch",
            json!({"id": "other"}),
            "does not match its file name",
        ),
    ];
    for (id, patch, expected) in cases {
        let dir = room.path(".loopward/overrides");
        let _ = std::fs::remove_dir_all(&dir);
        let mut body = base(id);
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        write_sentinel(&room, id, body);
        let text = why(&room, "builder", "plans/a.md");
        assert!(text.contains(expected), "{id}: {text}");
    }
}

#[test]
fn malformed_huge_and_non_regular_sentinels_are_refused_without_hanging() {
    let room = Room::new(PLANS);
    let dir = room.path(".loopward/overrides");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("bad.json"), "{not json").unwrap();
    std::fs::write(dir.join("huge.json"), vec![b' '; 10_000]).unwrap();
    std::fs::create_dir(dir.join("adir.json")).unwrap();
    std::fs::write(room.path("real.json"), "{}").unwrap();
    std::os::unix::fs::symlink(room.path("real.json"), dir.join("link.json")).unwrap();
    nix::unistd::mkfifo(&dir.join("pipe.json"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let text = why(&room, "builder", "plans/a.md");
    for expected in [
        "bad.json (malformed",
        "huge.json (10000 bytes; the limit is 4096)",
        "adir.json (a directory, not a regular file)",
        "link.json (a symbolic link, not a regular file)",
        "pipe.json (not a regular file (FIFO, socket or device))",
    ] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
}

#[test]
fn validity_comes_from_content_not_mtime() {
    let room = Room::new(PLANS);
    write_sentinel(
        &room,
        "old",
        json!({"id": "old", "agent": "builder", "path": "plans/a.md", "reason": "r",
               "not_before": NOW - 7_200_000, "expires": NOW - 3_600_000}),
    );
    // The file was written just now, but its content says it expired an hour ago.
    assert!(why(&room, "builder", "plans/a.md").contains("expired"));
}

#[test]
fn grants_refuse_empty_reasons_zero_and_over_long_ttls_and_control_paths() {
    let g = Grants::new(|_, ws| OverrideStore::for_workspace(ws).max_ttl(Duration::from_secs(600)));
    let (ws, store, clock, p) = (&g.ws, &g.store, &g.clock, &g.plan);
    let b = agent("builder");
    assert_eq!(
        g.grant_builder(" ").unwrap_err(),
        OverrideError::EmptyReason
    );
    assert!(matches!(
        store.grant(&b, p, "r", Duration::ZERO, clock),
        Err(OverrideError::BadTtl { .. })
    ));
    let e = store
        .grant(&b, p, "r", Duration::from_secs(601), clock)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "ttl 10m 1s is not allowed: it must be more than zero and at most 10m"
    );
    let ctl = ws.resolve(".loopward/x").unwrap();
    assert!(matches!(
        store.grant(&b, &ctl, "r", Duration::from_secs(60), clock),
        Err(OverrideError::NotOverridable(_))
    ));
}

#[test]
fn list_shows_problems_and_revoke_removes() {
    let dir = tempfile::tempdir().unwrap();
    let ws = loopward_runner::Workspace::new(dir.path()).unwrap();
    let store = OverrideStore::for_workspace(&ws);
    let clock = ManualClock::new(NOW);
    let g = store
        .grant(
            &agent("builder"),
            &ws.resolve("a.md").unwrap(),
            "r",
            Duration::from_secs(60),
            &clock,
        )
        .unwrap();
    let listed = store.list(&clock);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].problem, None);
    clock.advance_millis(61_000);
    assert!(store.list(&clock)[0]
        .problem
        .as_deref()
        .unwrap()
        .starts_with("expired"));
    store.revoke(&g.id).unwrap();
    assert!(store.list(&clock).is_empty());
    assert!(matches!(store.revoke("../x"), Err(OverrideError::BadId(_))));
    let _ = clock.now_millis();
}

#[test]
fn max_ttl_config_refuses_zero_and_huge() {
    for ttl in ["0s", "25h"] {
        let e = PolicyConfig::from_toml(&format!("[overrides]\nmax_ttl = \"{ttl}\"")).unwrap_err();
        assert!(e.to_string().contains("max_ttl"), "{e}");
    }
    let e = PolicyConfig::from_toml("[overrides]\nmax_ttl = \"soon\"").unwrap_err();
    assert!(e.to_string().contains("invalid duration \"soon\""), "{e}");
}

// ---- keyed stores: grants sealed under the ledger key, kept outside the workspace ----

use loopward_runner::audit::{KeyRing, LedgerKey};
use loopward_runner::gates::{Policy, MAX_REASON_BYTES};

/// A room whose overrides live in a keyed store outside the workspace (as `loopward` keeps
/// them in its state directory).
fn keyed_room(state: &std::path::Path) -> Room {
    let dir = tempfile::tempdir().unwrap();
    let ws = loopward_runner::Workspace::new(dir.path()).unwrap();
    let cfg = PolicyConfig::from_toml(PLANS).unwrap();
    let keys = KeyRing::single(LedgerKey::from_bytes(vec![33u8; 32]).unwrap());
    let policy = Policy::from_config(&cfg, ws.clone())
        .unwrap()
        .with_overrides(OverrideStore::new(state.join("overrides")).keyed(keys));
    Room::with_policy(dir, ws, policy)
}

fn denial_reason(room: &Room) -> String {
    match room.denials().last() {
        Some(Decision::Deny(r)) => r.reason.clone(),
        other => panic!("expected a recorded denial, got {other:?}"),
    }
}

#[tokio::test]
async fn a_keyed_grant_is_honoured_once_and_lives_outside_the_workspace() {
    let state = tempfile::tempdir().unwrap();
    let room = keyed_room(state.path());
    let id = grant(&room, "builder", "plans/a.md");
    assert!(state.path().join(format!("overrides/{id}.json")).is_file());
    assert!(!room.path(".loopward/overrides").exists());
    room.write_ok(&room.turn("builder"), "plans/a.md", "fixed")
        .await;
    assert_eq!(room.read("plans/a.md").unwrap(), "fixed");
}

#[tokio::test]
async fn a_hand_written_sentinel_is_refused_with_the_reason_and_the_refusal_is_recorded() {
    let state = tempfile::tempdir().unwrap();
    let room = keyed_room(state.path());
    let dir = state.path().join("overrides");
    std::fs::create_dir_all(&dir).unwrap();
    let forged = json!({"id": "ov-1-0", "agent": "builder", "path": "plans/a.md",
        "reason": "trust me", "not_before": NOW - 1, "expires": NOW + 60_000});
    std::fs::write(dir.join("ov-1-0.json"), forged.to_string()).unwrap();
    let err = room
        .write_file(&room.turn("builder"), "plans/a.md", "x")
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Refused(_)));
    assert_eq!(room.read("plans/a.md"), None);
    let reason = denial_reason(&room);
    assert!(reason.contains("override ov-1-0.json refused: not a grant: it carries no seal; only `loopward override grant` makes overrides"), "{reason}");
}

#[tokio::test]
async fn an_edited_grant_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let room = keyed_room(state.path());
    // Granted for one minute's work on a.md; edited to last a day and cover b.md.
    let id = grant(&room, "builder", "plans/a.md");
    let path = state.path().join(format!("overrides/{id}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("plans/a.md", "plans/b.md")).unwrap();
    assert!(room
        .write_file(&room.turn("builder"), "plans/b.md", "x")
        .await
        .is_err());
    let reason = denial_reason(&room);
    assert!(reason.contains("forged or edited"), "{reason}");
    assert_eq!(room.read("plans/b.md"), None);
}

#[test]
fn an_over_long_reason_is_refused_at_grant_time_and_the_longest_allowed_is_usable() {
    let g = Grants::new(|dir, _| {
        let keys = KeyRing::single(LedgerKey::from_bytes(vec![33u8; 32]).unwrap());
        OverrideStore::new(dir.join("state")).keyed(keys)
    });
    let (store, clock) = (&g.store, &g.clock);
    let err = g.grant_builder(&"x".repeat(5000)).unwrap_err();
    assert!(
        matches!(
            err,
            OverrideError::ReasonTooLong {
                len: 5000,
                max: MAX_REASON_BYTES
            }
        ),
        "{err}"
    );
    assert!(store.list(clock).is_empty(), "nothing was granted");
    let longest = "y".repeat(MAX_REASON_BYTES);
    g.grant_builder(&longest).unwrap();
    assert_eq!(
        store
            .take(&agent("builder"), "plans/a.md", clock)
            .unwrap()
            .reason,
        longest
    );
}

#[test]
fn concurrent_grants_never_share_a_temporary_file() {
    let g = Grants::in_workspace();
    let ids: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..16)
            .map(|_| s.spawn(|| g.grant_builder("many at once").unwrap().id))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let listed = g.store.list(&g.clock);
    assert_eq!(listed.len(), 16);
    assert!(listed.iter().all(|l| l.problem.is_none()), "{listed:?}");
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 16);
}
