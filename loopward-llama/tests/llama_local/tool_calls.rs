//! Grammar-constrained tool calls: made, recorded in the ledger, bounded by their budget.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smollm2_calls_a_constrained_tool_and_finishes_with_the_call_in_the_ledger() {
    let model = BoxModelService::new(load(
        LlamaConfig::new(model_path())
            .n_ctx(2048)
            .tool_choice(ToolChoice::CallThenAnswer),
    ));
    let dir = tempfile::tempdir().unwrap();
    let name = AgentId::new("forecaster").unwrap();
    let agent = LlmAgent::builder(name.clone(), model)
        .system("You answer questions about the weather. Use the get_weather tool.")
        .tools(ToolSet::new().with(Weather))
        .max_steps(3)
        .max_tokens(64)
        .build();
    let runner = Runner::builder(Workspace::new(dir.path()).unwrap())
        .agent(name.clone(), BoxTurnService::new(agent))
        .unwrap()
        .build()
        .unwrap();
    let sink = Arc::new(MemorySink::default());
    let report = runner
        .run(RunSpec::new(
            RunId::new("llama-weather").unwrap(),
            Person::at_the_keyboard().says("What is the weather in Paris today?"),
            name,
            sink.clone(),
        ))
        .await;
    assert_eq!(report.status, RunStatus::Completed, "{report:?}");
    // The model finished with an answer in text after reading the tool's result.
    assert!(report.final_text.contains("sunny"), "{report:?}");

    let events: Vec<AuditEvent> = sink.events().into_iter().map(|(_, e)| e).collect();
    let requested: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AuditEvent::ToolRequested {
                tool, arguments, ..
            } => Some((tool.clone(), arguments.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(requested.len(), 1, "exactly one tool call: {events:#?}");
    for (tool, arguments) in &requested {
        assert_eq!(tool, "get_weather");
        assert!(
            arguments["city"].is_string(),
            "invalid arguments {arguments}"
        );
    }
    let finished_ok = events.iter().any(|e| {
        matches!(e, AuditEvent::ToolFinished { tool, is_error: false, .. } if tool == "get_weather")
    });
    assert!(finished_ok, "the tool did not run cleanly: {events:#?}");
    let usages: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AuditEvent::ModelCall { usage, .. } => Some(*usage),
            _ => None,
        })
        .collect();
    assert_eq!(usages.len(), 2, "a call, then the answer: {events:#?}");
    // The answer reused the first prompt and the call from the KV cache.
    assert!(
        usages[1].cached_tokens >= usages[0].input_tokens + usages[0].output_tokens,
        "{usages:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tools_offered_a_text_answer_is_still_possible() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(2048));
    let reply = model
        .oneshot(ask_person("Say hello.", vec![Weather.spec()], 24))
        .await
        .unwrap();
    // Either shape is allowed by the grammar; whichever came out must be well-formed.
    if let Some(call) = reply.tool_calls.first() {
        assert_eq!(call.name, "get_weather");
        assert!(call.arguments["city"].is_string());
    } else {
        assert!(!reply.content.starts_with('{'), "{reply:?}");
    }
}

/// A tool-call budget too small for the call: a recorded error, never a half call, and the
/// model answers the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_by_its_budget_is_an_error_and_the_model_recovers() {
    let model = load(
        LlamaConfig::new(model_path())
            .n_ctx(2048)
            .tool_choice(ToolChoice::CallThenAnswer),
    );
    let err = model
        .clone()
        .oneshot(ask_person(
            "What is the weather in Paris today?",
            vec![Weather.spec()],
            3,
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::InvalidResponse(_)), "{err:?}");
    assert!(
        err.to_string().contains("cut off at max_tokens (3)")
            && err.to_string().contains("nothing was called"),
        "{err}"
    );
    let call = model
        .oneshot(ask_person(
            "What is the weather in Paris today?",
            vec![Weather.spec()],
            64,
        ))
        .await
        .unwrap();
    assert_eq!(call.tool_calls.len(), 1, "{call:?}");
    assert!(call.tool_calls[0].arguments["city"].is_string());
}

/// Argument strings without a `maxLength` are bounded by the configured default: a model told
/// to write at length still closes its call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unbounded_string_argument_is_cut_by_the_grammar_not_the_budget() {
    let note = ToolSpec {
        name: "write_note".into(),
        description: "Writes a note.".into(),
        parameters: json!({"type": "object", "properties": {"text": {"type": "string"}},
            "required": ["text"]}),
    };
    let model = load(
        LlamaConfig::new(model_path())
            .n_ctx(2048)
            .tool_choice(ToolChoice::CallThenAnswer)
            .argument_bounds(24, 4),
    );
    let reply = model
        .oneshot(ask_person(
            "Write a very long note about the history of Paris, at least a thousand words.",
            vec![note],
            200,
        ))
        .await
        .unwrap();
    let text = reply.tool_calls[0].arguments["text"].as_str().unwrap();
    assert!(text.chars().count() <= 24, "{text:?}");
    assert!(reply.usage.output_tokens < 200, "{:?}", reply.usage);
}
