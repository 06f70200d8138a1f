//! The demo acted out on a real local model (SmolLM2-135M, `cargo xtask fetch-model`): every
//! one of its 12 runs ends in a defined state — completed, exhausted, or stopped by a gate —
//! never failed on a half tool call or an answer cut off by its token limit (the demo's llama
//! mode bounds text answers to one line that ends before the budget).
#![cfg(feature = "llama")]

use loopward_core::{AuditEvent, RunStatus};
use loopward_demo::demo::{self, DemoBackend, Options};
use loopward_term::render::Printer;
use std::path::Path;

#[test]
fn on_smollm2_every_demo_run_ends_completed_exhausted_or_stopped_by_a_gate() {
    let model =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        model.exists(),
        "the test model {} is missing: run `cargo xtask fetch-model` first",
        model.display()
    );
    let scratch = tempfile::tempdir().unwrap();
    let out = demo::shared(Printer::plain(Vec::new()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let summary = rt
        .block_on(demo::run(
            Options {
                dir: Some(scratch.path().to_path_buf()),
                backend: DemoBackend::Llama {
                    model,
                    gpu_layers: None,
                },
                ..Options::default()
            },
            out.clone(),
        ))
        .unwrap();
    let text = String::from_utf8(out.lock().unwrap().get_ref().clone()).unwrap();
    let mut ends = vec![];
    for entry in std::fs::read_dir(&summary.runs_dir).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let events = loopward::ledger::events(&dir).unwrap();
        let status = events
            .iter()
            .rev()
            .find_map(|(_, e)| match e {
                AuditEvent::RunEnded { status, .. } => Some(status.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{} has no run_ended record\n{text}", dir.display()));
        let (mut replies, mut calls, mut longest) = (0, 0, 0);
        for (_, e) in &events {
            if let AuditEvent::ModelReply {
                text: said,
                tool_calls,
                stop,
            } = e
            {
                assert!(
                    !stop.is_cut_off(),
                    "{}: a reply was cut off\n{text}",
                    dir.display()
                );
                assert!(
                    said.chars().count() <= ANSWER_CHARS && !said.contains('\n'),
                    "{}: an answer longer than one line of {ANSWER_CHARS}: {said:?}",
                    dir.display()
                );
                replies += 1;
                calls += tool_calls.len();
                longest = longest.max(said.chars().count());
            }
        }
        ends.push((
            dir.file_name().unwrap().to_string_lossy().into_owned(),
            status,
            (replies, calls, longest),
        ));
    }
    ends.sort_by(|a, b| a.0.cmp(&b.0));
    // How each run ended, for the record (`-- --nocapture` shows it).
    for (run, status, (replies, calls, longest)) in &ends {
        eprintln!(
            "{run}: {status:?} ({replies} model replies, {calls} tool calls, longest answer \
             {longest} characters)"
        );
    }
    assert_eq!(ends.len(), 12, "{ends:#?}\n{text}");
    for (run, status, _) in &ends {
        assert!(
            matches!(
                status,
                RunStatus::Completed | RunStatus::Exhausted | RunStatus::Stopped { .. }
            ),
            "run {run} ended {status:?}\n{ends:#?}\n{text}"
        );
    }
    assert!(!text.contains("cut off"), "{text}");
}

/// The demo's bound on a text answer (its llama mode's `answer_chars`).
const ANSWER_CHARS: usize = 160;
