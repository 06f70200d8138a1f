//! A custom (`from_fn`) layer resumes from the decisions it had settled, as the built-ins do.

use super::*;

/// A custom turn layer (`from_fn`) that lets each agent take `limit` turns, recording each
/// decision under its own name, and rebuilding its counts on resume from its settled decisions
/// when `rebuild` (as a layer of the embedding application should).
fn turns_per_agent(
    limit: u32,
    rebuild: bool,
) -> loopward_runner::layers::from_fn::FromFnLayer<
    impl Fn(
            loopward_runner::TurnRequest,
            loopward_runner::layers::from_fn::NextTurn,
        ) -> futures::future::BoxFuture<
            'static,
            Result<loopward_runner::TurnOutcome, loopward_runner::TurnError>,
        > + Clone,
> {
    use loopward_core::{LayerId, LayerVerdict};
    struct Taken(std::sync::Mutex<std::collections::HashMap<AgentId, u32>>);
    type Fut = futures::future::BoxFuture<
        'static,
        Result<loopward_runner::TurnOutcome, loopward_runner::TurnError>,
    >;
    loopward_runner::layers::from_fn::from_fn(
        move |req: loopward_runner::TurnRequest,
              next: loopward_runner::layers::from_fn::NextTurn|
              -> Fut {
            let run = req.turn.run();
            let taken = run.extensions().get_or_insert_with(|| {
                let mut map = std::collections::HashMap::new();
                if rebuild {
                    for d in loopward_runner::journal::settled_decisions(
                        run,
                        &LayerId::from("per_agent"),
                    ) {
                        if d.verdict == LayerVerdict::Allow {
                            *map.entry(d.agent).or_insert(0) += 1;
                        }
                    }
                }
                Taken(std::sync::Mutex::new(map))
            });
            let n = {
                let mut map = taken.0.lock().unwrap();
                let n = map.entry(req.turn.agent().clone()).or_insert(0);
                *n += 1;
                *n
            };
            Box::pin(async move {
                let stop = n > limit;
                req.turn.record(&AuditEvent::LayerDecision {
                    layer: "per_agent".into(),
                    decision: if stop {
                        LayerVerdict::Stopped
                    } else {
                        LayerVerdict::Allow
                    },
                    detail: json!({"turn": n}).into(),
                })?;
                if stop {
                    return Err(loopward_runner::TurnError::Stop(RunStatus::Stopped {
                        reason: "turns spent".into(),
                    }));
                }
                next.run(req).await
            })
        },
    )
}

/// Runs (or resumes) `r1`: `a` and `b` playing ping-pong behind `turns_per_agent(1, rebuild)`.
async fn per_agent(ws: &Path, runs: &Path, opts: LedgerOptions, rebuild: bool) -> RunReport {
    let team = [id("a"), id("b")];
    let model = BoxModelService::new(FakeModel::new(ping_pong()));
    let layer = turns_per_agent(1, rebuild);
    let b = Runner::builder(Workspace::new(ws).unwrap()).agents(&team, |name| {
        let agent = LlmAgent::builder(name.clone(), model.clone())
            .tools(tools::builtin(&team))
            .build();
        BoxTurnService::new(layer.layer(agent))
    });
    let runner = b.build().unwrap();
    run_or_resume_r1(&runner, runs, opts).await
}

#[tokio::test]
async fn a_custom_layer_resumes_from_the_decisions_it_had_settled() {
    // Never stopped: a's second turn (the run's third) is refused.
    let (ws, runs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let whole = per_agent(ws.path(), runs.path(), LedgerOptions::default(), true).await;
    assert!(
        matches!(whole.status, RunStatus::Stopped { .. }),
        "{:?}",
        whole.status
    );
    assert_eq!(whole.turns, 3);
    for rebuild in [true, false] {
        // Killed as the third turn starts, then resumed.
        let (ws, runs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let first = per_agent(
            ws.path(),
            runs.path(),
            killed_at("turn_started", 3),
            rebuild,
        )
        .await;
        assert!(
            matches!(first.status, RunStatus::AuditFailed { .. }),
            "{:?}",
            first.status
        );
        let resumed = per_agent(ws.path(), runs.path(), LedgerOptions::default(), rebuild).await;
        if rebuild {
            assert_eq!(
                resumed.status, whole.status,
                "the layer counted on across the resume"
            );
            assert_eq!(resumed.turns, 3);
        } else {
            // The way it used to be for every custom layer: it forgets and lets two more turns by.
            assert_eq!(resumed.turns, 5, "{:?}", resumed.status);
        }
    }
}
