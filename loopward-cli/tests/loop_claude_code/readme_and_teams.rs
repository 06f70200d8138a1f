//! The README's loop section as written, and a team whose model agent hands off to a Claude Code agent.

use super::*;

/// The fenced `sh` block of the README's "Loop over a coding agent" section.
fn readme_commands() -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
        .unwrap();
    let start = text
        .find("### Loop over a coding agent")
        .expect("the README has the loop section");
    let section = &text[start..];
    let section = &section[..section.find("\n### ").unwrap()];
    let body = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the section has an sh block");
    body.lines().map(str::to_string).collect()
}

#[test]
fn the_readme_loop_section_runs_as_written() {
    let claude = need_claude!();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("crate");
    let (home, bin) = (dir.path().join("home"), dir.path().join("bin"));
    for d in [root.join("src"), home.clone(), bin.clone()] {
        std::fs::create_dir_all(d).unwrap();
    }
    // A Cargo project with a failing test, built once (Cargo.lock and target/ exist).
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"adder\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 {\n    0\n}\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 2), 4);\n}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("Cargo.lock"),
        "version = 3\n\n[[package]]\nname = \"adder\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    std::fs::create_dir(root.join("target")).unwrap();
    let root = root.canonicalize().unwrap();
    // `loopward` and `claude` on PATH, as for a user who installed both.
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_loopward"), bin.join("loopward")).unwrap();
    std::os::unix::fs::symlink(&claude, bin.join("claude")).unwrap();
    let (port, server) = anthropic_server::start(vec![
        Reply::tool(
            "Edit",
            json!({"file_path": root.join("src/lib.rs").to_str().unwrap(),
                   "old_string": "    0\n", "new_string": "    a + b\n"}),
        ),
        Reply::text("Fixed: add adds."),
    ]);
    let real_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let var = |name: &str, default: PathBuf| std::env::var_os(name).unwrap_or(default.into());
    let path = std::env::join_paths(
        std::iter::once(bin.clone())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    for line in readme_commands() {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(&line)
            .current_dir(&root)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", &home)
            .env("CARGO_HOME", var("CARGO_HOME", real_home.join(".cargo")))
            .env("RUSTUP_HOME", var("RUSTUP_HOME", real_home.join(".rustup")))
            .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
            .env("ANTHROPIC_API_KEY", "test")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("NO_COLOR", "1");
        if let Some(t) = std::env::var_os("RUSTUP_TOOLCHAIN") {
            c.env("RUSTUP_TOOLCHAIN", t);
        }
        let out = c.output().unwrap();
        eprintln!(
            "$ {line}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "`{line}` failed: {}", out.status);
    }
    assert_eq!(server.served(), 2, "one session, as scripted");
    assert!(std::fs::read_to_string(root.join("src/lib.rs"))
        .unwrap()
        .contains("a + b"));
    let rs = records(&root, "fix");
    assert_eq!(sessions(&rs), 1);
    assert_eq!(decisions(&rs, "verify")[0]["data"]["decision"], "allow");
}

/// A mixed team in `loopward.toml`: a model agent plans and hands off to a `claude-code`
/// agent, whose turns are sessions until its verifier passes; `loopward run` runs it.
#[test]
fn a_model_agent_hands_off_to_a_claude_code_agent_that_works_until_verified() {
    let (claude, _dir, root, home) = claude_and_project!();
    loop_ledger::write_team(
        &root,
        "kind = \"claude-code\"\nverify = \"test -f src/done.txt\"",
    );
    let p = |rel: &str| root.join(rel).to_str().unwrap().to_string();
    let (port, _server) = anthropic_server::start(vec![
        Reply::text("All done."),
        Reply::write(p("src/done.txt"), "yes\n"),
        Reply::text("Done, really."),
    ]);
    let (_bin, path) = clients::path_with(&claude, "claude");
    let out = Command::new(env!("CARGO_BIN_EXE_loopward"))
        .current_dir(&root)
        .args(["run", "--id", "team"])
        .env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", "test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .output()
        .unwrap();
    support::succeeded(&out);
    loop_ledger::assert_team_built(&root, &home, "claude_code");
}
