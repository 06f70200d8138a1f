//! Reads in Claude Code's own process: `Read`, `NotebookRead`, `LS`, `Grep` and `Glob` run in the
//! client, not in loopward's sandbox, so the kernel rule that keeps a `Bash` command out of
//! loopward's state ([`SandboxExec::unreadable`](super::SandboxExec::unreadable)) does not bind
//! them. At `PreToolUse` the hook works out what the call would read and denies it when that
//! lies at or under one of the unreadable folders
//! ([`HookContextBuilder::unreadable`](super::HookContextBuilder::unreadable)):
//!
//! - a path is judged where it lands: relative to the event's `cwd`, every symbolic link
//!   followed (its longest existing ancestor canonicalised, `..` applied as the kernel applies
//!   it; the part that does not exist yet taken as written), and also as written;
//! - a tree search (`Grep`'s `path`, `Glob`'s `path` joined with its pattern's fixed leading
//!   folders, `Grep`'s `glob` likewise) is denied when it starts in an unreadable folder or
//!   when one lies under where it starts;
//! - what cannot be judged is denied: a missing or empty path, a relative one without an
//!   absolute `cwd`, `~`, a pattern with `..` after a wildcard, a path that cannot be resolved
//!   for a reason other than not existing (a loop of links, a folder that may not be listed).
//!
//! What this guarantees, and what it does not: the check sees the file system as it is when the
//! hook runs, and the client reads afterwards. A link made or swapped between the two (by a
//! process a `Bash` command left running) can still carry the client's read into the folder —
//! the check and the read race. Links met *inside* a searched tree are not looked at here
//! (Claude Code 2.1.332's `Grep` and `Glob` do not follow them; checked by
//! `loopward-cli/tests/clients/`). This is a polite refusal observed at the hook, not
//! containment: the complete answer is to run the whole client inside the sandbox.

use super::claude_code::{ReadTool, Reply, ToolUse};
use super::decide::Engine;
use super::HookError;
use loopward_core::{Action, AuditEvent, Decision, GateMode, Refusal};
use serde_json::Value;
use std::path::{Component, Path, PathBuf};

use loopward_runner::gates::refusals;

/// One thing a read tool call would read.
#[derive(Debug)]
struct Target {
    /// The argument as the model gave it (a path, or a pattern).
    raw: String,
    /// Where it lands as written: absolute, `.` and `..` applied to the text.
    written: PathBuf,
    /// Where it lands with every link followed.
    real: PathBuf,
    /// A tree search: everything under it may be read.
    tree: bool,
}

impl Engine<'_> {
    /// Judges a read tool call against the unreadable folders: `deny` when it would reach one
    /// or cannot be judged, else no answer (the client's own permission flow decides).
    pub(super) fn pre_read(&mut self, call: &ToolUse, tool: ReadTool) -> Result<Reply, HookError> {
        if self.ctx.unreadable.is_empty() {
            return Ok(Reply::Silent);
        }
        let cwd = self.input.cwd.as_deref().map(Path::new);
        let (raw, refusal) = match targets(tool, &call.input, cwd) {
            Err((raw, why)) => {
                let refusal = refusals::read_unjudged(tool.name(), &raw, &why);
                (raw, Some(refusal))
            }
            Ok(targets) => {
                let refusal = targets
                    .iter()
                    .find_map(|t| refuse(tool, t, &self.ctx.unreadable).map(|r| (t, r)));
                match refusal {
                    Some((t, r)) => (t.raw.clone(), Some(r)),
                    None => (
                        targets.first().map(|t| t.raw.clone()).unwrap_or_default(),
                        None,
                    ),
                }
            }
        };
        self.record(&AuditEvent::GateDecision {
            call_id: call.id.clone(),
            gate: refusals::read_gate(),
            mode: GateMode::Enforce,
            action: Action::tool(tool.name()),
            path_raw: Some(raw.into()),
            source: None,
            path: None,
            decision: refusal.clone().map_or(Decision::Allow, Decision::Deny),
        })?;
        Ok(match refusal {
            Some(r) => Reply::denied(&r),
            None => Reply::Silent,
        })
    }
}

/// Why a target could not be judged: the argument as given, and what is wrong with it.
type Unjudged = (String, String);

/// What a call of `tool` with `input` would read.
fn targets(tool: ReadTool, input: &Value, cwd: Option<&Path>) -> Result<Vec<Target>, Unjudged> {
    let arg = |key: &str| match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err((other.to_string(), format!("`{key}` is not a string"))),
    };
    let required = |key: &str| {
        arg(key)?.ok_or_else(|| (String::new(), format!("`{key}` is missing or empty")))
    };
    let folder = |key: &str| -> Result<(String, PathBuf), Unjudged> {
        match arg(key)? {
            Some(p) => Ok((p.to_string(), absolute(p, cwd)?)),
            None => {
                let c = cwd.filter(|c| c.is_absolute()).ok_or_else(|| {
                    (
                        String::new(),
                        format!("`{key}` is not given and the event has no absolute cwd to search"),
                    )
                })?;
                Ok((c.to_string_lossy().into_owned(), c.to_path_buf()))
            }
        }
    };
    let one = |raw: &str, tree: bool| -> Result<Target, Unjudged> {
        target(raw.to_string(), absolute(raw, cwd)?, tree)
    };
    match tool {
        ReadTool::Read => Ok(vec![one(required("file_path")?, false)?]),
        ReadTool::NotebookRead => Ok(vec![one(required("notebook_path")?, false)?]),
        ReadTool::Ls => Ok(vec![one(required("path")?, false)?]),
        ReadTool::Grep => {
            let (raw, root) = folder("path")?;
            let mut out = vec![target(raw, root.clone(), true)?];
            if let Some(glob) = arg("glob")? {
                out.push(target(glob.to_string(), pattern_root(&root, glob)?, true)?);
            }
            Ok(out)
        }
        ReadTool::Glob => {
            let (_, root) = folder("path")?;
            let pattern = required("pattern")?;
            Ok(vec![target(
                pattern.to_string(),
                pattern_root(&root, pattern)?,
                true,
            )?])
        }
    }
}

/// `raw` as an absolute path: as given, or against the event's `cwd`.
fn absolute(raw: &str, cwd: Option<&Path>) -> Result<PathBuf, Unjudged> {
    let fail = |why: &str| Err((raw.to_string(), why.to_string()));
    if raw.starts_with('~') {
        return fail("a path starting with `~` depends on whose home the client expands it to");
    }
    if raw.contains('\0') {
        return fail("the path holds a NUL byte");
    }
    let path = Path::new(raw);
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    match cwd {
        Some(c) if c.is_absolute() => Ok(c.join(path)),
        _ => fail("the path is relative and the event has no absolute cwd"),
    }
}

/// Where a glob `pattern` searching from `root` starts: `root` joined with the pattern's leading
/// components that hold no wildcard. A `..` in the rest cannot be judged.
fn pattern_root(root: &Path, pattern: &str) -> Result<PathBuf, Unjudged> {
    let wild = |c: &str| c.contains(['*', '?', '[', '{', '\\']);
    let parts: Vec<&str> = pattern.split('/').collect();
    let fixed = parts.iter().take_while(|c| !wild(c)).count();
    if parts[fixed..].iter().any(|c| c.contains("..")) {
        return Err((
            pattern.to_string(),
            "the pattern has `..` after a wildcard".into(),
        ));
    }
    let prefix = parts[..fixed].join("/");
    if prefix.starts_with('~') {
        return Err((
            pattern.to_string(),
            "a pattern starting with `~` depends on whose home the client expands it to".into(),
        ));
    }
    Ok(if prefix.is_empty() && pattern.starts_with('/') {
        PathBuf::from("/")
    } else {
        root.join(prefix)
    })
}

fn target(raw: String, path: PathBuf, tree: bool) -> Result<Target, Unjudged> {
    match real(&path) {
        Ok(real) => Ok(Target {
            written: lexical(Path::new("/"), &path),
            real,
            raw,
            tree,
        }),
        Err(e) => Err((raw, format!("{} cannot be resolved ({e})", path.display()))),
    }
}

/// Where the absolute `path` lands with every link followed: its longest existing ancestor
/// canonicalised (links followed and `..` applied as the kernel does), and the part below it
/// that does not exist appended, `..` applied to the text.
fn real(path: &Path) -> std::io::Result<PathBuf> {
    for ancestor in path.ancestors() {
        match ancestor.canonicalize() {
            Ok(base) => {
                let rest = path.strip_prefix(ancestor).unwrap_or(Path::new(""));
                return Ok(lexical(&base, rest));
            }
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::ErrorKind::NotFound.into())
}

/// An error that says the path does not exist (so its parent is tried), not that it cannot be
/// looked at.
fn gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// `base` joined with `rest`, `.` dropped and `..` taking off the last component.
fn lexical(base: &Path, rest: &Path) -> PathBuf {
    let mut out = base.to_path_buf();
    for c in rest.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir => out = PathBuf::from("/"),
            Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// The refusal for a target that reaches one of the `unreadable` folders, if it does.
fn refuse(tool: ReadTool, t: &Target, unreadable: &[PathBuf]) -> Option<Refusal> {
    let reaches =
        |p: &Path, folder: &Path| p.starts_with(folder) || (t.tree && folder.starts_with(p));
    let (folder, real_folder) = unreadable.iter().find_map(|f| {
        let written = lexical(Path::new("/"), f);
        // A folder that cannot be resolved is compared as written only.
        let resolved = real(f).unwrap_or_else(|_| written.clone());
        (reaches(&t.real, &resolved) || reaches(&t.written, &written))
            .then_some((written, resolved))
    })?;
    let inside = t.real.starts_with(&real_folder) || t.written.starts_with(&folder);
    Some(refusals::read_unreadable(
        tool.name(),
        &t.raw,
        &t.real.display().to_string(),
        &folder.display().to_string(),
        inside,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn judge(tool: ReadTool, input: Value, cwd: &Path, unreadable: &Path) -> Result<bool, String> {
        let ts = targets(tool, &input, Some(cwd)).map_err(|(_, why)| why)?;
        Ok(ts
            .iter()
            .any(|t| refuse(tool, t, &[unreadable.to_path_buf()]).is_some()))
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        ws: PathBuf,
        state: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (ws, state) = (base.join("ws"), base.join("state"));
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(state.join("keys")).unwrap();
        std::fs::write(state.join("keys/k1.key"), "secret").unwrap();
        std::fs::write(ws.join("src/a.rs"), "fn main() {}").unwrap();
        Fixture {
            _dir: dir,
            ws,
            state,
        }
    }

    #[test]
    fn a_read_is_judged_where_every_link_lands() {
        let f = fixture();
        std::os::unix::fs::symlink(f.state.join("keys/k1.key"), f.ws.join("key-link")).unwrap();
        std::os::unix::fs::symlink(&f.state, f.ws.join("state-link")).unwrap();
        let read = |p: &str| judge(ReadTool::Read, json!({"file_path": p}), &f.ws, &f.state);
        assert_eq!(read("src/a.rs"), Ok(false));
        assert_eq!(
            read(f.state.join("keys/k1.key").to_str().unwrap()),
            Ok(true)
        );
        assert_eq!(read("key-link"), Ok(true));
        assert_eq!(read("state-link/keys/k1.key"), Ok(true));
        // Not there yet: judged by its longest existing ancestor.
        assert_eq!(read("state-link/keys/k2.key"), Ok(true));
        // `..` applied after the link, as the kernel does: still inside the state.
        assert_eq!(read("state-link/keys/../keys/k1.key"), Ok(true));
        // A sibling whose name starts the same is not inside.
        std::fs::create_dir_all(f.state.with_extension("evil")).unwrap();
        assert_eq!(
            read(f.state.with_extension("evil").join("x").to_str().unwrap()),
            Ok(false)
        );
    }

    #[test]
    fn a_search_that_starts_in_or_above_the_state_is_refused() {
        let f = fixture();
        let grep = |input: Value| judge(ReadTool::Grep, input, &f.ws, &f.state);
        let glob = |input: Value| judge(ReadTool::Glob, input, &f.ws, &f.state);
        assert_eq!(grep(json!({"pattern": "x"})), Ok(false));
        assert_eq!(grep(json!({"pattern": "x", "path": f.state})), Ok(true));
        // Above it: the search would descend into it.
        assert_eq!(grep(json!({"pattern": "x", "path": "/"})), Ok(true));
        assert_eq!(grep(json!({"pattern": "x", "path": ".."})), Ok(true));
        assert_eq!(
            grep(json!({"pattern": "x", "glob": format!("{}/**", f.state.display())})),
            Ok(true)
        );
        assert_eq!(glob(json!({"pattern": "**/*.rs"})), Ok(false));
        assert_eq!(glob(json!({"pattern": "../state/**/*.key"})), Ok(true));
        assert_eq!(
            glob(json!({"pattern": format!("{}/keys/*", f.state.display())})),
            Ok(true)
        );
        assert_eq!(glob(json!({"pattern": "*", "path": "/"})), Ok(true));
    }

    #[test]
    fn what_cannot_be_judged_is_refused() {
        let f = fixture();
        let why = |tool, input| judge(tool, input, &f.ws, &f.state).unwrap_err();
        assert!(why(ReadTool::Read, json!({})).contains("missing"));
        assert!(why(ReadTool::Read, json!({"file_path": 7})).contains("not a string"));
        assert!(why(ReadTool::Read, json!({"file_path": "~/.ssh/id_rsa"})).contains('~'));
        assert!(why(
            ReadTool::Glob,
            json!({"pattern": "src/*/../../../state/**"})
        )
        .contains(".."));
        // A loop of links cannot be resolved.
        std::os::unix::fs::symlink(f.ws.join("loop"), f.ws.join("loop")).unwrap();
        assert!(why(ReadTool::Read, json!({"file_path": "loop/x"})).contains("cannot be resolved"));
        // No cwd to resolve a relative path against.
        let t = targets(ReadTool::Read, &json!({"file_path": "src/a.rs"}), None);
        assert!(t.unwrap_err().1.contains("relative"));
    }
}
