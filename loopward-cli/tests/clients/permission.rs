//! The client's permission decision for a wrapped command stays its own.

use super::*;

/// The sandbox wrap leaves Claude Code's own permission decision alone. In the default mode with
/// no rule, a `Bash` command is not run (headless, a call that needs permission is refused);
/// with a `permissions.allow` rule for `Bash` it runs, wrapped (the kernel refuses its write into
/// the planner's territory). With `--defer-allows`, a `Write` loopward allows is still the
/// client's to decide; without it, loopward's `allow` lets it through.
#[test]
fn real_claude_code_keeps_its_own_permission_decision_for_wrapped_commands() {
    let Some(claude) = Client::ClaudeCode.find() else {
        return;
    };
    let p = |root: &Path, rel: &str| root.join(rel).to_str().unwrap().to_string();

    // No rule, the hook as installed.
    let (_dir, root, home) = project();
    std::fs::create_dir_all(root.join("notes")).unwrap();
    trust(&home, &root);
    let script = vec![
        Reply::bash("touch notes/unasked.txt", "no rule"),
        Reply::write(p(&root, "notes/w.md"), "w\n"),
        Reply::text("All done."),
    ];
    let (results, stdout) = scripted(&claude, &root, &home, script, "Go", "default", &[]);
    eprintln!("no rule: {results:#?}");
    assert_eq!(results.len(), 2, "{results:#?}\n{stdout}");
    assert!(results[0].1, "the command ran unasked: {:?}", results[0]);
    assert!(
        !root.join("notes/unasked.txt").exists(),
        "the command ran unasked"
    );
    assert!(!results[1].1, "{:?}", results[1]);
    crate::support::assert_file(&root, "notes/w.md", "w\n");

    // A rule for Bash, and --defer-allows.
    let (_dir, root, home) = project();
    std::fs::create_dir_all(root.join("notes")).unwrap();
    trust(&home, &root);
    configure(&root, &["Bash"], true);
    let script = vec![
        Reply::bash(
            "echo pwned > plans/roadmap.md; touch notes/ran.txt",
            "allowed by rule",
        ),
        Reply::write(p(&root, "notes/deferred.md"), "d\n"),
        Reply::write(p(&root, "plans/roadmap.md"), "# mine now\n"),
        Reply::text("All done."),
    ];
    let (results, stdout) = scripted(&claude, &root, &home, script, "Go", "default", &[]);
    eprintln!("Bash rule, deferred allows: {results:#?}");
    assert_eq!(results.len(), 3, "{results:#?}\n{stdout}");
    assert!(root.join("notes/ran.txt").exists(), "{:?}", results[0]);
    assert!(
        results[0].2.contains("Permission denied"),
        "{:?}",
        results[0]
    );
    crate::support::assert_file(&root, "plans/roadmap.md", ROADMAP);
    // loopward allowed it and answered nothing; the client had no rule for it, so it asked.
    assert!(results[1].1, "{:?}", results[1]);
    assert!(!root.join("notes/deferred.md").exists());
    assert!(
        results[2].1 && results[2].2.contains("plans/roadmap.md belongs to planner"),
        "{:?}",
        results[2]
    );
}
