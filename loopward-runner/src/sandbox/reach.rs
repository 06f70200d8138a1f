//! What a sandboxed command reaches besides its writes: the folders it may read and the
//! environment it starts with. Both are allow-lists.

use super::Network;
use loopward_core::AgentId;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The system and toolchain folders every sandboxed command may read (those that exist):
/// programs, libraries, their configuration, devices and the kernel's views. Nothing of a
/// user's home is here; `[read] allow` adds what a project needs (a toolchain under `~`).
pub const SYSTEM_READABLE: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/dev",
    "/proc",
    "/sys",
    "/nix/store",
];

/// Files under [`SYSTEM_READABLE`] no command may read even so: the host's password hashes and
/// its SSH host keys.
pub const SYSTEM_UNREADABLE: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh",
];

/// The search path of a command whose caller passed none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The variables a sandboxed command keeps from its caller's environment by default (when
/// they are set): how to find programs and how to talk to a terminal. Everything else — API
/// keys, tokens, cloud credentials — is left out unless the config names it (`[env] pass`).
pub const DEFAULT_ENV: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TERM",
    "COLORTERM",
    "TZ",
    "USER",
    "LOGNAME",
    "NO_COLOR",
];

/// What a sandboxed command may read and the environment it starts with.
///
/// The default reads the workspace and [`SYSTEM_READABLE`], and starts with only
/// `PATH=`[`DEFAULT_PATH`]; a caller that knows its process environment passes the allowed
/// variables with [`Reach::env`] (the facade passes [`DEFAULT_ENV`] and `[env] pass`).
///
/// ```
/// use loopward_runner::sandbox::Reach;
/// let reach = Reach::default().read("/opt/toolchain").env([("LANG", "C.UTF-8")]);
/// assert!(reach.readable().unwrap().iter().any(|p| p.ends_with("toolchain")));
/// assert_eq!(reach.environment(), [("LANG".to_string(), "C.UTF-8".to_string())]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reach {
    /// `None`: everything but the unreadable folders (the old, open shape).
    readable: Option<Vec<PathBuf>>,
    env: Vec<(String, String)>,
    network: Network,
    /// Per agent, the hosts its commands may reach through the egress proxy.
    nets: BTreeMap<AgentId, Vec<String>>,
    /// The proxy this process was told of (its `HTTP_PROXY`), for a sandbox made inside
    /// another one, whose network it keeps.
    outer_proxy: Option<String>,
    /// Whether commands may connect to any TCP port (no Landlock TCP line).
    local_tcp: bool,
}

impl Default for Reach {
    fn default() -> Self {
        Self {
            readable: Some(SYSTEM_READABLE.iter().map(PathBuf::from).collect()),
            env: vec![("PATH".into(), DEFAULT_PATH.into())],
            network: Network::default(),
            nets: BTreeMap::new(),
            outer_proxy: None,
            local_tcp: false,
        }
    }
}

impl Reach {
    /// Reads everywhere but the unreadable folders: an explicit opt-out of the read allow-list
    /// (`[read] open = true`).
    pub fn open_reads(mut self) -> Self {
        self.readable = None;
        self
    }

    /// Also lets commands read `path` (a file or a folder and all below it).
    pub fn read(mut self, path: impl Into<PathBuf>) -> Self {
        if let Some(r) = &mut self.readable {
            r.push(path.into());
        }
        self
    }

    /// The environment commands start with (replacing the default `PATH`).
    pub fn env<K: Into<String>, V: Into<String>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.env = vars
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        self
    }

    /// How commands reach the network (default [`Network::Isolated`]: only through the
    /// egress proxy).
    pub fn network(mut self, network: Network) -> Self {
        self.network = network;
        self
    }

    /// Lets `agent`'s commands reach `hosts` through the egress proxy (`[[agent]] net`).
    pub fn net(mut self, agent: AgentId, hosts: Vec<String>) -> Self {
        self.nets.insert(agent, hosts);
        self
    }

    /// The proxy the calling process itself was told of (its `HTTP_PROXY`). Where no network
    /// namespace can be made because this process already runs in one with loopback only (a
    /// wrapped command inside `loopward contain`), a command keeps that namespace and is
    /// pointed at this proxy, the outer supervisor's; elsewhere it is not used.
    pub fn outer_proxy(mut self, url: Option<String>) -> Self {
        self.outer_proxy = url;
        self
    }

    /// Lets commands connect to any TCP port in their namespace (`[net] local_tcp = true`).
    /// Default: with an isolated network and a kernel with Landlock's TCP rules (ABI 4), they
    /// connect only to their egress proxy's port.
    pub fn local_tcp(mut self, open: bool) -> Self {
        self.local_tcp = open;
        self
    }

    /// Whether [`local_tcp`](Self::local_tcp) was given.
    pub fn tcp_open(&self) -> bool {
        self.local_tcp
    }

    /// The proxy of [`outer_proxy`](Self::outer_proxy).
    pub fn outer_proxy_url(&self) -> Option<&str> {
        self.outer_proxy.as_deref()
    }

    /// How commands reach the network.
    pub fn network_mode(&self) -> &Network {
        &self.network
    }

    /// The hosts `agent`'s commands may reach (none when its config lists none).
    pub fn net_of(&self, agent: &AgentId) -> &[String] {
        self.nets.get(agent).map_or(&[], Vec::as_slice)
    }

    /// The readable folders besides the workspace (`None`: everything but the unreadable).
    pub fn readable(&self) -> Option<&[PathBuf]> {
        self.readable.as_deref()
    }

    /// The environment commands start with.
    pub fn environment(&self) -> &[(String, String)] {
        &self.env
    }
}
