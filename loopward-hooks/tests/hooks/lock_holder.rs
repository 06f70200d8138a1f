//! Another process holding a session's lock, for the tests that a held lock blocks instead of
//! waiting forever (here and in `loopward-cli/tests/hooks`, which includes this file).

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Starts flock(1) from util-linux holding `lock` in its own process (`-F`: no fork, so its PID
/// is the holder's) and returns once it says it has it. The caller ends it by its PID.
pub(crate) fn hold(lock: &Path) -> Child {
    let mut holder = Command::new("flock")
        .arg("-F")
        .arg(lock)
        .args(["sh", "-c", "echo held; exec sleep 600"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("flock from util-linux is needed for this test");
    let mut line = String::new();
    let mut said = std::io::BufReader::new(holder.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut said, &mut line).unwrap();
    assert_eq!(line.trim(), "held");
    holder
}
