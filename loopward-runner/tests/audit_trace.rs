//! Runs, turns, model calls and tool calls show up as `tracing` spans with OpenTelemetry GenAI
//! attribute names, nested run → turn → model/tool.

mod audit_support;

use audit_support::unrecorded_plan_and_build;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

#[derive(Clone, Debug, Default)]
struct SpanData {
    name: String,
    parent: Option<String>,
    fields: BTreeMap<String, String>,
}

/// Spans in creation order; the map follows span ids, which the registry reuses.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Spans>>);

type Spans = (Vec<SpanData>, BTreeMap<u64, usize>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut data = SpanData {
            name: attrs.metadata().name().into(),
            parent: ctx
                .span(id)
                .and_then(|s| s.parent())
                .map(|p| p.name().to_string()),
            ..SpanData::default()
        };
        attrs.record(&mut Fields(&mut data.fields));
        let mut c = self.0.lock().unwrap();
        c.0.push(data);
        let at = c.0.len() - 1;
        c.1.insert(id.into_u64(), at);
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut c = self.0.lock().unwrap();
        if let Some(&at) = c.1.get(&id.into_u64()) {
            values.record(&mut Fields(&mut c.0[at].fields));
        }
    }
}

#[tokio::test]
async fn spans_follow_the_genai_conventions_and_nest_run_turn_call() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let report = unrecorded_plan_and_build().await;

    let spans: Vec<SpanData> = capture.0.lock().unwrap().0.clone();
    let named = |n: &str| {
        spans
            .iter()
            .filter(|s| s.name == n)
            .cloned()
            .collect::<Vec<_>>()
    };

    let run = named("loopward.run");
    assert_eq!(run.len(), 1);
    assert_eq!(run[0].fields["gen_ai.conversation.id"], "r1");
    assert_eq!(run[0].fields["loopward.run.status"], "completed");
    assert_eq!(
        run[0].fields["gen_ai.usage.input_tokens"],
        report.usage.input_tokens.to_string()
    );

    let turns = named("invoke_agent");
    let agents: Vec<&str> = turns
        .iter()
        .map(|t| t.fields["gen_ai.agent.name"].as_str())
        .collect();
    assert_eq!(agents, ["planner", "builder"]);
    assert!(turns
        .iter()
        .all(|t| t.parent.as_deref() == Some("loopward.run")));
    assert_eq!(turns[0].fields["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(turns[0].fields["loopward.turn.finish"], "handoff");

    let chats = named("chat");
    assert_eq!(chats.len() as u64, report.usage.calls);
    assert!(chats
        .iter()
        .all(|c| c.parent.as_deref() == Some("invoke_agent")));
    assert_eq!(chats[0].fields["gen_ai.request.model"], "fake");
    // The backend names itself from inside the call; the reply says why the model stopped.
    assert!(chats
        .iter()
        .all(|c| c.fields["gen_ai.provider.name"] == "loopward.fake"));
    // The turn names the provider its model call named.
    assert!(turns
        .iter()
        .all(|t| t.fields["gen_ai.provider.name"] == "loopward.fake"));
    assert_eq!(
        chats[0].fields["gen_ai.response.finish_reasons"],
        "[\"tool_calls\"]"
    );
    assert_eq!(chats[0].fields["otel.name"], "chat");
    let out: u64 = chats
        .iter()
        .map(|c| {
            c.fields["gen_ai.usage.output_tokens"]
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(out, report.usage.output_tokens);

    let tools = named("execute_tool");
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t.fields["gen_ai.tool.name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "write_file",
            "handoff",
            "write_file",
            "write_file",
            "edit_file"
        ]
    );
    assert_eq!(tools[0].fields["gen_ai.tool.call.id"], "call-planner-1-1");
    assert_eq!(tools[0].fields["gen_ai.operation.name"], "execute_tool");
    assert!(tools
        .iter()
        .all(|t| t.parent.as_deref() == Some("invoke_agent")));
    assert!(!tools[0].fields.contains_key("error.type"));
}

#[cfg(feature = "http")]
#[path = "http/support.rs"]
#[allow(dead_code)] // the canned server, of which this test needs a part
mod http_support;

/// One agent on `model` runs one task; the spans it left.
#[cfg(feature = "http")]
async fn trace_of(model: loopward_runner::model::BoxModelService) -> Vec<SpanData> {
    use audit_support::{run_to_ledger, SteppingClock};
    use loopward_core::{Person, RunStatus};
    use loopward_runner::audit::LedgerOptions;
    use loopward_runner::tool::{BoxToolService, ToolExecutor};
    use loopward_runner::{tools, BoxTurnService, LlmAgent, Runner, Workspace};
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let solo = audit_support::id("solo");
    let agent = LlmAgent::builder(solo.clone(), model)
        .tools(tools::builtin(std::slice::from_ref(&solo)))
        .tool_stack(BoxToolService::new(ToolExecutor))
        .build();
    let runner = Runner::builder(Workspace::new(ws.path()).unwrap())
        .clock(SteppingClock::new())
        .agent(solo, BoxTurnService::new(agent))
        .unwrap()
        .build()
        .unwrap();
    let (report, _) = run_to_ledger(
        &runner,
        runs.path(),
        "r1",
        Person::at_the_keyboard().says("say hi"),
        "solo",
        LedgerOptions::default(),
    )
    .await;
    assert_eq!(report.status, RunStatus::Completed);
    let spans = capture.0.lock().unwrap().0.clone();
    spans
}

/// An http backend's chat span carries the reply's id (`gen_ai.response.id`: OpenAI's `id`,
/// Anthropic's `message.id`), streamed or whole, and the turn's `invoke_agent` span names the
/// provider the call named.
#[cfg(feature = "http")]
#[tokio::test]
async fn http_chat_spans_carry_the_reply_id_and_turns_name_the_provider() {
    use http_support::{data, event, json, sse, MockServer};
    use loopward_runner::model::http::{
        AnthropicConfig, AnthropicModel, ApiKey, OpenAiConfig, OpenAiModel,
    };
    use loopward_runner::model::BoxModelService;
    use serde_json::json;

    let openai = |url: &str, stream: bool| {
        let c = OpenAiConfig {
            stream,
            ..OpenAiConfig::new(format!("{url}/v1"), "gpt-test")
        };
        BoxModelService::new(OpenAiModel::new(c, None).unwrap())
    };
    let anthropic = |url: &str, stream: bool| {
        let c = AnthropicConfig {
            base_url: url.to_owned(),
            stream,
            ..AnthropicConfig::new("claude-test", "ANTHROPIC_API_KEY")
        };
        BoxModelService::new(AnthropicModel::new(c, ApiKey::new("sk-ant").unwrap()).unwrap())
    };
    let openai_chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        data(&json!({"id": "chatcmpl-streamed", "model": "gpt-test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))
    };
    let cases = [
        (
            "openai",
            "chatcmpl-streamed",
            sse(
                &[
                    openai_chunk(json!({"content": "hi"}), json!(null)),
                    openai_chunk(json!({}), json!("stop")),
                    "data: [DONE]\n\n".to_owned(),
                ],
                true,
            ),
            true,
        ),
        (
            "openai",
            "chatcmpl-whole",
            json(
                200,
                &json!({"id": "chatcmpl-whole", "model": "gpt-test", "choices": [{"index": 0,
                    "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
            ),
            false,
        ),
        (
            "anthropic",
            "msg_streamed",
            sse(
                &[
                    event(
                        "message_start",
                        &json!({"type": "message_start", "message": {
                        "id": "msg_streamed", "model": "claude-test",
                        "usage": {"input_tokens": 3, "output_tokens": 1}}}),
                    ),
                    event(
                        "content_block_start",
                        &json!({"type": "content_block_start", "index": 0,
                        "content_block": {"type": "text", "text": ""}}),
                    ),
                    event(
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": "hi"}}),
                    ),
                    event(
                        "content_block_stop",
                        &json!({"type": "content_block_stop", "index": 0}),
                    ),
                    event(
                        "message_delta",
                        &json!({"type": "message_delta",
                        "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
                    ),
                    event("message_stop", &json!({"type": "message_stop"})),
                ],
                true,
            ),
            true,
        ),
        (
            "anthropic",
            "msg_whole",
            json(
                200,
                &json!({"id": "msg_whole", "type": "message", "role": "assistant", "model": "claude-test",
                    "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                    "usage": {"input_tokens": 3, "output_tokens": 1}}),
            ),
            false,
        ),
    ];
    for (provider, id, reply, stream) in cases {
        let server = MockServer::start(vec![reply]).await;
        let model = if provider == "openai" {
            openai(&server.url, stream)
        } else {
            anthropic(&server.url, stream)
        };
        let spans = trace_of(model).await;
        let chats: Vec<_> = spans.iter().filter(|s| s.name == "chat").collect();
        assert_eq!(chats.len(), 1, "{provider} {id}: {spans:#?}");
        assert_eq!(chats[0].fields["gen_ai.response.id"], id, "{chats:#?}");
        assert_eq!(chats[0].fields["gen_ai.provider.name"], provider);
        let turns: Vec<_> = spans.iter().filter(|s| s.name == "invoke_agent").collect();
        assert_eq!(turns.len(), 1, "{spans:#?}");
        assert_eq!(
            turns[0].fields["gen_ai.provider.name"], provider,
            "{turns:#?}"
        );
    }
}
