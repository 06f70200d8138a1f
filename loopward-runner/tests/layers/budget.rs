//! Token and cost budgets end the run with the figures, overshooting by at most one model call.

use super::support;
use loopward_core::{AgentId, AuditEvent, Price, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::layers::budget::{BudgetConfig, BudgetLayer};
use loopward_runner::model::{
    fake::{FakeModel, Script},
    BoxModelService, ChatRequest, ModelError,
};
use loopward_runner::{tools, BoxTurnService, LlmAgent, RunReport};
use serde_json::json;
use std::sync::Arc;
use tower::{Layer, ServiceExt};

/// A budget of `n` tokens, and no other limit.
fn max_tokens(n: u64) -> BudgetConfig {
    BudgetConfig {
        max_tokens: Some(n),
        ..BudgetConfig::default()
    }
}

async fn run_with(config: BudgetConfig) -> (RunReport, Arc<MemorySink>) {
    run_on(config, false).await
}

/// A model service that runs each call of `inner` on a task of its own, as a backend or layer
/// that spawns does.
fn spawning(inner: BoxModelService) -> BoxModelService {
    BoxModelService::new(tower::service_fn(move |req: ChatRequest| {
        let inner = inner.clone();
        async move { tokio::spawn(inner.oneshot(req)).await.unwrap() }
    }))
}

/// A run of `a` under `config`; with `spawn`, the metered model runs on another task.
async fn run_on(config: BudgetConfig, spawn: bool) -> (RunReport, Arc<MemorySink>) {
    let a = AgentId::new("a").unwrap();
    let mut script = Script::default();
    for i in 0..20 {
        script.call(&a, "list_dir", json!({"path": ".", "n": i}));
    }
    script.say(&a, "done");
    let budget = BudgetLayer::new(config).unwrap();
    let mut model = BoxModelService::new(budget.meter().layer(FakeModel::new(script)));
    if spawn {
        model = spawning(model);
    }
    let agent = LlmAgent::builder(a.clone(), model)
        .tools(tools::builtin(std::slice::from_ref(&a)))
        .max_steps(100)
        .build();
    let dir = tempfile::tempdir().unwrap();
    let runner = support::one_agent(dir.path(), &a, BoxTurnService::new(budget.layer(agent)));
    let (report, sink) = support::run(&runner, &a, "list").await;
    (report, sink)
}

fn model_call_tokens(sink: &MemorySink) -> Vec<u64> {
    sink.events()
        .into_iter()
        .filter_map(|(_, e)| match e {
            AuditEvent::ModelCall { usage, .. } => Some(usage.total()),
            _ => None,
        })
        .collect()
}

fn exceeded(sink: &MemorySink) -> Vec<serde_json::Value> {
    crate::details(sink, loopward_core::LayerId::Budget, "budget_exceeded")
}

#[tokio::test]
async fn a_token_budget_stops_mid_turn_after_the_call_that_crossed_it() {
    let (report, sink) = run_with(max_tokens(300)).await;
    let calls = model_call_tokens(&sink);
    let total: u64 = calls.iter().sum();
    let before_last: u64 = calls[..calls.len() - 1].iter().sum();
    assert!(before_last < 300 && total >= 300, "calls {calls:?}");
    assert!(calls.len() < 21, "the script was not played to the end");
    assert_eq!(
        report.status,
        RunStatus::BudgetExceeded {
            budget: format!("tokens (used {total} of 300)")
        }
    );
    let figures = exceeded(&sink);
    assert_eq!(figures.len(), 1);
    assert_eq!(figures[0]["limit"], 300);
    assert_eq!(figures[0]["used"], total);
}

#[tokio::test]
async fn a_cost_budget_prices_each_call_by_the_model_that_answered() {
    let one_micro_per_token = Price {
        input_per_mtok_micros: 1_000_000,
        output_per_mtok_micros: 1_000_000,
    };
    let (report, sink) = run_with(BudgetConfig {
        max_cost_usd: Some(0.0002),
        prices: [("fake".to_string(), one_micro_per_token)].into(),
        ..BudgetConfig::default()
    })
    .await;
    let total: u64 = model_call_tokens(&sink).iter().sum();
    assert_eq!(
        report.status,
        RunStatus::BudgetExceeded {
            budget: format!("cost (used {total} of 200 micro-dollars)")
        }
    );

    let (report, _) = run_with(BudgetConfig {
        max_cost_usd: Some(1.0),
        prices: [("other".to_string(), one_micro_per_token)].into(),
        ..BudgetConfig::default()
    })
    .await;
    assert_eq!(
        report.status,
        RunStatus::BudgetExceeded {
            budget: "cost (model \"fake\" has no price)".into()
        }
    );
}

#[tokio::test]
async fn a_run_within_its_budget_completes() {
    let (report, sink) = run_with(max_tokens(1_000_000)).await;
    assert_eq!(report.status, RunStatus::Completed);
    assert!(exceeded(&sink).is_empty());
}

#[tokio::test]
async fn the_meter_charges_the_turn_its_request_carries_even_on_another_task() {
    // The turn travels in the request: a meter spawned onto another task (where a task-local
    // set by the turn would be gone) still finds its turn, charges it and stops the run.
    let (report, sink) = run_on(max_tokens(300), true).await;
    let total: u64 = model_call_tokens(&sink).iter().sum();
    assert!(total >= 300, "{total}");
    assert_eq!(
        report.status,
        RunStatus::BudgetExceeded {
            budget: format!("tokens (used {total} of 300)")
        }
    );
    assert_eq!(exceeded(&sink).len(), 1);
}

#[tokio::test]
async fn a_model_call_that_carries_no_turn_is_refused_by_the_meter() {
    let a = AgentId::new("a").unwrap();
    let mut script = Script::default();
    script.say(&a, "hi");
    let budget = BudgetLayer::new(max_tokens(1_000)).unwrap();
    let fake = FakeModel::new(script);
    let err = budget
        .meter()
        .layer(fake)
        .oneshot(crate::request("a"))
        .await
        .unwrap_err();
    let ModelError::Refused(refusal) = err else {
        panic!("expected a refusal, got {err:?}");
    };
    assert_eq!(refusal.gate, "budget");
    assert!(
        refusal.reason.contains("carries no turn"),
        "{}",
        refusal.reason
    );
}

#[test]
fn negative_zero_and_absurd_budgets_are_refused_naming_the_field() {
    let parse = |t: &str| toml::from_str::<BudgetConfig>(t);
    let err = BudgetLayer::new(parse("max_cost_usd = -1.0\nprices.fake = { input_per_mtok_micros = 1, output_per_mtok_micros = 1 }").unwrap()).unwrap_err();
    assert_eq!(err.field, "budget.max_cost_usd");
    assert!(parse("max_tokens = -5")
        .unwrap_err()
        .to_string()
        .contains("max_tokens"));
    assert_eq!(
        BudgetLayer::new(parse("max_tokens = 0").unwrap())
            .unwrap_err()
            .field,
        "budget.max_tokens"
    );
    assert_eq!(
        BudgetLayer::new(parse("max_cost_usd = 5.0").unwrap())
            .unwrap_err()
            .field,
        "budget.prices"
    );
    assert!(parse("max_tokenz = 5")
        .unwrap_err()
        .to_string()
        .contains("max_tokenz"));
}
