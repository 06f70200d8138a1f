//! Setting a confinement up with Landlock.
//!
//! Landlock restricts the calling *thread* and everything it starts afterwards. The runner is a
//! multi-threaded library that must not restrict itself, and `pre_exec` would need `unsafe`; so
//! each confined command is started from a fresh thread that restricts itself, spawns the
//! command (which inherits the restriction, as do all its descendants), and ends.

use super::{Confinement, SandboxError};
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, NetPort,
    PathBeneath, RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    ABI,
};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The Landlock ABI whose rights loopward asks for (the kernel may offer fewer; ABI 3, with
/// truncation, is required).
const WANTED: ABI = ABI::V7;

/// What the running kernel offers, from [`probe`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSupport {
    /// The Landlock ABI in use (`None`: Landlock unavailable).
    pub abi: Option<u32>,
    /// Why shell cannot be sandboxed here, if it cannot.
    pub missing: Option<String>,
}

impl KernelSupport {
    /// Whether commands can be sandboxed.
    pub fn ok(&self) -> bool {
        self.missing.is_none()
    }
}

/// What [`probe`] found, asked once per process (the kernel does not change while it runs).
pub fn kernel_support() -> &'static KernelSupport {
    static SUPPORT: std::sync::OnceLock<KernelSupport> = std::sync::OnceLock::new();
    SUPPORT.get_or_init(probe)
}

/// Checks whether this kernel can sandbox commands (restricts a throwaway thread).
pub fn probe() -> KernelSupport {
    let r = std::thread::spawn(|| restrict(None, None)).join();
    match r {
        Ok(Ok(status)) => KernelSupport {
            abi: abi_of(&status),
            missing: None,
        },
        Ok(Err(SandboxError::Unsupported { why })) => KernelSupport {
            abi: None,
            missing: Some(why),
        },
        Ok(Err(e)) => KernelSupport {
            abi: None,
            missing: Some(e.to_string()),
        },
        Err(_) => KernelSupport {
            abi: None,
            missing: Some("the probe thread panicked".into()),
        },
    }
}

fn abi_of(status: &RestrictionStatus) -> Option<u32> {
    match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => Some(effective_abi as u32),
        _ => None,
    }
}

/// Starts `cmd` inside `conf`. The command and every process it starts can write only what
/// `conf` grants. With an [isolated](super::Network::Isolated) network it has no route out at
/// all (the proxy's listener is dropped): use [`spawn_contained`] to serve it.
pub async fn spawn_confined(
    cmd: tokio::process::Command,
    conf: &Confinement,
) -> Result<tokio::process::Child, SandboxError> {
    spawn_contained(cmd, conf).await.map(|s| s.child)
}

/// A command started by [`spawn_contained`].
#[derive(Debug)]
pub struct Started {
    /// The command: PID 2 of its PID namespace (where one could be made), beside the
    /// sandbox's init, so when it ends (killed or not) every process it left ends too; its PID
    /// is the one to record, to signal and to end.
    pub child: tokio::process::Child,
    /// Where its egress proxy listens, inside its network namespace (`127.0.0.1`); serve it
    /// (see [`crate::egress`]) for as long as the command may connect out. `None`: the host's
    /// network, or the outer sandbox's (whose supervisor serves the way out).
    pub proxy: Option<std::net::TcpListener>,
}

/// The variables that name the egress proxy to a contained command.
const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// Starts `cmd` inside `conf`, in a network namespace of its own when `conf`'s network is
/// [isolated](super::Network::Isolated), with `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` set
/// to the returned listener's address there, and in PID and mount namespaces of its own: the
/// sandbox's [init](super::serve_init_if_asked) is PID 1 there, reaps every orphan and has
/// mounted a `/proc` that shows the sandbox's processes only; the command is PID 2, and when
/// it ends the kernel ends everything it left behind. Started inside
/// another such sandbox (where no namespace can be made), the command stays in the outer
/// namespaces and its proxy (`proxy` is then `None`).
pub async fn spawn_contained(
    mut cmd: tokio::process::Command,
    conf: &Confinement,
) -> Result<Started, SandboxError> {
    let isolated = *conf.network() == super::Network::Isolated;
    let proxy_env = conf.proxy_env().to_vec();
    let outer = conf.reach().outer_proxy_url().map(str::to_string);
    let tcp_line = isolated && !conf.reach().tcp_open();
    let handle = tokio::runtime::Handle::try_current()
        .map_err(|e| SandboxError::Spawn(format!("no tokio runtime: {e}")))?;
    // Opened here, beneath the root without following any link, so what is granted is what
    // was planned even if a link was swapped in since.
    let fds = open_grants(conf)?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("loopward-sandbox".into())
        .spawn(move || {
            let r = (|| {
                let (proxy, url) = if isolated {
                    let (l, url) = match super::net::isolate()? {
                        super::net::Netns::Own(l) => {
                            let addr = l
                                .local_addr()
                                .map_err(|e| SandboxError::Spawn(e.to_string()))?;
                            (Some(l), Some(format!("http://{addr}")))
                        }
                        // Inside another sandbox: its proxy, as this process was told of it.
                        super::net::Netns::Inherited => (None, outer.clone()),
                    };
                    for var in PROXY_VARS {
                        match &url {
                            Some(url) => cmd.env(var, url),
                            None => cmd.env_remove(var),
                        };
                    }
                    for (k, template) in &proxy_env {
                        if let Some(url) = &url {
                            cmd.env(k, template.replace("{proxy}", url));
                        }
                    }
                    (l, url)
                } else {
                    (None, None)
                };
                let _rt = handle.enter();
                // PID 1 first, unrestricted: it mounts the namespace's /proc (Landlock forbids
                // mounts), then the command as PID 2.
                let mut fds = fds;
                let init = match super::net::own_pids(isolated)? {
                    true => {
                        let ready = super::init::start()?;
                        fds.fresh_proc()?;
                        Some(ready)
                    }
                    false => None,
                };
                // Landlock's TCP line: connect only to the proxy's port (none when there is
                // no proxy to reach).
                let tcp = tcp_line.then(|| proxy_port(&proxy, &url));
                restrict(Some(fds), tcp)?;
                super::privilege::drop_introspection()?;
                let child = cmd.spawn().map_err(|e| {
                    SandboxError::Spawn(format!("could not start the command: {e}"))
                })?;
                if let Some(init) = init {
                    init.go(&handle);
                }
                Ok(Started { child, proxy })
            })();
            let _ = tx.send(r);
        })
        .map_err(|e| SandboxError::Spawn(format!("could not start the sandbox thread: {e}")))?;
    rx.await
        .map_err(|_| SandboxError::Spawn("the sandbox thread ended without an answer".into()))?
}

/// Restricts the calling thread (and every process it starts from now on) to `conf`. For a
/// single-threaded program about to `exec` a command (`loopward sandbox exec`); a library that
/// keeps running uses [`spawn_confined`].
pub fn confine_current_thread(conf: &Confinement) -> Result<(), SandboxError> {
    restrict(Some(open_grants(conf)?), None)?;
    super::privilege::drop_introspection()
}

/// How much an open grant covers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Span {
    /// A folder and everything below it.
    Tree,
    /// One file.
    File,
    /// A folder's names only (its entries are granted one by one, or not at all).
    List,
}

/// An open grant: the file or folder, and how much of it.
struct Open {
    fd: OwnedFd,
    span: Span,
}

/// Where a confined thread may read.
enum Reads {
    /// Everywhere.
    All,
    /// Folder listing everywhere; read and execute only beneath these (every entry of every
    /// folder on the way to an unreadable one, except that one).
    AllBut(Vec<Open>),
    /// Only beneath these (the allow-list: the workspace, the system folders, `[read] allow`).
    Only(Vec<Open>),
}

/// What a confined thread is granted: writes (with reads) and where it may read.
struct Grants {
    write: Vec<Open>,
    read: Reads,
    /// Whether `/proc` is readable whole: the sandbox's own procfs, mounted by its init after
    /// these were opened, is granted too (Landlock rules follow inodes, not paths).
    proc: bool,
}

impl Grants {
    /// Grants reading the `/proc` mounted since (the sandbox's own), where `/proc` was
    /// readable.
    fn fresh_proc(&mut self) -> Result<(), SandboxError> {
        let (Reads::AllBut(list) | Reads::Only(list)) = &mut self.read else {
            return Ok(()); // reads everywhere: the rule on `/` covers it
        };
        if !self.proc {
            return Ok(());
        }
        let fd = rustix::fs::open(
            "/proc",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| SandboxError::Io {
            path: "/proc".into(),
            source: e.into(),
        })?;
        list.push(Open {
            fd,
            span: Span::Tree,
        });
        Ok(())
    }
}

fn open_grants(conf: &Confinement) -> Result<Grants, SandboxError> {
    let proc = Path::new("/proc");
    let hides_proc = |hidden: &[PathBuf]| {
        hidden
            .iter()
            .any(|h| real_path(h).starts_with(proc) || proc.starts_with(real_path(h)))
    };
    let mut proc_whole = false;
    let read = match conf.reach().readable() {
        None if conf.unreadable().is_empty() => Reads::All,
        None => {
            proc_whole = !hides_proc(conf.unreadable());
            Reads::AllBut(read_cover(Path::new("/"), conf.unreadable())?)
        }
        Some(list) => {
            let hidden: Vec<PathBuf> = conf
                .unreadable()
                .iter()
                .cloned()
                .chain(super::reach::SYSTEM_UNREADABLE.iter().map(PathBuf::from))
                .collect();
            let roots: Vec<PathBuf> = std::iter::once(conf.root().to_path_buf())
                .chain(list.iter().cloned())
                .collect();
            proc_whole = roots.iter().any(|r| real_path(r) == proc) && !hides_proc(&hidden);
            Reads::Only(read_allowed(&roots, &hidden)?)
        }
    };
    Ok(Grants {
        write: open_writes(conf)?,
        read,
        proc: proc_whole,
    })
}

/// Read grants for `roots` but nothing at or below `hidden`: a root with a hidden folder below
/// it is opened up entry by entry (see [`read_cover`]); a root inside a hidden one is left out.
fn read_allowed(roots: &[PathBuf], hidden: &[PathBuf]) -> Result<Vec<Open>, SandboxError> {
    let hidden: Vec<PathBuf> = hidden.iter().map(|h| real_path(h)).collect();
    let mut out = Vec::new();
    for root in roots {
        let real = real_path(root);
        if hidden.iter().any(|h| real.starts_with(h)) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(&real) else {
            continue; // not on this machine
        };
        let span = if !meta.is_dir() {
            Span::File
        } else if hidden.iter().any(|h| h.starts_with(&real)) {
            cover(&real, &hidden, &mut out)?;
            Span::List
        } else {
            Span::Tree
        };
        match rustix::fs::open(&real, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => out.push(Open { fd, span }),
            Err(rustix::io::Errno::NOENT) => {}
            Err(e) => {
                return Err(SandboxError::Io {
                    path: real,
                    source: e.into(),
                })
            }
        }
    }
    Ok(out)
}

/// Read grants for everything below `top` but `hidden`. Landlock rules only add rights, and a
/// rule on a folder covers all below it; so no folder that holds a hidden one can be granted.
/// Instead each folder on the way from `top` to a hidden folder is opened up entry by entry:
/// every entry is granted whole except the next folder on the way (descended into) and the
/// hidden folder itself (left out). Links are not granted: what they point to is judged where
/// it lands. An entry made later directly in such a folder is unreadable too.
fn read_cover(top: &Path, hidden: &[PathBuf]) -> Result<Vec<Open>, SandboxError> {
    let hidden: Vec<PathBuf> = hidden.iter().map(|h| real_path(h)).collect();
    let mut out = Vec::new();
    cover(top, &hidden, &mut out)?;
    Ok(out)
}

fn cover(dir: &Path, hidden: &[PathBuf], out: &mut Vec<Open>) -> Result<(), SandboxError> {
    let io = |p: &Path, e: std::io::Error| SandboxError::Io {
        path: p.to_path_buf(),
        source: e,
    };
    for e in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let e = e.map_err(|e| io(dir, e))?;
        let path = e.path();
        let ft = e.file_type().map_err(|e| io(&path, e))?;
        if hidden.contains(&path) || ft.is_symlink() {
            continue;
        }
        if hidden.iter().any(|h| h.starts_with(&path)) {
            if ft.is_dir() {
                cover(&path, hidden, out)?;
            }
            continue;
        }
        match rustix::fs::open(
            &path,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => out.push(Open {
                fd,
                span: if ft.is_dir() { Span::Tree } else { Span::File },
            }),
            // Gone since it was listed: nothing to grant.
            Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(io(&path, e.into())),
        }
    }
    Ok(())
}

/// `path` with its longest existing prefix resolved (links, `..`), the rest appended: where the
/// folder is, or will be once created.
fn real_path(path: &Path) -> PathBuf {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut rest = Vec::new();
    let mut at = path.as_path();
    loop {
        if let Ok(real) = at.canonicalize() {
            return rest.iter().rev().fold(real, |p: PathBuf, c| p.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return path,
        }
    }
}

fn open_writes(conf: &Confinement) -> Result<Vec<Open>, SandboxError> {
    let io = |p: &Path, e: std::io::Error| SandboxError::Io {
        path: p.to_path_buf(),
        source: e,
    };
    let path_flags = OFlags::PATH | OFlags::CLOEXEC;
    let root = rustix::fs::open(conf.root(), path_flags | OFlags::DIRECTORY, Mode::empty())
        .map_err(|e| io(conf.root(), e.into()))?;
    let mut out = Vec::new();
    for g in conf.grants() {
        let fd = rustix::fs::openat2(
            &root,
            g.rel.as_str(),
            path_flags | OFlags::NOFOLLOW,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        );
        match fd {
            Ok(fd) => out.push(Open {
                fd,
                span: if g.tree { Span::Tree } else { Span::File },
            }),
            // Gone since the plan (or turned into a link): nothing to grant.
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::LOOP) => {}
            Err(e) => return Err(io(&conf.root().join(&g.rel), e.into())),
        }
    }
    for p in conf.outside() {
        match rustix::fs::open(p, path_flags, Mode::empty()) {
            Ok(fd) => {
                let tree = std::fs::metadata(p).is_ok_and(|m| m.is_dir());
                let span = if tree { Span::Tree } else { Span::File };
                out.push(Open { fd, span });
            }
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NXIO) => {}
            Err(e) => return Err(io(p, e.into())),
        }
    }
    Ok(out)
}

/// The port a command's TCP connections are held to: its proxy's (its own, or the outer
/// sandbox's named in `url`); 0, no port at all, when there is none.
fn proxy_port(own: &Option<std::net::TcpListener>, url: &Option<String>) -> u16 {
    let own = own
        .as_ref()
        .and_then(|l| l.local_addr().ok())
        .map(|a| a.port());
    let outer = || {
        let url = url.as_deref()?;
        let authority = url.split("://").nth(1)?.split('/').next()?;
        authority.rsplit(':').next()?.parse().ok()
    };
    own.or_else(outer).unwrap_or(0)
}

/// Restricts the calling thread: read and execute everywhere (or everywhere but the unreadable
/// folders), write only `grants` (`None`: a probe with no grants); with `tcp`, TCP connections
/// only to that port, where the kernel has Landlock's TCP rules (ABI 4; elsewhere the network
/// namespace alone holds).
fn restrict(grants: Option<Grants>, tcp: Option<u16>) -> Result<RestrictionStatus, SandboxError> {
    let unsupported = |e: &dyn std::fmt::Display| SandboxError::Unsupported { why: e.to_string() };
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V3))
        .map_err(|e| unsupported(&e))?
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(WANTED))
        .map_err(|e| unsupported(&e))?
        // The command may not signal loopward or anything else outside its sandbox.
        .scope(Scope::Signal)
        .map_err(|e| unsupported(&e))?;
    let ruleset = match tcp {
        Some(_) => ruleset
            .handle_access(AccessNet::ConnectTcp)
            .map_err(|e| unsupported(&e))?,
        None => ruleset,
    };
    let mut ruleset = ruleset.create().map_err(|e| unsupported(&e))?;
    if let Some(port) = tcp.filter(|p| *p != 0) {
        ruleset = ruleset
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(|e| unsupported(&e))?;
    }
    let grants = grants.unwrap_or(Grants {
        write: vec![],
        read: Reads::All,
        proc: false,
    });
    let (root_reads, reads) = match grants.read {
        Reads::All => (Some(AccessFs::from_read(WANTED)), vec![]),
        Reads::AllBut(r) => (Some(BitFlags::from(AccessFs::ReadDir)), r),
        Reads::Only(r) => (None, r),
    };
    if let Some(access) = root_reads {
        // Opened only when granted: an allow-list sandbox started inside another (a command
        // wrapped inside `loopward contain`) may not be able to open `/` at all.
        let root =
            rustix::fs::open("/", OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).map_err(|e| {
                SandboxError::Io {
                    path: "/".into(),
                    source: e.into(),
                }
            })?;
        ruleset = ruleset
            .add_rule(PathBeneath::new(root, access))
            .map_err(|e| unsupported(&e))?;
    }
    for g in reads {
        let access = match g.span {
            Span::Tree => AccessFs::from_read(WANTED),
            Span::File => AccessFs::Execute | AccessFs::ReadFile,
            Span::List => BitFlags::from(AccessFs::ReadDir),
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(g.fd, access))
            .map_err(|e| unsupported(&e))?;
    }
    for g in grants.write {
        let access = match g.span {
            Span::Tree | Span::List => AccessFs::from_all(WANTED),
            Span::File => AccessFs::from_file(WANTED),
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(g.fd, access))
            .map_err(|e| unsupported(&e))?;
    }
    let status = ruleset.restrict_self().map_err(|e| unsupported(&e))?;
    if status.ruleset == RulesetStatus::NotEnforced || !status.no_new_privs {
        return Err(SandboxError::Unsupported {
            why: format!(
                "Landlock is not enforced on this kernel ({:?})",
                status.landlock
            ),
        });
    }
    Ok(status)
}
