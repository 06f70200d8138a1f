//! The init of a sandbox's PID namespace: it reaps what the command orphans, the command's
//! exit status and signals are its own, and `/proc` shows the sandbox's processes only.

use loopward_runner::gates::ControlFiles;
use loopward_runner::sandbox::{spawn_confined, Confinement, Protected};

fn plan(ws: &tempfile::TempDir) -> Confinement {
    let ws = loopward_runner::Workspace::new(ws.path()).unwrap();
    Confinement::plan(&ws, &Protected::new(ControlFiles::default(), vec![])).unwrap()
}

/// Runs `script` under bash in `plan`; (status, stdout, stderr).
async fn run(plan: &Confinement, script: &str) -> (std::process::ExitStatus, String, String) {
    let mut cmd = tokio::process::Command::new("bash");
    plan.apply_env(cmd.as_std_mut());
    cmd.arg("-c").arg(script);
    cmd.stdout(std::process::Stdio::piped());
    cmd.stderr(std::process::Stdio::piped());
    let out = spawn_confined(cmd, plan)
        .await
        .unwrap()
        .wait_with_output()
        .await
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `script` under bash in a fresh workspace's sandbox.
async fn run_in_sandbox(script: &str) -> (std::process::ExitStatus, String, String) {
    let ws = tempfile::tempdir().unwrap();
    run(&plan(&ws), script).await
}

#[tokio::test]
async fn orphans_of_a_command_that_never_reaps_leave_no_zombie_behind() {
    // A background child forks twenty grandchildren and exits at once (the command collects
    // it): they are orphaned, and end 50 ms later. The command then becomes perl, which waits
    // for nothing; a command at PID 1 would collect them as zombies.
    let (status, stdout, stderr) = run_in_sandbox(
        r#"( for i in $(seq 20); do sleep 0.05 & done ) & wait $!
        exec perl -e 'select(undef, undef, undef, 0.8);
          my ($z, $n) = (0, 0);
          for my $f (glob "/proc/[0-9]*/stat") {
            open(my $h, "<", $f) or next; my $l = <$h>; $n++; $z++ if $l =~ /\) Z /;
          }
          print "processes=$n zombies=$z\n";'"#,
    )
    .await;
    assert!(status.success(), "{status:?}\n{stdout}\n{stderr}");
    // The init and perl, nothing else: every orphan ended and was reaped.
    assert_eq!(stdout.trim(), "processes=2 zombies=0", "{stderr}");
}

#[tokio::test]
async fn the_exit_status_is_the_commands_own() {
    let (status, _, stderr) = run_in_sandbox("sleep 0.01 & exit 7").await;
    assert_eq!(status.code(), Some(7), "{stderr}");
    // Killed by a signal of its own sending: a PID 1 would have ignored it.
    let (status, _, stderr) = run_in_sandbox("kill -TERM $$; sleep 5").await;
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(15), "{stderr}");
}

#[tokio::test]
async fn sigterm_from_outside_ends_a_command_that_does_not_handle_it() {
    let ws = tempfile::tempdir().unwrap();
    let plan = plan(&ws);
    let mut cmd = tokio::process::Command::new("sleep");
    plan.apply_env(cmd.as_std_mut());
    cmd.arg("30");
    let mut child = spawn_confined(cmd, &plan).await.unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait())
        .await
        .expect("SIGTERM did not end the command")
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(15));
}

#[tokio::test]
async fn proc_shows_the_sandboxs_own_processes_only() {
    let me = std::process::id();
    let (status, stdout, stderr) = run_in_sandbox(&format!(
        "echo self=$$; echo listed=$(ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '); \
         cat /proc/{me}/cmdline >/dev/null 2>&1 && echo outside=read || echo outside=hidden; \
         echo init=$(tr '\\0' ' ' < /proc/1/cmdline 2>&1 | head -c 200)"
    ))
    .await;
    assert!(status.success(), "{stdout}\n{stderr}");
    let field = |k: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in {stdout}\n{stderr}"))
            .trim()
            .to_string()
    };
    let listed: Vec<u32> = field("listed")
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let own: u32 = field("self").parse().unwrap();
    assert!(listed.contains(&own), "{listed:?} lacks the command, {own}");
    assert!(listed.contains(&1), "{listed:?} lacks the init");
    assert!(!listed.contains(&me), "{listed:?} shows the test process");
    // The init, bash and the few it runs for this line: nothing of the host.
    assert!(listed.len() <= 8, "{listed:?}");
    assert_eq!(field("outside"), "hidden");
    // The init's command line is readable only as far as Landlock lets the command inspect it.
    assert!(!field("init").contains("CARGO"), "{stdout}");
}
