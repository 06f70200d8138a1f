//! Runs, turns, model calls and tool calls show up as `tracing` spans with OpenTelemetry GenAI
//! attribute names, nested run → turn → model/tool.

mod audit_support;

use audit_support::{plan_and_build_script, run_to_ledger, team, SteppingClock};
use loopward_core::RunStatus;
use loopward_runner::audit::LedgerOptions;
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

    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let runner = team(
        ws.path(),
        &["planner", "builder"],
        plan_and_build_script(),
        SteppingClock::new(),
        None,
    );
    let (report, _) = run_to_ledger(
        &runner,
        runs.path(),
        "r1",
        "say hello",
        "planner",
        LedgerOptions::default(),
    )
    .await;
    assert_eq!(report.status, RunStatus::Completed);

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
