//! What a reply costs and how it ends a run: priced calls, empty answers, refused turns, a
//! reply cut off at its token limit.

use super::*;

#[tokio::test]
async fn a_priced_agent_records_the_cost_of_each_model_call() {
    let mut s = Script::default();
    s.say(&id("solo"), "a reply of some length");
    let dir = tempfile::tempdir().unwrap();
    let price = loopward_core::Price {
        input_per_mtok_micros: 3_000_000,
        output_per_mtok_micros: 15_000_000,
    };
    let agent = LlmAgent::builder(id("solo"), BoxModelService::new(FakeModel::new(s)))
        .price(price)
        .build();
    let runner = one_agent::one_agent(dir.path(), &id("solo"), BoxTurnService::new(agent));
    let (report, sink) = one_agent::run_as(&runner, "priced", &id("solo"), "answer").await;
    let (usage, cost) = sink
        .events()
        .into_iter()
        .find_map(|(_, e)| match e {
            AuditEvent::ModelCall {
                usage, cost_micros, ..
            } => Some((usage, cost_micros)),
            _ => None,
        })
        .unwrap();
    assert_eq!(cost, Some(price.cost_micros(&usage)));
    assert!(cost.unwrap() > 0);
    assert_eq!(report.usage.output_tokens, usage.output_tokens);
}

#[tokio::test]
async fn an_empty_or_blank_answer_fails_the_run_instead_of_completing_it() {
    for blank in ["", "  \n\t "] {
        let mut s = Script::default();
        s.say(&id("solo"), blank);
        let t = team(&["solo"], s, 8);
        let report = t.run("solo").await;
        let RunStatus::Failed { error } = &report.status else {
            panic!("{:?}", report.status)
        };
        assert!(
            error.contains("solo's model answered with nothing (no text, no tool call)"),
            "{error}"
        );
    }
}

#[tokio::test]
async fn a_turn_refused_before_it_ran_does_not_put_the_last_words_under_its_name() {
    use loopward_runner::layers::stopgate::{StopGateConfig, StopGates, StopMode};
    use tower::Layer;
    let mut s = Script::default();
    s.push(
        &id("builder"),
        ScriptedReply {
            text: "Built it; auditor, please check.".into(),
            tool_calls: vec![scripted(
                "handoff",
                json!({"to": "auditor", "message": "check"}),
            )],
            ..Default::default()
        },
    )
    .say(&id("builder"), "unused");
    let members = [id("builder"), id("auditor")];
    let gates = StopGates::new(&[StopGateConfig::turn("auditor", StopMode::Deny)]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let model = BoxModelService::new(FakeModel::new(s));
    let b = Runner::builder(Workspace::new(dir.path()).unwrap()).agents(&members, |m| {
        let agent = LlmAgent::builder(m.clone(), model.clone())
            .tools(tools::builtin(&members))
            .build();
        BoxTurnService::new(gates.turn_layer().layer(agent))
    });
    let (report, _) = one_agent::run(&b.build().unwrap(), &id("builder"), "t").await;
    assert!(matches!(report.status, RunStatus::Stopped { .. }));
    // The auditor never ran: the last words are the builder's, under the builder's name.
    assert_eq!(report.last_agent, Some(id("builder")));
    assert_eq!(report.final_text, "Built it; auditor, please check.");
}

#[tokio::test]
async fn a_reply_cut_off_at_the_token_limit_ends_the_run_failed_and_none_of_its_calls_run() {
    let mut s = Script::default();
    s.push(
        &id("builder"),
        ScriptedReply {
            text: "Writing the file now, then I will".into(),
            tool_calls: vec![scripted(
                "write_file",
                json!({"path": "half.txt", "content": "x"}),
            )],
            stop: loopward_runner::model::StopReason::TokenLimit,
        },
    )
    .say(&id("builder"), "unused");
    let t = team(&["builder"], s, 8);
    let report = t.run("builder").await;
    assert!(
        matches!(&report.status, RunStatus::Failed { error } if error.contains("builder's model was cut off at its token limit")),
        "{:?}",
        report.status
    );
    assert!(!t.dir.path().join("half.txt").exists());
    assert!(!t.sink.kinds().contains(&"tool_requested"));
    assert!(t.sink.events().iter().any(|(_, e)| matches!(
        e,
        AuditEvent::ModelReply { stop, .. } if stop.is_cut_off()
    )));
}
