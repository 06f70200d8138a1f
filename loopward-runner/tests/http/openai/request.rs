//! What goes out: messages, tools, the token limit and the key, and the config that refuses bad
//! fields.

use super::*;

#[tokio::test]
async fn request_maps_every_message_kind_tools_and_the_bearer_key() {
    let mut req = request();
    req.messages.extend([
        Message::model(
            "",
            vec![ToolCall::new("c1", "write_file", json!({"path": "a"}))],
        ),
        write_file_result("c1", "denied", true),
        Message::notice("handoff from planner"),
    ]);
    let sent = Served::sent(
        json(200, &full_reply("ok")),
        |server| model(server, false),
        req,
    )
    .await;
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test-secret"));
    assert_eq!(
        sent.json(),
        json!({
            "model": "gpt-test",
            "max_tokens": 256,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "write hello.txt"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\":\"a\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "[error] denied"},
                {"role": "user", "content": "[notice] handoff from planner"},
            ],
            "tools": [{"type": "function", "function": {"name": "write_file", "description": "Writes a file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
        })
    );
}

#[tokio::test]
async fn tool_choice_and_the_argument_bound_travel_with_the_tools_only() {
    let server = MockServer::start(vec![
        json(200, &full_reply("ok")),
        json(200, &full_reply("ok")),
    ])
    .await;
    let c = OpenAiConfig {
        tool_choice: ToolChoice::Required,
        argument_chars: Some(64),
        ..config(&server, false)
    };
    let m = OpenAiModel::new(c, None).unwrap();
    m.clone().oneshot(request()).await.unwrap();
    let mut no_tools = request();
    no_tools.tools.clear();
    m.oneshot(no_tools).await.unwrap();
    // Without a key (a local server), no credential header is sent at all.
    assert_eq!(server.requests()[0].header("authorization"), None);
    let sent: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(sent[0]["tool_choice"], "required");
    assert_eq!(
        sent[0]["tools"][0]["function"]["parameters"],
        json!({"type": "object", "properties": {"path": {"type": "string", "maxLength": 64}}})
    );
    // Without tools there is nothing to choose: no `tool_choice` (servers refuse one alone).
    assert!(sent[1].get("tool_choice").is_none(), "{}", sent[1]);
    assert!(sent[1].get("tools").is_none(), "{}", sent[1]);
    // The default (`auto`) is the servers' own and is not sent: see the exact body above.
    let c: OpenAiConfig = toml::from_str("model = \"m\"\ntool_choice = \"none\"").unwrap();
    assert_eq!(c.tool_choice, ToolChoice::None);
    let err = toml_refusal("model = \"m\"\ntool_choice = \"always\"");
    assert!(err.contains("`auto`, `required`"), "{err}");
    let err = refusal(|c| c.argument_chars = Some(0));
    assert!(err.contains("argument_chars is 0"), "{err}");
}

#[tokio::test]
async fn the_token_limit_can_travel_as_max_completion_tokens() {
    let from_toml = |server: &MockServer| {
        keyed(toml::from_str(&format!(
            "base_url = \"{}/v1\"\nmodel = \"o-test\"\nmax_tokens = 100\nmax_tokens_field = \"max_completion_tokens\"\nstream = false",
            server.url
        ))
        .unwrap())
    };
    let sent = Served::sent(json(200, &full_reply("ok")), from_toml, request())
        .await
        .json();
    assert_eq!(
        sent["max_completion_tokens"],
        json!(100),
        "the request's 256 is above the config's 100"
    );
    assert!(sent.get("max_tokens").is_none());
}

#[tokio::test]
async fn the_key_never_appears_in_debug_output_or_errors() {
    let server = MockServer::start(vec![json(401, &json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}))]).await;
    let (m, _) = model(&server, false);
    assert!(!format!("{m:?}").contains("sk-test-secret"));
    let err = call(m).await.unwrap_err();
    assert!(matches!(err, ModelError::Rejected { status: 401, .. }));
    assert!(!err.to_string().contains("sk-test-secret"));
    assert!(err.to_string().contains("check the API key"));
}

#[test]
fn config_rejects_bad_fields_with_precise_messages() {
    let err = toml_refusal("model = \"m\"\napi_key = \"sk\"");
    assert!(err.contains("unknown field `api_key`"), "{err}");
    let err = toml_refusal("model = \"m\"\nread_timeout = \"soon\"");
    assert!(err.contains("invalid duration \"soon\""), "{err}");
    let err = refusal(|c| c.base_url = "ftp://host".into());
    assert!(err.contains("base_url"), "{err}");
    let err = refusal(|c| {
        c.key_env = Some("K".into());
        c.key_file = Some("k.txt".into());
    });
    assert!(err.contains("both set"), "{err}");
    let err = refusal(|c| c.retry.max_attempts = 0);
    assert!(err.contains("retry.max_attempts"), "{err}");
}

/// What `validate` says of a config for `http://h` changed by `tune`.
fn refusal(tune: impl FnOnce(&mut OpenAiConfig)) -> String {
    let mut c = OpenAiConfig::new("http://h", "m");
    tune(&mut c);
    c.validate().unwrap_err().to_string()
}

/// What parsing `text` as a config says.
fn toml_refusal(text: &str) -> String {
    toml::from_str::<OpenAiConfig>(text)
        .unwrap_err()
        .to_string()
}
