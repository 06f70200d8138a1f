//! Gates changed from the command line: one-use overrides and `gates add`.

use super::*;

#[test]
fn override_grant_is_used_once_and_listed_until_then() {
    let dir = initialised();
    let d = dir.path();
    let o = loopward(
        d,
        &[
            "override", "grant", "--agent", "builder", "--path", "plan.md", "--reason", "typo fix",
            "--ttl", "10m",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let list = text(&loopward(d, &["override", "list"]));
    assert_says(&list, "builder → plan.md  usable  (typo fix)");
    let o = loopward(
        d,
        &[
            "override", "grant", "--agent", "builder", "--path", "plan.md", "--reason", " ",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    crate::support::assert_prints(&o, "non-empty reason");
    let id = list.split_whitespace().next().unwrap().to_string();
    assert!(loopward(d, &["override", "revoke", &id]).status.success());
    assert!(text(&loopward(d, &["override", "list"])).contains("no overrides"));
}

#[test]
fn gates_add_refuses_a_change_that_would_not_load_and_leaves_the_file_alone() {
    let dir = initialised();
    let d = dir.path();
    let before = std::fs::read_to_string(d.join("loopward.toml")).unwrap();
    let o = loopward(
        d,
        &[
            "gates",
            "add",
            "territory",
            "--paths",
            "src/main.rs",
            "--owner",
            "planner",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    crate::support::assert_prints(&o, "nothing was written");
    crate::support::assert_file(d, "loopward.toml", &before);
    let o = loopward(
        d,
        &[
            "gates",
            "add",
            "territory",
            "--paths",
            "docs/**",
            "--owner",
            "auditor",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&loopward(d, &["gates", "list"])).contains("territory:auditor"));
    assert!(loopward(d, &["gates", "rm", "territory:auditor"])
        .status
        .success());
    assert!(!text(&loopward(d, &["gates", "list"])).contains("territory:auditor"));
    assert!(
        d.join(".loopward/changes").is_dir(),
        "each change is recorded"
    );
}
