//! `audit.html` and `runs/index.html`: what a reader sees, folded from ledger records alone, and
//! model-controlled text shown as text.

use loopward_core::{
    AgentId, AuditEvent, Decision, Effect, EffectKind, FinishReason, GateMode, Handoff, Refusal,
    RunId, RunStatus, Scope, TurnNumber, Usage,
};
use loopward_pages::{render_html, render_index};
use loopward_runner::audit::{Chain, Ledger, LedgerOptions, LedgerState, Record, GENESIS};

const XSS_PATH: &str = "docs/<img src=x onerror=alert(1)>.md";
const XSS_CONTENT: &str = "<script>alert('owned')</script>";

fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}

/// The territory gate `gate`'s `decision` on `write_file` call `call` to `path`, enforced.
fn write_decision(call: &str, gate: &str, path: &str, decision: Decision) -> AuditEvent {
    AuditEvent::GateDecision {
        call_id: Some(call.into()),
        gate: loopward_core::GateId::new(loopward_core::GateKind::Territory, gate),
        mode: GateMode::Enforce,
        action: loopward_core::Action::tool("write_file"),
        path_raw: Some(path.into()),
        source: None,
        path: Some(path.into()),
        decision,
    }
}

/// A two-agent run: builder writes (with markup in its arguments), is refused a write to the
/// auditor's file and a handoff to the tester, hands off to the auditor, whose second handoff is
/// refused.
fn events() -> Vec<(Option<u32>, Option<&'static str>, AuditEvent)> {
    let refusal = Refusal::new(
        &loopward_core::GateId::new(loopward_core::GateKind::Territory, "territory:auditor"),
        "review.md belongs to auditor; builder does not own it <b>bold</b>",
        "hand the change to auditor",
    );
    let review =
        loopward_core::GateId::new(loopward_core::GateKind::Review, "review:builder->auditor");
    vec![
        (
            None,
            None,
            AuditEvent::RunStarted {
                task: "build <it>".into(),
                agent: agent("builder"),
            },
        ),
        (
            None,
            None,
            AuditEvent::HumanMessage {
                content: (&loopward_core::Person::at_the_keyboard().says("build <it>")).into(),
            },
        ),
        (
            Some(1),
            Some("builder"),
            AuditEvent::TurnStarted {
                agent: agent("builder"),
            },
        ),
        (
            Some(1),
            Some("builder"),
            AuditEvent::ToolRequested {
                call_id: "c1".into(),
                tool: "write_file".into(),
                arguments: serde_json::json!({"path": XSS_PATH, "content": XSS_CONTENT}),
            },
        ),
        (
            Some(1),
            Some("builder"),
            write_decision("c1", "territory:builder", XSS_PATH, Decision::Allow),
        ),
        (
            Some(1),
            Some("builder"),
            AuditEvent::ToolFinished {
                call_id: "c1".into(),
                tool: "write_file".into(),
                is_error: false,
                effects: vec![Effect::ok(XSS_PATH, EffectKind::Create)],
                summary: format!("wrote {XSS_PATH}"),
                output: None,
            },
        ),
        (
            Some(1),
            Some("builder"),
            write_decision(
                "c2",
                "territory:auditor",
                "review.md",
                Decision::Deny(refusal.clone()),
            ),
        ),
        (
            Some(1),
            Some("builder"),
            AuditEvent::GateDecision {
                call_id: Some("c3".into()),
                gate: review.clone(),
                mode: GateMode::Enforce,
                action: "handoff:tester".parse().unwrap(),
                path_raw: None,
                source: None,
                path: None,
                decision: Decision::Deny(Refusal::new(
                    &review,
                    "auditor must review first",
                    "hand off to auditor",
                )),
            },
        ),
        (
            Some(1),
            Some("builder"),
            AuditEvent::HandoffRegistered(Handoff {
                from: agent("builder"),
                to: agent("auditor"),
                message: "please review </svg><script>x()</script>".into(),
            }),
        ),
        (
            Some(1),
            Some("builder"),
            AuditEvent::TurnEnded {
                finish: FinishReason::Handoff,
                usage: Usage::default(),
                ends_run: None,
            },
        ),
        (
            Some(2),
            Some("auditor"),
            AuditEvent::TurnStarted {
                agent: agent("auditor"),
            },
        ),
        (
            Some(2),
            Some("auditor"),
            AuditEvent::HandoffRegistered(Handoff {
                from: agent("auditor"),
                to: agent("tester"),
                message: "test it".into(),
            }),
        ),
        (
            Some(2),
            Some("auditor"),
            AuditEvent::HandoffRefused {
                to: agent("builder"),
                standing: agent("tester"),
            },
        ),
        (
            Some(2),
            Some("auditor"),
            AuditEvent::TurnEnded {
                finish: FinishReason::Handoff,
                usage: Usage::default(),
                ends_run: None,
            },
        ),
        (
            Some(3),
            Some("tester"),
            AuditEvent::TurnStarted {
                agent: agent("tester"),
            },
        ),
        (
            Some(3),
            Some("tester"),
            AuditEvent::LayerDecision {
                layer: "stopgate".into(),
                decision: loopward_core::LayerVerdict::Approved,
                // What an interactive stop-gate writes (`StopGateDetail`).
                detail: serde_json::json!({"gate": "publish", "action": "turn:tester", "by": "ana",
                    "mode": "interactive", "summary": "tester's turn"})
                .into(),
            },
        ),
        (
            Some(3),
            Some("tester"),
            AuditEvent::TurnEnded {
                finish: FinishReason::Done,
                usage: Usage::default(),
                ends_run: None,
            },
        ),
        (
            None,
            None,
            AuditEvent::RunEnded {
                status: RunStatus::Completed,
                usage: Usage::default(),
                cost_micros: None,
            },
        ),
    ]
}

fn sealed() -> Vec<Record> {
    seal_all(events())
}

fn count(page: &str, needle: &str) -> usize {
    page.matches(needle).count()
}

#[test]
fn markup_in_a_tool_argument_shows_as_text_not_as_markup() {
    let page = render_html(&sealed(), &LedgerState::verified("sha256"));
    for raw in ["<script", "<img", "<b>bold", "</svg><script", "<it>"] {
        assert!(!page.contains(raw), "raw markup {raw:?} reached the page");
    }
    assert!(
        page.contains("&lt;script&gt;alert('owned')&lt;/script&gt;")
            || page.contains("&lt;script&gt;alert(&#39;owned&#39;)"),
        "the argument is not shown as text"
    );
    assert!(page.contains("docs/&lt;img src=x onerror=alert(1)&gt;.md"));
    assert!(page.contains("build &lt;it&gt;"));
}

#[test]
fn audit_html_draws_a_lane_per_agent_arrows_and_linked_markers() {
    let page = render_html(&sealed(), &LedgerState::verified("sha256"));
    assert_eq!(
        count(&page, "<g class=\"lane\""),
        3,
        "builder, auditor, tester"
    );
    assert_eq!(count(&page, "class=\"turn\""), 3);
    assert_eq!(
        count(&page, "class=\"arrow stood\""),
        2,
        "builder→auditor, auditor→tester"
    );
    assert_eq!(
        count(&page, "class=\"arrow refused\""),
        2,
        "gate-refused handoff, second handoff"
    );
    assert_eq!(count(&page, "class=\"marker write\""), 1);
    assert_eq!(count(&page, "class=\"marker refusal\""), 2);
    assert_eq!(count(&page, "class=\"marker stopgate\""), 1);
    // Every marker and arrow links to its record, and the record is on the page.
    for seq in [6, 7, 8, 9, 13, 16] {
        assert!(
            page.contains(&format!("href=\"#seq-{seq}\"")),
            "no link to #{seq}"
        );
        assert!(
            page.contains(&format!("id=\"seq-{seq}\"")),
            "no record #{seq}"
        );
    }
    // The refusal's reason and way out are on hover.
    assert!(page.contains("what to do: hand the change to auditor"));
    assert!(page.contains("stop-gate publish approved by ana"));
    // Pass-through verdicts are folded.
    assert!(page.contains("<details><summary>1 pass-through verdict(s), #5</summary>"));
    // Files × agents.
    assert!(page.contains("refused ×1"));
    // No script, nothing fetched.
    assert!(
        !page.contains("<script") && !page.contains("src=\"http") && !page.contains("href=\"http")
    );
}

#[test]
fn index_marks_runs_that_do_not_verify_and_links_the_rest() {
    let runs = tempfile::tempdir().unwrap();
    let key = loopward_runner::audit::LedgerKey::from_bytes(vec![5u8; 32]).unwrap();
    for name in ["good", "tampered"] {
        let run = RunId::new(name).unwrap();
        let opts = LedgerOptions {
            pages: loopward_pages::pages(),
            ..LedgerOptions::keyed(key.clone())
        };
        let ledger = Ledger::create(runs.path(), &run, opts).unwrap();
        for (turn, who, event) in events() {
            let scope = Scope {
                run: run.clone(),
                turn: turn.map(TurnNumber),
                agent: who.map(agent),
            };
            loopward_core::AuditSink::record(&*ledger, &scope, &event).unwrap();
        }
        let fin = ledger.finish().unwrap();
        assert!(fin.pages[0].ends_with("audit.html") && fin.pages[0].is_file());
    }
    let events = runs.path().join("tampered/events.jsonl");
    let text = std::fs::read_to_string(&events)
        .unwrap()
        .replace("test it", "TEST IT");
    std::fs::write(&events, text).unwrap();

    let keys = loopward_runner::audit::KeyRing::single(key.clone());
    let page = render_index(
        runs.path(),
        &loopward_runner::audit::VerifyOptions::keyed(keys),
    )
    .unwrap();
    assert_eq!(count(&page, "<tr class=\"run\""), 1);
    assert_eq!(count(&page, "<tr class=\"invalid\""), 1);
    assert!(page.contains("href=\"good/audit.html\""));
    assert!(page.contains("LEFT OUT: the ledger did not verify"));
    // The ledger state names the key that verified the run, on the index and on its page.
    let id = key.id().to_string();
    assert_eq!(
        count(
            &page,
            &format!("<code class=\"key\" title=\"the key that verified it\">{id}</code>")
        ),
        1
    );
    let good = std::fs::read_to_string(runs.path().join("good/audit.html")).unwrap();
    assert!(good.contains(&format!(" key <code>{id}</code>")), "{id}");
    assert_eq!(count(&page, "<svg class=\"mini\""), 1);
    assert!(!page.contains("<script"));
}

/// `records` of run `r1`, sealed in order, each `(turn, agent, event)`.
fn seal_all(events: Vec<(Option<u32>, Option<&str>, AuditEvent)>) -> Vec<Record> {
    let mut prev = GENESIS.to_string();
    let mut out = Vec::new();
    for (i, (turn, who, event)) in events.into_iter().enumerate() {
        let scope = Scope {
            run: RunId::new("r1").unwrap(),
            turn: turn.map(TurnNumber),
            agent: who.map(agent),
        };
        let (rec, _) = Record::seal(
            &Chain::Sha256,
            i as u64 + 1,
            "2026-01-01T00:00:00.000Z",
            &scope,
            &event,
            &prev,
        )
        .unwrap();
        prev = rec.hash.clone();
        out.push(rec);
    }
    out
}

/// A `say` call of `tester` (`id`, its words) and how it ended.
fn say(
    id: &str,
    text: &str,
    is_error: bool,
) -> Vec<(Option<u32>, Option<&'static str>, AuditEvent)> {
    vec![
        (
            Some(1),
            Some("tester"),
            AuditEvent::ToolRequested {
                call_id: id.into(),
                tool: "say".into(),
                arguments: serde_json::json!({ "text": text }),
            },
        ),
        (
            Some(1),
            Some("tester"),
            AuditEvent::ToolFinished {
                call_id: id.into(),
                tool: "say".into(),
                is_error,
                effects: vec![],
                summary: String::new(),
                output: None,
            },
        ),
    ]
}

#[test]
fn an_agents_say_shows_as_what_it_said_escaped_and_only_once_it_went_through() {
    let mut events = say("c1", "<b>ship</b> it\nnow", false);
    events.extend(say("c2", "refused words", true));
    let records = seal_all(events);
    let page = render_html(&records, &LedgerState::verified("sha256"));
    assert!(!page.contains("<b>ship"), "raw markup reached the page");
    // Listed near the top, and in the events table on the call's end, linked.
    assert!(page.contains("<h2>Said to you</h2>"));
    assert_eq!(
        count(&page, "tester said: &lt;b&gt;ship&lt;/b&gt; it\nnow"),
        2,
        "{page}"
    );
    assert!(page.contains("<a href=\"#seq-2\">#2</a> tester said:"));
    assert!(page.contains("<tr id=\"seq-2\" class=\"said\">"));
    // A say that did not go through was not said (its request still shows, as any call's).
    assert!(!page.contains("tester said: refused words"));
    assert!(
        !page.contains("class=\"human\""),
        "an agent's words are no person's"
    );
    let md = loopward_runner::audit::render_markdown(&records);
    assert!(
        md.contains("#2 **tester said:** <b>ship</b> it now\n"),
        "{md}"
    );
    assert!(!md.contains("tester said:** refused words"), "{md}");
    // A page with nothing said has no such section.
    let quiet = render_html(&sealed(), &LedgerState::verified("sha256"));
    assert!(!quiet.contains("Said to you"));
}
