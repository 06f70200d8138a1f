//! The sprawl gate: an agent that starts a third distinct unit of work since the last human
//! message, with no plan presented since then, is refused once and asked for a plan.
//!
//! A unit of work is a file with its siblings (by default `src/**/foo.rs`, `tests/**/foo.rs`
//! and `docs/**/foo.md` are one unit); all paths one call writes (a rename's two ends, one shell
//! command's changes) and edits repeating the same `old` → `new` replacement across files (a
//! mechanical rename) are one unit. "Since the last human message" is decided by event order
//! ([`human_message`] and plan writes bump a run-level counter), never by file times.
//!
//! ```
//! use loopward_runner::gates::{SprawlConfig, SprawlGate};
//! let gate = SprawlGate::from_config(&SprawlConfig::default()).unwrap();
//! assert_eq!(gate.unit_key("src/gates/foo.rs"), gate.unit_key("tests/foo.rs"));
//! assert_eq!(gate.unit_key("docs/foo.md"), gate.unit_key("src/foo.rs"));
//! assert_ne!(gate.unit_key("src/foo.rs"), gate.unit_key("src/bar.rs"));
//! ```

use super::config::{glob, ConfigError, SprawlConfig};
use crate::context::RunContext;
use globset::GlobMatcher;
use loopward_core::{AgentId, AuditError, AuditEvent};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// One sibling template: a glob with `{stem}` in its file name.
#[derive(Clone, Debug)]
pub(crate) struct SiblingTemplate {
    matcher: GlobMatcher,
    prefix: String,
    suffix: String,
}

impl SiblingTemplate {
    pub(crate) fn parse(t: &str, section: &str) -> Result<Self, ConfigError> {
        let invalid = |why: &str| ConfigError::Invalid {
            section: section.into(),
            why: format!("sibling template {t:?}: {why}"),
        };
        let file = t.rsplit('/').next().unwrap_or(t);
        if t.matches("{stem}").count() != 1 || !file.contains("{stem}") {
            return Err(invalid("needs exactly one {stem}, in the file name"));
        }
        let (prefix, suffix) = file.split_once("{stem}").unwrap_or((file, ""));
        if prefix.contains(['*', '?', '[', '{']) || suffix.contains(['*', '?', '[', '{']) {
            return Err(invalid("the file name around {stem} must be literal"));
        }
        let g = glob(&t.replace("{stem}", "*"), section)?;
        Ok(Self {
            matcher: g.compile_matcher(),
            prefix: prefix.into(),
            suffix: suffix.into(),
        })
    }

    fn stem<'a>(&self, path: &'a str) -> Option<&'a str> {
        if !self.matcher.is_match(path) {
            return None;
        }
        let file = path.rsplit('/').next().unwrap_or(path);
        file.strip_prefix(self.prefix.as_str())?
            .strip_suffix(self.suffix.as_str())
            .filter(|s| !s.is_empty())
    }
}

/// The compiled sprawl gate.
#[derive(Clone, Debug)]
pub struct SprawlGate {
    config: SprawlConfig,
    rules: Vec<Vec<SiblingTemplate>>,
}

impl SprawlGate {
    /// Compiles `[gates.sprawl]`.
    pub fn from_config(config: &SprawlConfig) -> Result<Self, ConfigError> {
        let mut rules = Vec::new();
        for rule in &config.siblings {
            let mut r = Vec::new();
            for t in rule {
                r.push(SiblingTemplate::parse(t, "[gates.sprawl]")?);
            }
            rules.push(r);
        }
        config.validate()?;
        Ok(Self {
            config: config.clone(),
            rules,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SprawlConfig {
        &self.config
    }

    /// The unit of work a canonical path belongs to.
    pub fn unit_key(&self, path: &str) -> String {
        for (i, rule) in self.rules.iter().enumerate() {
            for t in rule {
                if let Some(stem) = t.stem(path) {
                    return format!("rule{i}:{stem}");
                }
            }
        }
        format!("file:{path}")
    }

    /// Whether `content` is a plan: its first line starts with the marker.
    pub fn is_plan(&self, content: &str) -> bool {
        content.lines().next().is_some_and(|l| {
            l.trim_start_matches('\u{feff}')
                .starts_with(&self.config.marker)
        })
    }
}

/// Run-level order of human messages and plan writes.
#[derive(Debug, Default)]
pub(crate) struct Epochs {
    inner: Mutex<EpochsInner>,
}

#[derive(Debug, Default)]
struct EpochsInner {
    next: u64,
    last_human: u64,
    last_plan: Option<u64>,
}

impl Epochs {
    fn lock(&self) -> std::sync::MutexGuard<'_, EpochsInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn human(&self) {
        let mut g = self.lock();
        g.next += 1;
        g.last_human = g.next;
    }

    pub(crate) fn plan(&self) {
        let mut g = self.lock();
        g.next += 1;
        g.last_plan = Some(g.next);
    }

    /// (the last human message's position, whether a plan came after it)
    pub(crate) fn state(&self) -> (u64, bool) {
        let g = self.lock();
        (g.last_human, g.last_plan.is_some_and(|p| p > g.last_human))
    }
}

/// Records a genuine human message in a run and starts a new turn for turn-scoped gates (the
/// sprawl gate's unit count and its plan requirement). The runner records the task itself;
/// embedders call this for every later message a person sends.
///
/// ```
/// use loopward_core::{AgentId, RunId};
/// use loopward_runner::{audit::MemorySink, gates, RunContext, SystemClock, Workspace};
/// use std::sync::Arc;
/// let dir = tempfile::tempdir().unwrap();
/// let sink = Arc::new(MemorySink::default());
/// let run = RunContext::new(RunId::new("r").unwrap(), vec![AgentId::new("a").unwrap()],
///     Workspace::new(dir.path()).unwrap(), sink.clone(), Arc::new(SystemClock));
/// gates::human_message(&run, "now add tests").unwrap();
/// assert_eq!(sink.kinds(), vec!["human_message"]);
/// ```
pub fn human_message(run: &RunContext, content: &str) -> Result<(), AuditError> {
    run.record(&AuditEvent::HumanMessage {
        content: content.into(),
    })?;
    run.extensions().get_or_default::<Epochs>().human();
    Ok(())
}

/// Units of work one agent touched since the last human message.
#[derive(Debug, Default)]
pub(crate) struct SprawlState {
    inner: Mutex<HashMap<AgentId, AgentUnits>>,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct AgentUnits {
    epoch: u64,
    units: Vec<Unit>,
    pub(crate) fired: bool,
}

#[derive(Debug, Default, Clone)]
struct Unit {
    keys: BTreeSet<String>,
    files: BTreeSet<String>,
}

/// What the sprawl gate says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SprawlVerdict {
    /// Under the threshold, a plan exists, or the gate already fired this turn.
    Pass,
    /// This call starts unit number `n` (≥ threshold) without a plan.
    Refuse {
        /// Files touched so far.
        touched: Vec<String>,
        /// The unit number it would start.
        n: usize,
    },
}

impl SprawlState {
    fn with<R>(&self, agent: &AgentId, epoch: u64, f: impl FnOnce(&mut AgentUnits) -> R) -> R {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let e = g.entry(agent.clone()).or_default();
        if e.epoch != epoch {
            *e = AgentUnits {
                epoch,
                ..AgentUnits::default()
            };
        }
        f(e)
    }

    /// Decides on a call whose unit keys are `keys`; marks the gate fired on a refusal.
    pub(crate) fn judge(
        &self,
        gate: &SprawlGate,
        agent: &AgentId,
        epochs: &Epochs,
        keys: &BTreeSet<String>,
        mark_fired: bool,
    ) -> SprawlVerdict {
        let (epoch, planned) = epochs.state();
        self.with(agent, epoch, |st| {
            if keys.is_empty() || planned || st.fired {
                return SprawlVerdict::Pass;
            }
            let joins = st.units.iter().any(|u| !u.keys.is_disjoint(keys));
            let n = st.units.len() + 1;
            if joins || n < gate.config.threshold as usize {
                return SprawlVerdict::Pass;
            }
            if mark_fired {
                st.fired = true;
            }
            let touched = st
                .units
                .iter()
                .flat_map(|u| u.files.iter().cloned())
                .collect();
            SprawlVerdict::Refuse { touched, n }
        })
    }

    /// Records that a call touched `files` with unit `keys` (merging units it links).
    pub(crate) fn touch(
        &self,
        agent: &AgentId,
        epochs: &Epochs,
        keys: BTreeSet<String>,
        files: BTreeSet<String>,
    ) {
        if keys.is_empty() {
            return;
        }
        let (epoch, _) = epochs.state();
        self.with(agent, epoch, |st| {
            let mut merged = Unit { keys, files };
            st.units.retain(|u| {
                if u.keys.is_disjoint(&merged.keys) {
                    true
                } else {
                    merged.keys.extend(u.keys.iter().cloned());
                    merged.files.extend(u.files.iter().cloned());
                    false
                }
            });
            st.units.push(merged);
        });
    }
}
