//! A run killed mid-stream, and a server restarted mid-run.

use super::*;

#[test]
#[ignore = "needs llama-server: run `bash scripts/llama-server-ci.sh`"]
fn a_run_killed_mid_stream_leaves_a_verifiable_ledger_and_the_server_serves_the_next_run() {
    let (e, dir) = on_the_server(400);
    let d = dir.path();
    let run = run_openai(d, &e.key, "killed", &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it while its first model call streams: after the turn started, before it recorded
    // the call.
    await_first_turn(d, "killed", Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(150));
    let mut run = run;
    run.kill().unwrap();
    run.wait().unwrap();
    // Killed, it never finished: no anchor, so it is checked as unfinished (every record it
    // wrote still chains and verifies).
    let verify = loopward(d, &e.key, &["verify", "--unfinished", "runs/killed"])
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
    // The server dropped the abandoned stream and answers the next run.
    let out = run_openai(d, &e.key, "next", &[]).output().unwrap();
    let (status, calls, _) = ledger_of(d, "next", &e.key);
    assert!(defined(&status), "{status:?}\n{}", text(&out));
    assert!(!calls.is_empty());
}

#[test]
#[ignore = "needs llama-server: run `bash scripts/llama-server-ci.sh`"]
fn the_server_restarted_mid_run_is_retried_and_the_run_goes_on() {
    let e = env();
    let spot = Spot::free();
    let first = spot.start(&e, "first.log", None);
    let dir = workspace(&spot.url, 400);
    let d = dir.path();
    let run = spawn_piped(run_openai(d, &e.key, "restart", &[]));
    // While the first call streams, the server goes away and comes back.
    await_first_turn(d, "restart", Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(500));
    first.stop();
    let second = spot.start(&e, "second.log", None);
    let out = wait_for(run, Duration::from_secs(300), "the restarted run");
    drop(second);
    let shown = text(&out);
    let (status, calls, _) = ledger_of(d, "restart", &e.key);
    assert!(defined(&status), "ended {status:?}\n{shown}");
    assert!(
        shown.contains("model call: retrying"),
        "no retry was logged\n{shown}"
    );
    assert!(
        !calls.is_empty(),
        "no call was answered: {calls:?}\n{shown}"
    );
    let served = std::fs::read_to_string(spot.log("second.log")).unwrap();
    assert!(
        served.contains("prompt eval time"),
        "the restarted server answered nothing:\n{served}"
    );
}
