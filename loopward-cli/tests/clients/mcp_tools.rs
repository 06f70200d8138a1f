//! MCP tools denied until `allow_tools` names them.

use super::*;

/// A one-tool MCP server (`lab`, tool `note`) in POSIX shell: newline-delimited JSON-RPC.
const LAB_MCP: &str = r#"#!/bin/sh
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  [ -n "$id" ] || continue
  case "$line" in
    *'"method":"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"lab","version":"1"}}}\n' "$id" ;;
    *'"method":"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"note","description":"Notes a thing down.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}}\n' "$id" ;;
    *'"method":"tools/call"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"noted by lab"}]}}\n' "$id" ;;
    *) printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" ;;
  esac
done
"#;

/// With the hook on every tool, the client's own `ToolSearch` reaches it and runs; an MCP
/// server's tool reaches it and is denied with the remedy, until `[hooks] allow_tools` names
/// the server's tools, and then it runs, recorded with the line of `[hooks]`.
#[test]
fn real_claude_code_mcp_tools_are_denied_until_allow_tools_names_them() {
    let Some(claude) = Client::ClaudeCode.find() else {
        return;
    };
    let (dir, root, home) = project();
    let lab = dir.path().join("lab-mcp.sh");
    crate::support::write_script(&lab, LAB_MCP);
    let mcp = json!({"mcpServers": {"lab": {"command": lab}}}).to_string();
    let run = |script: Vec<Reply>| {
        let extra = ["--mcp-config", &mcp, "--strict-mcp-config"];
        scripted(
            &claude,
            &root,
            &home,
            script,
            "Note it",
            "bypassPermissions",
            &extra,
        )
        .0
    };
    // The client defers MCP tools behind its own ToolSearch: loading one is a quiet tool call.
    let results = run(vec![
        Reply::tool(
            "ToolSearch",
            json!({"query": "select:mcp__lab__note", "max_results": 1}),
        ),
        Reply::tool("mcp__lab__note", json!({"text": "hi"})),
        Reply::text("Done."),
    ]);
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(!results[0].1, "ToolSearch ran: {results:#?}");
    let (_, denied, said) = &results[1];
    assert!(*denied, "{said}");
    assert!(said.contains("made for Claude Code 2.1.332"), "{said}");
    assert!(said.contains(r#"allow_tools = ["mcp__lab__*"]"#), "{said}");
    assert!(!said.contains("noted by lab"), "{said}");
    let seen = |tool: &str| {
        ledger(&root)
            .iter()
            .any(|r| r["kind"] == "tool_requested" && r["data"]["tool"] == tool)
    };
    assert!(seen("ToolSearch"), "the hook never saw ToolSearch");
    assert!(seen("mcp__lab__note"), "the hook never saw the MCP call");

    let config = format!("{CONFIG}\n[hooks]\nallow_tools = [\"mcp__lab__*\"]\n");
    let line = config.lines().position(|l| l == "[hooks]").unwrap() + 1;
    std::fs::write(root.join("loopward.toml"), &config).unwrap();
    let results = run(vec![
        Reply::tool("mcp__lab__note", json!({"text": "hi"})),
        Reply::text("Done."),
    ]);
    assert_eq!(results.len(), 1, "{results:#?}");
    assert!(
        !results[0].1 && results[0].2.contains("noted by lab"),
        "{results:#?}"
    );
    let allowed = ledger(&root).into_iter().any(|r| {
        r["kind"] == "gate_decision"
            && r["data"]["gate"] == "allow_tools:mcp__lab__*"
            && r["data"]["decision"]["decision"] == "allow"
            && r["data"]["source"] == format!("loopward.toml:{line}")
    });
    assert!(allowed, "no allow_tools decision in the ledger");
}
