//! A torn last line is cut on reopen, damage is refused, and a ledger killed at any moment
//! reopens losing nothing acknowledged.

use super::*;

#[test]
fn a_torn_last_line_is_cut_and_recorded_on_reopen() {
    let runs = tempfile::tempdir().unwrap();
    let run = RunId::new("r1").unwrap();
    let ledger = Ledger::create(runs.path(), &run, LedgerOptions::default()).unwrap();
    for t in ["a", "b", "c"] {
        ledger.record(&run_scope("r1"), &note(t)).unwrap();
    }
    drop(ledger); // a crash: no finish
    let path = runs.path().join("r1/events.jsonl");
    let torn = br#"{"seq":4,"time":"2026-"#;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(torn)
        .unwrap();
    let (ledger, rec) = Ledger::open_existing(runs.path(), &run, LedgerOptions::default()).unwrap();
    assert_eq!((rec.kept, rec.truncated_bytes), (3, torn.len() as u64));
    ledger.finish().unwrap();
    let ok = verify(&runs.path().join("r1"), &keyless()).unwrap();
    assert_eq!(ok.final_seq, 4);
    let text = std::fs::read_to_string(&path).unwrap();
    let last = Record::parse_line(text.lines().last().unwrap().as_bytes())
        .unwrap()
        .0;
    assert_eq!(
        last.event().unwrap(),
        AuditEvent::LedgerRecovered {
            truncated_bytes: torn.len() as u64
        }
    );
}

#[test]
fn damage_before_the_last_line_or_a_wrong_key_is_refused_not_cut() {
    let runs = tempfile::tempdir().unwrap();
    let run = RunId::new("r1").unwrap();
    let key = LedgerKey::from_bytes(vec![3u8; 32]).unwrap();
    let opts = LedgerOptions {
        key: Some(key),
        ..LedgerOptions::default()
    };
    let ledger = Ledger::create(runs.path(), &run, opts).unwrap();
    ledger.record(&run_scope("r1"), &note("only")).unwrap();
    drop(ledger);
    let path = runs.path().join("r1/events.jsonl");
    let before = std::fs::read(&path).unwrap();
    let wrong = LedgerOptions {
        key: LedgerKey::from_bytes(vec![4u8; 32]),
        ..LedgerOptions::default()
    };
    let err = Ledger::open_existing(runs.path(), &run, wrong).unwrap_err();
    assert!(matches!(err, LedgerError::Corrupt { seq: 1, .. }), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "a whole record was cut"
    );
}

// ---- killed at random points ----

const CHILD_ENV: &str = "LOOPWARD_LEDGER_CRASH_CHILD";

/// Runs only as the child of `the_ledger_survives_being_killed_at_random_points`: appends events
/// to a ledger forever, printing `ack N` once record N is acknowledged: when `record` returned
/// for an event written at once, when a later one or a commit returned for one that may wait
/// for the commit.
#[test]
#[ignore = "child process of the_ledger_survives_being_killed_at_random_points"]
fn crash_child_appends_until_killed() {
    let Ok(runs) = std::env::var(CHILD_ENV) else {
        return;
    };
    let run = std::env::var("LOOPWARD_CRASH_RUN").unwrap();
    let ledger = Ledger::create(
        Path::new(&runs),
        &RunId::new(run.clone()).unwrap(),
        LedgerOptions::keyed(crash_key()),
    )
    .unwrap();
    let mut out = std::io::stdout().lock();
    for i in 1u64.. {
        // Big, varied lines make a kill mid-write (a torn line) likely.
        let size = usize::try_from((i * 7919) % 300_000).unwrap();
        let event = match i % 3 {
            0 => decision(),
            1 => AuditEvent::ToolRequested {
                call_id: format!("c{i}").into(),
                tool: "write_file".into(),
                arguments: json!({"path": "x.txt", "content": "x".repeat(size)}),
            },
            _ => note(&"y".repeat(size / 3)),
        };
        ledger.record(&run_scope(&run), &event).unwrap();
        if event.may_wait_for_commit() {
            if i % 5 != 0 {
                continue;
            }
            ledger.commit().unwrap();
        }
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn the_ledger_survives_being_killed_at_random_points() {
    let runs = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut torn = 0;
    const KILLS: u32 = 30;
    for i in 0..KILLS {
        let run = format!("k{i}");
        let mut child = std::process::Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "recovery::crash_child_appends_until_killed",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, runs.path())
            .env("LOOPWARD_CRASH_RUN", &run)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Wait for the first acknowledged record, then let it run a random while and kill it.
        let mut acked = 0u64;
        for line in lines.by_ref() {
            if let Some(n) = line.unwrap().strip_prefix("ack ") {
                acked = n.parse().unwrap();
                break;
            }
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(std::time::Duration::from_micros(rng % 40_000));
        child.kill().unwrap(); // SIGKILL, by this child's own PID
        child.wait().unwrap();
        for line in lines {
            if let Some(n) = line.unwrap().strip_prefix("ack ") {
                acked = n.parse().unwrap();
            }
        }
        // A kill rarely lands inside the write syscall itself, so every other time also leave
        // what a torn write looks like: a random prefix of the next record's line.
        let mut cut = 0;
        if i % 2 == 1 {
            cut = tear_next_record(&runs.path().join(&run), &run, rng);
        }
        let (ledger, rec) = Ledger::open_existing(
            runs.path(),
            &RunId::new(run.clone()).unwrap(),
            LedgerOptions::keyed(crash_key()),
        )
        .unwrap();
        if cut > 0 {
            assert_eq!(rec.truncated_bytes, cut as u64, "kill {i}");
        }
        assert!(
            rec.kept >= acked,
            "kill {i}: {acked} records were acknowledged but only {} kept",
            rec.kept
        );
        if rec.truncated_bytes > 0 {
            torn += 1;
        }
        let fin = ledger.finish().unwrap();
        let ok = verify(
            &runs.path().join(&run),
            &VerifyOptions::keyed(KeyRing::single(crash_key())),
        )
        .unwrap();
        assert_eq!(ok.final_seq, fin.final_seq);
        let recovered = kinds(&runs.path().join(&run))
            .iter()
            .any(|k| k == "ledger_recovered");
        assert_eq!(recovered, rec.truncated_bytes > 0, "kill {i}");
    }
    // Not asserted (it depends on timing), but shown: how many kills tore a line.
    eprintln!("{torn} of {KILLS} reopenings cut a torn last line");
    assert!(torn >= KILLS / 2);
}

/// Appends a prefix (1 byte up to all but the newline) of a correctly chained next record.
fn tear_next_record(run_dir: &Path, run: &str, rng: u64) -> usize {
    let path = run_dir.join("events.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let (seq, prev) = match text.lines().last() {
        Some(l) if text.ends_with('\n') => {
            let r = Record::parse_line(l.as_bytes()).unwrap().0;
            (r.seq + 1, r.hash)
        }
        // The kill itself tore the line; leave it as it is.
        _ => return 0,
    };
    let (_, line) = Record::seal(
        &Chain::Hmac(crash_key()),
        seq,
        "2026-01-01T00:00:00.000Z",
        &run_scope(run),
        &note("torn"),
        &prev,
    )
    .unwrap();
    let cut = 1 + usize::try_from(rng % (line.len() as u64 - 1)).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(&line[..cut]).unwrap();
    cut
}
