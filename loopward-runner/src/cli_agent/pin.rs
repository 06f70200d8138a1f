//! A client's pinned version: the one its stream parser and hook protocol are tested against,
//! checked before the first session, and named in every error about it.

use super::stream::StreamError;
use super::CliAgentError;
use std::ffi::OsString;
use std::path::Path;

/// A client's pin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pin {
    /// The client's name (`Claude Code`, `Codex`, `Gemini CLI`).
    pub client: &'static str,
    /// Its binary's usual name.
    pub program: &'static str,
    /// The tested version.
    pub version: &'static str,
    /// How to install that version.
    pub install: &'static str,
    /// The `loopward loop` flag that names another binary.
    pub flag: &'static str,
}

impl Pin {
    /// Runs `program --version` and compares what `pick` reads of it with the pin.
    pub(super) fn check(
        &'static self,
        program: &Path,
        env: &[(OsString, OsString)],
        pick: impl Fn(&str) -> String,
    ) -> Result<(), CliAgentError> {
        let out = std::process::Command::new(program)
            .arg("--version")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| CliAgentError::NotInstalled {
                program: program.to_path_buf(),
                why: e.to_string(),
                pin: self,
            })?;
        let found = pick(&String::from_utf8_lossy(&out.stdout));
        if !out.status.success() || found != self.version {
            return Err(CliAgentError::UntestedVersion {
                program: program.to_path_buf(),
                found: if found.is_empty() {
                    format!("nothing ({})", out.status)
                } else {
                    found
                },
                pin: self,
            });
        }
        Ok(())
    }

    /// A stream line this client's parser does not know.
    pub(super) fn stream_error(&self, line: usize, why: String) -> StreamError {
        StreamError {
            line,
            why,
            client: self.client,
            program: self.program,
            version: self.version,
        }
    }
}

/// The `n`th word of a `--version` answer (`2.1.332 (Claude Code)`: 0; `codex-cli 0.171.0`: 1).
pub(super) fn version_word(out: &str, n: usize) -> String {
    out.split_whitespace()
        .nth(n)
        .unwrap_or_default()
        .to_string()
}
