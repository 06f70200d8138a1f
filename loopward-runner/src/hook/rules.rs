//! The rules the hook applies to one write, built from the policy gates' own pieces
//! ([`ControlFiles`], [`Territory`], [`OverrideStore`], [`SprawlGate`]) in the order the policy
//! layer applies them: control files, territories (an override found where one is needed),
//! sprawl, and only when all allow, the override consumed. The sprawl gate's turn state is the
//! session's ([`AgentTurn`]), kept on disk between hook processes, where the policy layer keeps
//! it in the run's memory.

use super::session::AgentTurn;
use crate::clock::Clock;
use crate::gates::{
    ConfigError, ControlFiles, OverrideError, OverrideStore, PolicyConfig, ShellWatchConfig,
    SprawlGate, Territory, CONTROL_GATE,
};
use crate::workspace::Workspace;
use loopward_core::{AgentId, AuditEvent, Decision, GateMode, Refusal};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::time::Duration;

/// The compiled rules.
#[derive(Clone, Debug)]
pub(crate) struct Rules {
    territories: Vec<Territory>,
    control: ControlFiles,
    sprawl: Option<SprawlGate>,
    max_ttl: Duration,
    shell: ShellWatchConfig,
}

/// One write to judge.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteAsk<'a> {
    pub(crate) caller: &'a AgentId,
    pub(crate) call_id: Option<&'a str>,
    /// `tool:Write`, …
    pub(crate) action: &'a str,
    /// The path as the model wrote it (none for a change found by the shell watch).
    pub(crate) raw: Option<&'a str>,
    /// The canonical workspace-relative path.
    pub(crate) rel: &'a str,
    /// The unit keys of the call (see [`Rules::unit_keys`]).
    pub(crate) keys: &'a BTreeSet<String>,
}

/// What the rules say about one write, with the events to record before it runs, in order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WriteVerdict {
    pub(crate) events: Vec<AuditEvent>,
    pub(crate) denial: Option<Refusal>,
    pub(crate) warnings: Vec<Refusal>,
    /// The sprawl gate fired (refused or warned once) on this call.
    pub(crate) sprawl_fired: bool,
}

fn show(rel: &str) -> &str {
    if rel.is_empty() {
        "the workspace root"
    } else {
        rel
    }
}

impl Rules {
    /// Compiles the gate sections; `config_file` and `runs_dir` are workspace-relative control
    /// paths.
    pub(crate) fn from_config(
        cfg: &PolicyConfig,
        config_file: &str,
        runs_dir: &str,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let territories = cfg
            .territory
            .iter()
            .map(Territory::from_config)
            .collect::<Result<Vec<_>, _>>()?;
        let sprawl = if cfg.gates.sprawl.enabled {
            Some(SprawlGate::from_config(&cfg.gates.sprawl)?)
        } else {
            None
        };
        Ok(Self {
            territories,
            control: ControlFiles::new(config_file, runs_dir),
            sprawl,
            max_ttl: cfg.overrides.max_ttl,
            shell: cfg.gates.shell.clone(),
        })
    }

    fn overrides(ws: &Workspace, max_ttl: Duration) -> OverrideStore {
        OverrideStore::for_workspace(ws).max_ttl(max_ttl)
    }

    /// The unit of work a path belongs to.
    fn unit_key(&self, rel: &str) -> String {
        match &self.sprawl {
            Some(s) => s.unit_key(rel),
            None => format!("file:{rel}"),
        }
    }

    /// The unit keys of a write to `rel`; `replacements` are an edit's (old, new) pairs, so one
    /// replacement repeated across files (a mechanical rename) is one unit of work.
    pub(crate) fn unit_keys(&self, rel: &str, replacements: &[(&str, &str)]) -> BTreeSet<String> {
        let mut keys = BTreeSet::from([self.unit_key(rel)]);
        for (old, new) in replacements {
            let digest = Sha256::digest(format!("{old}\0{new}").as_bytes());
            keys.insert(format!("replace:{}", hex::encode(&digest[..8])));
        }
        keys
    }

    /// Whether `rel` is the plan file and `content` a plan.
    pub(crate) fn is_plan(&self, rel: &str, content: &str) -> bool {
        self.sprawl
            .as_ref()
            .is_some_and(|s| rel == s.config().plan_path && s.is_plan(content))
    }

    fn foreign_enforced(&self, caller: &AgentId, rel: &str) -> Option<&Territory> {
        let mut covering: Vec<&Territory> =
            self.territories.iter().filter(|t| t.covers(rel)).collect();
        covering.sort_by(|a, b| a.name().cmp(b.name()));
        covering
            .into_iter()
            .find(|t| !t.owned_by(caller) && t.mode() == GateMode::Enforce)
    }

    /// Whether a shell change to `rel` by `caller` breaks a rule, and which.
    pub(crate) fn guarded(&self, caller: &AgentId, rel: &str) -> Option<String> {
        if self.control.covers(rel) {
            return Some(format!(
                "{} is a control file; no agent may change it",
                show(rel)
            ));
        }
        self.foreign_enforced(caller, rel).map(|t| {
            format!(
                "{} belongs to {} ({}); {caller} does not own it",
                show(rel),
                t.owner_list(),
                t.name()
            )
        })
    }

    /// `[gates.shell]`: top-level folders not watched, and the snapshot size limit.
    pub(crate) fn shell(&self) -> &ShellWatchConfig {
        &self.shell
    }

    /// The paths the watch neither compares nor restores: the `[gates.shell] skip` folders and
    /// the runs directory, where loopward appends ledgers while commands run.
    pub(crate) fn unwatched(&self) -> Vec<String> {
        let mut skip = self.shell.skip.clone();
        skip.extend(self.control.runs_dir().map(str::to_string));
        skip
    }

    /// Whether `rel` is watched closely around shell calls (its content kept for a revert).
    pub(crate) fn watched(&self, rel: &str) -> bool {
        self.control.covers(rel) || self.territories.iter().any(|t| t.covers(rel))
    }

    fn territory_refusal(
        &self,
        t: &Territory,
        caller: &AgentId,
        rel: &str,
        no_override: Option<&OverrideError>,
    ) -> Refusal {
        let mut reason = format!(
            "{} belongs to {} ({}); {caller} does not own it",
            show(rel),
            t.owner_list(),
            t.name()
        );
        if let Some(OverrideError::NoneValid { rejections, .. }) = no_override {
            for r in rejections {
                reason.push_str(&format!("; override {} refused: {}", r.file, r.why));
            }
        }
        let owner = t.owners().first().map_or("its owner", AgentId::as_str);
        Refusal::new(
            t.name(),
            reason,
            format!(
                "leave the change to {owner}: delegate it to the {owner} subagent, saying exactly what to change and why; or ask the person for a one-shot override (loopward override grant --agent {caller} --path {} --reason \"<why>\" --ttl {}) and make the same call again",
                show(rel),
                humantime::format_duration(self.max_ttl.min(Duration::from_secs(600)))
            ),
        )
    }

    /// Judges one write. Consumes an override only when every gate allows; the consumption is
    /// the first event returned, so it is recorded before the allow. `turn` is `None` for a
    /// change a shell command already made: the sprawl gate counts the command as a whole.
    pub(crate) fn judge_write(
        &self,
        ask: &WriteAsk<'_>,
        turn: Option<&AgentTurn>,
        plan_fresh: bool,
        ws: &Workspace,
        clock: &dyn Clock,
    ) -> WriteVerdict {
        let overrides = Self::overrides(ws, self.max_ttl);
        self.judge_write_with(ask, turn, plan_fresh, Some(&overrides), clock)
    }

    /// [`judge_write`](Self::judge_write) with the override store given; `None` judges as if no
    /// override existed and touches nothing on disk (`loopward calibrate`'s shadow mode).
    pub(crate) fn judge_write_with(
        &self,
        ask: &WriteAsk<'_>,
        turn: Option<&AgentTurn>,
        plan_fresh: bool,
        overrides: Option<&OverrideStore>,
        clock: &dyn Clock,
    ) -> WriteVerdict {
        let WriteAsk {
            caller,
            call_id,
            action,
            raw,
            rel,
            keys,
        } = *ask;
        let mut v = WriteVerdict {
            events: Vec::new(),
            denial: None,
            warnings: Vec::new(),
            sprawl_fired: false,
        };
        let decision_event =
            |gate: &str, mode: GateMode, decision: Decision| AuditEvent::GateDecision {
                call_id: call_id.map(str::to_string),
                gate: gate.to_string(),
                mode,
                action: action.to_string(),
                path_raw: raw.map(str::to_string),
                path: Some(rel.to_string()),
                decision,
            };
        let push = |v: &mut WriteVerdict, gate: &str, mode: GateMode, decision: Decision| {
            match &decision {
                Decision::Deny(r) if v.denial.is_none() => v.denial = Some(r.clone()),
                Decision::Warn(r) => v.warnings.push(r.clone()),
                _ => {}
            }
            v.events.push(decision_event(gate, mode, decision));
        };
        if self.control.covers(rel) {
            push(
                &mut v,
                CONTROL_GATE,
                GateMode::Enforce,
                Decision::Deny(Refusal::new(
                    CONTROL_GATE,
                    format!("{} is a control file: .loopward/, the config file and the runs directory are never writable by agents, with or without an override", show(rel)),
                    "leave it unchanged; if it must change, say so in your reply and the person will do it",
                )),
            );
            return v;
        }
        let mut covering: Vec<&Territory> =
            self.territories.iter().filter(|t| t.covers(rel)).collect();
        covering.sort_by(|a, b| a.name().cmp(b.name()));
        let foreign: Vec<&Territory> = covering
            .iter()
            .copied()
            .filter(|t| !t.owned_by(caller))
            .collect();
        // The territory whose override this write needs, once every gate allows.
        let mut needs: Option<&Territory> = None;
        let territory = match foreign.iter().find(|t| t.mode() == GateMode::Enforce) {
            Some(t) => match overrides.map(|o| o.find(caller, rel, clock)) {
                None => Some((
                    t.name().to_string(),
                    GateMode::Enforce,
                    Decision::Deny(self.territory_refusal(t, caller, rel, None)),
                )),
                Some(Ok(_)) => {
                    needs = Some(t);
                    None
                }
                Some(Err(e)) => Some((
                    t.name().to_string(),
                    GateMode::Enforce,
                    Decision::Deny(self.territory_refusal(t, caller, rel, Some(&e))),
                )),
            },
            None => match foreign.first() {
                Some(t) => Some((
                    t.name().to_string(),
                    GateMode::Advisory,
                    Decision::Warn(self.territory_refusal(t, caller, rel, None)),
                )),
                None => Some((
                    covering
                        .first()
                        .map_or("territory", |t| t.name())
                        .to_string(),
                    GateMode::Enforce,
                    Decision::Allow,
                )),
            },
        };
        if let Some((gate, mode, d)) = territory.clone() {
            if matches!(d, Decision::Deny(_)) {
                push(&mut v, &gate, mode, d);
                return v;
            }
        }
        // The sprawl gate.
        let mut sprawl_event = None;
        if let (Some(s), Some(turn)) = (&self.sprawl, turn) {
            let n = turn.units.len() + 1;
            let mode = s.config().mode;
            let fires = !turn.joins(keys)
                && rel != s.config().plan_path
                && !plan_fresh
                && !turn.sprawl_fired
                && n >= s.config().threshold as usize;
            let d = if fires {
                v.sprawl_fired = true;
                let touched = turn.files().into_iter().collect::<Vec<_>>().join(", ");
                let refusal = Refusal::new(
                    "sprawl",
                    format!("{rel} would start unit of work number {n} since the person's last message, with no plan presented since then; touched so far: {touched}"),
                    format!(
                        "write your plan to {} — its first line starting with {:?} — naming the units of work and their order, then make the same call again; this gate refuses once per turn",
                        s.config().plan_path, s.config().marker
                    ),
                );
                match mode {
                    GateMode::Enforce => Decision::Deny(refusal),
                    GateMode::Advisory => Decision::Warn(refusal),
                }
            } else {
                Decision::Allow
            };
            sprawl_event = Some((mode, d));
        }
        if let Some((mode, d @ Decision::Deny(_))) = &sprawl_event {
            // The override, if one was found, stays for the next try.
            if let Some(t) = needs {
                push(
                    &mut v,
                    t.name(),
                    GateMode::Enforce,
                    Decision::Deny(Refusal::new(
                        t.name(),
                        format!("{rel} needs an override, which was not used because sprawl refused the call"),
                        "",
                    )),
                );
            } else if let Some((gate, m, td)) = territory {
                push(&mut v, &gate, m, td);
            }
            push(&mut v, "sprawl", *mode, d.clone());
            return v;
        }
        // Every gate allows: consume the override this write needs, recorded first.
        match needs.zip(overrides) {
            Some((t, overrides)) => match overrides.take(caller, rel, clock) {
                Ok(taken) => {
                    v.events.push(AuditEvent::OverrideConsumed {
                        id: taken.id.clone(),
                        agent: caller.clone(),
                        path: taken.path.clone(),
                        reason: taken.reason.clone(),
                    });
                    push(
                        &mut v,
                        t.name(),
                        GateMode::Enforce,
                        Decision::Override {
                            id: taken.id,
                            reason: taken.reason,
                        },
                    );
                }
                Err(e) => {
                    let r = self.territory_refusal(t, caller, rel, Some(&e));
                    push(&mut v, t.name(), GateMode::Enforce, Decision::Deny(r));
                    return v;
                }
            },
            None => {
                if let Some((gate, mode, d)) = territory {
                    push(&mut v, &gate, mode, d);
                }
            }
        }
        if let Some((mode, d)) = sprawl_event {
            push(&mut v, "sprawl", mode, d);
        }
        v
    }
}
