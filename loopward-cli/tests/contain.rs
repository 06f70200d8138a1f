//! What an agent reads, sends and holds: secrets kept out of commands and masked in every
//! record, reads by allow-list, the environment by allow-list.

mod support;
use support::http_server;

use std::path::Path;
use std::process::{Command, Output};

const SECRET: &str = "s3cr3t-TOKEN-value-8842";

fn loopward(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_loopward"));
    cmd.args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        // Beside the project, outside its workspace.
        .env("XDG_STATE_HOME", state_of(dir))
        .env_remove("SECRET_TOKEN");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn state_of(dir: &Path) -> std::path::PathBuf {
    let name = dir.file_name().unwrap().to_string_lossy();
    dir.with_file_name(format!("{name}-state"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A project in a temporary folder; the state folder beside it (`state_of`) goes with it.
struct Project(tempfile::TempDir);

impl Project {
    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(state_of(self.0.path()));
    }
}

fn project(script: &str) -> Project {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("loopward.toml"),
        r#"
[run]
first = "builder"
task = "print the token"

[backend]
script = "script.toml"

[[agent]]
name = "builder"
tools = ["shell"]

[secrets.SECRET_TOKEN]
env = "SECRET_TOKEN"
hosts = ["deploy.example.com"]
"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("script.toml"), script).unwrap();
    Project(dir)
}

/// Every file below `dir`, with its bytes.
fn files(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out
}

fn holds(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn a_secret_printed_by_a_tool_is_masked_in_every_file_under_runs_and_in_json_output() {
    // The command cannot see the variable (the environment is an allow-list), so it reads the
    // value from a file in the workspace, as an agent would find one in a stray .env; the
    // agent's answer repeats it.
    let dir = project(&format!(
        "[[agents.builder]]\ntool_calls = [{{ name = \"shell\", arguments = {{ command = \"echo token=$SECRET_TOKEN; cat stray.env\" }} }}]\n\n\
         [[agents.builder]]\ntext = \"the token is {SECRET}\"\n"
    ));
    let d = dir.path();
    std::fs::write(d.join("stray.env"), format!("SECRET_TOKEN={SECRET}\n")).unwrap();
    let run = loopward(
        d,
        &["run", "--id", "r1", "--json"],
        &[("SECRET_TOKEN", SECRET)],
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(!holds(&run.stdout, SECRET), "{stdout}");
    assert!(!holds(&run.stderr, SECRET), "{}", text(&run));
    assert!(
        stdout.contains("SECRET_TOKEN=[secret:SECRET_TOKEN]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the token is [secret:SECRET_TOKEN]"),
        "{stdout}"
    );
    // The variable never reached the command.
    assert!(stdout.contains("token=\\nSECRET_TOKEN="), "{stdout}");
    let all = files(&d.join("runs"));
    assert!(all.len() >= 5, "{all:?}");
    for (path, bytes) in &all {
        assert!(!holds(bytes, SECRET), "the secret is in {}", path.display());
    }
    let events = std::fs::read_to_string(d.join("runs/r1/events.jsonl")).unwrap();
    assert!(events.contains("[secret:SECRET_TOKEN]"), "{events}");
    // Masked before it was hashed: the ledger verifies as written.
    let verify = loopward(d, &["verify", "runs/r1"], &[]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
    let report = loopward(d, &["report", "--json"], &[]);
    assert!(
        String::from_utf8_lossy(&report.stdout).contains("\"runs\": 1"),
        "{}",
        text(&report)
    );
    assert!(!holds(&report.stdout, SECRET), "{}", text(&report));
}

#[test]
fn a_missing_secret_source_fails_before_anything_starts() {
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    let run = loopward(dir.path(), &["run", "--id", "r1"], &[]);
    let out = text(&run);
    assert_eq!(run.status.code(), Some(1), "{out}");
    assert!(out.contains("secrets.SECRET_TOKEN.env"), "{out}");
    assert!(out.contains("SECRET_TOKEN is not set"), "{out}");
    assert!(!dir.path().join("runs/r1").exists());
}

#[test]
fn a_command_reads_the_workspace_but_not_another_project_or_the_home_folder() {
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join(".env"), "OTHER=leaked-from-next-door").unwrap();
    let dir = project(&format!(
        "[[agents.builder]]\ntool_calls = [{{ name = \"shell\", arguments = {{ command = \"cat mine.txt; cat {}/.env; echo other=$?; echo home=$HOME\" }} }}]\n\n\
         [[agents.builder]]\ntext = \"done\"\n",
        other.path().display()
    ));
    let d = dir.path();
    std::fs::write(d.join("mine.txt"), "workspace-ok\n").unwrap();
    let run = loopward(
        d,
        &["run", "--id", "r1", "--json"],
        &[("SECRET_TOKEN", SECRET)],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert!(stdout.contains("workspace-ok"), "{stdout}");
    assert!(stdout.contains("other=1"), "{stdout}");
    assert!(!stdout.contains("leaked-from-next-door"), "{stdout}");
    // HOME is the command's own scratch folder, not the user's.
    assert!(stdout.contains("home=/tmp/loopward-sh-"), "{stdout}");
}

#[test]
fn a_secret_source_passed_to_commands_is_refused_at_load() {
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    let cfg = dir.path().join("loopward.toml");
    let mut text_cfg = std::fs::read_to_string(&cfg).unwrap();
    text_cfg.push_str("\n[env]\npass = [\"SECRET_TOKEN\"]\n");
    std::fs::write(&cfg, text_cfg).unwrap();
    let run = loopward(
        dir.path(),
        &["run", "--id", "r1"],
        &[("SECRET_TOKEN", SECRET)],
    );
    let out = text(&run);
    assert_eq!(run.status.code(), Some(1), "{out}");
    assert!(out.contains("env.pass[0]"), "{out}");
    assert!(out.contains("holds a secret (SECRET_TOKEN)"), "{out}");
}

fn with_net(dir: &Path, net: &str, extra: &str) {
    let cfg = dir.join("loopward.toml");
    let text_cfg = std::fs::read_to_string(&cfg).unwrap().replace(
        "tools = [\"shell\"]",
        &format!("tools = [\"shell\"]\nnet = {net}"),
    );
    std::fs::write(&cfg, format!("{text_cfg}\n{extra}")).unwrap();
}

#[test]
fn a_command_reaches_only_its_agents_hosts_through_the_proxy_and_report_counts_each_decision() {
    let (good, _) = http_server("127.0.0.1", "hello-from-allowed");
    let (evil, evil_hits) = http_server("127.0.0.2", "attacker-got-it");
    let dir = project(&format!(
        "[[agents.builder]]\ntool_calls = [{{ name = \"shell\", arguments = {{ command = \"curl -s -m 5 http://127.0.0.1:{good}/; echo; curl -s -m 5 http://127.0.0.2:{evil}/; curl -s -m 5 --noproxy '*' http://127.0.0.2:{evil}/ || echo direct-failed\" }} }}]\n\n\
         [[agents.builder]]\ntext = \"done\"\n"
    ));
    let d = dir.path();
    with_net(d, "[\"127.0.0.1\"]", "");
    let run = loopward(
        d,
        &["run", "--id", "r1", "--json"],
        &[("SECRET_TOKEN", SECRET)],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert!(stdout.contains("hello-from-allowed"), "{stdout}");
    assert!(
        stdout.contains("loopward egress: 127.0.0.2 is not in this agent's net allow-list"),
        "{stdout}"
    );
    assert!(stdout.contains("direct-failed"), "{stdout}");
    assert!(!stdout.contains("attacker-got-it"), "{stdout}");
    assert_eq!(evil_hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    let report = loopward(d, &["report"], &[]);
    let out = text(&report);
    assert!(
        out.contains("egress: 1 connections allowed, 1 refused"),
        "{out}"
    );
    // The run's page shows each decision and the counts.
    let page = std::fs::read_to_string(d.join("runs/r1/audit.html")).unwrap();
    assert!(
        page.contains(&format!("egress to 127.0.0.2:{evil} refused")),
        "{page}"
    );
    assert!(
        page.contains(&format!("egress to 127.0.0.1:{good} allowed")),
        "{page}"
    );
    assert!(page.contains("egress (allowed / refused)"), "{page}");
}

#[test]
fn opting_out_of_network_isolation_is_recorded_on_every_call() {
    let dir = project(
        "[[agents.builder]]\ntool_calls = [{ name = \"shell\", arguments = { command = \"true\" } }]\n\n\
         [[agents.builder]]\ntext = \"done\"\n",
    );
    with_net(dir.path(), "[]", "[net]\nisolate = false\n");
    let run = loopward(
        dir.path(),
        &["run", "--id", "r1", "--json"],
        &[("SECRET_TOKEN", SECRET)],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert!(
        stdout.contains("network: this command reaches any host"),
        "{stdout}"
    );
}

#[test]
fn a_host_in_net_that_is_not_one_is_refused_at_load() {
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    with_net(dir.path(), "[\"https://evil.example/x\"]", "");
    let run = loopward(
        dir.path(),
        &["run", "--id", "r1"],
        &[("SECRET_TOKEN", SECRET)],
    );
    let out = text(&run);
    assert_eq!(run.status.code(), Some(1), "{out}");
    assert!(out.contains("agent[0].net[0]"), "{out}");
    assert!(out.contains("is not a host name or an address"), "{out}");
}

/// `loopward contain` in `dir`, with a home of the test's own holding an SSH key.
fn contain(dir: &Path, home: &Path, args: &[&str]) -> Output {
    let mut all = vec!["contain", "--agent", "builder", "--id", "s1", "--"];
    all.extend_from_slice(args);
    let home = home.to_str().unwrap();
    loopward(
        dir,
        &all,
        &[
            ("SECRET_TOKEN", SECRET),
            ("OPENAI_API_KEY", "sk-user-key-that-must-stay-out"),
            ("HOME", home),
        ],
    )
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
    assert_eq!(
        std::fs::read_to_string(d.join("plan.md")).unwrap(),
        "the plan\n"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("src/main.rs")).unwrap(),
        "code\n"
    );
    assert!(all.contains("hello-from-allowed"), "{all}");
    assert!(
        all.contains("1=loopward egress: 127.0.0.2 is not in this agent's net allow-list"),
        "{all}"
    );
    for line in [
        "2=direct-failed",
        "3=devtcp-failed",
        "4=py-failed",
        "5=dns-failed",
    ] {
        assert!(all.contains(line), "{line} missing:\n{all}");
    }
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
    assert!(
        text(&report).contains("egress: 1 connections allowed, 1 refused"),
        "{}",
        text(&report)
    );
}

/// A contained session runs for hours: the orphans of its shells are reaped by the sandbox's
/// init, and its `/proc` shows the sandbox's processes only, not the supervisor's.
#[test]
fn a_contained_program_sees_only_its_own_processes_and_leaves_no_zombies() {
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    let d = dir.path();
    with_net(d, "[]", "");
    let home = tempfile::tempdir().unwrap();
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
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    let d = dir.path();
    with_net(d, "[]", "[net]\nisolate = false\n");
    let home = tempfile::tempdir().unwrap();
    let out = contain(d, home.path(), &["true"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("the host's network (isolation opted out)"),
        "{}",
        text(&out)
    );
    let events = std::fs::read_to_string(d.join("runs/s1/events.jsonl")).unwrap();
    assert!(
        events.contains("network: the contained program reaches any host"),
        "{events}"
    );
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
    assert!(
        text(&out).contains("\"no-such-program-anywhere\" is not found"),
        "{}",
        text(&out)
    );
    assert!(!d.join("runs/s1").exists());
    // An agent not on the team.
    let out = loopward(
        d,
        &["contain", "--agent", "ghost", "--", "true"],
        &[("SECRET_TOKEN", SECRET)],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("there is no agent ghost on the team; use one of: builder"),
        "{}",
        text(&out)
    );
    // A secret whose source is missing.
    let out = loopward(d, &["contain", "--agent", "builder", "--", "true"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("secrets.SECRET_TOKEN.env"),
        "{}",
        text(&out)
    );
    assert!(!d.join("runs").exists());
}

#[test]
fn a_secret_in_a_claude_code_hook_event_is_masked_in_the_session_ledger() {
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    let root = dir.path().canonicalize().unwrap();
    let event = serde_json::json!({
        "session_id": "masked-1", "transcript_path": "/t.jsonl", "cwd": root,
        "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_use_id": "toolu_1",
        "tool_input": {"file_path": root.join(format!("notes-{SECRET}.md")), "content": format!("token {SECRET}")},
    });
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopward"))
        .args(["hook", "claude-code", "--config"])
        .arg(root.join("loopward.toml"))
        .env("XDG_STATE_HOME", state_of(&root))
        .env("SECRET_TOKEN", SECRET)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(event.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!holds(&out.stdout, SECRET), "{}", text(&out));
    let all = files(&root.join("runs"));
    assert!(!all.is_empty());
    let mut masked = false;
    for (path, bytes) in &all {
        assert!(!holds(bytes, SECRET), "the secret is in {}", path.display());
        masked |= holds(bytes, "[secret:SECRET_TOKEN]");
    }
    assert!(masked, "no record names the masked secret: {all:?}");
}

#[test]
fn a_sandboxed_command_cannot_read_the_keys_in_loopwards_own_environment() {
    // The parent of a shell command is the `loopward run` that holds the API keys; as root, a
    // non-dumpable parent's /proc/<pid>/environ is still readable, so loopward holds none there.
    let dir = project(
        "[[agents.builder]]\ntool_calls = [{ name = \"shell\", arguments = { command = \"echo parent=$PPID; tr '\\\\0' '\\\\n' < /proc/$PPID/environ\" } }]\n\n\
         [[agents.builder]]\ntext = \"done\"\n",
    );
    let d = dir.path();
    let run = loopward(
        d,
        &["run", "--id", "r1", "--json"],
        &[
            ("SECRET_TOKEN", SECRET),
            ("OPENAI_API_KEY", "sk-user-key-in-loopwards-env"),
        ],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert!(stdout.contains("parent="), "{stdout}");
    assert!(!stdout.contains("sk-user-key-in-loopwards-env"), "{stdout}");
    assert!(!stdout.contains("XDG_STATE_HOME"), "{stdout}");
    // The same for a contained program and its supervisor.
    let home = tempfile::tempdir().unwrap();
    let out = contain(
        d,
        home.path(),
        &["bash", "-c", "tr '\\0' '\\n' < /proc/$PPID/environ; true"],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(!all.contains("sk-user-key-that-must-stay-out"), "{all}");
    assert!(!all.contains("XDG_STATE_HOME"), "{all}");
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
