//! A run stopped at any record resumes from its last committed step; an interrupted effect
//! is reported, not run again, unless the policy says so; a finished run is not resumed.

use super::*;

#[tokio::test]
async fn a_run_stopped_at_any_record_resumes_repeating_no_reply_and_no_effect() {
    // The uninterrupted run: its records and its model calls.
    let s = Scratch::new();
    let whole = start_or_resume(&s, LedgerOptions::default(), None).await;
    assert_eq!(whole.status, RunStatus::Completed);
    let kinds: Vec<&'static str> = records(&s.run_dir())
        .iter()
        .map(|(_, e)| e.kind())
        .collect();
    let replies = lines(&s.log()).len();
    assert_eq!(replies, 6);

    for (k, kind) in kinds.iter().enumerate() {
        let seq = k as u64 + 1;
        let s = Scratch::new();
        // The process "dies" at record `seq`: that write fails and nothing after it happens.
        let opts = LedgerOptions {
            fault: Some(Arc::new(move |op: LedgerOp<'_>| match op {
                LedgerOp::Write { seq: s, .. } if s == seq => Err(std::io::Error::other("killed")),
                _ => Ok(()),
            })),
            ..LedgerOptions::default()
        };
        let first = start_or_resume(&s, opts, None).await;
        assert!(
            matches!(first.status, RunStatus::AuditFailed { .. }),
            "stopped at #{seq} {kind}: {:?}",
            first.status
        );
        let resumed = start_or_resume(&s, LedgerOptions::default(), None).await;
        assert_eq!(
            resumed.status,
            RunStatus::Completed,
            "stopped at #{seq} {kind}"
        );
        assert_eq!(resumed.final_text, "All done.");

        // Each effect once.
        let mut effects = lines(&s.ws().join("out/effects.log"));
        effects.sort();
        assert_eq!(effects, ["b1", "b2", "p1"], "stopped at #{seq} {kind}");
        assert_eq!(
            std::fs::read_to_string(s.ws().join("out/notes.md")).unwrap(),
            "# notes"
        );
        // Each reply asked once; only a reply whose record was lost is asked again.
        let repeated = usize::from(matches!(*kind, "model_call" | "model_reply"));
        assert_eq!(
            lines(&s.log()).len(),
            replies + repeated,
            "stopped at #{seq} {kind}: {:?}",
            lines(&s.log())
        );
        let recs = records(&s.run_dir());
        let replies_recorded = recs
            .iter()
            .filter(|(_, e)| matches!(e, AuditEvent::ModelReply { .. }))
            .count();
        assert_eq!(replies_recorded, replies, "stopped at #{seq} {kind}");
        verify(
            &s.run_dir(),
            &loopward_runner::audit::VerifyOptions::keyless(),
        )
        .unwrap();
        // An effect stopped between its start and its end is interrupted, told, not rerun.
        if *kind == "tool_finished" {
            let interrupted = recs.iter().any(|(_, e)| {
                matches!(e, AuditEvent::LayerDecision { layer, decision, .. }
                    if *layer == loopward_core::LayerId::Resume && (decision.as_str() == "interrupted" || decision.as_str() == "retried"))
            });
            let resumed_mid_effect = recs.iter().any(|(_, e)| {
                matches!(e, AuditEvent::RunResumed { interrupted, .. } if !interrupted.is_empty())
            });
            assert_eq!(interrupted, resumed_mid_effect, "stopped at #{seq}");
        }
    }
}

#[tokio::test]
async fn an_interrupted_shell_call_is_reported_to_the_agent_and_not_run_again() {
    let s = Scratch::new();
    // Stopped right after the first shell command ran, before its end was recorded.
    let opts = LedgerOptions {
        fault: Some(Arc::new(|op: LedgerOp<'_>| match op {
            LedgerOp::Write {
                kind: "tool_finished",
                ..
            } => Err(std::io::Error::other("killed")),
            _ => Ok(()),
        })),
        ..LedgerOptions::default()
    };
    start_or_resume(&s, opts, None).await;
    assert_eq!(lines(&s.ws().join("out/effects.log")), ["p1"]);
    let journal = Journal::from_records(&records(&s.run_dir())).unwrap();
    assert_eq!(journal.interrupted(), ["call-planner-1-1"]);
    let done = start_or_resume(&s, LedgerOptions::default(), None).await;
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(lines(&s.ws().join("out/effects.log")), ["p1", "b1", "b2"]);
    let told = records(&s.run_dir())
        .into_iter()
        .find_map(|(_, e)| match e {
            AuditEvent::ToolFinished {
                call_id,
                is_error: true,
                output: Some(o),
                ..
            } if call_id == "call-planner-1-1" => Some(o),
            _ => None,
        });
    assert!(
        told.unwrap()
            .starts_with("interrupted: this shell call started"),
        "the agent reads that the call was interrupted"
    );
}

#[tokio::test]
async fn the_policy_decides_which_interrupted_tools_run_again() {
    let [write, read, shell, edit] =
        ["write_file", "read_file", "shell", "edit_file"].map(loopward_core::ToolName::from);
    let policy = ResumePolicy::default();
    assert!(policy.retries(&write) && policy.retries(&read));
    assert!(!policy.retries(&shell) && !policy.retries(&edit));
    let custom = ResumePolicy::retrying(["shell"]);
    assert!(custom.retries(&shell) && !custom.retries(&write));
}

#[tokio::test]
async fn a_finished_run_is_not_resumed_and_says_how_it_finished() {
    let s = Scratch::new();
    start_or_resume(&s, LedgerOptions::default(), None).await;
    let before = records(&s.run_dir()).len();
    let journal = Journal::from_records(&records(&s.run_dir())).unwrap();
    assert_eq!(journal.finished(), Some(&RunStatus::Completed));
    let (ledger, _) = Ledger::open_existing(
        s.runs(),
        &RunId::new("r1").unwrap(),
        LedgerOptions::default(),
    )
    .unwrap();
    let err = runner(s.ws(), &s.log(), None)
        .resume(
            ledger.run_spec(Person::at_the_keyboard().says(""), id("planner")),
            &journal,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ResumeError::Finished { .. }));
    assert!(
        err.to_string()
            .starts_with("run r1 finished (completed); a finished run is not resumed"),
        "{err}"
    );
    drop(ledger);
    assert_eq!(records(&s.run_dir()).len(), before, "nothing appended");
    assert_eq!(lines(&s.ws().join("out/effects.log")), ["p1", "b1", "b2"]);
}

#[tokio::test]
async fn a_run_stopped_before_its_first_record_starts_again_under_its_id() {
    let s = Scratch::new();
    let opts = LedgerOptions {
        fault: Some(Arc::new(|op: LedgerOp<'_>| match op {
            LedgerOp::Write { seq: 1, .. } => Err(std::io::Error::other("killed")),
            _ => Ok(()),
        })),
        ..LedgerOptions::default()
    };
    start_or_resume(&s, opts, None).await;
    assert!(records(&s.run_dir()).is_empty());
    assert!(matches!(
        Journal::from_records(&[]),
        Err(JournalError::NotStarted { .. })
    ));
    let done = start_or_resume(&s, LedgerOptions::default(), None).await;
    assert_eq!(done.status, RunStatus::Completed);
    verify(
        &s.run_dir(),
        &loopward_runner::audit::VerifyOptions::keyless(),
    )
    .unwrap();
}

#[tokio::test]
async fn a_durable_turn_gate_on_an_agent_with_two_turns_completes_on_resume() {
    let s = Scratch::new();
    let pdir = pending_dir(s.ws());
    // planner turn 1 · builder turn 2 (gated) · planner turn 3: builder has one turn here, so
    // gate the planner, which has two.
    let mut pauses = 0;
    let mut report = start_or_resume(&s, LedgerOptions::default(), Some("planner")).await;
    while let RunStatus::AwaitingApproval { pending } = &report.status {
        pauses += 1;
        assert!(pauses <= 2, "each turn of the planner is approved once");
        approve(&pdir, pending).unwrap();
        report = start_or_resume(&s, LedgerOptions::default(), Some("planner")).await;
    }
    assert_eq!(report.status, RunStatus::Completed);
    assert_eq!(pauses, 2);
    assert_eq!(lines(&s.ws().join("out/effects.log")), ["p1", "b1", "b2"]);
    assert_eq!(lines(&s.log()).len(), 6, "no reply asked twice");
    verify(
        &s.run_dir(),
        &loopward_runner::audit::VerifyOptions::keyless(),
    )
    .unwrap();
}
