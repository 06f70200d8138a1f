//! File tools.

use crate::context::TurnContext;
use crate::tool::{object_schema, parse_args, Access, Tool, ToolError, ToolInvocation, ToolOutput};
use crate::workspace::WorkPath;
use futures::future::BoxFuture;
use futures::FutureExt;
use loopward_core::{Effect, EffectKind, ToolSpec};
use serde::Deserialize;
use serde_json::json;
use std::path::Path;

use super::MAX_READ_BYTES;

/// The largest file `edit_file` reads.
const MAX_EDIT_BYTES: u64 = 16 * 1024 * 1024;

fn path_schema(extra: serde_json::Value, required: &[&str]) -> serde_json::Value {
    let mut props =
        json!({"path": {"type": "string", "description": "Path relative to the workspace root"}});
    if let (Some(p), Some(e)) = (props.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    object_schema(props, required)
}

fn io_err(what: &str, path: &str, e: std::io::Error) -> ToolError {
    ToolError::Failed(format!("could not {what} {path}: {e}"))
}

fn first_path(inv: &ToolInvocation) -> Result<WorkPath, ToolError> {
    match inv.accesses.first() {
        Some(Access::Read(p) | Access::Write(p) | Access::Edit { path: p, .. }) => Ok(p.clone()),
        _ => Err(ToolError::Failed(
            "internal: the call declared no path".into(),
        )),
    }
}

/// Runs `op` (a `beneath` read or write: through a handle on the workspace root, following no
/// link, so the file judged is the file touched, or nothing is) on `p` on a blocking thread;
/// `what` it does names it in the errors.
async fn beneath<T: Send + 'static>(
    inv: &ToolInvocation,
    p: &WorkPath,
    what: &str,
    op: impl FnOnce(&Path, &str) -> std::io::Result<T> + Send + 'static,
) -> Result<T, ToolError> {
    let root = inv.turn.workspace().root().to_path_buf();
    let rel = p.rel().to_string();
    tokio::task::spawn_blocking(move || op(&root, &rel))
        .await
        .map_err(|e| ToolError::Failed(format!("the {what} task failed: {e}")))?
        .map_err(|e| io_err(what, p.rel(), e))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    path: String,
}

/// `read_file {path}`: returns a text file's content.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadFile;

impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: "Read a UTF-8 text file from the workspace.".into(),
            parameters: path_schema(json!({}), &["path"]),
        }
    }

    fn accesses(
        &self,
        args: &serde_json::Value,
        turn: &TurnContext,
    ) -> Result<Vec<Access>, ToolError> {
        let a: PathArgs = parse_args("read_file", args)?;
        Ok(vec![Access::Read(turn.workspace().resolve(&a.path)?)])
    }

    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        async move {
            let p = first_path(&inv)?;
            let bytes = tokio::fs::read(p.abs())
                .await
                .map_err(|e| io_err("read", p.rel(), e))?;
            if bytes.len() > MAX_READ_BYTES {
                return Err(ToolError::Failed(format!(
                    "{} is {} bytes; the limit is {MAX_READ_BYTES}",
                    p.rel(),
                    bytes.len()
                )));
            }
            String::from_utf8(bytes)
                .map(ToolOutput::text)
                .map_err(|_| ToolError::Failed(format!("{} is not UTF-8 text", p.rel())))
        }
        .boxed()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

/// `write_file {path, content}`: creates or replaces a file (and its parent directories).
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteFile;

impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write_file".into(),
            description: "Create or overwrite a text file in the workspace.".into(),
            parameters: path_schema(json!({"content": {"type": "string"}}), &["path", "content"]),
        }
    }

    fn accesses(
        &self,
        args: &serde_json::Value,
        turn: &TurnContext,
    ) -> Result<Vec<Access>, ToolError> {
        let a: WriteArgs = parse_args("write_file", args)?;
        let p = turn.workspace().resolve(&a.path)?;
        if p.is_root() {
            return Err(ToolError::BadArguments {
                tool: "write_file".into(),
                why: "the path names the workspace root, not a file".into(),
            });
        }
        Ok(vec![Access::Write(p)])
    }

    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        async move {
            let a: WriteArgs = parse_args("write_file", &inv.call.arguments)?;
            let p = first_path(&inv)?;
            let content = a.content.clone();
            let existed = beneath(&inv, &p, "write", move |root, rel| {
                super::beneath::write(root, rel, content.as_bytes())
            })
            .await?;
            let kind = if existed {
                EffectKind::Modify
            } else {
                EffectKind::Create
            };
            Ok(ToolOutput::with_effects(
                format!("wrote {} ({} bytes)", p.rel(), a.content.len()),
                vec![Effect::ok(p.rel(), kind)],
            ))
        }
        .boxed()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: String,
    old: String,
    new: String,
}

/// `edit_file {path, old, new}`: replaces exactly one occurrence of `old` with `new`.
#[derive(Clone, Copy, Debug, Default)]
pub struct EditFile;

impl Tool for EditFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit_file".into(),
            description: "Replace the one exact occurrence of `old` with `new` in a text file."
                .into(),
            parameters: path_schema(
                json!({"old": {"type": "string"}, "new": {"type": "string"}}),
                &["path", "old", "new"],
            ),
        }
    }

    fn accesses(
        &self,
        args: &serde_json::Value,
        turn: &TurnContext,
    ) -> Result<Vec<Access>, ToolError> {
        let a: EditArgs = parse_args("edit_file", args)?;
        if a.old.is_empty() {
            return Err(ToolError::BadArguments {
                tool: "edit_file".into(),
                why: "`old` is empty; give the exact text to replace".into(),
            });
        }
        Ok(vec![Access::Edit {
            path: turn.workspace().resolve(&a.path)?,
            old: a.old,
            new: a.new,
        }])
    }

    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        async move {
            let a: EditArgs = parse_args("edit_file", &inv.call.arguments)?;
            let p = first_path(&inv)?;
            let bytes = beneath(&inv, &p, "read", |root, rel| {
                super::beneath::read(root, rel, MAX_EDIT_BYTES)
            })
            .await?;
            let text = String::from_utf8(bytes).map_err(|_| {
                ToolError::Failed(format!("{} is not UTF-8 text; edit_file edits text", p.rel()))
            })?;
            let n = text.matches(&a.old).count();
            if n != 1 {
                return Err(ToolError::Failed(format!(
                    "`old` occurs {n} times in {}; it must occur exactly once (include more context)",
                    p.rel()
                )));
            }
            let updated = text.replacen(&a.old, &a.new, 1);
            beneath(&inv, &p, "write", move |root, rel| {
                super::beneath::write(root, rel, updated.as_bytes())
            })
            .await?;
            Ok(ToolOutput::with_effects(
                format!("edited {}", p.rel()),
                vec![Effect::ok(p.rel(), EffectKind::Modify)],
            ))
        }
        .boxed()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default)]
    path: Option<String>,
}

/// `list_dir {path?}`: lists a directory (`/` after sub-directories), sorted.
#[derive(Clone, Copy, Debug, Default)]
pub struct ListDir;

impl Tool for ListDir {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_dir".into(),
            description: "List a directory of the workspace (default: its root).".into(),
            parameters: path_schema(json!({}), &[]),
        }
    }

    fn accesses(
        &self,
        args: &serde_json::Value,
        turn: &TurnContext,
    ) -> Result<Vec<Access>, ToolError> {
        let a: ListArgs = parse_args("list_dir", args)?;
        let raw = a.path.unwrap_or_else(|| ".".into());
        Ok(vec![Access::Read(turn.workspace().resolve(&raw)?)])
    }

    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        async move {
            let p = first_path(&inv)?;
            let shown = if p.is_root() { "." } else { p.rel() };
            let mut rd = tokio::fs::read_dir(p.abs())
                .await
                .map_err(|e| io_err("list", shown, e))?;
            let mut names = Vec::new();
            while let Some(e) = rd
                .next_entry()
                .await
                .map_err(|e| io_err("list", shown, e))?
            {
                let mut name = e.file_name().to_string_lossy().into_owned();
                if e.file_type().await.map(|t| t.is_dir()).unwrap_or(false) {
                    name.push('/');
                }
                names.push(name);
            }
            names.sort();
            Ok(ToolOutput::text(names.join("\n")))
        }
        .boxed()
    }
}
