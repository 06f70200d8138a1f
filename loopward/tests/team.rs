//! A team built from its `loopward.toml`, as an embedder gets it: what each agent is offered.

use loopward::runner::model::{BoxModelService, ChatRequest, ChatResponse, ModelError};
use loopward::Team;
use std::sync::{Arc, Mutex};

const CONFIG: &str = r#"
[run]
first = "planner"

[[agent]]
name = "planner"
tools = ["handoff"]

[[agent]]
name = "builder"
tools = ["handoff"]

[[agent]]
name = "reviewer"
tools = ["handoff"]
"#;

#[tokio::test]
async fn the_handoff_tool_offers_every_agent_but_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("loopward.toml");
    std::fs::write(&path, CONFIG).unwrap();
    let seen: Arc<Mutex<Vec<ChatRequest>>> = Arc::default();
    let log = seen.clone();
    let model = BoxModelService::new(tower::service_fn(move |req: ChatRequest| {
        log.lock().unwrap().push(req);
        async {
            Ok::<_, ModelError>(ChatResponse {
                content: "Planned; nothing to hand off.".into(),
                ..ChatResponse::default()
            })
        }
    }));
    // The ledger is keyed: its key lives in a state directory outside the workspace.
    let state = tempfile::tempdir().unwrap();
    let custody = loopward::state::Custody::new(
        loopward_runner::StateDir::at(state.path()).unwrap(),
        loopward_runner::audit::KeyRing::single(
            loopward_runner::audit::LedgerKey::generate().unwrap(),
        ),
        loopward::config::ChainKind::HmacSha256,
    );
    let report = Team::from_config(&path)
        .unwrap()
        .model(model)
        .custody(custody)
        .run(loopward::core::Person::at_the_keyboard().says("plan it"))
        .await
        .unwrap();
    assert_eq!(report.turns, 1);
    let seen = seen.lock().unwrap();
    let handoff = seen[0].tools.iter().find(|t| t.name == "handoff").unwrap();
    assert_eq!(
        handoff.parameters["properties"]["to"]["enum"],
        serde_json::json!(["builder", "reviewer"]),
        "the planner is not offered itself"
    );
}
