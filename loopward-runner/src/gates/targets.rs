//! What a call writes: the canonical paths behind its declared accesses. A directory deleted,
//! renamed or linked to stands for everything below it; a file with other hard links stands for
//! those too.

use super::policy::{Policy, MAX_AFFECTED_PATHS};
use crate::path_text;
use crate::tool::Access;
use crate::workspace::WorkPath;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

/// A path a call writes: the raw path as given (where there is one) and the canonical
/// workspace-relative path, shared with the access that declared it and the verdicts on it.
pub(super) type Target = (Option<Arc<str>>, Arc<str>);

impl Policy {
    /// The canonical paths a call writes, with the raw path given where there is one. A
    /// directory deleted, renamed or linked to stands for everything below it; a file with other
    /// hard links stands for those too.
    pub(super) fn targets(&self, accesses: &[Access]) -> Result<Vec<Target>, String> {
        let root = self.inner.workspace.root();
        let mut out = Targets::default();
        for a in accesses {
            match a {
                Access::Write(p) | Access::Edit { path: p, .. } => {
                    out.declared(p);
                    out.found(hard_link_aliases(root, p.rel())?);
                }
                Access::Delete(p) => {
                    out.declared(p);
                    out.found(descendants(root, p.rel())?);
                }
                Access::Rename { from, to } => {
                    out.declared(from);
                    out.declared(to);
                    for d in descendants(root, from.rel())? {
                        let moved = format!("{}{}", to.rel(), &d[from.rel().len()..]);
                        out.found([d, moved]);
                    }
                    out.found(descendants(root, to.rel())?);
                }
                Access::Link { path, target } => {
                    out.declared(path);
                    out.declared(target);
                    out.found(descendants(root, target.rel())?);
                }
                // Reads, handoffs and commands write nothing a gate can name in advance.
                _ => {}
            }
        }
        Ok(out.0)
    }
}

/// A call's targets so far, each path once. Declared paths are shared with their access; only
/// the paths found on disk are made.
#[derive(Default)]
struct Targets(Vec<Target>);

impl Targets {
    fn push(&mut self, raw: Option<&Arc<str>>, rel: Arc<str>) {
        if !self.0.iter().any(|(_, r)| *r == rel) {
            self.0.push((raw.cloned(), rel));
        }
    }

    /// A path the call declared.
    fn declared(&mut self, p: &WorkPath) {
        self.push(Some(p.shared_raw()), Arc::clone(p.shared_rel()));
    }

    /// Paths found on disk, in order.
    fn found(&mut self, rels: impl IntoIterator<Item = String>) {
        for rel in rels {
            self.push(None, rel.into());
        }
    }
}

impl Policy {
    /// The other places a write to `rel` lands, as the workspace stands now: where a symbolic
    /// link at `rel` points, and the other names of a file with several hard links. For an
    /// adapter whose snapshot does not record links. An error says why they could not be found
    /// (too many paths to search); the change is then refused.
    pub fn link_ends(&self, rel: &str) -> Result<Vec<String>, String> {
        let ws = &self.inner.workspace;
        let mut ends = hard_link_aliases(ws.root(), rel)?;
        if std::fs::symlink_metadata(ws.root().join(path_text::path(rel)))
            .is_ok_and(|m| m.is_symlink())
        {
            // Where it lands, whatever bytes its target holds (a link out of the workspace or
            // into a loop lands on nothing a rule here covers).
            if let Ok(p) = ws.land_text(rel) {
                ends.push(p);
            }
        }
        ends.retain(|e| e != rel);
        Ok(ends)
    }
}

/// Everything below `rel` on disk (not following links), capped.
fn descendants(root: &std::path::Path, rel: &str) -> Result<Vec<String>, String> {
    let abs = root.join(path_text::path(rel));
    let is_dir = std::fs::symlink_metadata(&abs).is_ok_and(|m| m.is_dir());
    if !is_dir {
        return Ok(vec![]);
    }
    let mut out = Vec::new();
    let mut stack = vec![rel.to_string()];
    while let Some(d) = stack.pop() {
        let rd = std::fs::read_dir(root.join(path_text::path(&d)))
            .map_err(|e| format!("cannot list {d}: {e}"))?;
        for e in rd {
            let e = e.map_err(|e| format!("cannot list {d}: {e}"))?;
            let name = path_text::encode(e.file_name().as_bytes()).into_owned();
            let child = if d.is_empty() {
                name
            } else {
                format!("{d}/{name}")
            };
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(child.clone());
            }
            out.push(child);
            if out.len() > MAX_AFFECTED_PATHS {
                return Err(format!("{rel} holds more than {MAX_AFFECTED_PATHS} paths"));
            }
        }
    }
    Ok(out)
}

/// Other paths in the workspace that are hard links to the same file as `rel`.
fn hard_link_aliases(root: &std::path::Path, rel: &str) -> Result<Vec<String>, String> {
    let Ok(meta) = std::fs::symlink_metadata(root.join(path_text::path(rel))) else {
        return Ok(vec![]);
    };
    if !meta.is_file() || meta.nlink() < 2 {
        return Ok(vec![]);
    }
    let (dev, ino) = (meta.dev(), meta.ino());
    let mut out = Vec::new();
    for p in descendants(root, "")? {
        if p == rel {
            continue;
        }
        if std::fs::symlink_metadata(root.join(path_text::path(&p)))
            .is_ok_and(|m| m.dev() == dev && m.ino() == ino)
        {
            out.push(p);
        }
    }
    Ok(out)
}
