//! The workspace root and the one path canonicaliser every tool and gate uses.
//!
//! A path an agent gives is resolved against the workspace root, never the process's working
//! directory. `..` escapes, absolute paths outside the root, home-relative paths, NUL bytes and
//! over-long paths are refused. Symbolic links along the path — existing or dangling — are
//! followed to where a write would land, and that place must still be inside the workspace.

use crate::path_text;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The longest path, in bytes, an agent may name.
pub const MAX_PATH_BYTES: usize = 4096;

/// How many symbolic links one resolution may follow before it is refused as a loop.
const MAX_LINK_HOPS: u32 = 40;

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path is empty.
    #[error("the path is empty; give a path relative to the workspace root, e.g. \"src/lib.rs\"")]
    Empty,
    /// The path contains a NUL byte.
    #[error("the path contains a NUL byte")]
    Nul,
    /// The path is longer than [`MAX_PATH_BYTES`].
    #[error("the path is {len} bytes long; the limit is {MAX_PATH_BYTES}")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// The path starts with `~` (home-relative paths are not resolved).
    #[error("{raw:?} is home-relative; give a path relative to the workspace root")]
    HomeRelative {
        /// The path as given.
        raw: String,
    },
    /// The path, or a link along it, leads outside the workspace.
    #[error(
        "{raw:?} leads outside the workspace ({why}); only paths inside the workspace can be used"
    )]
    Escapes {
        /// The path as given.
        raw: String,
        /// How it escapes.
        why: String,
    },
    /// The path lands on a name that is not text, which file tools do not write.
    #[error("{raw:?} leads to {landed:?}, a name that is not valid UTF-8 text (its other bytes are shown as U+FFFD and hex); the file tools write only names that are text, so write another path or use a command")]
    NotText {
        /// The path as given.
        raw: String,
        /// Where it lands, as text.
        landed: String,
    },
    /// Too many symbolic links.
    #[error("{raw:?} goes through more than {MAX_LINK_HOPS} symbolic links")]
    LinkLoop {
        /// The path as given.
        raw: String,
    },
    /// The workspace root itself is unusable.
    #[error("workspace root {root:?} is not usable: {why}")]
    BadRoot {
        /// The root given.
        root: PathBuf,
        /// The error.
        why: String,
    },
}

/// A path inside the workspace, resolved.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorkPath {
    // Shared: the gate decisions on a call hold these, and a clone copies no text.
    raw: Arc<str>,
    rel: Arc<str>,
    abs: PathBuf,
}

impl WorkPath {
    /// The path as the agent gave it.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The canonical workspace-relative path (`/`-separated, `""` for the root itself).
    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// [`WorkPath::raw`], shared.
    pub(crate) fn shared_raw(&self) -> &Arc<str> {
        &self.raw
    }

    /// [`WorkPath::rel`], shared.
    pub(crate) fn shared_rel(&self) -> &Arc<str> {
        &self.rel
    }

    /// The absolute path on disk.
    pub fn abs(&self) -> &Path {
        &self.abs
    }

    /// Whether this is the workspace root itself.
    pub fn is_root(&self) -> bool {
        self.rel.is_empty()
    }
}

/// The directory agents work in.
///
/// ```
/// use loopward_runner::Workspace;
/// let dir = tempfile::tempdir().unwrap();
/// let ws = Workspace::new(dir.path()).unwrap();
/// assert_eq!(ws.resolve("src/./lib.rs").unwrap().rel(), "src/lib.rs");
/// assert_eq!(ws.resolve("a/../b.md").unwrap().rel(), "b.md");
/// assert!(ws.resolve("../outside").is_err());
/// assert!(ws.resolve("/etc/passwd").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// A workspace nothing is read from or written to: for judging recorded actions whose paths
    /// are already canonical (replays, calibration).
    pub(crate) fn detached() -> Self {
        Self {
            root: PathBuf::from("/nonexistent/loopward-detached"),
        }
    }

    /// Opens a workspace at `root`, which must be an existing directory.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, PathError> {
        let root = root.as_ref();
        let bad = |why: String| PathError::BadRoot {
            root: root.to_path_buf(),
            why,
        };
        let canonical = root.canonicalize().map_err(|e| bad(e.to_string()))?;
        if !canonical.is_dir() {
            return Err(bad("not a directory".into()));
        }
        Ok(Self { root: canonical })
    }

    /// The canonical absolute root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a path an agent gave to where it lands inside the workspace. A path that lands
    /// on a name that is not text (bytes that are not UTF-8, or a `U+FFFD` in it) is refused:
    /// the file tools write only names that are their own text.
    pub fn resolve(&self, raw: &str) -> Result<WorkPath, PathError> {
        let landed = self.land(raw, raw.as_bytes())?;
        let text = path_text::encode(&landed);
        if !path_text::is_plain(&text) {
            return Err(PathError::NotText {
                raw: raw.into(),
                landed: text.into_owned(),
            });
        }
        let rel = text.into_owned();
        let abs = self.root.join(&rel);
        let raw: Arc<str> = raw.into();
        // Most paths are given canonical already: then one text serves as both.
        let rel = if *rel == *raw {
            Arc::clone(&raw)
        } else {
            rel.into()
        };
        Ok(WorkPath { raw, rel, abs })
    }

    /// Where the workspace path whose `path_text` is `text` (a name a snapshot found, of any
    /// bytes) lands, links followed, as text: the watch judges a link a command made by it.
    pub(crate) fn land_text(&self, text: &str) -> Result<String, PathError> {
        let landed = self.land(text, &path_text::decode(text))?;
        Ok(path_text::encode(&landed).into_owned())
    }

    /// Where the path `raw_bytes` lands, as bytes (`raw`, its text, names it in errors).
    fn land(&self, raw: &str, raw_bytes: &[u8]) -> Result<Vec<u8>, PathError> {
        if raw_bytes.is_empty() {
            return Err(PathError::Empty);
        }
        if raw_bytes.contains(&0) {
            return Err(PathError::Nul);
        }
        if raw_bytes.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong {
                len: raw_bytes.len(),
            });
        }
        if raw_bytes.starts_with(b"~") {
            return Err(PathError::HomeRelative { raw: raw.into() });
        }
        let escapes = |why: &str| PathError::Escapes {
            raw: raw.into(),
            why: why.into(),
        };
        let given = Path::new(OsStr::from_bytes(raw_bytes));
        let relative: PathBuf = if given.is_absolute() {
            // Component-wise, not lexically: `/ws/link/../x` climbs from the link's target.
            given
                .strip_prefix(&self.root)
                .map_err(|_| escapes("absolute path outside the workspace root"))?
                .to_path_buf()
        } else {
            given.to_path_buf()
        };
        // Components are taken one at a time, as the kernel does: `..` climbs from where the
        // links so far have led (`link/..` is the parent of the link's target), never lexically.
        // They are bytes: a name or link target that is not UTF-8 is followed like any other.
        let mut pending: Vec<std::ffi::OsString> =
            components(&relative).into_iter().rev().collect();
        let mut done: Vec<std::ffi::OsString> = Vec::new();
        let mut hops = 0;
        while let Some(part) = pending.pop() {
            if part == ".." {
                done.pop()
                    .ok_or_else(|| escapes("`..` above the workspace root"))?;
                continue;
            }
            let here = self.root.join(done.iter().collect::<PathBuf>()).join(&part);
            let is_link = here
                .symlink_metadata()
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false);
            if !is_link {
                done.push(part);
                continue;
            }
            hops += 1;
            if hops > MAX_LINK_HOPS {
                return Err(PathError::LinkLoop { raw: raw.into() });
            }
            let target = std::fs::read_link(&here)
                .map_err(|e| escapes(&format!("unreadable link {}: {e}", here.display())))?;
            if target.is_absolute() {
                // Component-wise: its `..` are then climbed like any other, from the root.
                let inside = target
                    .strip_prefix(&self.root)
                    .map_err(|_| escapes(&format!("link {} points outside", here.display())))?;
                done.clear();
                pending.extend(components(inside).into_iter().rev());
            } else {
                pending.extend(components(&target).into_iter().rev());
            }
        }
        let mut out = Vec::new();
        for (i, part) in done.iter().enumerate() {
            if i > 0 {
                out.push(b'/');
            }
            out.extend_from_slice(part.as_bytes());
        }
        Ok(out)
    }
}

/// The parts of `path`, `.` dropped and `..` kept. Root and prefix components are dropped
/// (callers handle absolutes).
fn components(path: &Path) -> Vec<std::ffi::OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let d = tempfile::tempdir().unwrap();
        let w = Workspace::new(d.path()).unwrap();
        (d, w)
    }

    #[test]
    fn absolute_path_inside_root_becomes_relative() {
        let (_d, w) = ws();
        let abs = format!("{}/src/x.rs", w.root().display());
        assert_eq!(w.resolve(&abs).unwrap().rel(), "src/x.rs");
    }

    #[test]
    fn refuses_escapes_home_nul_and_long_paths() {
        let (_d, w) = ws();
        for bad in ["../x", "a/../../x", "/etc/passwd", "~/x", "a\0b", ""] {
            assert!(w.resolve(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(matches!(
            w.resolve(&"a/".repeat(3000)),
            Err(PathError::TooLong { .. })
        ));
    }

    #[test]
    fn directory_link_is_followed_to_where_the_write_lands() {
        let (_d, w) = ws();
        std::fs::create_dir(w.root().join("plans")).unwrap();
        symlink("plans", w.root().join("notes")).unwrap();
        assert_eq!(w.resolve("notes/a.md").unwrap().rel(), "plans/a.md");
    }

    #[test]
    fn dangling_link_resolves_to_its_target() {
        let (_d, w) = ws();
        symlink("plan.md", w.root().join("innocent.txt")).unwrap();
        assert_eq!(w.resolve("innocent.txt").unwrap().rel(), "plan.md");
    }

    #[test]
    fn link_outside_the_workspace_is_refused() {
        let (_d, w) = ws();
        symlink("/etc", w.root().join("etc")).unwrap();
        assert!(matches!(
            w.resolve("etc/passwd"),
            Err(PathError::Escapes { .. })
        ));
        symlink("../../x", w.root().join("up")).unwrap();
        assert!(w.resolve("up").is_err());
    }

    #[test]
    fn dot_dot_after_a_link_climbs_from_its_target_as_the_kernel_does() {
        let (_d, w) = ws();
        std::fs::create_dir_all(w.root().join("plans/deep")).unwrap();
        std::fs::create_dir(w.root().join("src")).unwrap();
        symlink("plans/deep", w.root().join("d")).unwrap();
        // Lexically `d/../x.md` would be `x.md`; the kernel lands in `plans/x.md`.
        assert_eq!(w.resolve("d/../x.md").unwrap().rel(), "plans/x.md");
        let abs = format!("{}/d/../y.md", w.root().display());
        assert_eq!(w.resolve(&abs).unwrap().rel(), "plans/y.md");
    }

    #[test]
    fn a_link_target_that_is_not_utf8_is_followed_by_the_watch_and_refused_to_file_tools() {
        let (_d, w) = ws();
        std::fs::create_dir(w.root().join("plans")).unwrap();
        symlink(OsStr::from_bytes(b"pl\xffan.md"), w.root().join("odd")).unwrap();
        let err = w.resolve("odd").unwrap_err();
        assert!(err.to_string().contains("not valid UTF-8"), "{err}");
        assert_eq!(w.land_text("odd").unwrap(), "pl\u{fffd}ffan.md");
        // A link whose target is not text and leads into a folder lands there.
        symlink(OsStr::from_bytes(b"\xfe"), w.root().join("hop")).unwrap();
        symlink("plans", w.root().join(OsStr::from_bytes(b"\xfe"))).unwrap();
        assert_eq!(w.land_text("hop/x.md").unwrap(), "plans/x.md");
        assert_eq!(w.resolve("hop/x.md").unwrap().rel(), "plans/x.md");
        // A name the file tools could be made to write under another text is refused.
        assert!(w.resolve("a\u{fffd}ff").is_err());
    }

    #[test]
    fn link_loop_is_refused() {
        let (_d, w) = ws();
        symlink("b", w.root().join("a")).unwrap();
        symlink("a", w.root().join("b")).unwrap();
        assert!(matches!(w.resolve("a"), Err(PathError::LinkLoop { .. })));
    }
}
