//! `[ledger]` and `[state]`: how run ledgers are chained, where anchors are also witnessed, and
//! where loopward keeps what no agent may write (keys, approvals, overrides, hook sessions).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How ledgers are chained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChainKind {
    /// HMAC-SHA256 under the key in loopward's state directory (the default).
    #[default]
    #[serde(rename = "hmac-sha256")]
    HmacSha256,
    /// A keyless SHA-256 chain: an explicit opt-out. It proves only that nobody edited a
    /// ledger carelessly; `verify` and `report` refuse it unless given `--allow-keyless`.
    #[serde(rename = "sha256")]
    Sha256,
}

impl ChainKind {
    /// The name as written in the config and in ledgers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HmacSha256 => "hmac-sha256",
            Self::Sha256 => "sha256",
        }
    }
}

/// `[ledger]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerConfig {
    /// `hmac-sha256` (default) or `sha256` (keyless, an explicit opt-out).
    #[serde(default)]
    pub chain: ChainKind,
    /// An external witness: an append-only file outside the agents' reach (another disk, a
    /// mounted log) that receives a copy of every anchor; `loopward verify --witness` checks it.
    /// Relative to the config file's folder.
    #[serde(default)]
    pub witness: Option<PathBuf>,
}

/// `[state]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// loopward's state directory for this workspace, used as is (default:
    /// `$XDG_STATE_HOME/loopward/<workspace id>/`, else `~/.local/state/loopward/<id>/`).
    /// Relative to the config file's folder; it must lie outside the workspace.
    #[serde(default)]
    pub dir: Option<PathBuf>,
}
