//! Part 5's verdicts and figures on made-up pairs, and the `/proc` reading on this process.

use super::*;

fn rep(long_ns: u64, long_waits: u64) -> Rep {
    Rep {
        prefilled: 240,
        short_ns: 2_000_000_000,
        short_gen: 1,
        long_ns,
        long_gen: 193,
        long_prefilled: 1,
        long_waits,
    }
}

fn decode_verdict(pairs: &[(Rep, Rep)]) -> (Verdict, Option<String>) {
    let s = section(
        Path::new("m.gguf"),
        Timing::Together,
        (1, pairs.len()),
        pairs,
        &[],
    );
    let t = s
        .targets
        .iter()
        .find(|t| t.what.contains("decode"))
        .expect("a decode target");
    (t.verdict, t.reason.clone())
}

#[test]
fn equal_sides_that_do_not_wait_meet_the_target() {
    let pairs: Vec<(Rep, Rep)> = (0..6)
        .map(|i| (rep(5_000_000_000 + i, 0), rep(5_000_000_000 + i, 1)))
        .collect();
    assert_eq!(decode_verdict(&pairs).0, Verdict::Met);
}

#[test]
fn a_side_that_waits_within_a_request_is_not_shown_whatever_its_cpu_time_says() {
    // Loopward's CPU time equals the direct loop's, but its threads blocked 193 times: time
    // CPU time does not see.
    let pairs: Vec<(Rep, Rep)> = (0..6)
        .map(|_| (rep(5_000_000_000, 0), rep(5_000_000_000, 193)))
        .collect();
    let (verdict, reason) = decode_verdict(&pairs);
    assert_eq!(verdict, Verdict::NotShown);
    assert!(reason.is_some_and(|r| r.contains("blocked")));
}

#[test]
fn the_drift_note_sets_the_machines_drift_against_the_pairs() {
    // The machine swings between two speeds from pair to pair; both sides swing together.
    let pairs: Vec<(Rep, Rep)> = (0..6)
        .map(|i| {
            let ns = if i % 2 == 0 {
                4_000_000_000
            } else {
                5_000_000_000
            };
            (rep(ns, 0), rep(ns, 1))
        })
        .collect();
    let note = drift_note(&pairs, 6);
    assert!(note.contains("21.9% (5 steps)"), "{note}");
    assert!(note.contains("0.00% (6 pairs)"), "{note}");
}

#[test]
fn a_threads_cpu_time_and_waits_are_read_from_proc() {
    // Work until the reader sees 10 ms more CPU time: how soon depends on how busy the
    // machine is (CI runs tests side by side), so the deadline is only against a reader that
    // never moves.
    let (cpu, _) = cpu_and_waits("thread-self").expect("this thread");
    let mut x = 0u64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut cpu2 = cpu;
    while cpu2 - cpu < 10_000_000 && std::time::Instant::now() < deadline {
        for _ in 0..100_000 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        cpu2 = cpu_and_waits("thread-self").expect("this thread").0;
    }
    assert!(
        cpu2 - cpu >= 10_000_000,
        "{cpu} → {cpu2}: the thread's CPU time did not grow by 10 ms in 20 s of work"
    );
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::Builder::new()
        .name("lw-test-named".into())
        .spawn(move || rx.recv())
        .expect("spawn");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // The thread names itself once it runs.
    let task = std::iter::repeat_with(|| {
        std::thread::sleep(std::time::Duration::from_millis(5));
        thread_named("lw-test-named")
    })
    .find(|t| t.is_ok() || std::time::Instant::now() > deadline)
    .and_then(Result::ok)
    .expect("found by name");
    // It blocks in `recv` soon after it starts: a voluntary switch.
    let waited = std::iter::repeat_with(|| {
        std::thread::sleep(std::time::Duration::from_millis(5));
        cpu_and_waits(&task).expect("the named thread").1
    })
    .find(|w| *w >= 1 || std::time::Instant::now() > deadline);
    tx.send(()).expect("send");
    h.join().expect("join").expect("recv");
    assert!(
        waited >= Some(1),
        "a thread blocked in recv has waited: {waited:?}"
    );
    assert!(thread_named("no-such-thread").is_err());
}
