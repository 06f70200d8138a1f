//! What a `gate_changed` record says the gate is ([`GateDefinition`]): the ledger's words for a
//! gate's definition. The runner and the CLI convert their configuration into it; this crate
//! knows nothing of how a policy is configured.
//!
//! Written, each form gives exactly the bytes the same definition as a `serde_json` map gives
//! (keys sorted, absent keys omitted). Read back, a definition is typed only when writing the
//! typed form again gives exactly the JSON on the line ([`GateDefinition::read`]); any other
//! shape (an older ledger's) stays [`GateDefinition::Json`], written as it was read.
//!
//! ```
//! use loopward_core::{GateDefinition, GateMode};
//! use serde_json::json;
//! let line = json!({"mode": "advisory", "name": "plans", "spec": {
//!     "kind": "territory", "mode": "advisory", "name": "plans", "owner": "planner",
//!     "paths": ["plans/**"]}});
//! let read = GateDefinition::read(line.clone());
//! let GateDefinition::Listed(listed) = &read else { panic!("{read:?}") };
//! assert_eq!((listed.name.as_str(), listed.mode), ("plans", GateMode::Advisory));
//! assert_eq!(read.name(), Some("plans"));
//! assert_eq!(serde_json::to_string(&read).unwrap(), line.to_string());
//! // A shape no typed form holds stays JSON, as it was.
//! let odd = json!({"name": "g", "kind": "territory", "allow": ["src/**"]});
//! assert!(matches!(GateDefinition::read(odd.clone()), GateDefinition::Json(v) if v == odd));
//! ```

use crate::{GateKind, GateMode};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A gate's definition in a `gate_changed` record: after the change, or before it for a removal.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum GateDefinition {
    /// A gate as the policy lists it (a run's `add`, `remove` and `set_mode`).
    Listed(ListedGate),
    /// A gate's rules alone (what `loopward gates rm` removed).
    Rules(GateRules),
    /// A gate as `loopward gates add` showed it: its kind and a line.
    Shown(ShownGate),
    /// An added gate the policy does not list (a sprawl gate added disabled): `null`.
    Unlisted,
    /// A definition of another shape (an older ledger's), as it was read.
    Json(serde_json::Value),
}

/// A gate as listed: `{mode, name, spec}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedGate {
    // Fields in sorted order of their names: the ledger writes them as declared.
    /// Its mode.
    pub mode: GateMode,
    /// Its name (unique in a policy).
    pub name: String,
    /// Its rules (`null` for the built-in control gate).
    pub spec: Option<GateRules>,
}

/// A gate as `loopward gates add` showed it: `{gate, kind}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownGate {
    /// The line shown (`territory of planner: plans/**`).
    pub gate: String,
    /// Its kind (a territory or a review gate).
    pub kind: GateKind,
}

/// A gate's rules, by kind; written with its `kind` among the rules' keys, in sorted order.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GateRules {
    /// A territory.
    Territory(TerritoryRules),
    /// The sprawl gate.
    Sprawl(SprawlRules),
    /// A review gate.
    Review(ReviewRules),
}

/// A territory's rules: paths only its owners may write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerritoryRules {
    /// Its mode.
    pub mode: GateMode,
    /// Its name, when one is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The owning agent, when one is named so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The owning agents, when named so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<String>,
    /// Workspace-relative globs.
    pub paths: Vec<String>,
}

/// The sprawl gate's rules: a plan before the `threshold`th unit of work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SprawlRules {
    /// Whether it is on.
    pub enabled: bool,
    /// What the plan's first line must start with.
    pub marker: String,
    /// Its mode.
    pub mode: GateMode,
    /// Where the plan goes.
    pub plan_path: String,
    /// Sibling rules: templates whose paths with one stem are one unit of work.
    pub siblings: Vec<Vec<String>>,
    /// The unit of work that triggers it.
    pub threshold: u32,
}

/// A review gate's rules: after `from` changes files matching `when`, a handoff to `via`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewRules {
    /// Whether only a handoff to its own `via` satisfies it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
    /// The agent whose work needs review.
    pub from: String,
    /// Its mode.
    pub mode: GateMode,
    /// Its name, when one is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The reviewer.
    pub via: String,
    /// Globs of changes that arm it; empty arms it on every handoff.
    pub when: Vec<String>,
}

/// Writes `fields` (a map's keys in sorted order) with `kind` in its sorted place among them.
fn with_kind<S: Serializer, T: Serialize>(s: S, kind: &str, fields: &T) -> Result<S::Ok, S::Error> {
    let serde_json::Value::Object(map) =
        serde_json::to_value(fields).map_err(serde::ser::Error::custom)?
    else {
        return Err(serde::ser::Error::custom("a gate's rules are a map"));
    };
    let mut m = s.serialize_map(Some(map.len() + 1))?;
    let mut kind = Some(kind);
    for (k, v) in &map {
        if let Some(word) = kind.filter(|_| k.as_str() > "kind") {
            m.serialize_entry("kind", word)?;
            kind = None;
        }
        m.serialize_entry(k, v)?;
    }
    if let Some(word) = kind {
        m.serialize_entry("kind", word)?;
    }
    m.end()
}

impl Serialize for GateRules {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Territory(r) => with_kind(s, GateKind::Territory.as_str(), r),
            Self::Sprawl(r) => with_kind(s, GateKind::Sprawl.as_str(), r),
            Self::Review(r) => with_kind(s, GateKind::Review.as_str(), r),
        }
    }
}

impl GateRules {
    /// The gate's name, when its rules give one.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::Territory(r) => r.name.as_deref(),
            Self::Sprawl(_) => Some(GateKind::Sprawl.as_str()),
            Self::Review(r) => r.name.as_deref(),
        }
    }
}

/// `T` when `v` is exactly what `T` writes: read, written again, and equal.
fn exact<T: serde::de::DeserializeOwned + Serialize>(v: &serde_json::Value) -> Option<T> {
    let typed = T::deserialize(v).ok()?;
    (serde_json::to_value(&typed).ok()? == *v).then_some(typed)
}

impl GateDefinition {
    /// A definition read back as `v`: the typed form whose writing gives exactly `v`, else `v`
    /// as JSON. The forms have different keys, so at most one fits.
    pub fn read(v: serde_json::Value) -> Self {
        if v.is_null() {
            return Self::Unlisted;
        }
        exact(&v)
            .map(Self::Listed)
            .or_else(|| exact(&v).map(Self::Rules))
            .or_else(|| exact(&v).map(Self::Shown))
            .unwrap_or(Self::Json(v))
    }

    /// The gate's name, where the definition says it.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::Listed(g) => Some(&g.name),
            Self::Rules(r) => r.name(),
            Self::Json(v) => v.get("name").and_then(serde_json::Value::as_str),
            Self::Shown(_) | Self::Unlisted => None,
        }
    }

    /// The definition as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Self::Json(v) => v.clone(),
            typed => serde_json::to_value(typed).unwrap_or_default(),
        }
    }
}

impl Serialize for GateDefinition {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Listed(g) => g.serialize(s),
            Self::Rules(r) => r.serialize(s),
            Self::Shown(g) => g.serialize(s),
            Self::Unlisted => s.serialize_unit(),
            Self::Json(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for GateDefinition {
    /// Typed by [`GateDefinition::read`].
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(d).map(Self::read)
    }
}

impl PartialEq for GateDefinition {
    /// Equal when their JSON is: a typed definition equals the same one read back.
    fn eq(&self, other: &Self) -> bool {
        self.to_json() == other.to_json()
    }
}

/// The definition as compact JSON, as a `serde_json::Value` displays it.
impl fmt::Display for GateDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Whether a definition read back is of the form expected.
    type Is = fn(&GateDefinition) -> bool;

    /// Each form's JSON as `serde_json` maps write it, and what it reads back as.
    fn shapes() -> Vec<(serde_json::Value, Is)> {
        let territory = json!({"kind": "territory", "mode": "enforce", "owner": "planner",
                               "paths": ["plans/**"]});
        let named = json!({"kind": "territory", "mode": "advisory", "name": "t",
                           "owners": ["a", "b"], "paths": ["x/*"]});
        let sprawl = json!({"enabled": true, "kind": "sprawl", "marker": "# Plan",
                            "mode": "enforce", "plan_path": "plan.md",
                            "siblings": [["src/**/{stem}.rs", "docs/**/{stem}.md"]],
                            "threshold": 3});
        let review = json!({"exclusive": true, "from": "builder", "kind": "review",
                            "mode": "enforce", "name": "r", "via": "auditor", "when": []});
        let review_plain = json!({"from": "builder", "kind": "review", "mode": "advisory",
                                  "via": "auditor", "when": ["src/**"]});
        vec![
            (
                json!({"mode": "enforce", "name": "territory:planner", "spec": territory.clone()}),
                |d| matches!(d, GateDefinition::Listed(_)),
            ),
            (
                json!({"mode": "enforce", "name": "sprawl", "spec": sprawl.clone()}),
                |d| matches!(d, GateDefinition::Listed(_)),
            ),
            (
                json!({"mode": "advisory", "name": "r", "spec": review.clone()}),
                |d| matches!(d, GateDefinition::Listed(_)),
            ),
            (
                json!({"mode": "enforce", "name": "control", "spec": null}),
                |d| matches!(d, GateDefinition::Listed(ListedGate { spec: None, .. })),
            ),
            (territory, |d| {
                matches!(d, GateDefinition::Rules(GateRules::Territory(_)))
            }),
            (named, |d| {
                matches!(d, GateDefinition::Rules(GateRules::Territory(_)))
            }),
            (sprawl, |d| {
                matches!(d, GateDefinition::Rules(GateRules::Sprawl(_)))
            }),
            (review, |d| {
                matches!(d, GateDefinition::Rules(GateRules::Review(_)))
            }),
            (review_plain, |d| {
                matches!(d, GateDefinition::Rules(GateRules::Review(_)))
            }),
            (
                json!({"gate": "review: builder hands off via auditor", "kind": "review"}),
                |d| {
                    matches!(
                        d,
                        GateDefinition::Shown(ShownGate {
                            kind: GateKind::Review,
                            ..
                        })
                    )
                },
            ),
            (json!(null), |d| matches!(d, GateDefinition::Unlisted)),
            // Shapes no typed form holds: a key too many, a kind of gate with no rules here.
            (
                json!({"name": "g", "kind": "territory", "allow": ["src/**"]}),
                |d| matches!(d, GateDefinition::Json(_)),
            ),
            (
                json!({"from": "b", "kind": "review", "mode": "enforce", "via": "a", "when": [],
                    "exclusive": false}),
                |d| matches!(d, GateDefinition::Json(_)),
            ),
            (json!({"gate": "x", "kind": "sandboxed"}), |d| {
                matches!(d, GateDefinition::Json(_))
            }),
        ]
    }

    #[test]
    fn each_form_reads_back_typed_and_writes_the_same_bytes() {
        for (v, is) in shapes() {
            let text = v.to_string();
            let read: GateDefinition = serde_json::from_str(&text).unwrap();
            assert!(is(&read), "{text} read as {read:?}");
            assert_eq!(serde_json::to_string(&read).unwrap(), text);
            assert_eq!(read.to_string(), text);
            assert_eq!(read, GateDefinition::Json(v));
        }
    }

    #[test]
    fn a_typed_definition_is_written_as_its_map_would_be() {
        let rules = GateRules::Review(ReviewRules {
            exclusive: false,
            from: "builder".into(),
            mode: GateMode::Enforce,
            name: None,
            via: "auditor".into(),
            when: vec!["src/**".into()],
        });
        assert_eq!(
            serde_json::to_string(&rules).unwrap(),
            r#"{"from":"builder","kind":"review","mode":"enforce","via":"auditor","when":["src/**"]}"#
        );
        assert_eq!(GateDefinition::Rules(rules).name(), None);
    }
}
