//! Helpers shared by the CLI's integration tests.

pub mod anthropic_server;
pub mod clients;
pub mod gemini_server;
pub mod http;
pub mod loop_ledger;
pub mod responses_server;
pub mod scratch;

/// `loopward args` in `dir`, kept from the caller's environment: no colour, no tracing or
/// span export unless a test sets it, and the tests' own state base (never the user's).
#[allow(dead_code)]
pub(crate) fn loopward_cmd(dir: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_loopward"));
    cmd.args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env(
            "XDG_STATE_HOME",
            std::env::temp_dir().join("loopward-test-state"),
        );
    cmd
}

/// Writes an executable script at `path`. A child process writes it: a process another test's
/// thread forks while this one holds the file open for writing keeps that descriptor until it
/// execs, and the script cannot be started meanwhile ("Text file busy").
#[allow(dead_code)] // not every test binary writes a script
pub(crate) fn write_script(path: &std::path::Path, script: &str) {
    let out = with_stdin(
        std::process::Command::new("sh")
            .args(["-c", "cat > \"$0\" && chmod 755 \"$0\""])
            .arg(path),
        script.as_bytes(),
    );
    assert!(
        out.status.success(),
        "writing {}: {}",
        path.display(),
        text(&out)
    );
}

/// What a command printed, stdout then stderr: what a person at the terminal reads.
#[allow(dead_code)]
pub(crate) fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// What `o` printed on stdout; it must have exited 0 (all it printed is shown when not).
#[allow(dead_code)]
#[track_caller]
pub(crate) fn succeeded(o: &std::process::Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", text(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The file `rel` under `root` holds `want`.
#[allow(dead_code)]
#[track_caller]
pub(crate) fn assert_file(root: &std::path::Path, rel: &str, want: impl AsRef<str>) {
    let path = root.join(rel);
    let got = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} cannot be read: {e}", path.display()));
    assert_eq!(got, want.as_ref(), "{}", path.display());
}

/// Runs `cmd`, which must succeed, and reads what it printed on stdout as JSON.
#[allow(dead_code)]
pub(crate) fn json_out(cmd: &mut std::process::Command) -> serde_json::Value {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}\n{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `text` (what a command printed) says `needle`; the whole text is shown when it does not.
#[allow(dead_code)]
#[track_caller]
pub(crate) fn assert_says(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} not in:\n{text}");
}

/// `text` says each of `needles`.
#[allow(dead_code)]
#[track_caller]
pub(crate) fn assert_says_all(text: &str, needles: &[&str]) {
    for needle in needles {
        assert_says(text, needle);
    }
}

/// What `o` printed (stdout, then stderr) says `needle`.
#[allow(dead_code)]
#[track_caller]
pub(crate) fn assert_prints(o: &std::process::Output, needle: &str) {
    assert_says(&text(o), needle);
}

/// Waits for `child` at most `limit`; a child still running then is ended by its PID (`None`).
#[allow(dead_code)]
pub(crate) fn wait_up_to(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Runs the client `name` (`cmd`, stdin closed) with its output in `<home>/<name>.out` and
/// `.err`, ended by its PID after two minutes, which fails the test: whether it succeeded, and
/// what it printed.
#[allow(dead_code)]
pub(crate) fn run_client(
    cmd: &mut std::process::Command,
    home: &std::path::Path,
    name: &str,
) -> (bool, String) {
    let (log, err) = (
        home.join(format!("{name}.out")),
        home.join(format!("{name}.err")),
    );
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {name}: {e}"));
    let status = wait_up_to(&mut child, std::time::Duration::from_secs(120));
    let out = std::fs::read_to_string(&log).unwrap_or_default()
        + &std::fs::read_to_string(&err).unwrap_or_default();
    assert!(
        status.is_some(),
        "{name} hung (ended after 2 minutes)\n{out}"
    );
    (status.unwrap().success(), out)
}

/// Every hook ledger under `<root>/runs`, one JSON record a line.
#[allow(dead_code)]
pub(crate) fn ledger(root: &std::path::Path) -> Vec<serde_json::Value> {
    let mut records = Vec::new();
    for e in std::fs::read_dir(root.join("runs")).unwrap() {
        let p = e.unwrap().path().join("events.jsonl");
        if p.is_file() {
            for l in std::fs::read_to_string(p).unwrap().lines() {
                records.push(serde_json::from_str(l).unwrap());
            }
        }
    }
    records
}

/// The installed Claude Code client (`LOOPWARD_CLAUDE`, else the project's `.claude-code/`),
/// if any.
#[allow(dead_code)]
pub(crate) fn claude() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("LOOPWARD_CLAUDE") {
        return Some(p.into());
    }
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.claude-code/node_modules/.bin/claude")
        .canonicalize()
        .ok()?;
    p.is_file().then_some(p)
}

/// Serves `body` over HTTP on `ip` from a thread (an attacker's or an allowed host's server,
/// on the loopback range); counts connections.
#[allow(dead_code)]
pub(crate) fn http_server(
    ip: &str,
    body: &'static str,
) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, hits)
}

/// Runs `cmd` with `stdin` written to it and its stdout and stderr captured: a hook as its host
/// runs it (one process per event, the event on stdin).
#[allow(dead_code)]
pub(crate) fn with_stdin(cmd: &mut std::process::Command, stdin: &[u8]) -> std::process::Output {
    started_with_stdin(cmd, stdin).wait_with_output().unwrap()
}

/// Starts `cmd` with `stdin` written to it and its stdout and stderr captured; the caller waits
/// for it.
#[allow(dead_code)]
pub(crate) fn started_with_stdin(
    cmd: &mut std::process::Command,
    stdin: &[u8],
) -> std::process::Child {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child
}
