//! The llama backend on a real model: SmolLM2-135M-Instruct (`cargo xtask fetch-model`).

use futures::future::BoxFuture;
use loopward_core::{AgentId, AuditEvent, Message, Person, RunId, RunStatus, ToolSpec};
use loopward_llama::{LlamaConfig, LlamaModel, LlamaService, ToolChoice};
use loopward_runner::audit::MemorySink;
use loopward_runner::model::{
    BoxModelService, ChatRequest, ChatResponse, ModelError, StopReason, TurnSlot,
};
use loopward_runner::tool::{Access, Tool, ToolError, ToolInvocation, ToolOutput, ToolSet};
use loopward_runner::{BoxTurnService, LlmAgent, RunSpec, Runner, TurnContext, Workspace};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tower::ServiceExt;

fn model_path() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("models")
        .join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        path.exists(),
        "the test model {} is missing: run `cargo xtask fetch-model` first",
        path.display()
    );
    path
}

fn load(config: LlamaConfig) -> LlamaService {
    LlamaModel::load(config).expect("the SmolLM2 model loads")
}

fn ask(messages: Vec<Message>, tools: Vec<ToolSpec>, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        agent: AgentId::new("asker").expect("a valid agent id"),
        messages,
        tools,
        max_tokens: Some(max_tokens),
        turn: TurnSlot::empty(),
    }
}

/// A tool that reports the weather of a city.
struct Weather;

impl Tool for Weather {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "get_weather".into(),
            description: "Returns today's weather in a city.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 40}},
                "required": ["city"]
            }),
        }
    }

    fn accesses(&self, _: &serde_json::Value, _: &TurnContext) -> Result<Vec<Access>, ToolError> {
        Ok(vec![])
    }

    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let city = inv.call.arguments["city"].as_str().unwrap_or("").to_owned();
        Box::pin(async move { Ok(ToolOutput::text(format!("{city}: sunny, 21 degrees."))) })
    }
}

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
        .run(RunSpec {
            id: RunId::new("llama-weather").unwrap(),
            task: Person::at_the_keyboard().says("What is the weather in Paris today?"),
            first: name,
            audit: sink.clone(),
            audit_location: None,
        })
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
async fn second_turn_prefills_only_the_new_tokens() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(2048));
    let mut messages = vec![
        Message::system("You are a helpful assistant."),
        Message::human(Person::at_the_keyboard().says("What is the capital of France?")),
    ];
    let first = model
        .clone()
        .oneshot(ask(messages.clone(), vec![], 24))
        .await
        .unwrap();
    assert!(first.content.contains("Paris"), "{first:?}");
    assert_eq!(first.usage.cached_tokens, 0);
    let first_prompt = first.usage.input_tokens;

    messages.push(Message::model(first.content.clone(), vec![]));
    messages.push(Message::human(
        Person::at_the_keyboard().says("And of Germany?"),
    ));
    let second = model
        .clone()
        .oneshot(ask(messages, vec![], 24))
        .await
        .unwrap();
    let prefilled = second.usage.input_tokens - second.usage.cached_tokens;
    // The cache holds the first prompt and every generated token but the end-of-turn marker.
    assert!(
        second.usage.cached_tokens >= first_prompt + first.usage.output_tokens,
        "first {:?}, second {:?}",
        first.usage,
        second.usage
    );
    // The new part: end-of-turn, "<|im_start|>user\nAnd of Germany?<|im_end|>\n<|im_start|>assistant\n".
    assert!(prefilled <= 16, "prefilled {prefilled}: {:?}", second.usage);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greedy_decoding_is_deterministic_and_a_repeated_prompt_reuses_all_but_one_token() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(1024));
    let req = ask(
        vec![Message::human(
            Person::at_the_keyboard().says("Name a colour."),
        )],
        vec![],
        12,
    );
    assert_eq!(model.decode_time(), std::time::Duration::ZERO);
    let started = std::time::Instant::now();
    let a = model.clone().oneshot(req.clone()).await.unwrap();
    let first = model.decode_time();
    assert!(
        first > std::time::Duration::ZERO && first < started.elapsed(),
        "decode time {first:?} is spent within the request's wall time"
    );
    let b = model.clone().oneshot(req).await.unwrap();
    assert!(
        model.decode_time() > first,
        "the second request decodes too"
    );
    assert_eq!(a.content, b.content);
    assert_eq!(b.usage.cached_tokens, b.usage.input_tokens - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_model_file_is_a_clear_error() {
    let err = LlamaModel::load(LlamaConfig::new("models/no-such-model.gguf")).unwrap_err();
    assert!(matches!(err, ModelError::Local(_)));
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_not_gguf_is_refused_before_llama_cpp_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weights.gguf");
    std::fs::write(&path, "<html>404 Not Found</html>").unwrap();
    let err = LlamaModel::load(LlamaConfig::new(&path)).unwrap_err();
    assert!(err.to_string().contains("is not a GGUF model"), "{err}");
    std::fs::write(&path, "GG").unwrap();
    let err = LlamaModel::load(LlamaConfig::new(&path)).unwrap_err();
    assert!(err.to_string().contains("is not a GGUF model"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_longer_than_the_context_is_an_error_and_the_model_still_answers_after() {
    // llama.cpp rounds the context up to a multiple of 256.
    let model = load(LlamaConfig::new(model_path()).n_ctx(256));
    let long = "word ".repeat(400);
    let err = model
        .clone()
        .oneshot(ask(
            vec![Message::human(Person::at_the_keyboard().says(long))],
            vec![],
            8,
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Local(_)));
    assert!(
        err.to_string()
            .contains("but the context holds 256: raise n_ctx"),
        "{err}"
    );
    let ok: ChatResponse = model
        .oneshot(ask(
            vec![Message::human(Person::at_the_keyboard().says("Hi"))],
            vec![],
            4,
        ))
        .await
        .unwrap();
    assert!(ok.usage.output_tokens > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_that_fills_the_context_is_an_error() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(256));
    let filler = "Once upon a time. ".repeat(35);
    let err = model
        .oneshot(ask(
            vec![Message::human(
                Person::at_the_keyboard()
                    .says(format!("{filler}Write a long story about a dragon.")),
            )],
            vec![],
            500,
        ))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("filled up"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_request_stops_and_the_next_one_is_served() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(2048));
    let long = ask(
        vec![Message::human(
            Person::at_the_keyboard().says("Write a long story about a dragon."),
        )],
        vec![],
        2000,
    );
    let pending = model.clone().oneshot(long);
    // Poll once so the job is queued, then drop it.
    let raced = tokio::time::timeout(std::time::Duration::ZERO, pending).await;
    assert!(raced.is_err(), "the long job cannot have finished already");
    let next = model
        .clone()
        .oneshot(ask(
            vec![Message::human(Person::at_the_keyboard().says("Say hi."))],
            vec![],
            8,
        ))
        .await
        .unwrap();
    assert!(next.usage.output_tokens > 0);
    assert_eq!(model.cancelled_jobs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tools_offered_a_text_answer_is_still_possible() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(2048));
    let reply = model
        .oneshot(ask(
            vec![Message::human(Person::at_the_keyboard().says("Say hello."))],
            vec![Weather.spec()],
            24,
        ))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_string_ends_the_answer_before_it() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(2048).stop("Paris"));
    let reply = model
        .oneshot(ask(
            vec![
                Message::system("You are a helpful assistant."),
                Message::human(Person::at_the_keyboard().says("What is the capital of France?")),
            ],
            vec![],
            24,
        ))
        .await
        .unwrap();
    assert_eq!(reply.content, "The capital of France is ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_sampling_repeats_itself_for_the_same_seed() {
    let config = LlamaConfig::new(model_path())
        .n_ctx(1024)
        .sampling(0.9, 0.95, 40, 7);
    let req = ask(
        vec![Message::human(
            Person::at_the_keyboard().says("Invent a name for a cat."),
        )],
        vec![],
        16,
    );
    let a = load(config.clone()).oneshot(req.clone()).await.unwrap();
    let b = load(config).oneshot(req).await.unwrap();
    assert_eq!(a.content, b.content);
    assert!(a.usage.output_tokens > 0);
}

/// A text answer that runs into max_tokens says so (the runner does not take it as an answer);
/// one that ends by itself is finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_answer_cut_by_max_tokens_says_so() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(1024));
    let cut = model
        .clone()
        .oneshot(ask(
            vec![Message::human(
                Person::at_the_keyboard().says("Write a long story about a dragon."),
            )],
            vec![],
            8,
        ))
        .await
        .unwrap();
    assert_eq!(cut.stop, StopReason::TokenLimit, "{cut:?}");
    assert_eq!(cut.usage.output_tokens, 8);
    let whole = load(LlamaConfig::new(model_path()).n_ctx(1024))
        .oneshot(ask(
            vec![Message::human(Person::at_the_keyboard().says("Say hi."))],
            vec![],
            64,
        ))
        .await
        .unwrap();
    assert_eq!(whole.stop, StopReason::Finished, "{whole:?}");
}

/// With bounded answers, the same rambling request ends by itself before its budget: one line of
/// printable ASCII, shorter than `max_tokens`, finished — with or without tools offered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_answer_ends_before_its_budget_instead_of_being_cut_off() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(1024).answer_chars(200));
    for tools in [vec![], vec![Weather.spec()]] {
        let reply = model
            .clone()
            .oneshot(ask(
                vec![Message::human(
                    Person::at_the_keyboard().says("Write a long story about a dragon."),
                )],
                tools,
                64,
            ))
            .await
            .unwrap();
        assert_eq!(reply.stop, StopReason::Finished, "{reply:?}");
        if reply.tool_calls.is_empty() {
            assert!(reply.usage.output_tokens < 64, "{reply:?}");
            assert!(reply.content.len() <= 63, "{reply:?}");
            assert!(
                reply.content.chars().all(|c| (' '..='~').contains(&c)),
                "{reply:?}"
            );
        }
    }
}

/// Four runs on one model with four sequence slots: their requests are decoded together in one
/// batch, each is answered, and each keeps its own KV region: asked again, every request reuses
/// all but one token of its prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_one_batch_and_each_keeps_its_own_cache() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(1024).parallel(4));
    let request = |k: usize| {
        ask(
            vec![
                Message::system(format!("You are assistant number {k}. Answer briefly.")),
                Message::human(Person::at_the_keyboard().says("What is the capital of France?")),
            ],
            vec![],
            24,
        )
    };
    for round in 0..2 {
        let replies =
            futures::future::try_join_all((0..4).map(|k| model.clone().oneshot(request(k))))
                .await
                .unwrap();
        for (k, r) in replies.iter().enumerate() {
            assert!(
                !r.content.trim().is_empty() && r.usage.output_tokens > 0,
                "round {round}, run {k}: {r:?}"
            );
            if round == 1 {
                assert_eq!(
                    r.usage.cached_tokens + 1,
                    r.usage.input_tokens,
                    "run {k} did not find its own prompt in its slot: {:?}",
                    r.usage
                );
            }
        }
    }
    assert!(
        model.peak_batched_requests() >= 3,
        "at most {} requests were decoded together",
        model.peak_batched_requests()
    );
}

/// More requests than slots: the rest wait their turn and every one is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_requests_than_slots_wait_their_turn() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(512).parallel(2));
    let replies = futures::future::try_join_all((0..5).map(|k| {
        model.clone().oneshot(ask(
            vec![Message::human(
                Person::at_the_keyboard().says(format!("Say the number {k}.")),
            )],
            vec![],
            8,
        ))
    }))
    .await
    .unwrap();
    assert_eq!(replies.len(), 5);
    assert!(
        replies.iter().all(|r| r.usage.output_tokens > 0),
        "{replies:?}"
    );
    assert_eq!(model.peak_batched_requests(), 2);
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
        .oneshot(ask(
            vec![Message::human(
                Person::at_the_keyboard().says("What is the weather in Paris today?"),
            )],
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
        .oneshot(ask(
            vec![Message::human(
                Person::at_the_keyboard().says("What is the weather in Paris today?"),
            )],
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
        .oneshot(ask(
            vec![Message::human(Person::at_the_keyboard().says(
                "Write a very long note about the history of Paris, at least a thousand words.",
            ))],
            vec![note],
            200,
        ))
        .await
        .unwrap();
    let text = reply.tool_calls[0].arguments["text"].as_str().unwrap();
    assert!(text.chars().count() <= 24, "{text:?}");
    assert!(reply.usage.output_tokens < 200, "{:?}", reply.usage);
}

mod property {
    //! A grammar-constrained call is complete and valid against its schema, or a recorded
    //! error — for random schemas, prompts and budgets.
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;
    use std::sync::OnceLock;

    const ITEMS: u32 = 3;

    fn shared() -> &'static (LlamaService, tokio::runtime::Runtime) {
        static MODEL: OnceLock<(LlamaService, tokio::runtime::Runtime)> = OnceLock::new();
        MODEL.get_or_init(|| {
            let model = load(
                LlamaConfig::new(model_path())
                    .n_ctx(2048)
                    .tool_choice(ToolChoice::CallThenAnswer)
                    .argument_bounds(32, ITEMS),
            );
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            (model, rt)
        })
    }

    fn property() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(json!({"type": "string"})),
            (1u32..20).prop_map(|n| json!({"type": "string", "maxLength": n})),
            Just(json!({"type": "integer"})),
            Just(json!({"type": "number"})),
            Just(json!({"type": "boolean"})),
            Just(json!({"type": "string", "enum": ["red", "green", "blue"]})),
            Just(json!({"type": "array", "items": {"type": "string"}})),
        ]
    }

    fn schema() -> impl Strategy<Value = Value> {
        proptest::collection::vec((property(), any::<bool>()), 1..4).prop_map(|props| {
            let names = ["alpha", "beta", "gamma"];
            let mut properties = serde_json::Map::new();
            let mut required = vec![];
            for (i, (p, req)) in props.into_iter().enumerate() {
                properties.insert(names[i].into(), p);
                if req {
                    required.push(names[i]);
                }
            }
            json!({"type": "object", "properties": properties, "required": required})
        })
    }

    /// Checks `v` against the subset of JSON Schema that [`schema`] produces.
    fn valid(v: &Value, s: &Value) -> Result<(), String> {
        let fail = |why: &str| Err(format!("{v} against {s}: {why}"));
        match s["type"].as_str() {
            Some("object") => {
                let Value::Object(o) = v else {
                    return fail("not an object");
                };
                for k in s["required"].as_array().unwrap() {
                    if !o.contains_key(k.as_str().unwrap()) {
                        return fail("a required key is missing");
                    }
                }
                for (k, x) in o {
                    let Some(p) = s["properties"].get(k) else {
                        return fail("an undeclared key");
                    };
                    valid(x, p)?;
                }
                Ok(())
            }
            Some("string") => {
                let Value::String(t) = v else {
                    return fail("not a string");
                };
                let max = s["maxLength"].as_u64().unwrap_or(32);
                if let Some(e) = s["enum"].as_array() {
                    return if e.contains(v) {
                        Ok(())
                    } else {
                        fail("not in the enum")
                    };
                }
                if t.chars().count() as u64 > max {
                    return fail("longer than its bound");
                }
                Ok(())
            }
            Some("integer") if v.is_i64() || v.is_u64() => Ok(()),
            Some("number") if v.is_number() => Ok(()),
            Some("boolean") if v.is_boolean() => Ok(()),
            Some("array") => {
                let Value::Array(a) = v else {
                    return fail("not an array");
                };
                if a.len() as u32 > ITEMS {
                    return fail("more items than its bound");
                }
                a.iter().try_for_each(|x| valid(x, &s["items"]))
            }
            _ => fail("wrong type"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]
        #[test]
        fn a_constrained_call_is_complete_and_valid_or_a_recorded_error(
            parameters in schema(),
            budget in 1u32..40,
            topic in prop::sample::select(vec!["Paris", "a red bicycle", "the number 7", "bees"]),
        ) {
            let (model, rt) = shared();
            let tool = ToolSpec {
                name: "record".into(),
                description: "Records facts about a topic.".into(),
                parameters: parameters.clone(),
            };
            let req = ask(vec![Message::human(Person::at_the_keyboard().says(format!("Record facts about {topic}.")))], vec![tool], budget);
            match rt.block_on(model.clone().oneshot(req)) {
                Ok(reply) => {
                    prop_assert_eq!(reply.tool_calls.len(), 1, "{:?}", reply);
                    prop_assert_eq!(&reply.tool_calls[0].name, "record");
                    prop_assert!(reply.usage.output_tokens <= u64::from(budget));
                    if let Err(why) = valid(&reply.tool_calls[0].arguments, &parameters) {
                        prop_assert!(false, "{}", why);
                    }
                }
                Err(e) => {
                    prop_assert!(
                        matches!(&e, ModelError::InvalidResponse(m) if m.contains(&format!("cut off at max_tokens ({budget})"))),
                        "{e:?}"
                    );
                }
            }
        }
    }
}
