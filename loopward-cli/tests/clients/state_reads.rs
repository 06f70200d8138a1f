//! The client's own read tools kept out of loopward's state.

use super::*;

/// Claude Code's own read tools run in the client, outside the sandbox: the hook refuses a
/// `Read` of a ledger key, a `Read` through a link in the workspace that lands on it, and a
/// `Grep` or `Glob` over the state folder, before they run. Not a byte of the key reaches the
/// "model"; an ordinary read still does.
#[test]
fn real_claude_code_cannot_read_loopward_state_with_its_own_tools() {
    let Some(claude) = Client::ClaudeCode.find() else {
        return;
    };
    let (_dir, root, home) = project();
    let state = state_dir(&home, &root);
    // The key exists before the session (made on first use, as any hook event would).
    let made = Command::new(env!("CARGO_BIN_EXE_loopward"))
        .args(["key", "show", "--config"])
        .arg(root.join("loopward.toml"))
        .env("HOME", &home)
        .env_remove("XDG_STATE_HOME")
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let key = std::fs::read_dir(state.join("keys"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "key"))
        .expect("a key file");
    let bytes = std::fs::read(&key).unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::os::unix::fs::symlink(&key, root.join("docs/notes.md")).unwrap();
    let script = vec![
        Reply::tool("Read", json!({"file_path": key})),
        Reply::tool("Read", json!({"file_path": root.join("docs/notes.md")})),
        Reply::tool(
            "Grep",
            json!({"pattern": ".", "path": state, "output_mode": "content"}),
        ),
        Reply::tool("Glob", json!({"pattern": "**/*.key", "path": state})),
        Reply::tool("Read", json!({"file_path": root.join("plans/roadmap.md")})),
        Reply::text("All done."),
    ];
    // This client offers Grep and Glob only when asked for them.
    let (results, stdout) = scripted(
        &claude,
        &root,
        &home,
        script,
        "Look around",
        "bypassPermissions",
        &["--allowedTools", "Grep", "Glob"],
    );
    eprintln!("tool results: {results:#?}");
    assert_eq!(results.len(), 5, "{results:#?}\n{stdout}");
    // No tool result the client sent to the "model" holds the key: not in hex, nor any line of
    // it as text, however the client decoded it (UTF-8 with U+FFFD for what is not, or byte by
    // byte as a legacy encoding); the client numbers the lines it reads.
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let utf8 = String::from_utf8_lossy(&bytes).into_owned();
    let latin1: String = bytes.iter().map(|&b| char::from(b)).collect();
    let mut forms = vec![hex.clone(), hex.to_uppercase()];
    for decoded in [&utf8, &latin1] {
        forms.extend(
            decoded
                .split('\n')
                .map(|line| line.trim_end_matches('\r'))
                .filter(|line| line.chars().count() >= 8)
                .map(str::to_string),
        );
    }
    for (_, _, said) in &results {
        let leaked = forms.iter().find(|f| said.contains(f.as_str()));
        assert!(leaked.is_none(), "the key reached the model: {said}");
    }
    for (i, (_, denied, text)) in results.iter().take(4).enumerate() {
        assert!(*denied, "{i}: {text}");
        assert!(text.contains("refused by unreadable"), "{i}: {text}");
        assert!(text.contains("What to do"), "{i}: {text}");
    }
    assert!(results[1].2.contains("docs/notes.md"), "{}", results[1].2);
    assert!(results[4].2.contains("Roadmap"), "{:?}", results[4]);
    let denials = ledger(&root)
        .iter()
        .filter(|r| {
            r["kind"] == "gate_decision"
                && r["data"]["gate"] == "unreadable"
                && r["data"]["decision"]["decision"] == "deny"
        })
        .count();
    assert_eq!(denials, 4);
}
