//! Real tool calls through llama-server's tool template, each gated.

use super::*;

/// The chat template that gets tool calls out of SmolLM2 through llama-server.
fn tools_template() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/llama-server-tools.jinja")
}

/// A team on the openai backend at `url` in which every reply is a tool call of at most
/// `max_tokens`: the builder owns
/// every file; the reviewer may write too, but its territory is none.
fn gated_team(url: &str, max_tokens: u32) -> String {
    format!(
        r#"[run]
first = "builder"
runs_dir = "runs"

{backend}tool_choice = "required"
argument_chars = 48

[[agent]]
name = "builder"
role = "You are the builder. You write files with write_file and hand work to the reviewer with handoff."
tools = ["write_file", "handoff"]
max_steps = 2

[[agent]]
name = "reviewer"
role = "You check the builder's files."
tools = ["write_file"]
max_steps = 1

[[territory]]
paths = ["**"]
owner = "builder"

[limits]
turns_per_run = 2
"#,
        backend = backend(url, max_tokens)
    )
}

/// One gated tool call as the ledger has it.
#[derive(Debug)]
struct Gated {
    agent: String,
    tool: loopward_core::ToolName,
    arguments: serde_json::Value,
    /// The territory gate's decision on it.
    territory: Option<Decision>,
    /// Its effects, when it ran.
    effects: Vec<loopward_core::Effect>,
}

/// Every requested tool call of `run`, with the territory gate's decision and its effects.
fn gated_calls(dir: &Path, run: &str) -> Vec<Gated> {
    let events = ledger::events(&dir.join("runs").join(run)).unwrap();
    let mut calls: Vec<(loopward_core::CallId, Gated)> = vec![];
    for (scope, e) in events {
        match e {
            AuditEvent::ToolRequested {
                call_id,
                tool,
                arguments,
            } => calls.push((
                call_id,
                Gated {
                    agent: scope
                        .agent
                        .map(|a| a.as_str().to_owned())
                        .unwrap_or_default(),
                    tool,
                    arguments,
                    territory: None,
                    effects: vec![],
                },
            )),
            AuditEvent::GateDecision {
                call_id: Some(id),
                gate,
                decision,
                ..
            } if &*gate.name == "territory:builder" => {
                if let Some((_, c)) = calls.iter_mut().find(|(c, _)| *c == id) {
                    c.territory = Some(decision);
                }
            }
            AuditEvent::ToolFinished {
                call_id, effects, ..
            } => {
                if let Some((_, c)) = calls.iter_mut().find(|(c, _)| *c == call_id) {
                    c.effects = effects;
                }
            }
            _ => {}
        }
    }
    calls.into_iter().map(|(_, c)| c).collect()
}

#[test]
#[ignore = "needs llama-server: run `bash scripts/llama-server-ci.sh`"]
fn real_tool_calls_stream_through_llama_server_and_are_gated() {
    let e = env();
    let spot = Spot::free();
    let server = spot.start(&e, "tools.log", Some(&tools_template()));
    let run = |task: &str, id: &str| {
        let dir = workspace_of(&gated_team(&spot.url, 200));
        let child = spawn_piped(run_openai(dir.path(), &e.key, id, &["--task", task]));
        let out = wait_for(child, Duration::from_secs(300), id);
        let (status, calls, _) = ledger_of(dir.path(), id, &e.key);
        let shown = text(&out);
        assert!(defined(&status), "{id} ended {status:?}\n{shown}");
        assert!(
            calls.iter().all(|(_, out)| *out > 0),
            "{id}: a model call reported no output tokens: {calls:?}"
        );
        let calls = gated_calls(dir.path(), id);
        (dir, calls, shown)
    };

    // The builder is asked to write: its calls are the model's own, streamed back whole, and its
    // territory lets them through; what they wrote is on disk.
    let (built, calls, shown) = run("Create src/hello.txt.", "built");
    let writes: Vec<&Gated> = calls.iter().filter(|c| c.tool == "write_file").collect();
    assert!(
        !writes.is_empty(),
        "the builder made no write_file call\n{shown}"
    );
    for w in &writes {
        assert_eq!(w.agent, "builder", "{w:?}");
        assert_eq!(w.territory, Some(Decision::Allow), "{w:?}\n{shown}");
        assert!(
            w.effects.iter().any(|f| f.status == EffectStatus::Ok),
            "an allowed write changed nothing: {w:?}\n{shown}"
        );
    }
    let last = writes.last().unwrap();
    let path = last.arguments["path"].as_str().unwrap();
    let on_disk = std::fs::read_to_string(built.path().join(path)).unwrap();
    assert_eq!(
        on_disk,
        last.arguments["content"].as_str().unwrap(),
        "{path}"
    );

    // Asked to hand off first, the builder does, and the reviewer's write is refused by the
    // builder's territory: a `gate_decision` deny, no effect, nothing on disk.
    let (refused, calls, shown) = run(
        "Hand off to the reviewer, who checks src/hello.txt.",
        "refused",
    );
    let events = ledger::events(&refused.path().join("runs/refused")).unwrap();
    assert!(
        events
            .iter()
            .any(|(_, e)| matches!(e, AuditEvent::HandoffRegistered(h)
            if h.from.as_str() == "builder" && h.to.as_str() == "reviewer")),
        "the builder did not hand off to the reviewer\n{shown}"
    );
    let denied: Vec<&Gated> = calls
        .iter()
        .filter(|c| c.agent == "reviewer" && c.tool == "write_file")
        .collect();
    assert!(
        !denied.is_empty(),
        "the reviewer made no write_file call\n{shown}"
    );
    for d in &denied {
        assert!(
            matches!(&d.territory, Some(Decision::Deny(_))),
            "the reviewer's write was not refused by the territory: {d:?}\n{shown}"
        );
        assert!(d.effects.is_empty(), "{d:?}");
        let path = d.arguments["path"].as_str().unwrap_or_default();
        assert!(
            path.is_empty() || !refused.path().join(path).exists(),
            "the refused write's file {path:?} exists"
        );
    }
    assert!(shown.contains("refused by territory:builder"), "{shown}");

    // Six tokens cannot hold a whole call: the server stops the stream inside it, and the run
    // fails with that said; no half call reaches a tool.
    let cut = workspace_of(&gated_team(&spot.url, 6));
    let out = run_openai(
        cut.path(),
        &e.key,
        "cut",
        &["--task", "Create src/hello.txt."],
    )
    .output()
    .unwrap();
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(9), "{shown}");
    let (status, _, tools) = ledger_of(cut.path(), "cut", &e.key);
    assert!(matches!(status, RunStatus::Failed { .. }), "{status:?}");
    assert_eq!(tools, 0, "a cut-off call reached a tool\n{shown}");
    assert!(shown.contains("in the middle of a tool call"), "{shown}");
    drop(server);
}
