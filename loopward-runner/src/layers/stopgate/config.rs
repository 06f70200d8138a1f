//! `[[stopgate]]` settings.

use super::action::GatedAction;
use crate::layers::config::ConfigError;
use globset::GlobMatcher;
use loopward_core::{AgentId, ToolName};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// How a gate gets its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopMode {
    /// Ask a person through the configured [`Approver`](super::Approver); no approver, no answer
    /// in time, or an error: deny.
    Interactive,
    /// Approve, and record that it was approved automatically.
    Auto,
    /// Always deny.
    Deny,
    /// Write a pending record under `.loopward/pending/`, pause the run
    /// (`AwaitingApproval`), and run the action once after `loopward approve`.
    Durable,
}

impl StopMode {
    /// The mode's name as written in `loopward.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interactive => "interactive",
            Self::Auto => "auto",
            Self::Deny => "deny",
            Self::Durable => "durable",
        }
    }
}

/// One `[[stopgate]]` table of `loopward.toml`.
///
/// `point` is one of `turn` (with `agent`), `phase` (with `phase`), `tool` (with `tool`),
/// `write` (with `glob`: writes to a matching workspace path, `*` does not cross `/`) and
/// `handoff` (with `to`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopGateConfig {
    /// The gate's name (default: `<point>:<target>`).
    #[serde(default)]
    pub name: Option<String>,
    /// Where the gate stands.
    pub point: String,
    /// `turn`: the agent whose turns are gated.
    #[serde(default)]
    pub agent: Option<String>,
    /// `phase`: the phase.
    #[serde(default)]
    pub phase: Option<String>,
    /// `tool`: the tool.
    #[serde(default)]
    pub tool: Option<ToolName>,
    /// `write`: the glob of gated paths.
    #[serde(default)]
    pub glob: Option<String>,
    /// `handoff`: the agent handoffs to which are gated.
    #[serde(default)]
    pub to: Option<String>,
    /// How the gate answers.
    pub mode: StopMode,
    /// `interactive`: how long to wait for an answer before denying (`"1s"` to `"24h"`,
    /// default `"5m"`).
    #[serde(default, with = "crate::duration::optional")]
    pub ask_timeout: Option<Duration>,
}

impl StopGateConfig {
    fn bare(point: &str, mode: StopMode) -> Self {
        Self {
            name: None,
            point: point.into(),
            agent: None,
            phase: None,
            tool: None,
            glob: None,
            to: None,
            mode,
            ask_timeout: None,
        }
    }

    /// A gate before tool `tool`.
    pub fn tool(tool: impl Into<ToolName>, mode: StopMode) -> Self {
        Self {
            tool: Some(tool.into()),
            ..Self::bare("tool", mode)
        }
    }

    /// A gate before writes under `glob`.
    pub fn write(glob: &str, mode: StopMode) -> Self {
        Self {
            glob: Some(glob.into()),
            ..Self::bare("write", mode)
        }
    }

    /// A gate before phase `phase`.
    pub fn phase(phase: &str, mode: StopMode) -> Self {
        Self {
            phase: Some(phase.into()),
            ..Self::bare("phase", mode)
        }
    }

    /// A gate before every turn of `agent`.
    pub fn turn(agent: &str, mode: StopMode) -> Self {
        Self {
            agent: Some(agent.into()),
            ..Self::bare("turn", mode)
        }
    }

    /// A gate before handoffs to `to`.
    pub fn handoff(to: &str, mode: StopMode) -> Self {
        Self {
            to: Some(to.into()),
            ..Self::bare("handoff", mode)
        }
    }
}

/// Where a validated gate stands.
#[derive(Clone, Debug)]
pub(super) enum Point {
    Turn(AgentId),
    Phase(String),
    Tool(ToolName),
    Write(GlobMatcher),
    Handoff(AgentId),
}

impl Point {
    /// Why an action meets this gate, for the person asked.
    pub(super) fn why(&self) -> String {
        match self {
            Self::Turn(a) => format!("every turn of {a} needs a person's approval"),
            Self::Phase(p) => format!("entering phase {p} needs a person's approval"),
            Self::Tool(t) => format!("every {t} call needs a person's approval"),
            Self::Write(g) => format!("writes under {} need a person's approval", g.glob()),
            Self::Handoff(a) => format!("a handoff to {a} needs a person's approval"),
        }
    }
}

/// A validated gate.
#[derive(Clone, Debug)]
pub(super) struct Gate {
    pub(super) name: Arc<str>,
    pub(super) point: Point,
    pub(super) mode: StopMode,
    pub(super) ask_timeout: Duration,
    /// For a turn or phase gate, the one action it stands before, made once.
    pub(super) fixed: Option<Fixed>,
}

/// The action a turn or phase gate stands before, with its key and summary: shared by every
/// verdict and record the gate makes, not rebuilt for each.
#[derive(Clone, Debug)]
pub(super) struct Fixed {
    pub(super) action: Arc<GatedAction>,
    pub(super) key: Arc<str>,
    pub(super) summary: Arc<str>,
}

impl Fixed {
    pub(super) fn new(action: GatedAction, summary: String) -> Self {
        Self {
            key: action.key().into(),
            action: Arc::new(action),
            summary: summary.into(),
        }
    }
}

const POINTS: &str = "turn, phase, tool, write, handoff";

impl Gate {
    pub(super) fn from_config(i: usize, c: &StopGateConfig) -> Result<Self, ConfigError> {
        let field = |f: &str| format!("stopgate[{i}].{f}");
        let wanted = match c.point.as_str() {
            "turn" => "agent",
            "phase" => "phase",
            "tool" => "tool",
            "write" => "glob",
            "handoff" => "to",
            other => {
                return Err(ConfigError::new(
                    field("point"),
                    format!("unknown gate point {other:?}; expected one of {POINTS}"),
                ))
            }
        };
        let given = [
            ("agent", c.agent.as_deref()),
            ("phase", c.phase.as_deref()),
            ("tool", c.tool.as_ref().map(ToolName::as_str)),
            ("glob", c.glob.as_deref()),
            ("to", c.to.as_deref()),
        ];
        let mut target = None;
        for (name, value) in given {
            match (name == wanted, value) {
                (true, Some(v)) if !v.trim().is_empty() => target = Some(v),
                (true, _) => {
                    return Err(ConfigError::new(
                        field(name),
                        format!("required (and non-empty) for point = {:?}", c.point),
                    ))
                }
                (false, Some(_)) => {
                    return Err(ConfigError::new(
                        field(name),
                        format!("does not apply to point = {:?}; use {wanted}", c.point),
                    ))
                }
                (false, None) => {}
            }
        }
        let Some(target) = target else {
            return Err(ConfigError::new(field(wanted), "required"));
        };
        let agent =
            |t: &str| AgentId::new(t).map_err(|e| ConfigError::new(field(wanted), e.to_string()));
        let point = match wanted {
            "agent" => Point::Turn(agent(target)?),
            "phase" => Point::Phase(target.into()),
            "tool" => Point::Tool(target.into()),
            "to" => Point::Handoff(agent(target)?),
            // The one glob format of `loopward.toml`: workspace-relative, `*` within a folder.
            _ => Point::Write(
                crate::gates::workspace_glob(target, &field("glob"))
                    .map_err(|e| match e {
                        crate::gates::ConfigError::BadGlob { glob, why, .. } => {
                            ConfigError::new(field("glob"), format!("invalid glob {glob:?}: {why}"))
                        }
                        other => ConfigError::new(field("glob"), other.to_string()),
                    })?
                    .compile_matcher(),
            ),
        };
        if c.ask_timeout.is_some() && c.mode != StopMode::Interactive {
            return Err(ConfigError::new(
                field("ask_timeout"),
                "only applies to mode = \"interactive\"",
            ));
        }
        let ask_timeout = c.ask_timeout.unwrap_or(Duration::from_secs(300));
        crate::duration::in_range(
            &field("ask_timeout"),
            ask_timeout,
            Duration::from_secs(1),
            Duration::from_secs(86_400),
        )?;
        let name = match &c.name {
            Some(n) if n.trim().is_empty() => {
                return Err(ConfigError::new(field("name"), "must not be empty"))
            }
            Some(n) => n.clone(),
            None => format!("{}:{target}", c.point),
        };
        let fixed = match &point {
            Point::Turn(agent) => Some(Fixed::new(
                GatedAction::Turn {
                    agent: agent.clone(),
                },
                format!("start a turn of {agent}"),
            )),
            Point::Phase(phase) => Some(Fixed::new(
                GatedAction::Phase {
                    name: phase.clone(),
                },
                format!("enter phase {phase}"),
            )),
            _ => None,
        };
        Ok(Self {
            name: name.into(),
            point,
            mode: c.mode,
            ask_timeout,
            fixed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::StopMode;
    use crate::layers::stopgate::durable::{KEYED_PENDING_DIR, PENDING_DIR};
    use loopward_core::StopGateDetail;

    #[test]
    fn every_mode_and_pending_dir_a_detail_names_reads_back_typed() {
        for mode in [
            StopMode::Interactive,
            StopMode::Auto,
            StopMode::Deny,
            StopMode::Durable,
        ] {
            assert!(StopGateDetail::MODES.contains(&mode.as_str()), "{mode:?}");
        }
        for dir in [PENDING_DIR, KEYED_PENDING_DIR] {
            assert!(StopGateDetail::DIRS.contains(&dir), "{dir}");
        }
    }
}
