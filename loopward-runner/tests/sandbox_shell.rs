//! The kernel sandbox around the runner's `shell` tool: a command writes only what its agent may
//! write, whatever it runs and however long its processes live.

#[path = "gates/support.rs"]
mod gates_support;

use gates_support::*;
use loopward_core::{AuditEvent, Decision};
use loopward_runner::gates::ControlFiles;
use loopward_runner::sandbox::{Confinement, Protected, Reach};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The planner owns the plans, the builder `src/**` (sprawl off).
const ROOM: &str = include_str!("gates/policies/plans-and-src.toml");

fn sandbox_decisions(room: &Room) -> Vec<Decision> {
    room.events()
        .into_iter()
        .filter_map(|e| match e {
            AuditEvent::GateDecision { gate, decision, .. }
                if gate.kind == loopward_core::GateKind::Sandbox =>
            {
                Some(decision)
            }
            _ => None,
        })
        .collect()
}

/// A workspace in a fresh folder holding `a.txt` ("mine"), and the confinement of a command
/// in it before any reach is added.
fn confined_workspace() -> (tempfile::TempDir, Confinement) {
    let ws_dir = tempfile::tempdir().unwrap();
    std::fs::write(ws_dir.path().join("a.txt"), "mine").unwrap();
    let ws = loopward_runner::Workspace::new(ws_dir.path()).unwrap();
    let plan = Confinement::plan(&ws, &Protected::new(ControlFiles::default(), vec![])).unwrap();
    (ws_dir, plan)
}

/// A folder `dir/name` holding the key `k1.key` with `secret` in it.
fn keys_in(dir: &Path, name: &str, secret: &str) -> PathBuf {
    let keys = dir.join(name);
    std::fs::create_dir(&keys).unwrap();
    std::fs::write(keys.join("k1.key"), secret).unwrap();
    keys
}

/// The paths of every violation recorded so far.
fn violated(room: &Room) -> Vec<String> {
    room.violations()
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

#[tokio::test]
async fn a_command_writes_its_own_territory_and_is_refused_by_the_kernel_elsewhere() {
    let (room, _, out) = Room::builder_ran(
        ROOM,
        &[("plan.md", "the plan"), ("loopward.toml", "# config")],
        "echo code > src/main.rs; echo hijack > plan.md; echo evil >> loopward.toml; \
         mkdir -p plans; echo new > plans/new.md; echo x > $TMPDIR/scratch && cat $TMPDIR/scratch",
    )
    .await;
    // The sandbox said no to each foreign write; nothing had to be reverted.
    assert_eq!(room.read("src/main.rs").unwrap(), "code\n");
    assert_eq!(room.read("plan.md").unwrap(), "the plan");
    assert_eq!(room.read("loopward.toml").unwrap(), "# config");
    assert!(!room.path("plans").exists());
    assert_says(
        &out.content,
        &[
            "Permission denied",
            "stdout:\nx\n",
            "sandbox: this command could write only",
        ],
    );
    assert!(violated(&room).is_empty());
    assert_eq!(sandbox_decisions(&room), vec![Decision::Allow]);
}

#[tokio::test]
async fn a_file_in_a_territory_folder_that_does_not_exist_yet_cannot_be_created() {
    let (room, builder) = Room::with_turn(ROOM, "builder");
    let out = room
        .sh(
            &builder,
            "mkdir plans; touch plans/a.md; touch plan.md; ln -s src plans2",
        )
        .await;
    assert!(!room.path("plans").exists(), "{}", out.content);
    assert!(!room.path("plan.md").exists());
    assert!(!room.path("plans2").exists());
    // The builder's own territory folder was made for it, and is writable.
    assert!(room.path("src").is_dir());
}

/// The command is the init of a PID namespace of its own: what it leaves behind (`setsid`,
/// `nohup`, `&`) ends with it, so nothing of it writes once the call is over, not even in its
/// own territory.
#[tokio::test]
async fn a_background_writer_does_not_outlive_the_command() {
    let (room, _, out) = Room::builder_ran(
        ROOM,
        &[("plan.md", "the plan")],
        // The command returns only once the writer has left its process group (`setsid`
        // runs before `sh` touches src/.left): the shell tool's group kill does not reach it.
        "setsid sh -c 'touch src/.left; sleep 0.5; echo late > plan.md; echo late > src/late.txt' >/dev/null 2>&1 & \
         nohup sh -c 'sleep 0.5; echo late > src/nohup.txt' >/dev/null 2>&1 & \
         while [ ! -e src/.left ]; do sleep 0.01; done; echo started",
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(room.path("src/.left").exists());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!room.path("src/late.txt").exists());
    assert!(!room.path("src/nohup.txt").exists());
    assert_eq!(room.read("plan.md").unwrap(), "the plan");
}

#[tokio::test]
async fn links_and_hard_links_into_a_territory_do_not_open_it() {
    let (room, _, out) = Room::builder_ran(
        ROOM,
        &[("plans/a.md", "keep")],
        "ln plans/a.md src/hard.md; ln -s ../plans/a.md src/soft.md; echo x > src/soft.md; \
         mv plans/a.md src/moved.md; echo x >> src/hard.md",
    )
    .await;
    assert_eq!(room.read("plans/a.md").unwrap(), "keep", "{}", out.content);
    use std::os::unix::fs::MetadataExt;
    // The kernel refused the hard link (EXDEV) and the move; `>>` then made a file of its own.
    assert_eq!(
        std::fs::metadata(room.path("plans/a.md")).unwrap().nlink(),
        1
    );
    assert_says(&out.content, &["Invalid cross-device link"]);
    assert!(!room.path("src/moved.md").exists());
    // The symbolic link (harmless to the kernel: a write through it is checked where it lands)
    // is still a link into a territory, and the watch removed it.
    assert!(!room.path("src/soft.md").exists());
    assert_eq!(violated(&room), vec!["src/soft.md".to_string()]);
}

#[tokio::test]
async fn a_command_cannot_tamper_with_loopward_state_or_signal_loopward() {
    let room = Room::new(ROOM);
    room.write(".loopward/overrides/x.json", "{}");
    room.write("runs/r0/events.jsonl", "{}\n");
    let me = std::process::id();
    let builder = room.turn("builder");
    room.sh(
        &builder,
        &format!(
            "echo forged > .loopward/overrides/y.json; rm -f .loopward/overrides/x.json; \
             echo cut > runs/r0/events.jsonl; kill -STOP {me}; true"
        ),
    )
    .await;
    assert!(!room.path(".loopward/overrides/y.json").exists());
    assert_eq!(room.read(".loopward/overrides/x.json").unwrap(), "{}");
    assert_eq!(room.read("runs/r0/events.jsonl").unwrap(), "{}\n");
}

#[tokio::test]
async fn a_config_edit_and_a_territory_write_in_one_command_are_both_stopped() {
    let room = Room::new(ROOM);
    room.write(
        "loopward.toml",
        "[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"\n",
    );
    room.write("plan.md", "the plan");
    let builder = room.turn("builder");
    room.sh(&builder, "printf '' > loopward.toml; echo hijack > plan.md")
        .await;
    assert!(room.read("loopward.toml").unwrap().contains("planner"));
    assert_eq!(room.read("plan.md").unwrap(), "the plan");
}

#[tokio::test]
async fn watch_only_is_an_explicit_opt_in_recorded_as_a_warning() {
    let (room, _, out) = Room::builder_ran(
        &format!("{ROOM}\n[gates.shell]\nsandbox = \"watch-only\"\n"),
        &[("plan.md", "the plan")],
        "echo hijack > plan.md",
    )
    .await;
    // Not contained, only watched: the write happened and was put back.
    assert!(out.is_error);
    assert_eq!(room.read("plan.md").unwrap(), "the plan");
    assert_eq!(violated(&room), vec!["plan.md".to_string()]);
    let d = sandbox_decisions(&room);
    assert!(
        matches!(&d[..], [Decision::Warn(r)] if r.reason.contains("watch-only")),
        "{d:?}"
    );
}

#[tokio::test]
async fn with_open_reads_a_confined_command_cannot_read_an_unreadable_folder_but_reads_its_neighbours(
) {
    let (ws_dir, plan) = confined_workspace();
    let state = tempfile::tempdir().unwrap();
    let keys = keys_in(state.path(), "keys", "secret");
    std::fs::write(state.path().join("index-head.json"), "head").unwrap();
    let plan = plan
        .with_reach(Reach::default().open_reads())
        .with_unreadable(keys.clone());
    let script = format!(
        "cat {k}; echo \"cat=$?\"; ls {kd}; cat {head}; echo; cat {ws}/a.txt; echo; cat /etc/hostname > /dev/null && echo etc-ok; echo new > {ws}/a.txt && echo write-ok",
        k = keys.join("k1.key").display(),
        kd = keys.display(),
        head = state.path().join("index-head.json").display(),
        ws = ws_dir.path().display(),
    );
    let out = run_confined(&plan, &script).await;
    // The key is not readable (EACCES), though its name can be listed; everything else reads.
    let stderr = &out.stderr;
    assert!(stderr.contains("k1.key: Permission denied"), "{stderr}");
    out.assert_stdout(
        &["cat=1", "k1.key\n", "head\nmine\netc-ok\nwrite-ok"],
        &["secret"],
    );
}

#[tokio::test]
async fn a_shell_command_cannot_read_loopward_keys() {
    let state = tempfile::tempdir().unwrap();
    let keys = keys_in(state.path(), "keys", "secret");
    let dir = tempfile::tempdir().unwrap();
    let ws = loopward_runner::Workspace::new(dir.path()).unwrap();
    let cfg = loopward_runner::gates::PolicyConfig::from_toml(ROOM).unwrap();
    let policy = loopward_runner::gates::Policy::from_config(&cfg, ws.clone())
        .unwrap()
        .with_unreadable(vec![keys.clone()]);
    let room = Room::with_policy(dir, ws, policy);
    let builder = room.turn("builder");
    let out = room
        .sh(
            &builder,
            &format!(
                "cat {k}; cp {k} src/stolen; echo copied=$?",
                k = keys.join("k1.key").display()
            ),
        )
        .await;
    assert_says(&out.content, &["k1.key: Permission denied"]);
    assert!(!out.content.contains("secret"), "{}", out.content);
    assert!(room.read("src/stolen").is_none());
}

#[tokio::test]
async fn a_huge_file_next_to_a_territory_write_blinds_nothing() {
    let (room, builder) = Room::builder_in(
        &format!("{ROOM}\n[gates.shell]\nmax_snapshot_bytes = 4096\n"),
        &[("plan.md", "the plan")],
    );
    let out = room
        .shell(
            &builder,
            "head -c 100000 /dev/zero > src/huge.bin; echo hijack > plan.md; true",
        )
        .await;
    // The kernel refused the territory write; the watch, not blinded by a file it need not
    // read, compares everything else and records no unchecked change.
    assert_eq!(room.read("plan.md").unwrap(), "the plan");
    let out = out.unwrap();
    let paths: Vec<_> = out.effects.iter().map(|e| e.path.as_str()).collect();
    assert!(paths.contains(&"src/huge.bin"), "{out:?}");
    let unremedied = room.events().into_iter().any(|e| {
        matches!(
            e,
            AuditEvent::Violation {
                remedy: loopward_core::Remedy::Unremedied { .. },
                ..
            }
        )
    });
    assert!(!unremedied, "{:#?}", room.events());
}

/// What a confined command printed.
struct Printed {
    stdout: String,
    stderr: String,
}

impl Printed {
    /// Asserts that stdout says each of `says` and none of `hides`, showing both streams when it
    /// does not.
    #[track_caller]
    fn assert_stdout(&self, says: &[&str], hides: &[&str]) {
        let Self { stdout, stderr } = self;
        for s in says {
            assert!(
                stdout.contains(s),
                "{s:?} missing from:\n{stdout}\n{stderr}"
            );
        }
        for h in hides {
            assert!(!stdout.contains(h), "{h:?} in:\n{stdout}\n{stderr}");
        }
    }
}

/// Runs `script` under bash in `plan`.
async fn run_confined(plan: &Confinement, script: &str) -> Printed {
    let mut cmd = tokio::process::Command::new("bash");
    plan.apply_env(cmd.as_std_mut());
    cmd.arg("-c").arg(script);
    cmd.stdout(std::process::Stdio::piped());
    cmd.stderr(std::process::Stdio::piped());
    let out = loopward_runner::sandbox::spawn_confined(cmd, plan)
        .await
        .unwrap()
        .wait_with_output()
        .await
        .unwrap();
    Printed {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test]
async fn reads_are_an_allow_list_the_workspace_and_system_folders_but_not_another_project_or_the_host_secrets(
) {
    let (ws_dir, plan) = confined_workspace();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join(".env"), "OTHER_PROJECT_KEY=leaked").unwrap();
    let toolchain = tempfile::tempdir().unwrap();
    std::fs::write(toolchain.path().join("tool"), "tool-ok").unwrap();
    let keys = keys_in(toolchain.path(), "state-keys", "key-bytes");
    let plan = plan
        .with_reach(Reach::default().read(toolchain.path()))
        .with_unreadable(keys.clone());
    let script = format!(
        "cat {ws}/a.txt; echo; cat {other}/.env; echo \"other=$?\"; cat {tool}/tool; echo; \
         cat {key}; echo \"key=$?\"; head -c0 /etc/shadow; echo \"shadow=$?\"; \
         ls /usr/bin >/dev/null && echo usr-ok; cat /etc/hostname >/dev/null && echo etc-ok",
        ws = ws_dir.path().display(),
        other = other.path().display(),
        tool = toolchain.path().display(),
        key = keys.join("k1.key").display(),
    );
    let out = run_confined(&plan, &script).await;
    let Printed { stdout, stderr } = &out;
    assert!(stdout.starts_with("mine\n"), "{stdout}\n{stderr}");
    // A hidden folder inside an allowed one stays hidden (`key=1`, no `key-bytes`).
    out.assert_stdout(
        &["other=1", "tool-ok", "key=1", "shadow=1", "usr-ok\netc-ok"],
        &["leaked", "key-bytes"],
    );
}

#[tokio::test]
async fn a_confined_command_starts_with_the_allowed_environment_only() {
    let (_ws_dir, plan) = confined_workspace();
    let plan =
        plan.with_reach(Reach::default().env([("PATH", "/usr/bin:/bin"), ("LANG", "C.UTF-8")]));
    // Whatever this test process holds (cargo sets many variables) does not reach the command.
    let Printed { stdout, stderr } =
        run_confined(&plan, "env; cat /proc/self/environ | tr '\\0' '\\n'").await;
    let mut names: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| !["PWD", "SHLVL", "_"].contains(k))
        .collect();
    names.sort_unstable();
    names.dedup();
    // The allowed variables, and the egress proxy of the command's own network.
    assert_eq!(
        names,
        [
            "ALL_PROXY",
            "HTTPS_PROXY",
            "HTTP_PROXY",
            "LANG",
            "PATH",
            "all_proxy",
            "http_proxy",
            "https_proxy"
        ],
        "{stdout}\n{stderr}"
    );
    assert!(!stdout.contains("CARGO"), "{stdout}");
}

#[tokio::test]
async fn a_confined_command_cannot_read_the_environment_of_the_process_that_started_it() {
    let (_ws_dir, plan) = confined_workspace();
    // This test process has CARGO_PKG_NAME in its environment, as a supervisor has its API
    // keys; the command may read /proc, but not a process outside its sandbox.
    let script = format!(
        "tr '\\0' '\\n' < /proc/{pid}/environ; echo \"parent=$?\"; cat /proc/self/status >/dev/null && echo self-ok",
        pid = std::process::id()
    );
    run_confined(&plan, &script)
        .await
        .assert_stdout(&["parent=1", "self-ok"], &["CARGO_PKG_NAME"]);
}
