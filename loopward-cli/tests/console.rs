//! The console (`loopward serve`) in a real browser, as a person on a phone meets it: signed in
//! with the printed link, a run waiting at a stop-gate is shown with the exact action, Approve
//! lets the run go on (the console resumes it) and the ledger records who approved; Deny ends
//! the run with who denied; the kill switch stops a running loop at its next turn boundary, as
//! that person's recorded decision.
//!
//! Why WebDriver (Debian's `chromium` + `chromium-driver`, installed by `.ci/run`) through
//! `fantoccini`: the test has to click, type and wait like a person, across page loads and the
//! console's live refresh; WebDriver is the standard protocol for exactly that, chromedriver is
//! built with the Chromium it drives (same Debian version), and fantoccini is the maintained
//! async client of it on the tokio runtime the tests already use. (The audit-page test needs
//! only a dumped DOM, so it runs `chromium-headless-shell` directly.)
//!
//! Every process the test starts (the console, chromedriver with its browsers, the looping run)
//! is in its own process group and ended by its recorded PID; servers listen on 127.0.0.1 only,
//! on ports the system picked; the whole test is bounded.
//!
//! And the console's token is out of every agent's reach: a command in an agent's sandbox cannot
//! read it.
//!
//! `LOOPWARD_SCREENSHOTS=<dir>` also keeps 375 px screenshots of the console there (the ones in
//! `docs/console/` are made this way).

#[path = "support/browser.rs"]
mod browser;
mod support;

use browser::{answer, browser, fill, until, Owned};
use fantoccini::Locator;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use support::scratch::Scratch;

/// The builder's team, waiting at a durable stop-gate before each turn, and its script.
const GATE_TEAM: &str = include_str!("fixtures/console/gate-team.toml");
const GATE_SCRIPT: &str = include_str!("fixtures/console/gate.script.toml");
/// Ping and pong handing the work back and forth (their script: [`loop_script`]).
const LOOP_TEAM: &str = include_str!("fixtures/console/loop-team.toml");

/// Two agents handing the work to each other, each turn a short command: a loop that runs
/// until someone stops it (or its cap, minutes away).
fn loop_script() -> String {
    let mut s = String::new();
    for i in 0..100 {
        for (me, you) in [("ping", "pong"), ("pong", "ping")] {
            s.push_str(&format!(
                "[[agents.{me}]]\ntool_calls = [{{ name = \"shell\", arguments = {{ command = \"sleep 0.3 # {i}\" }} }}]\n\
                 [[agents.{me}]]\ntool_calls = [{{ name = \"handoff\", arguments = {{ to = \"{you}\", message = \"your turn ({i})\" }} }}]\n"
            ));
        }
    }
    s
}

/// A scratch workspace with the gate team (`loopward.toml`), the loop team (`loop.toml`) and
/// their scripts.
fn workspace() -> Scratch {
    let w = Scratch::new();
    for (name, text) in [
        ("loopward.toml", GATE_TEAM.to_string()),
        ("gate.script.toml", GATE_SCRIPT.to_string()),
        ("loop.toml", LOOP_TEAM.to_string()),
        ("loop.script.toml", loop_script()),
    ] {
        std::fs::write(w.dir().join(name), text).unwrap();
    }
    w
}

fn ledger_text(w: &Scratch, run: &str) -> String {
    std::fs::read_to_string(w.dir().join("runs").join(run).join("events.jsonl")).unwrap_or_default()
}

/// Starts `loopward serve` on a free port; returns it and its sign-in link.
fn serve(w: &Scratch) -> (Owned, String) {
    use std::os::unix::process::CommandExt;
    let mut child = w
        .loopward(&["serve", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first
        .trim()
        .strip_prefix("console: ")
        .unwrap_or_else(|| panic!("serve printed {first:?}"))
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    (Owned(child), url)
}

const PANEL_STATUS: &str =
    "const s = document.querySelector('#console-panel [data-status]'); return s ? s.dataset.status : null;";

fn shot(name: &str, png: &[u8]) {
    if let Some(dir) = std::env::var_os("LOOPWARD_SCREENSHOTS") {
        let dir = Path::new(&dir);
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), png).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_approves_denies_and_stops_runs_from_the_console_in_a_real_browser() {
    tokio::time::timeout(Duration::from_secs(240), scenario())
        .await
        .expect("the browser scenario finished within 240 s");
}

async fn scenario() {
    let w = workspace();
    for run in ["r-approve", "r-deny"] {
        let o = w.loopward(&["run", "--id", run]).output().unwrap();
        assert_eq!(o.status.code(), Some(7), "{o:?}");
    }
    let (_serve, login) = serve(&w);
    let (_driver, c) = browser().await;

    // Signed in with the printed link: the waiting gates, with the exact action each allows.
    c.goto(&login).await.unwrap();
    let gates = c.find_all(Locator::Css("div.gate")).await.unwrap();
    assert_eq!(gates.len(), 2);
    let action = c
        .find(Locator::Css("div.gate[data-run='r-approve'] code.action"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(action, "turn:builder");
    let width = c
        .execute(
            "return [window.innerWidth, document.documentElement.scrollWidth];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(width[0], 375, "a phone's viewport");
    assert!(
        width[1].as_f64().unwrap() <= 375.0,
        "the runs page needs {} px at 375 px",
        width[1]
    );
    shot("console-runs.png", &c.screenshot().await.unwrap());

    // Approve: the console resumes the run, and the page sees it complete.
    answer(&c, "r-approve", "approve", "ana").await;
    until(
        &c,
        "return location.pathname + ' ' + document.title;",
        "/runs/r-approve Run r-approve · loopward",
    )
    .await;
    until(&c, PANEL_STATUS, "completed").await;
    let ledger = ledger_text(&w, "r-approve");
    let consumed = ledger
        .lines()
        .find(|l| l.contains("\"approval_consumed\""))
        .expect("the approval is in the ledger");
    assert!(consumed.contains("\"by\":\"ana (console)\""), "{consumed}");
    assert!(w.dir().join("hello.txt").exists(), "the approved turn ran");
    shot("console-run.png", &c.screenshot().await.unwrap());

    // Deny: the run goes on to the refusal and ends stopped, saying who denied.
    c.goto(&login).await.unwrap();
    answer(&c, "r-deny", "deny", "bob").await;
    until(&c, PANEL_STATUS, "stopped").await;
    let ledger = ledger_text(&w, "r-deny");
    assert!(
        ledger.contains("denied by bob (console)"),
        "the denial names who denied: {ledger}"
    );

    // The kill switch on a running loop: stopped at its next turn boundary, by the person.
    use std::os::unix::process::CommandExt;
    let mut looping = Owned(
        w.loopward(&["run", "--config", "loop.toml", "--id", "r-loop", "--quiet"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    for _ in 0..300 {
        if ledger_text(&w, "r-loop").contains("\"turn_started\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let base = login.split("/login").next().unwrap();
    c.goto(&format!("{base}/runs/r-loop")).await.unwrap();
    until(&c, PANEL_STATUS, "running").await;
    for (field, value) in [("by", "carol"), ("reason", "it loops")] {
        fill(&c, &format!("form.stop input[name={field}]"), value).await;
    }
    shot("console-stop.png", &c.screenshot().await.unwrap());
    c.find(Locator::Css("form.stop button.stop"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until(&c, PANEL_STATUS, "stopped").await;
    let status = tokio::task::spawn_blocking(move || looping.0.wait().unwrap().code())
        .await
        .unwrap();
    assert_eq!(status, Some(6), "a stopped run exits 6");
    let ledger = ledger_text(&w, "r-loop");
    let stop = ledger
        .lines()
        .find(|l| l.contains("\"layer\":\"stop\""))
        .expect("the stop is in the ledger");
    assert!(
        stop.contains("\"by\":\"carol (console)\"") && stop.contains("\"stopped\""),
        "{stop}"
    );
    let turns = ledger.matches("\"turn_started\"").count();
    assert!(turns < 200, "stopped long before its cap ({turns} turns)");
    // Replayed, the run stops where it did: the person's stop is an input the ledger keeps.
    let o = w.loopward(&["replay", "runs/r-loop"]).output().unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    c.close().await.unwrap();
}

#[test]
fn the_consoles_token_is_unreadable_to_an_agents_sandboxed_command() {
    let w = workspace();
    let (serve, login) = serve(&w);
    drop(serve);
    let token = login.split("token=").nth(1).unwrap().to_string();
    let state = w.state();
    let file = state.join("console/token");
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), token);
    let o = w
        .loopward(&[
            "sandbox",
            "exec",
            "--config",
            "loop.toml",
            "--agent",
            "ping",
            "--",
            "cat",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!o.status.success(), "{o:?}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains(&token));
}

#[test]
fn serving_beyond_loopback_without_tls_is_refused_and_nothing_listens() {
    let w = workspace();
    let o = w
        .loopward(&["serve", "--bind", "0.0.0.0", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("only over TLS"), "{said}");
    assert!(o.stdout.is_empty(), "no sign-in link was printed");
}

#[test]
fn a_passphrase_set_from_standard_input_signs_in_and_a_short_one_is_refused() {
    use std::io::{Read, Write};
    use std::os::unix::process::CommandExt;
    let w = workspace();
    // `serve --set-passphrase` with `passphrase` on its standard input.
    let serve = |passphrase: &[u8]| {
        let mut child = w
            .loopward(&["serve", "--port", "0", "--set-passphrase"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(passphrase).unwrap();
        child
    };
    let o = serve(b"too short\n").wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("at least 12 characters"));
    let mut child = serve(b"correct horse battery staple\n");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let _serving = Owned(child);
    let host = first
        .trim()
        .strip_prefix("console: http://")
        .and_then(|u| u.split('/').next())
        .unwrap_or_else(|| panic!("serve printed {first:?}"))
        .to_string();
    let post = |form: &str| {
        let mut s = std::net::TcpStream::connect(&host).unwrap();
        write!(
            s,
            "POST /login HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    };
    let wrong = post("passphrase=correct+horse+battery+stable");
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    assert!(!wrong.to_ascii_lowercase().contains("set-cookie"));
    let right = post("passphrase=correct+horse+battery+staple");
    assert!(right.starts_with("HTTP/1.1 303"), "{right}");
    assert!(right.contains("loopward_console="), "{right}");
}
