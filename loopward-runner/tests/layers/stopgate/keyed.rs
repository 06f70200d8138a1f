//! Keyed approvals: a sealed record names who approved; records flipped, hand-written or
//! malformed are refused; racing decisions decide once.

use super::*;
use loopward_runner::audit::{KeyRing, LedgerKey};
use loopward_runner::layers::stopgate::{ApprovalStore, DurableError, PendingState};

fn ring() -> KeyRing {
    KeyRing::single(LedgerKey::from_bytes(vec![21u8; 32]).unwrap())
}

/// A keyed store in a folder of its own (the state directory, for `loopward`).
fn keyed_store(state: &Path) -> ApprovalStore {
    ApprovalStore::new(state.join("pending")).keyed(ring())
}

/// A workspace, a keyed store in a state folder of its own, and the gated `deploy` tool.
struct Deploy {
    ws: tempfile::TempDir,
    _state: tempfile::TempDir,
    store: ApprovalStore,
    deploy: Probe,
}

impl Deploy {
    /// A fresh set-up whose first attempt at `deploy` is held, waiting for a person.
    async fn asked() -> Self {
        let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let store = keyed_store(state.path());
        let d = Self {
            ws,
            _state: state,
            store,
            deploy: Probe::new("deploy"),
        };
        assert!(d.attempt().await.0.is_err());
        d
    }

    /// One attempt at the gated `deploy` call through the keyed store; returns the outcome and
    /// the sink.
    async fn attempt(&self) -> (Result<(), ToolError>, Arc<MemorySink>) {
        let gates = StopGates::new(&[StopGateConfig::tool("deploy", StopMode::Durable)])
            .unwrap()
            .with_store(self.store.clone());
        let tools = gates.tool_layer().layer(ToolExecutor);
        let (r, sink) = run(self.ws.path(), "r1");
        let call = self
            .deploy
            .invocation(&turn(&r, "builder", 1), json!({"env": "prod"}));
        (tools.oneshot(call).await.map(|_| ()), sink)
    }
}

fn denial_notes(sink: &MemorySink) -> Vec<String> {
    let denied = crate::details(sink, loopward_core::LayerId::StopGate, "denied");
    let reason = |d: &serde_json::Value| d["reason"].as_str().unwrap_or_default().to_string();
    denied.iter().map(reason).collect()
}

#[tokio::test]
async fn a_keyed_approval_runs_the_action_once_and_names_who_approved() {
    let d = Deploy::asked().await;
    let waiting = d.store.list_pending();
    assert_eq!(waiting.len(), 1);
    assert!(waiting[0].seal.is_some(), "the gate seals its request");
    let decided = d
        .store
        .approve(&waiting[0].id, "ana", 1_700_000_000_000)
        .unwrap();
    assert_eq!(
        decided.decision_text(),
        "approved by ana at 2023-11-14T22:13:20.000Z"
    );
    d.attempt().await.0.unwrap();
    assert_eq!(d.deploy.calls(), 1);
    // Nothing was written into the workspace.
    assert!(!pending_dir(d.ws.path()).exists());
}

#[tokio::test]
async fn a_pending_record_flipped_to_approved_by_another_process_is_refused_and_recorded() {
    let d = Deploy::asked().await;
    let id = d.store.list_pending()[0].id.clone();
    let path = d.store.dir().join(format!("{id}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"pending\"", "\"approved\"")).unwrap();
    let (out, sink) = d.attempt().await;
    assert!(out.is_err());
    assert_eq!(d.deploy.calls(), 0, "no person approved it");
    let notes = denial_notes(&sink);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("forged or edited"), "{}", notes[0]);
    assert!(notes[0].contains("moved to rejected/"), "{}", notes[0]);
    assert_eq!(
        std::fs::read_dir(d.store.dir().join("rejected"))
            .unwrap()
            .count(),
        1
    );
    // The way out works: the next attempt asks a person afresh.
    let (out, _) = d.attempt().await;
    assert!(out.is_err());
    assert_eq!(d.store.list_pending().len(), 1);
}

#[tokio::test]
async fn a_hand_written_approved_record_is_refused() {
    // Learn the id the gate uses, then forge an approved record for it from scratch.
    let d = Deploy::asked().await;
    let mut record = d.store.list_pending().remove(0);
    record.state = PendingState::Approved;
    record.seal = None;
    let path = d.store.dir().join(format!("{}.json", record.id));
    std::fs::write(&path, serde_json::to_string(&record).unwrap()).unwrap();
    assert!(
        matches!(d.store.read(&record.id), Err(DurableError::Forged { ref why, .. }) if why.contains("no seal"))
    );
    let (out, sink) = d.attempt().await;
    assert!(out.is_err());
    assert_eq!(d.deploy.calls(), 0);
    assert!(denial_notes(&sink)[0].contains("carries no seal"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_approve_and_deny_decide_exactly_once_and_the_losers_are_told_who_won() {
    for round in 0..5 {
        let d = Deploy::asked().await;
        let id = d.store.list_pending()[0].id.clone();
        let results: Vec<Result<_, DurableError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..16)
                .map(|i| {
                    let (store, id) = (&d.store, &id);
                    s.spawn(move || {
                        let who = format!("person{i}");
                        if i % 2 == 0 {
                            store.approve(id, &who, 1_000)
                        } else {
                            store.deny(id, &who, 1_000)
                        }
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: exactly one decision");
        let won = winners[0].decision_text();
        for r in &results {
            if let Err(e) = r {
                assert!(matches!(e, DurableError::AlreadyDecided { .. }), "{e}");
                assert!(
                    e.to_string().contains(&format!("already decided: {won}")),
                    "{e}"
                );
            }
        }
        // What is on disk is the winner's decision, sealed and readable.
        assert_eq!(d.store.read(&id).unwrap().unwrap().decision_text(), won);
        // No temporary file was left behind.
        let tmp = std::fs::read_dir(d.store.dir())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            })
            .count();
        assert_eq!(tmp, 0);
    }
}

#[tokio::test]
async fn a_malformed_pending_record_is_skipped_and_reported_never_blocking_others() {
    let d = Deploy::asked().await;
    std::fs::write(d.store.dir().join("r9-garbage.json"), "{ not json").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", d.store.dir().join("r9-link.json")).unwrap();
    let scan = d.store.scan();
    assert_eq!(scan.records.len(), 1);
    let skipped: Vec<&str> = scan.skipped.iter().map(|s| s.file.as_str()).collect();
    assert_eq!(skipped, ["r9-garbage.json", "r9-link.json"]);
    assert!(
        scan.skipped[1].why.contains("symbolic link"),
        "{}",
        scan.skipped[1].why
    );
    // The good record can still be decided and used.
    let id = &d.store.list_pending()[0].id;
    d.store.approve(id, "ana", 5).unwrap();
    d.attempt().await.0.unwrap();
    assert_eq!(d.deploy.calls(), 1);
}
