//! `[backend]`'s API key, as the facade builds a backend from `loopward.toml`: `api_key_file` is
//! read (relative to the config file) and sent, and a missing key's message names the file
//! setting as the other way to give it. The messages are snapshotted as the CLI prints them: the
//! error's own text, which already quotes its cause (the CLI says each cause once). And the
//! openai backend's `tool_choice` and `argument_chars` reach the request, or are refused where
//! the backend cannot honour them.
#![cfg(feature = "http")]

use loopward::backend::{self, Choice};
use loopward::config::Config;
use loopward::core::{AgentId, Message, Person, ToolSpec};
use loopward::runner::model::{ChatRequest, TurnSlot};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use tower::ServiceExt;

/// A one-connection server on 127.0.0.1 that answers one streamed chat completion and hands
/// back the raw request it read.
fn serve_once() -> (String, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = s.read(&mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_lowercase();
            if let Some(end) = text.find("\r\n\r\n") {
                let len = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                if got.len() >= end + 4 + len {
                    break;
                }
            }
            assert!(n > 0, "the client closed before its request was whole");
        }
        let body = concat!(
            "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n",
            "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        String::from_utf8(got).unwrap()
    });
    (url, handle)
}

fn config(dir: &Path, backend: &str) -> Config {
    let text = format!(
        "[backend]\nkind = \"openai\"\nmodel = \"gpt-test\"\n{backend}\n\n[run]\nfirst = \"builder\"\n\n[[agent]]\nname = \"builder\"\ntools = []\n"
    );
    let path = dir.join("loopward.toml");
    std::fs::write(&path, &text).unwrap();
    Config::parse(&path, &text).unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        agent: AgentId::new("builder").unwrap(),
        messages: vec![Message::human(Person::at_the_keyboard().says("say hi"))],
        tools: vec![],
        max_tokens: Some(16),
        turn: TurnSlot::empty(),
    }
}

#[tokio::test]
async fn api_key_file_is_read_relative_to_the_config_and_sent_as_the_bearer_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("secrets")).unwrap();
    std::fs::write(dir.path().join("secrets/openai.key"), "sk-from-the-file\n").unwrap();
    let (url, server) = serve_once();
    let cfg = config(
        dir.path(),
        &format!("base_url = \"{url}\"\napi_key_file = \"secrets/openai.key\""),
    );
    // The environment holds a different key under the default name: the file must win.
    let choice = Choice {
        env: Some(|name| (name == "OPENAI_API_KEY").then(|| "sk-from-the-env".to_owned())),
        ..Choice::default()
    };
    let model = backend::model(&cfg, dir.path(), &choice).unwrap();
    let reply = model.oneshot(request()).await.unwrap();
    assert_eq!(reply.content, "hi");
    let sent = server.join().unwrap().to_lowercase();
    assert!(
        sent.contains("authorization: bearer sk-from-the-file\r\n"),
        "{sent}"
    );
    assert!(!sent.contains("sk-from-the-env"), "{sent}");
}

#[test]
fn a_missing_key_file_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "api_key_file = \"nowhere.key\"");
    let err = backend::model(&cfg, dir.path(), &Choice::default()).unwrap_err();
    let msg = err
        .to_string()
        .replace(&dir.path().display().to_string(), "<dir>");
    insta::assert_snapshot!("missing_key_file", msg);
}

#[test]
fn a_missing_api_key_names_the_variable_and_api_key_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "api_key_env = \"MY_OPENAI_KEY\"");
    let choice = Choice {
        env: Some(|_| None),
        ..Choice::default()
    };
    let err = backend::model(&cfg, dir.path(), &choice).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("api_key_file"), "{msg}");
    insta::assert_snapshot!("missing_api_key", msg);
}

#[test]
fn api_key_env_and_api_key_file_together_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "api_key_env = \"MY_OPENAI_KEY\"\napi_key_file = \"k.key\"",
    );
    let err = backend::model(&cfg, dir.path(), &Choice::default()).unwrap_err();
    insta::assert_snapshot!("both_keys", err.to_string());
}

#[tokio::test]
async fn tool_choice_and_argument_chars_reach_the_openai_request() {
    let dir = tempfile::tempdir().unwrap();
    let (url, server) = serve_once();
    let cfg = config(
        dir.path(),
        &format!("base_url = \"{url}\"\ntool_choice = \"required\"\nargument_chars = 40"),
    );
    let choice = Choice {
        env: Some(|_| Some("sk-test".to_owned())),
        ..Choice::default()
    };
    let model = backend::model(&cfg, dir.path(), &choice).unwrap();
    let mut req = request();
    req.tools = vec![ToolSpec {
        name: "write_file".into(),
        description: "Writes a file.".into(),
        parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }];
    model.oneshot(req).await.unwrap();
    let sent = server.join().unwrap();
    let body: serde_json::Value =
        serde_json::from_str(&sent[sent.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    assert_eq!(body["tool_choice"], "required", "{body}");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["properties"]["path"]["maxLength"], 40,
        "{body}"
    );
}

#[test]
fn a_tool_choice_the_backend_cannot_honour_is_refused_naming_what_works() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "tool_choice = \"call_then_answer\"");
    let err = backend::model(&cfg, dir.path(), &Choice::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "backend.tool_choice = \"call_then_answer\" does not work with the openai backend; use auto or required or none"
    );
    let choice = Choice {
        kind: Some(loopward::config::BackendKind::Anthropic),
        ..Choice::default()
    };
    let cfg = config(dir.path(), "tool_choice = \"required\"");
    let err = backend::model(&cfg, dir.path(), &choice).unwrap_err();
    assert_eq!(
        err.to_string(),
        "backend.tool_choice = \"required\" does not work with the anthropic backend; use auto"
    );
}
