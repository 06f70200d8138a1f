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
use super::policy::Policy;
use crate::context::RunContext;
use crate::journal::{Resumed, SettledSprawl};
use globset::GlobMatcher;
use loopward_core::{AgentId, AuditError, AuditEvent, HumanWords};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// One sibling template: a glob with `{stem}` in its file name.
#[derive(Clone, Debug)]
pub(crate) struct SiblingTemplate {
    /// The template with `{stem}` as `*`, compiled when a path first reaches it (the file-name
    /// check before it turns most paths away; a config's check need not compile it).
    pattern: String,
    matcher: std::sync::OnceLock<Option<GlobMatcher>>,
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
        let pattern = t.replace("{stem}", "*");
        super::config::check_glob(&pattern, section)?;
        Ok(Self {
            pattern,
            matcher: std::sync::OnceLock::new(),
            prefix: prefix.into(),
            suffix: suffix.into(),
        })
    }

    fn stem<'a>(&self, path: &'a str) -> Option<&'a str> {
        // The literal file-name check first: it rejects most paths without running the glob.
        let file = path.rsplit('/').next().unwrap_or(path);
        let stem = file
            .strip_prefix(self.prefix.as_str())?
            .strip_suffix(self.suffix.as_str())
            .filter(|s| !s.is_empty())?;
        // Checked when the config loaded, so it parses.
        let matcher = self
            .matcher
            .get_or_init(|| glob(&self.pattern, "").ok().map(|g| g.compile_matcher()));
        matcher
            .as_ref()
            .is_some_and(|m| m.is_match(path))
            .then_some(stem)
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
        for (i, rule) in config.siblings.iter().enumerate() {
            let mut r = Vec::new();
            for t in rule {
                r.push(SiblingTemplate::parse(
                    t,
                    &format!("gates.sprawl.siblings[{i}]"),
                )?);
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

    /// The work a call writing `files` does; `replacements` are its edits' (old, new) pairs, so
    /// one replacement repeated across files (a mechanical rename) is one unit of work. The plan
    /// (`plan`, where it lands) is not work.
    pub fn work<'a>(
        &self,
        files: impl IntoIterator<Item = &'a str>,
        replacements: &[(&str, &str)],
        plan: Option<&str>,
    ) -> Work {
        let mut w = Work::default();
        for f in files {
            if Some(f) != plan {
                w.keys.insert(self.unit_key(f));
                w.files.insert(f.to_string());
            }
        }
        if !w.is_empty() {
            for (old, new) in replacements {
                let digest = Sha256::digest(format!("{old}\0{new}").as_bytes());
                w.keys
                    .insert(format!("replace:{}", hex::encode(&digest[..8])));
            }
        }
        w
    }

    /// Whether `content` is a plan: its first line starts with the marker.
    pub fn is_plan(&self, content: &str) -> bool {
        content.lines().next().is_some_and(|l| {
            l.trim_start_matches('\u{feff}')
                .starts_with(&self.config.marker)
        })
    }
}

/// What the sprawl gate remembers between calls: the order of human messages and plan writes,
/// and per agent the units of work touched since the last human message. The same type serves
/// every enforcement point: the runner keeps it in the run's memory, the Claude Code hook in the
/// session's state file (it is `serde`).
///
/// ```
/// use loopward_core::AgentId;
/// use loopward_runner::gates::{SprawlTracker, Work};
/// let mut t = SprawlTracker::default();
/// let a = AgentId::new("builder").unwrap();
/// t.touch(&a, Work::one("file:src/a.rs", "src/a.rs"));
/// assert_eq!(t.files(&a), ["src/a.rs"]);
/// t.human();
/// assert!(t.files(&a).is_empty());
/// t.plan();
/// assert!(t.planned());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SprawlTracker {
    /// Human messages and plan writes so far; "after" is decided by this order, never by time.
    #[serde(default)]
    order: u64,
    #[serde(default)]
    last_human: u64,
    #[serde(default)]
    last_plan: Option<u64>,
    #[serde(default)]
    agents: BTreeMap<AgentId, AgentWork>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct AgentWork {
    #[serde(default)]
    units: Vec<Work>,
    /// The gate already refused (or warned) once this turn.
    #[serde(default)]
    fired: bool,
}

/// The units of work one action counts as: its unit keys and the files it writes. Actions whose
/// keys meet are one unit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Work {
    /// The unit keys ([`SprawlGate::unit_key`], and one per repeated replacement).
    pub keys: BTreeSet<String>,
    /// The files written.
    pub files: BTreeSet<String>,
}

impl Work {
    /// One key, one file.
    pub fn one(key: impl Into<String>, file: impl Into<String>) -> Self {
        Self {
            keys: BTreeSet::from([key.into()]),
            files: BTreeSet::from([file.into()]),
        }
    }

    /// Whether it counts as no work at all.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
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

impl SprawlTracker {
    /// A person spoke: a new turn starts, every agent's units are forgotten.
    pub fn human(&mut self) {
        self.order += 1;
        self.last_human = self.order;
        self.agents.clear();
    }

    /// A plan was written (and stands).
    pub fn plan(&mut self) {
        self.order += 1;
        self.last_plan = Some(self.order);
    }

    /// Whether a plan was written after the last human message.
    pub fn planned(&self) -> bool {
        self.last_plan.is_some_and(|p| p > self.last_human)
    }

    /// Records that `agent`'s action, which stands, did `work` (merging the units it links).
    pub fn touch(&mut self, agent: &AgentId, work: Work) {
        if work.is_empty() {
            return;
        }
        let st = self.agents.entry(agent.clone()).or_default();
        let mut merged = work;
        // The units it links are moved into it, not copied (the same unit touched again is
        // the common case: its keys and files are kept, the call's duplicates dropped).
        let mut i = 0;
        while i < st.units.len() {
            if st.units[i].keys.is_disjoint(&merged.keys) {
                i += 1;
                continue;
            }
            let mut unit = st.units.remove(i);
            if unit.keys.len() + unit.files.len() < merged.keys.len() + merged.files.len() {
                std::mem::swap(&mut unit, &mut merged);
            }
            // Inserted one by one: `BTreeSet::append` would rebuild the larger set each time.
            merged.keys.extend(std::mem::take(&mut unit.keys));
            merged.files.extend(std::mem::take(&mut unit.files));
        }
        st.units.push(merged);
    }

    /// Every file `agent` touched this turn, in path order.
    pub fn files(&self, agent: &AgentId) -> Vec<&str> {
        let set: BTreeSet<&str> = self
            .agents
            .get(agent)
            .into_iter()
            .flat_map(|st| st.units.iter())
            .flat_map(|u| u.files.iter().map(String::as_str))
            .collect();
        set.into_iter().collect()
    }

    /// What the gate says about `agent` starting `work` now. Decides; changes nothing.
    pub(crate) fn verdict(&self, gate: &SprawlGate, agent: &AgentId, work: &Work) -> SprawlVerdict {
        let st = self.agents.get(agent);
        let fired = st.is_some_and(|s| s.fired);
        if work.is_empty() || self.planned() || fired {
            return SprawlVerdict::Pass;
        }
        let units = st.map_or(&[][..], |s| &s.units[..]);
        let joins = units.iter().any(|u| !u.keys.is_disjoint(&work.keys));
        let n = units.len() + 1;
        if joins || n < gate.config.threshold as usize {
            return SprawlVerdict::Pass;
        }
        SprawlVerdict::Refuse {
            touched: self.files(agent).into_iter().map(String::from).collect(),
            n,
        }
    }

    /// The gate fired for `agent`: it stays quiet until the next human message.
    pub(crate) fn fire(&mut self, agent: &AgentId) {
        self.agents.entry(agent.clone()).or_default().fired = true;
    }
}

/// The run's sprawl tracker, kept in the run's extensions.
#[derive(Debug, Default)]
pub(crate) struct RunSprawl(pub(crate) Mutex<SprawlTracker>);

impl RunSprawl {
    /// The tracker of `run`, judged by `policy`. A resumed run's tracker starts from what the
    /// settled part of the run noted (its people's messages, the gate's firings, the work of its
    /// finished calls, a plan among their writes, read where it stands now), so the gate counts
    /// the units of work of the part before the kill. (A person's message taken live before any
    /// call asks starts a new turn anyway: what came before it no longer counts.)
    pub(crate) fn of(run: &RunContext, policy: &Policy) -> std::sync::Arc<Self> {
        // Every call asks: the settled part of a resumed run is read only by the first.
        if let Some(tracker) = run.extensions().get::<Self>() {
            return tracker;
        }
        let resumed = Resumed::of(run);
        run.extensions().get_or_insert_with(|| {
            let mut tracker = SprawlTracker::default();
            for s in resumed.as_deref().map_or(&[][..], Resumed::sprawl) {
                match s {
                    SettledSprawl::Human => tracker.human(),
                    SettledSprawl::Fired(agent) => tracker.fire(agent),
                    SettledSprawl::Finished {
                        agent,
                        effects,
                        replacements,
                    } => {
                        let reps: Vec<(&str, &str)> = replacements
                            .iter()
                            .map(|(o, n)| (o.as_str(), n.as_str()))
                            .collect();
                        tracker.touch(agent, policy.recorded_work(effects, &reps));
                        policy.note_plan(effects, &mut tracker);
                    }
                }
            }
            Self(Mutex::new(tracker))
        })
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, SprawlTracker> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Records a genuine human message in a run and starts a new turn for turn-scoped gates (the
/// sprawl gate's unit count and its plan requirement). The runner records the task itself;
/// embedders call this for every later message a person sends.
///
/// ```
/// use loopward_core::{AgentId, Person, RunId};
/// use loopward_runner::{audit::MemorySink, gates, RunContext, SystemClock, Workspace};
/// use std::sync::Arc;
/// let dir = tempfile::tempdir().unwrap();
/// let sink = Arc::new(MemorySink::default());
/// let run = RunContext::new(RunId::new("r").unwrap(), vec![AgentId::new("a").unwrap()],
///     Workspace::new(dir.path()).unwrap(), sink.clone(), Arc::new(SystemClock));
/// gates::human_message(&run, &Person::at_the_keyboard().says("now add tests")).unwrap();
/// assert_eq!(sink.kinds(), vec!["human_message"]);
/// ```
pub fn human_message(run: &RunContext, words: &HumanWords) -> Result<(), AuditError> {
    run.record_owned(AuditEvent::HumanMessage {
        content: words.into(),
    })?;
    run.extensions()
        .get_or_default::<RunSprawl>()
        .lock()
        .human();
    Ok(())
}
