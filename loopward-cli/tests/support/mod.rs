//! Helpers shared by the CLI's integration tests.

pub mod anthropic_server;
pub mod http;
pub mod responses_server;

/// Waits for `child` at most `limit`; a child still running then is ended by its PID (`None`).
#[allow(dead_code)]
pub(crate) fn wait_up_to(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
