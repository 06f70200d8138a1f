//! The channel between a contained program's hooks and `loopward contain`, its supervisor.
//!
//! Inside the sandbox, `loopward hook claude-code` cannot read the ledger key or the session
//! state (loopward's state is unreadable there), so it judges nothing itself: it sends the
//! event over the Unix socket named by [`SUPERVISOR_ENV`] and prints the answer it gets. The
//! supervisor, outside, judges the event with its own config and agent (never the client's
//! flags) and records it in its ledgers. A socket that cannot be reached blocks the call.

use anyhow::{Context, Result};
use loopward_hooks::HookAnswer;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The variable naming the supervisor's hook socket in a contained program's environment.
pub(super) const SUPERVISOR_ENV: &str = "LOOPWARD_SUPERVISOR";

/// How long a hook waits for the supervisor (Claude Code's own hook timeout is longer).
const WAIT: Duration = Duration::from_secs(50);

/// The hook's side: sends `input` to the supervisor at `socket` and returns its answer.
pub(super) fn forward(socket: &Path, input: &str) -> Result<HookAnswer> {
    let mut s = std::os::unix::net::UnixStream::connect(socket)
        .with_context(|| format!("reaching loopward's supervisor at {}", socket.display()))?;
    s.set_read_timeout(Some(WAIT))?;
    s.set_write_timeout(Some(WAIT))?;
    s.write_all(input.as_bytes())?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)
        .context("reading the supervisor's answer")?;
    let v: serde_json::Value =
        serde_json::from_str(&reply).context("the supervisor's answer is not JSON")?;
    Ok(HookAnswer {
        stdout: v["stdout"].as_str().unwrap_or_default().to_string(),
        stderr: v["stderr"].as_str().unwrap_or_default().to_string(),
        exit_code: v["exit_code"].as_i64().map_or(2, |c| c as i32),
    })
}

/// The supervisor's side: answers every hook event sent to `listener` with `config`'s policy,
/// `agent` as the main agent, until the returned future is dropped.
pub(super) async fn serve(listener: tokio::net::UnixListener, config: PathBuf, agent: String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    while let Ok((mut stream, _)) = listener.accept().await {
        let (config, agent) = (config.clone(), agent.clone());
        tokio::spawn(async move {
            let mut input = Vec::new();
            let limit = loopward_hooks::claude_code::MAX_INPUT_BYTES as u64 + 1;
            let read = (&mut stream).take(limit).read_to_end(&mut input).await;
            let answer = match (read, String::from_utf8(input)) {
                (Ok(_), Ok(input)) => tokio::task::spawn_blocking(move || {
                    super::hook::answer_event(
                        &config,
                        &agent,
                        false,
                        loopward_runner::gates::Host::ClaudeCode,
                        &input,
                    )
                })
                .await
                .unwrap_or_else(|e| HookAnswer::fail_closed(format!("the supervisor failed: {e}"))),
                _ => HookAnswer::fail_closed("the hook event could not be read as UTF-8"),
            };
            let reply = serde_json::json!({
                "stdout": answer.stdout, "stderr": answer.stderr, "exit_code": answer.exit_code,
            });
            let _ = stream.write_all(reply.to_string().as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}
