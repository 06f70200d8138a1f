//! Where a rule is written. Each `[[territory]]`, `[[gates.review]]` and `[gates.sprawl]` read
//! from a config file keeps the line of its table, and every decision it makes records it
//! (`source: "loopward.toml:12"` on a `gate_decision`), so a ledger line leads back to the rule.
//!
//! The line comes from the one parse of the file: toml's span of the table (its `[[…]]` header),
//! read through the same deserializer, then turned into `file:line` once the file's name is
//! known ([`RuleSource::resolve`]).
//!
//! ```
//! use loopward_runner::gates::PolicyConfig;
//! let text = "# the team's rules\n\n[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"\n";
//! let cfg = PolicyConfig::from_toml_in("loopward.toml", text).unwrap();
//! assert_eq!(cfg.territory[0].source.as_str(), Some("loopward.toml:3"));
//! // Text of no file has no source; where a rule is written never makes it another rule.
//! let bare = PolicyConfig::from_toml(text).unwrap();
//! assert_eq!(bare.territory[0].source.as_str(), None);
//! assert_eq!(bare, cfg);
//! ```

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// Where a rule is written: `file:line` of its table, when it was read from a named file.
///
/// Metadata, not policy: two rules that differ only in where they are written are equal, and
/// the source is never serialised with the rule (the policy's version ignores it).
#[derive(Clone, Default)]
pub struct RuleSource(Option<At>);

#[derive(Clone)]
enum At {
    /// The byte offset of the rule's table in the text, before the file is known.
    Offset(usize),
    /// `file:line`.
    Line(Arc<str>),
}

impl RuleSource {
    /// The source `file:line`.
    pub fn at(file: &str, line: usize) -> Self {
        Self(Some(At::Line(format!("{file}:{line}").into())))
    }

    /// `file:line`, when known.
    pub fn as_str(&self) -> Option<&str> {
        self.get().map(|s| &**s)
    }

    /// `file:line`, shared (what a decision records).
    pub fn get(&self) -> Option<&Arc<str>> {
        match &self.0 {
            Some(At::Line(s)) => Some(s),
            _ => None,
        }
    }

    /// Turns the offsets the parse of `text` left into `file:line`; without a file, forgets
    /// them (text of no file has no source).
    pub fn resolve<'a>(
        sources: impl IntoIterator<Item = &'a mut RuleSource>,
        file: Option<&str>,
        text: &str,
    ) {
        let mut newlines: Option<Vec<usize>> = None;
        for s in sources {
            let Some(At::Offset(offset)) = s.0 else {
                continue;
            };
            s.0 = file.map(|file| {
                let newlines = newlines.get_or_insert_with(|| {
                    text.bytes()
                        .enumerate()
                        .filter(|(_, b)| *b == b'\n')
                        .map(|(i, _)| i)
                        .collect()
                });
                let line = newlines.partition_point(|&n| n < offset) + 1;
                At::Line(format!("{file}:{line}").into())
            });
        }
    }
}

impl PartialEq for RuleSource {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for RuleSource {}

impl fmt::Debug for RuleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_str() {
            Some(s) => write!(f, "{s}"),
            None => f.write_str("-"),
        }
    }
}

/// A rule that knows where it is written.
pub(crate) trait Located {
    fn source_mut(&mut self) -> &mut RuleSource;
}

macro_rules! located {
    ($($rule:ty),*) => {$(
        impl Located for $rule {
            fn source_mut(&mut self) -> &mut RuleSource {
                &mut self.source
            }
        }
    )*};
}

located!(
    super::TerritoryConfig,
    super::SprawlConfig,
    super::ReviewConfig,
    super::HooksConfig
);

// toml hands a value's span to a struct of this name with these three fields (serde_spanned's
// protocol, what `toml::Spanned` reads); any other deserializer hands the table's own keys.
const SPANNED: &str = "$__serde_spanned_private_Spanned";
const START: &str = "$__serde_spanned_private_start";
const END: &str = "$__serde_spanned_private_end";
const VALUE: &str = "$__serde_spanned_private_value";

/// A rule read with the offset of its table, when the deserializer knows it.
struct Spanned<T>(T);

impl<'de, T: Located + DeserializeOwned> Deserialize<'de> for Spanned<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_struct(SPANNED, &[START, END, VALUE], SpannedVisitor(PhantomData))
    }
}

struct SpannedVisitor<T>(PhantomData<T>);

impl<'de, T: Located + DeserializeOwned> Visitor<'de> for SpannedVisitor<T> {
    type Value = Spanned<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        let first: Option<String> = map.next_key()?;
        if first.as_deref() == Some(START) {
            let start: usize = map.next_value()?;
            let mut value = None;
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    VALUE => value = Some(map.next_value::<T>()?),
                    _ => {
                        map.next_value::<de::IgnoredAny>()?;
                    }
                }
            }
            let mut value = value.ok_or_else(|| de::Error::missing_field(VALUE))?;
            *value.source_mut() = RuleSource(Some(At::Offset(start)));
            return Ok(Spanned(value));
        }
        // Another format (JSON, a value tree): the table's own keys, read as the rule.
        let mut table = serde_json::Map::new();
        if let Some(key) = first {
            table.insert(key, map.next_value()?);
        }
        while let Some(key) = map.next_key::<String>()? {
            table.insert(key, map.next_value()?);
        }
        T::deserialize(serde_json::Value::Object(table))
            .map(Spanned)
            .map_err(de::Error::custom)
    }
}

/// `deserialize_with` for a list of rules (`[[territory]]`, `[[gates.review]]`).
pub(crate) fn located_list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Located + DeserializeOwned,
{
    Ok(Vec::<Spanned<T>>::deserialize(d)?
        .into_iter()
        .map(|s| s.0)
        .collect())
}

/// `deserialize_with` for one rule's table (`[gates.sprawl]`).
pub(crate) fn located_one<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Located + DeserializeOwned,
{
    Spanned::<T>::deserialize(d).map(|s| s.0)
}

/// `deserialize_with` for a whole file's `[[territory]]` list, for configs that embed
/// [`TerritoryConfig`](super::TerritoryConfig)s field by field (the `loopward` crate's
/// `Config`); resolve the sources with [`RuleSource::resolve`].
pub fn located_territories<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<super::TerritoryConfig>, D::Error> {
    located_list(d)
}

/// `deserialize_with` for a whole file's `[hooks]`, for configs that embed
/// [`HooksConfig`](super::HooksConfig) field by field (the `loopward` crate's `Config`);
/// resolve its source with [`RuleSource::resolve`].
pub fn located_hooks<'de, D: Deserializer<'de>>(d: D) -> Result<super::HooksConfig, D::Error> {
    located_one(d)
}

#[cfg(test)]
mod tests {
    use super::super::PolicyConfig;

    const TEXT: &str = "[gates.sprawl]\nthreshold = 4\n\n[[territory]]\npaths = [\"a/**\"]\nowner = \"x\"\n\n[[gates.review]]\nfrom = \"x\"\nvia = \"y\"\n\n[[territory]] # second\nowner = \"y\"\npaths = [\"b/**\"]\n";

    #[test]
    fn each_rule_is_located_at_its_table_header() {
        let cfg = PolicyConfig::from_toml_in("team.toml", TEXT).unwrap();
        let at: Vec<_> = cfg.territory.iter().map(|t| t.source.as_str()).collect();
        assert_eq!(at, [Some("team.toml:4"), Some("team.toml:12")]);
        assert_eq!(cfg.gates.review[0].source.as_str(), Some("team.toml:8"));
        assert_eq!(cfg.gates.sprawl.source.as_str(), Some("team.toml:1"));
    }

    #[test]
    fn a_config_read_from_json_still_parses_without_sources() {
        let cfg = PolicyConfig::from_toml_in("team.toml", TEXT).unwrap();
        let back: PolicyConfig =
            serde_json::from_value(serde_json::to_value(&cfg).unwrap()).unwrap();
        assert_eq!(back, cfg);
        assert_eq!(back.territory[1].paths, ["b/**"]);
        assert_eq!(back.territory[1].source.as_str(), None);
        // An unknown key is still refused.
        let bad = serde_json::json!({"territory": [{"paths": ["a"], "owner": "x", "ownr": "y"}]});
        assert!(serde_json::from_value::<PolicyConfig>(bad).is_err());
    }
}
