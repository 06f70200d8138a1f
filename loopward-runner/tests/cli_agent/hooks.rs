//! A session's hook answered by the loop over the session's socket: judged, recorded under
//! the session's turn, and refused without the session's token.

use super::{agent, events, setup_with, stream, verdicts, Hooks, Setup};
use loopward_core::{AgentId, AuditEvent, LayerVerdict, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::cli_agent::{HookEvent, HookJudge, HookReply, Judged};
use std::path::Path;
use std::sync::Arc;

/// A plan line that sends the hook event `event` of the session to the loop the way
/// `loopward hook claude-code` does (the host's name, the event; the answer back), keeping the
/// answer in `$PLANS/answer`; `$LOOPWARD_SESSION` in the event is the session's id.
fn ask_hook(event: &str) -> String {
    send("claude-code", event)
}

/// A plan line that sends `first` and `body` to the session's socket with the session's token,
/// as the client's hooks do, keeping the answer.
fn send(first: &str, body: &str) -> String {
    send_as(first, body, "with-token")
}

/// Like [`send`]; `token` is `with-token`, or `none` for a sender the token was not given (a
/// command the hook wrapped).
fn send_as(first: &str, body: &str, token: &str) -> String {
    let py = r#"import json, os, socket, sys
ev = sys.argv[2].replace("SESSION", os.environ["LOOPWARD_SESSION"])
first = sys.argv[1]
if sys.argv[3] == "with-token":
    first += " " + os.environ["LOOPWARD_SUPERVISOR_TOKEN"]
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(os.environ["LOOPWARD_SUPERVISOR"])
    s.sendall((first + "\n" + ev).encode())
    s.shutdown(socket.SHUT_WR)
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
    print(out.decode())
except OSError as e:
    print(json.dumps({"unreachable": str(e)}))
"#;
    format!(
        "python3 -c '{}' '{first}' '{body}' {token} >> \"$PLANS/answer\"\n",
        py.replace('\'', "'\\''"),
    )
}

fn answers(plans: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(plans.join("answer"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A judge that denies every `PreToolUse`, recording a gate decision for it (a subagent's as
/// its own), and errs on anything else.
fn denying_judge() -> Arc<dyn HookJudge> {
    Arc::new(|e: &HookEvent<'_>| {
        let v: serde_json::Value = serde_json::from_str(e.event).map_err(|e| e.to_string())?;
        if v["hook_event_name"] != "PreToolUse" {
            return Err(format!("cannot judge {}", v["hook_event_name"]));
        }
        let who = v["agent_type"].as_str().map(|a| AgentId::new(a).unwrap());
        Ok(Judged {
            reply: HookReply {
                stdout: r#"{"decision":"deny"}"#.into(),
                stderr: String::new(),
                exit_code: 0,
            },
            records: vec![(
                who,
                AuditEvent::LayerDecision {
                    layer: "judged".into(),
                    decision: LayerVerdict::Refused,
                    detail: serde_json::json!({"session": e.session, "handoff": e.handoff}).into(),
                },
            )],
        })
    })
}

/// Runs one session of `plan` (its stream: done), its hook answered by [`denying_judge`].
async fn judged_run(plan: &str) -> (Setup, Arc<MemorySink>, RunStatus) {
    let s = setup_with(
        &[(plan, stream("Done.", 0.0))],
        3,
        Hooks::Judge(denying_judge()),
        None,
        None,
    );
    let (report, sink) = s.run().await;
    (s, sink, report.status)
}

#[tokio::test]
async fn a_sessions_hook_is_answered_by_the_loop_and_its_decision_recorded_under_the_sessions_turn()
{
    let pre = r#"{"session_id":"SESSION","hook_event_name":"PreToolUse","agent_type":"planner"}"#;
    let post = r#"{"session_id":"SESSION","hook_event_name":"PostToolUse"}"#;
    let other = r#"{"session_id":"another","hook_event_name":"PreToolUse"}"#;
    let plan = format!(
        "{}{}{}{}echo yes > done.txt\n",
        ask_hook(pre),
        ask_hook(post),
        ask_hook(other),
        // A sandboxed command that found the socket: it was not given the token.
        send_as("claude-code", pre, "none"),
    );
    let (s, sink, status) = judged_run(&plan).await;
    assert!(matches!(status, RunStatus::Completed), "{status:?}");
    let a = answers(&s.plans);
    assert_eq!(a.len(), 4, "{a:?}");
    // Judged: the judge's answer, as it gave it.
    assert_eq!(
        (a[0]["exit_code"].as_i64(), a[0]["stdout"].as_str()),
        (Some(0), Some(r#"{"decision":"deny"}"#))
    );
    // A judge's error, and an event of another session, block.
    assert_eq!(a[1]["exit_code"], 2);
    assert!(a[1]["stderr"].as_str().unwrap().contains("cannot judge"));
    assert_eq!(a[2]["exit_code"], 2);
    assert!(
        a[2]["stderr"].as_str().unwrap().contains("not \"another\""),
        "{a:?}"
    );
    // Without the session's token: refused before the judge sees it.
    assert_eq!(a[3]["exit_code"], 2);
    assert!(
        a[3]["stderr"]
            .as_str()
            .unwrap()
            .contains("LOOPWARD_SUPERVISOR_TOKEN"),
        "{a:?}"
    );
    // In the run's ledger, under the session's turn: how many records are the hook's, then
    // them, the subagent's under its own name.
    let all = sink.events();
    let at = all
        .iter()
        .position(|(_, e)| matches!(e, AuditEvent::LayerDecision { layer, .. } if layer.as_str() == "judged"))
        .expect("the decision is in the run's ledger");
    let (scope, e) = &all[at];
    assert_eq!(scope.turn.map(|t| t.0), Some(1));
    assert_eq!(scope.agent.as_ref().map(AgentId::as_str), Some("planner"));
    let AuditEvent::LayerDecision { detail, .. } = e else {
        unreachable!()
    };
    let session = detail.to_json()["session"].as_str().unwrap().to_string();
    assert!(!session.is_empty());
    let AuditEvent::LayerDecision { layer, detail, .. } = &all[at - 1].1 else {
        panic!("{:?}", all[at - 1])
    };
    assert_eq!(layer.as_str(), "hook");
    assert_eq!(detail.to_json()["records"], 1);
    assert_eq!(all[at - 1].0.agent.as_ref(), Some(&agent()));
    // One judged event only: the erring one, the other session's and the tokenless one
    // recorded nothing.
    assert_eq!(verdicts(&events(&sink), "hook").len(), 1);
}

#[tokio::test]
async fn a_session_whose_hook_never_asks_the_loop_fails_the_run_as_ungoverned() {
    let (_s, sink, status) = judged_run("echo yes > done.txt").await;
    let RunStatus::Failed { error } = &status else {
        panic!("{status:?}")
    };
    assert!(
        error.contains("never asked the loop") && error.contains("not governed"),
        "{error}"
    );
    assert!(verdicts(&events(&sink), "verify").is_empty());
}

#[tokio::test]
async fn a_wrapped_commands_egress_decision_is_recorded_by_the_loop_and_nothing_else_is_taken() {
    let egress = r#"{"agent":"coder","event":{"kind":"egress_decided","allowed":false,"host":"evil.example","port":443,"reason":"not in net"}}"#;
    let forged = r#"{"agent":"coder","event":{"kind":"turn_started","agent":"coder"}}"#;
    let plan = format!(
        "{}{}{}echo yes > done.txt\n",
        ask_hook(r#"{"session_id":"SESSION","hook_event_name":"PreToolUse"}"#),
        send("egress", egress),
        send("egress", forged),
    );
    let (s, sink, status) = judged_run(&plan).await;
    assert!(matches!(status, RunStatus::Completed), "{status:?}");
    let a = answers(&s.plans);
    assert_eq!(a[1]["exit_code"], 0, "{a:?}");
    assert_eq!(a[2]["exit_code"], 2, "{a:?}");
    let all = sink.events();
    let (scope, _) = all
        .iter()
        .find(
            |(_, e)| matches!(e, AuditEvent::EgressDecided { host, .. } if host == "evil.example"),
        )
        .expect("the egress decision is in the run's ledger");
    assert_eq!(scope.turn.map(|t| t.0), Some(1));
    // Only egress records are taken: no second turn start, forged over the socket.
    let starts = all
        .iter()
        .filter(|(_, e)| matches!(e, AuditEvent::TurnStarted { .. }))
        .count();
    assert_eq!(starts, 1);
}
