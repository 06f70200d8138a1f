//! What `replay` puts where the live run had a tool and a person: the recorded results of tool
//! calls (no tool runs) and the recorded answers of interactive stop-gates.

use futures::future::BoxFuture;
use loopward_core::{AuditEvent, CallId, EffectKind, EffectStatus, LayerId, LayerVerdict, Scope};
use loopward_runner::layers::stopgate::{Answer, ApprovalRequest, Approver, GatedAction};
use loopward_runner::tool::{ToolError, ToolInvocation, ToolOutput};
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Built-in tools that act only on the run's own state (a handoff, the class-jump tracker):
/// they touch nothing on the host, and the decisions after them depend on what they register,
/// so a replay runs them.
const RUN_STATE_TOOLS: [&str; 2] = ["handoff", "report_attempt"];

/// One recorded execution of a call: what the model read, and what changed on disk.
#[derive(Clone, Debug)]
struct Execution {
    content: String,
    is_error: bool,
    effects: Vec<loopward_core::Effect>,
    /// Writes the shell watch caught and reverted, and, for an interrupted call, the changes it
    /// judged: made again as modifications.
    violations: Vec<String>,
}

/// The innermost tool service of a replay: returns each call's recorded result and makes its
/// recorded changes again in the (scratch) workspace with placeholder content. It runs no tool
/// that can reach the host (only [`RUN_STATE_TOOLS`]).
#[derive(Clone, Debug, Default)]
pub(super) struct RecordedTools {
    runs: Arc<Mutex<HashMap<CallId, VecDeque<Execution>>>>,
}

impl RecordedTools {
    /// Every call of `records` that started (`tool_started`): finished, with its result; or
    /// interrupted (the process ended before `tool_finished`), with the changes the shell watch
    /// had judged before it ended, so the replay of that part judges them too. `replay` builds
    /// one per part of a resumed run, from that part's records only: a call that part did not
    /// start has no result there.
    pub(super) fn from_records(records: &[(Scope, AuditEvent)]) -> Self {
        let mut runs: HashMap<CallId, VecDeque<Execution>> = HashMap::new();
        // The call under way: its id, the writes reverted, the paths the watch judged.
        let mut open: Option<(CallId, Vec<String>, Vec<String>)> = None;
        let interrupted =
            |runs: &mut HashMap<CallId, VecDeque<Execution>>,
             open: Option<(CallId, Vec<String>, Vec<String>)>| {
                if let Some((id, mut violations, judged)) = open {
                    violations.extend(
                        judged
                            .into_iter()
                            .filter(|p| !violations.contains(p))
                            .collect::<Vec<_>>(),
                    );
                    runs.entry(id).or_default().push_back(Execution {
                        content: "replay: this call was interrupted in the recorded run".into(),
                        is_error: true,
                        effects: vec![],
                        violations,
                    });
                }
            };
        for (_, e) in records {
            match e {
                AuditEvent::ToolStarted { call_id, .. } => {
                    interrupted(&mut runs, open.take());
                    open = Some((call_id.clone(), vec![], vec![]));
                }
                AuditEvent::RunResumed { .. } | AuditEvent::RunEnded { .. } => {
                    interrupted(&mut runs, open.take());
                }
                AuditEvent::Violation { path, .. } => {
                    if let Some((_, v, _)) = &mut open {
                        v.push(path.clone());
                    }
                }
                // A change the watch judged (its path) before the call's end was recorded.
                AuditEvent::GateDecision {
                    call_id: Some(id),
                    path: Some(path),
                    ..
                } => {
                    if let Some((_, _, judged)) = open.as_mut().filter(|(o, _, _)| o == id) {
                        judged.push(path.to_string());
                    }
                }
                AuditEvent::ToolFinished {
                    call_id,
                    is_error,
                    effects,
                    summary,
                    output,
                    ..
                } => {
                    if let Some((id, violations, _)) = open.take_if(|(id, _, _)| *id == *call_id) {
                        runs.entry(id).or_default().push_back(Execution {
                            content: output.clone().unwrap_or_else(|| summary.clone()),
                            is_error: *is_error,
                            effects: effects.clone(),
                            violations,
                        });
                    }
                }
                _ => {}
            }
        }
        interrupted(&mut runs, open);
        Self {
            runs: Arc::new(Mutex::new(runs)),
        }
    }
}

/// Makes a recorded change again under `root`, with placeholder content (what the gates and the
/// shell watch judge is the path and the kind of change, not the bytes).
fn remake(root: &Path, inv: &ToolInvocation, rel: &str, kind: &EffectKind) {
    if inv.turn.workspace().resolve(rel).is_err() {
        return;
    }
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let content = inv
        .call
        .arguments
        .get("content")
        .and_then(|c| c.as_str())
        .filter(|_| inv.call.arguments.get("path").and_then(|p| p.as_str()) == Some(rel));
    match kind {
        EffectKind::Delete => drop(std::fs::remove_file(&path)),
        EffectKind::Rename { from } => drop(std::fs::rename(root.join(from), &path)),
        EffectKind::Link => {}
        _ => match content {
            Some(c) => drop(std::fs::write(&path, c)),
            None => {
                let mut bytes = std::fs::read(&path).unwrap_or_default();
                bytes.extend_from_slice(format!("(replayed {})\n", inv.call.id).as_bytes());
                drop(std::fs::write(&path, bytes));
            }
        },
    }
}

loopward_runner::leaf_service!(RecordedTools: ToolInvocation => Result<ToolOutput, ToolError>, |recorded, inv| {
    let next = recorded
        .runs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_mut(&inv.call.id)
        .and_then(VecDeque::pop_front);
    Box::pin(async move {
        if RUN_STATE_TOOLS.contains(&inv.call.name.as_str()) {
            inv.turn
                .record(&AuditEvent::ToolStarted {
                    call_id: inv.call.id.clone(),
                    tool: inv.call.name.clone(),
                })
                .map_err(ToolError::Audit)?;
            let tool = inv.tool.clone();
            return tool.call(inv).await;
        }
        let Some(run) = next else {
            return Err(ToolError::Failed(format!(
                "replay: the ledger holds no result for call {} ({}); the live run did not run it here",
                inv.call.id, inv.call.name
            )));
        };
        inv.turn
            .record(&AuditEvent::ToolStarted {
                call_id: inv.call.id.clone(),
                tool: inv.call.name.clone(),
            })
            .map_err(ToolError::Audit)?;
        let root = inv.turn.workspace().root().to_path_buf();
        for e in run
            .effects
            .iter()
            .filter(|e| e.status != EffectStatus::Failed)
        {
            remake(&root, &inv, &e.path, &e.kind);
        }
        for v in &run.violations {
            remake(&root, &inv, v, &EffectKind::Modify);
        }
        Ok(ToolOutput {
            content: run.content,
            is_error: run.is_error,
            effects: run.effects,
        })
    })
});

/// The answers interactive stop-gates got in the live run, given again in the same order.
#[derive(Debug, Default)]
pub(super) struct RecordedApprovals {
    answers: Mutex<Vec<(String, GatedAction, Answer)>>,
}

impl RecordedApprovals {
    /// The `approved` / `denied` decisions of interactive gates in `records`.
    pub(super) fn from_records(records: &[(Scope, AuditEvent)]) -> Self {
        let answers = records
            .iter()
            .filter_map(|(_, e)| match e {
                AuditEvent::LayerDecision {
                    layer,
                    decision,
                    detail,
                } if *layer == LayerId::StopGate => {
                    let gate = detail.as_stop_gate()?;
                    if gate.mode != "interactive" {
                        return None;
                    }
                    let text = |t: &Option<String>| t.clone().unwrap_or_default();
                    let answer = match decision {
                        LayerVerdict::Approved => Answer::Approve { by: text(&gate.by) },
                        LayerVerdict::Denied => Answer::Deny {
                            reason: text(&gate.reason),
                        },
                        _ => return None,
                    };
                    // An action that does not read back is never the one asked about.
                    let action = gate.action.parse::<GatedAction>().ok()?;
                    Some((gate.gate.to_string(), action, answer))
                }
                _ => None,
            })
            .collect();
        Self {
            answers: Mutex::new(answers),
        }
    }
}

impl Approver for RecordedApprovals {
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        let answer = answers
            .iter()
            .position(|(g, a, _)| *g == request.gate && *a == request.action)
            .map(|i| answers.remove(i).2)
            .unwrap_or_else(|| Answer::Deny {
                reason: "replay: the ledger records no answer for this request".into(),
            });
        Box::pin(async move { answer })
    }
}

/// Creates in the scratch workspace `root` the folders the recorded changes were made in that
/// no recorded change created: they existed before the run (the ledger does not hold the
/// workspace's prior files, but a write into `out/` shows `out/` was there).
pub(super) fn prepare_folders(root: &Path, records: &[(Scope, AuditEvent)]) {
    let mut paths: Vec<&str> = vec![];
    let mut created: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for (_, e) in records {
        match e {
            AuditEvent::ToolFinished { effects, .. } => {
                for ef in effects {
                    paths.push(&ef.path);
                    if ef.kind == EffectKind::Create {
                        created.insert(&ef.path);
                    }
                }
            }
            AuditEvent::Violation { path, .. } => paths.push(path),
            _ => {}
        }
    }
    for p in paths {
        let mut dir = Path::new(p).parent();
        while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
            if !created.contains(d.to_string_lossy().as_ref()) && !d.is_absolute() {
                let _ = std::fs::create_dir_all(root.join(d));
                break;
            }
            dir = d.parent();
        }
    }
}
