//! Observability from the command line alone: `RUST_LOG` shows spans on stderr, and the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` sends them to a collector (here a stand-in on 127.0.0.1).

use super::assert_says;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

fn loopward(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = super::loopward_cmd(dir, args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The stderr of `run --id id` with `env` set, which must succeed.
fn run_stderr(dir: &Path, id: &str, env: &[(&str, &str)]) -> String {
    let o = loopward(dir, &["run", "--id", id], env);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    stderr
}

fn initialised() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    assert!(loopward(dir.path(), &["init"], &[]).status.success());
    dir
}

#[test]
fn rust_log_shows_the_runs_spans_and_silence_is_the_default() {
    let dir = initialised();
    let stderr = run_stderr(dir.path(), "quiet", &[]);
    assert!(!stderr.contains("invoke_agent"), "{stderr}");

    let stderr = run_stderr(dir.path(), "loud", &[("RUST_LOG", "info")]);
    assert_says(&stderr, "invoke_agent");
    assert_says(&stderr, "execute_tool");
}

#[test]
fn an_invalid_rust_log_is_named_not_fatal() {
    let dir = initialised();
    let stderr = run_stderr(dir.path(), "bad-log", &[("RUST_LOG", "=[")]);
    assert_says(&stderr, "RUST_LOG=\"=[\" is not a valid filter");
}

/// A collector stand-in: accepts HTTP posts and keeps their paths and bodies.
fn collector() -> (String, std::sync::mpsc::Receiver<(String, Vec<u8>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(16) {
            let Ok(mut s) = stream else { break };
            s.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            // Read the head, then as many body bytes as Content-Length says.
            let (head_end, len) = loop {
                let n = s.read(&mut chunk).unwrap_or(0);
                if n == 0 {
                    break (buf.len(), 0);
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                    let len = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    break (i + 4, len);
                }
            };
            while buf.len() < head_end + len {
                let n = s.read(&mut chunk).unwrap_or(0);
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let line = String::from_utf8_lossy(&buf)
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = tx.send((path, buf[head_end.min(buf.len())..].to_vec()));
        }
    });
    (url, rx)
}

#[test]
fn otel_exporter_otlp_endpoint_alone_sends_the_spans_to_a_collector() {
    if !cfg!(feature = "otel") {
        // The export needs the `otel` feature; without it the binary says so (tested below).
        let dir = initialised();
        let o = loopward(
            dir.path(),
            &["run", "--id", "no-otel"],
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")],
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_says(&stderr, "--features otel");
        return;
    }
    let (url, posts) = collector();
    let dir = initialised();
    run_stderr(
        dir.path(),
        "exported",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &url),
            ("OTEL_SERVICE_NAME", "loopward-test"),
        ],
    );
    let mut bodies = Vec::new();
    while let Ok((path, body)) = posts.recv_timeout(Duration::from_secs(10)) {
        assert_eq!(path, "/v1/traces");
        bodies.extend(body);
        if bodies.windows(12).any(|w| w == b"invoke_agent") {
            break;
        }
    }
    let has = |s: &[u8]| bodies.windows(s.len()).any(|w| w == s);
    assert!(has(b"invoke_agent"), "no invoke_agent span exported");
    assert!(
        has(b"loopward-test"),
        "the service name is not OTEL_SERVICE_NAME"
    );
    assert!(has(b"gen_ai.agent.name"), "GenAI attributes missing");
    // The backend names its provider on each model call's span.
    let contains = |b: &[u8], s: &[u8]| b.windows(s.len()).any(|w| w == s);
    while !contains(&bodies, b"gen_ai.provider.name") {
        match posts.recv_timeout(Duration::from_secs(10)) {
            Ok((_, body)) => bodies.extend(body),
            Err(_) => break,
        }
    }
    let has = |s: &[u8]| contains(&bodies, s);
    assert!(
        has(b"gen_ai.provider.name"),
        "no gen_ai.provider.name exported"
    );
    assert!(
        has(b"loopward.fake"),
        "the fake backend is not named as the provider"
    );
    assert!(
        has(b"gen_ai.response.finish_reasons"),
        "no finish reasons exported"
    );
}
