//! A hook that fails blocks: the installed hook's `"onFailure": "block"`, with the real client.

use super::*;

/// Points every installed hook at a binary that is not there (a moved or removed loopward)
/// and keeps (`block`) or drops its `onFailure`.
fn break_hooks(root: &Path, block: bool) {
    let path = root.join(".claude/settings.json");
    let mut settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for entries in settings["hooks"].as_object_mut().unwrap().values_mut() {
        for entry in entries.as_array_mut().unwrap() {
            for hook in entry["hooks"].as_array_mut().unwrap() {
                assert_eq!(hook["onFailure"], "block", "hook install writes it: {hook}");
                hook["command"] = json!(root.join("gone/loopward"));
                if !block {
                    hook.as_object_mut().unwrap().remove("onFailure");
                }
            }
        }
    }
    std::fs::write(&path, settings.to_string()).unwrap();
}

/// With the hook's binary gone, the client cannot start the hook: as installed
/// (`onFailure: block`) a `Write` any agent may make does not happen; the same settings
/// without it let the write through unjudged, which is what the key is there to prevent.
#[test]
fn a_hook_that_cannot_start_blocks_the_call_as_installed() {
    let Some(claude) = Client::ClaudeCode.find() else {
        return;
    };
    for block in [true, false] {
        let (_dir, root, home) = project();
        break_hooks(&root, block);
        let target = root.join("notes.md");
        let script = vec![
            Reply::write(target.to_str().unwrap(), "unjudged\n"),
            Reply::text("Done."),
        ];
        let (port, _server) = anthropic_server::start(script);
        let (_, stdout, stderr) = session(
            &claude,
            &root,
            &home,
            port,
            "Write the notes",
            "bypassPermissions",
            &[],
        );
        assert_eq!(
            target.exists(),
            !block,
            "onFailure block: {block}\nstdout: {stdout}\nstderr: {stderr}"
        );
    }
}
