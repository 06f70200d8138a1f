//! Rate limits under paused tokio time: deterministic, no wall clock.

use crate::request as req;
use loopward_core::{AuditEvent, LayerVerdict, Message, Person, TurnNumber};
use loopward_runner::layers::ratelimit::{
    QuotaConfig, RateConfig, RateLimitLayer, RateLimitService,
};
use loopward_runner::layers::testing;
use loopward_runner::model::{BoxModelService, ChatRequest, ChatResponse, ModelError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

/// A model that notes when (since `start`) each call reached it.
fn recording(start: Instant, log: Arc<Mutex<Vec<Duration>>>) -> BoxModelService {
    BoxModelService::new(tower::service_fn(move |_req: ChatRequest| {
        log.lock().unwrap().push(start.elapsed());
        async { Ok::<_, ModelError>(ChatResponse::default()) }
    }))
}

/// A rate-limit layer under a config, and when (since it was made) each call reached the
/// recording models behind it.
struct Limited {
    layer: RateLimitLayer,
    start: Instant,
    arrivals: Arc<Mutex<Vec<Duration>>>,
}

impl Limited {
    fn new(config: RateConfig) -> Self {
        Self {
            layer: RateLimitLayer::new(config).unwrap(),
            start: Instant::now(),
            arrivals: Arc::default(),
        }
    }

    /// A recording model behind the layer (each one shares the layer's limiters).
    fn model(&self) -> RateLimitService<BoxModelService> {
        self.layer
            .layer(recording(self.start, self.arrivals.clone()))
    }

    fn arrivals(&self) -> Vec<Duration> {
        self.arrivals.lock().unwrap().clone()
    }
}

/// Only the backend limited: `n` requests every `per_secs` seconds.
fn backend(n: u32, per_secs: u64) -> RateConfig {
    RateConfig {
        backend: requests(n, per_secs),
        ..RateConfig::default()
    }
}

fn requests(n: u32, per_secs: u64) -> Option<QuotaConfig> {
    Some(QuotaConfig {
        requests: Some(n),
        tokens: None,
        per: Duration::from_secs(per_secs),
    })
}

#[tokio::test(start_paused = true)]
async fn fifty_callers_against_twenty_per_second_admit_exactly_twenty_at_once() {
    let limited = Limited::new(backend(20, 1));
    let model = limited.model();
    let callers: Vec<_> = (0..50)
        .map(|_| tokio::spawn(model.clone().oneshot(req("a"))))
        .collect();
    for c in callers {
        c.await.unwrap().unwrap();
    }
    let mut times = limited.arrivals();
    times.sort();
    assert_eq!(times.iter().filter(|t| t.is_zero()).count(), 20);
    assert_eq!(times[20], Duration::from_millis(50), "then one every 50 ms");
    assert_eq!(times[49], Duration::from_millis(1500));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiting_caller_leaves_its_slot_to_the_next() {
    let limited = Limited::new(backend(1, 1));
    let model = limited.model();
    model.clone().oneshot(req("a")).await.unwrap();
    let waiting = tokio::spawn(model.clone().oneshot(req("a")));
    tokio::time::sleep(Duration::from_millis(500)).await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    model.clone().oneshot(req("a")).await.unwrap();
    assert_eq!(
        limited.arrivals(),
        vec![Duration::ZERO, Duration::from_secs(1)],
        "the third caller got the slot the dropped one waited for"
    );
}

#[tokio::test(start_paused = true)]
async fn each_agent_has_its_own_quota_and_clones_share_the_limiters() {
    let limited = Limited::new(RateConfig {
        per_agent: requests(1, 10),
        ..RateConfig::default()
    });
    let (one, two) = (limited.model(), limited.model());
    one.oneshot(req("a")).await.unwrap();
    two.clone().oneshot(req("b")).await.unwrap();
    two.oneshot(req("a")).await.unwrap();
    assert_eq!(
        limited.arrivals(),
        vec![Duration::ZERO, Duration::ZERO, Duration::from_secs(10)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_larger_than_the_burst_fails_at_once_with_a_clear_error() {
    let limited = Limited::new(RateConfig {
        backend: Some(QuotaConfig {
            requests: None,
            tokens: Some(100),
            per: Duration::from_secs(60),
        }),
        ..RateConfig::default()
    });
    let model = limited.model();
    // A request of `chars` characters from the person: about a quarter as many tokens.
    let sized = |chars: usize| ChatRequest {
        messages: vec![Message::human(
            Person::at_the_keyboard().says("x".repeat(chars)),
        )],
        ..req("a")
    };
    let err = model.clone().oneshot(sized(4000)).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("needs 1000 tokens but the backend quota admits at most 100"),
        "{err}"
    );
    assert!(limited.start.elapsed().is_zero());
    model.oneshot(sized(400)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn admissions_are_recorded_on_the_turn_the_request_carries_even_on_another_task() {
    let dir = tempfile::tempdir().unwrap();
    let (run, sink) = testing::run(dir.path(), "r1");
    let turn = testing::turn(&run, "a", 1);
    let model = Limited::new(backend(1, 10)).model();
    let mut in_turn = req("a");
    in_turn.turn = turn.slot();
    // Spawned: the layer runs on a task the turn never ran on.
    tokio::spawn(model.clone().oneshot(in_turn))
        .await
        .unwrap()
        .unwrap();
    let admitted: Vec<_> = sink
        .events()
        .into_iter()
        .filter(|(_, e)| {
            matches!(e, AuditEvent::LayerDecision { layer, decision, .. }
                if *layer == loopward_core::LayerId::RateLimit && *decision == LayerVerdict::Admitted)
        })
        .collect();
    assert_eq!(admitted.len(), 1, "{admitted:?}");
    assert_eq!(admitted[0].0.turn, Some(TurnNumber(1)));
    // A call that carries no turn (a backend called directly) waits the same, unrecorded.
    let start = Instant::now();
    model.oneshot(req("a")).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(10));
    assert_eq!(sink.events().len(), 1, "nothing recorded without a turn");
}

#[test]
fn zero_or_empty_quotas_are_refused_naming_the_field() {
    let err = RateLimitLayer::new(backend(0, 1)).unwrap_err();
    assert_eq!(err.field, "rate.backend.requests");
    let err = RateLimitLayer::new(RateConfig {
        per_agent: requests(5, 0),
        ..RateConfig::default()
    })
    .unwrap_err();
    assert_eq!(err.field, "rate.per_agent.per");
    let err: Result<RateConfig, _> = toml::from_str("[backend]\nper = \"1s\"\n");
    let err = RateLimitLayer::new(err.unwrap()).unwrap_err();
    assert_eq!(err.field, "rate.backend");
}
