//! With the `otel` feature, the runner's spans reach an OTLP/HTTP collector.
#![cfg(feature = "otel")]

mod audit_support;

use audit_support::unrecorded_plan_and_build;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use tracing_subscriber::layer::SubscriberExt;

/// A one-endpoint collector: answers every POST with 200 and hands back the bodies.
fn collector() -> (String, std::sync::mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
            let _ = tx.send(body);
        }
    });
    (url, rx)
}

#[test]
fn spans_are_exported_over_otlp_http() {
    let (url, bodies) = collector();
    let (layer, guard) =
        loopward_runner::telemetry::otel::otlp_layer("loopward-test", &url).unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            unrecorded_plan_and_build().await;
        });
    });
    drop(guard); // flushes the batch
    let mut all = Vec::new();
    while let Ok(b) = bodies.recv_timeout(std::time::Duration::from_secs(10)) {
        all.extend(b);
        let text = String::from_utf8_lossy(&all);
        if text.contains("execute_tool write_file") && text.contains("gen_ai.tool.call.id") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&all);
    for needle in [
        "loopward-test",
        "invoke_agent planner",
        "gen_ai.request.model",
        "execute_tool write_file",
        "gen_ai.tool.call.id",
        "gen_ai.usage.input_tokens",
    ] {
        assert!(text.contains(needle), "the collector never saw {needle:?}");
    }
}
