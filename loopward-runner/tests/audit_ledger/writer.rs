//! One writer per run, what it stamps, what `finish` anchors and writes.

use super::*;

#[test]
fn each_record_is_stamped_with_the_clock_s_millisecond_at_its_append() {
    let runs = tempfile::tempdir().unwrap();
    let clock = Arc::new(loopward_runner::ManualClock::new(1_700_000_000_123));
    let opts = LedgerOptions {
        clock: clock.clone(),
        ..LedgerOptions::default()
    };
    let ledger = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap();
    for step in [0, 0, 1, 0, 999, 1_000, 0] {
        clock.advance_millis(step);
        ledger.record(&run_scope("r1"), &note("n")).unwrap();
    }
    let times: Vec<String> = std::fs::read_to_string(runs.path().join("r1/events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| Record::parse_line(l.as_bytes()).unwrap().0.time)
        .collect();
    assert_eq!(
        times,
        [
            "2023-11-14T22:13:20.123Z",
            "2023-11-14T22:13:20.123Z",
            "2023-11-14T22:13:20.124Z",
            "2023-11-14T22:13:20.124Z",
            "2023-11-14T22:13:21.123Z",
            "2023-11-14T22:13:22.123Z",
            "2023-11-14T22:13:22.123Z",
        ]
    );
}

#[test]
fn a_second_writer_for_the_same_run_is_refused() {
    let runs = tempfile::tempdir().unwrap();
    let run = RunId::new("r1").unwrap();
    let ledger = Ledger::create(runs.path(), &run, LedgerOptions::default()).unwrap();
    let again = Ledger::create(runs.path(), &run, LedgerOptions::default()).unwrap_err();
    assert!(matches!(again, LedgerError::AlreadyExists(_)), "{again}");
    assert!(again.to_string().contains("run ids are not reused"));
    let reopen = Ledger::open_existing(runs.path(), &run, LedgerOptions::default()).unwrap_err();
    assert!(matches!(reopen, LedgerError::Locked(_)), "{reopen}");
    ledger.record(&run_scope("r1"), &note("hi")).unwrap();
    ledger.finish().unwrap();
    // Finishing releases the lock; the run can be reopened (to resume it).
    let (_, rec) = Ledger::open_existing(runs.path(), &run, LedgerOptions::default()).unwrap();
    assert_eq!((rec.kept, rec.truncated_bytes), (1, 0));
}

#[test]
fn nothing_is_recorded_after_finish_or_for_another_run() {
    let runs = tempfile::tempdir().unwrap();
    let ledger = Ledger::create(
        runs.path(),
        &RunId::new("r1").unwrap(),
        LedgerOptions::default(),
    )
    .unwrap();
    let err = ledger.record(&run_scope("r2"), &note("x")).unwrap_err();
    assert!(err.0.contains("run r2"), "{err}");
    ledger.finish().unwrap();
    let err = ledger.record(&run_scope("r1"), &note("late")).unwrap_err();
    assert!(err.0.contains("finished"), "{err}");
}

#[test]
fn finish_anchors_only_what_it_wrote_and_refuses_a_file_that_lost_records() {
    let runs = tempfile::tempdir().unwrap();
    let run = RunId::new("r1").unwrap();
    let ledger = Ledger::create(runs.path(), &run, LedgerOptions::keyed(crash_key())).unwrap();
    for t in ["a", "b", "c"] {
        ledger.record(&run_scope("r1"), &note(t)).unwrap();
    }
    // Someone drops the last record behind the writer's back (the lock is advisory).
    let path = runs.path().join("r1/events.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text.lines().take(2).collect();
    std::fs::write(&path, format!("{}\n", kept.join("\n"))).unwrap();
    let err = ledger.finish().unwrap_err();
    assert!(
        matches!(
            err,
            LedgerError::Disagrees {
                wrote_seq: 3,
                file_seq: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("not anchored"), "{err}");
    assert!(!runs.path().join("index.jsonl").exists());
}

/// A page named as its test says.
struct Named(&'static str);

impl Page for Named {
    fn file_name(&self) -> &str {
        self.0
    }

    fn render(&self, _: &[Record], _: &LedgerState) -> String {
        "overwritten\n".into()
    }
}

#[test]
fn a_page_named_as_the_ledger_or_outside_the_run_folder_is_refused_and_writes_nothing() {
    for name in [
        "events.jsonl",
        "audit.md",
        "../escaped.html",
        "/tmp/abs.html",
        "a/b.html",
        "",
    ] {
        let runs = tempfile::tempdir().unwrap();
        let opts = LedgerOptions {
            pages: vec![Arc::new(Named(name))],
            ..LedgerOptions::keyed(crash_key())
        };
        let ledger = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap();
        ledger.record(&run_scope("r1"), &decision()).unwrap();
        let err = ledger.finish().unwrap_err();
        assert!(matches!(&err, LedgerError::Page { .. }), "{name}: {err}");
        assert!(err.to_string().contains("plain file"), "{name}: {err}");
        // The ledger and summaries stand; nothing was written outside the run's folder.
        let check = VerifyOptions::keyed(KeyRing::single(crash_key()));
        assert!(
            verify(&runs.path().join("r1"), &check).unwrap().anchored,
            "{name}"
        );
        assert_ne!(
            std::fs::read_to_string(runs.path().join("r1/audit.md")).unwrap(),
            "overwritten\n"
        );
        assert!(!runs.path().join("escaped.html").exists());
    }
}

#[test]
fn a_page_that_cannot_be_written_loses_nothing_of_the_ledger_or_its_anchor() {
    let runs = tempfile::tempdir().unwrap();
    let opts = LedgerOptions {
        fault: Some(Arc::new(|op: LedgerOp<'_>| match op {
            LedgerOp::Create { path } if path.ends_with("audit.html") => {
                Err(std::io::Error::other("injected: disk full"))
            }
            _ => Ok(()),
        })),
        pages: stub_pages(),
        ..LedgerOptions::keyed(crash_key())
    };
    let ledger = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap();
    ledger.record(&run_scope("r1"), &decision()).unwrap();
    ledger.commit().unwrap();
    let err = ledger.finish().unwrap_err();
    assert!(
        matches!(&err, LedgerError::Page { path, .. } if path.ends_with("audit.html")),
        "{err}"
    );
    assert!(err.to_string().contains("loopward report --html"), "{err}");
    // The ledger and its anchor were made durable first: the run verifies, anchored.
    let check = VerifyOptions::keyed(KeyRing::single(crash_key()));
    let ok = verify(&runs.path().join("r1"), &check).unwrap();
    assert!(ok.anchored);
    assert_eq!(ok.final_seq, 1);
    assert!(runs.path().join("r1/audit.md").exists());
    assert!(!runs.path().join("r1/audit.html").exists());
    // The pages are written again from the verified ledger, as finish would have.
    let md = std::fs::read(runs.path().join("r1/audit.md")).unwrap();
    let written = write_pages(&runs.path().join("r1"), &check, &stub_pages()).unwrap();
    assert!(written[2].ends_with("r1/audit.html"));
    let html = std::fs::read_to_string(&written[2]).unwrap();
    assert!(html.contains(crash_key().id().as_str()), "names its key");
    assert_eq!(std::fs::read(&written[1]).unwrap(), md);
    // Not from a ledger that does not verify.
    let err = write_pages(&runs.path().join("r1"), &VerifyOptions::default(), &[]).unwrap_err();
    assert!(matches!(err, LedgerError::Verify(_)), "{err}");
}
