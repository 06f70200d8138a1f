//! The heartbeat on a real terminal: `loopward run` under a pseudo-terminal (`script`, from
//! util-linux) against a model server that thinks for a few seconds shows the spinner on the
//! terminal, with the seconds moving, and clears it before the run's next line.

use crate::support::http::{listen, Listener};
use std::process::Command;
use std::time::Duration;

/// An OpenAI-compatible server on 127.0.0.1 that waits `think` before it streams its answer;
/// stops when dropped.
fn slow_server(think: Duration) -> (String, Listener) {
    let listener = listen(move |_, _, _, _| {
        std::thread::sleep(think);
        let body = concat!(
            "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"All done.\"},\"finish_reason\":null}]}\n\n",
            "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n",
            "data: [DONE]\n\n",
        );
        ("200 OK", "text/event-stream", body.as_bytes().to_vec())
    });
    (format!("http://127.0.0.1:{}/v1", listener.port), listener)
}

#[test]
fn the_heartbeat_shows_on_a_terminal_while_the_model_thinks_and_is_cleared() {
    if Command::new("script").arg("--version").output().is_err() {
        panic!("this test needs `script` (util-linux) to give the run a terminal");
    }
    let (url, server) = slow_server(Duration::from_millis(2600));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("loopward.toml"),
        format!(
            "[run]\nfirst = \"solo\"\ntask = \"say hi\"\n\n[backend]\nkind = \"openai\"\nmodel = \"slow\"\nbase_url = \"{url}\"\napi_key_env = \"LOOPWARD_TTY_TEST_KEY\"\n\n[[agent]]\nname = \"solo\"\ntools = []\n"
        ),
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_loopward");
    // `script -q -e -c CMD /dev/null`: CMD runs on a new pseudo-terminal; what it writes there
    // comes out on script's stdout, escape sequences and all.
    let o = Command::new("script")
        .args([
            "-q",
            "-e",
            "-c",
            &format!("'{bin}' run --id r1"),
            "/dev/null",
        ])
        .current_dir(dir.path())
        .env("LOOPWARD_TTY_TEST_KEY", "sk-test")
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .output()
        .unwrap();
    drop(server);
    let tty = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{tty}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The spinner said who waits, and its seconds moved while the model thought.
    assert!(tty.contains("solo: waiting for the model · 0s"), "{tty:?}");
    assert!(tty.contains("solo: waiting for the model · 2s"), "{tty:?}");
    // It was cleared (indicatif erases its line) before the run's outcome was printed, and the
    // outcome's line carries no spinner text.
    let last = tty.rfind("waiting for the model").unwrap();
    let rest = &tty[last..];
    let cleared = rest.find("\x1b[2K").expect("the spinner's line is erased");
    let outcome = rest.find("completed").expect("the run's outcome follows");
    assert!(cleared < outcome, "{rest:?}");
    let outcome_line = rest[outcome..].lines().next().unwrap();
    assert!(!outcome_line.contains("waiting"), "{outcome_line:?}");
}
