//! The network of a sandboxed command: a namespace of its own with loopback only, and the
//! egress proxy's port in it.

use super::SandboxError;
use nix::sched::CloneFlags;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketType};

/// How a sandboxed command reaches the network.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Network {
    /// A network namespace of its own: loopback only, no route out. The egress proxy listens
    /// on its `127.0.0.1` (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` name it) and is served from
    /// outside, by the supervisor. The default.
    #[default]
    Isolated,
    /// The host's network as the caller has it: an explicit opt-out (`[net] isolate = false`).
    Host,
}

/// The network a sandbox thread got from [`isolate`].
pub(super) enum Netns {
    /// A namespace of its own, with the proxy's listener in it.
    Own(std::net::TcpListener),
    /// The one this process is already in, which has loopback only: a sandbox started inside
    /// another (a wrapped `Bash` inside `loopward contain`). The outer supervisor's proxy is
    /// the way out, and records what goes.
    Inherited,
}

/// Moves the calling thread into a new network namespace, brings its loopback up and listens
/// there for the proxy. Everything the thread starts from now on is in that namespace; the
/// listener is served from any thread (a socket stays in the namespace it was made in). Where
/// no namespace can be made but this process's own already has loopback only, the thread stays
/// in it ([`Netns::Inherited`]); anywhere else that is an error (fail closed).
pub(super) fn isolate() -> Result<Netns, SandboxError> {
    let unsupported = |why: String| SandboxError::Network { why };
    if let Err(e) = nix::sched::unshare(CloneFlags::CLONE_NEWNET) {
        if loopback_only() {
            return Ok(Netns::Inherited);
        }
        return Err(unsupported(format!(
            "cannot give the command a network namespace of its own ({e})"
        )));
    }
    loopback_up().map_err(|e| {
        unsupported(format!(
            "cannot bring up loopback in the command's network namespace: {e}"
        ))
    })?;
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| unsupported(format!("cannot listen for the egress proxy: {e}")))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| unsupported(format!("cannot listen for the egress proxy: {e}")))?;
    Ok(Netns::Own(listener))
}

/// Whether this process's network namespace has no interface but loopback (as the kernel
/// lists them in `/proc/self/net/dev`; unreadable counts as no).
fn loopback_only() -> bool {
    std::fs::read_to_string("/proc/self/net/dev").is_ok_and(|t| {
        let mut ifaces = t.lines().skip(2).filter_map(|l| l.split(':').next());
        ifaces.all(|name| name.trim() == "lo")
    })
}

/// Gives the calling thread's next children a PID namespace of their own; returns whether it
/// did. Its first process is the sandbox's [init](super::init) (PID 1), the command the next:
/// when the command ends the init exits and the kernel ends everything left in the namespace
/// (background processes, `nohup`, `setsid`), and no process inside can name one outside by
/// its PID. Where none can be made but this process is already in a namespace below the host's
/// (a sandbox inside another), the command shares that one (and its init). Otherwise an error
/// when `required` (an isolated network: the same privilege makes both), else nothing.
pub(super) fn own_pids(required: bool) -> Result<bool, SandboxError> {
    match nix::sched::unshare(CloneFlags::CLONE_NEWPID) {
        Ok(()) => Ok(true),
        Err(_) if nested_pids() || !required => Ok(false),
        Err(e) => Err(SandboxError::Network {
            why: format!("cannot give the command a process namespace of its own ({e})"),
        }),
    }
}

/// Whether this process is in a PID namespace below another: `NSpid` lists more than one
/// (where `/proc` is an outer namespace's), or PID 1 is a sandbox's init (a sandbox's own
/// `/proc` shows nothing above it).
fn nested_pids() -> bool {
    super::init::is_sandbox_init(1)
        || std::fs::read_to_string("/proc/self/status").is_ok_and(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .is_some_and(|ids| ids.split_whitespace().count() > 1)
        })
}

/// `RTM_NEWLINK` on interface 1 (`lo` in a fresh namespace) with `IFF_UP`, over route netlink;
/// waits for the kernel's acknowledgement.
fn loopback_up() -> std::io::Result<()> {
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST_ACK: u16 = 1 | 4;
    const NLMSG_ERROR: u16 = 2;
    const IFF_UP: u32 = 1;
    let fd = rustix::net::socket(AddressFamily::NETLINK, SocketType::RAW, None)?;
    let mut msg = Vec::with_capacity(32);
    msg.extend_from_slice(&32u32.to_ne_bytes()); // nlmsg_len
    msg.extend_from_slice(&RTM_NEWLINK.to_ne_bytes());
    msg.extend_from_slice(&NLM_F_REQUEST_ACK.to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    msg.extend_from_slice(&[0, 0]); // ifi_family AF_UNSPEC, pad
    msg.extend_from_slice(&0u16.to_ne_bytes()); // ifi_type
    msg.extend_from_slice(&1i32.to_ne_bytes()); // ifi_index: lo
    msg.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_flags
    msg.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_change
    rustix::net::send(&fd, &msg, SendFlags::empty())?;
    let mut buf = [0u8; 256];
    let (n, _) = rustix::net::recv(&fd, &mut buf, RecvFlags::empty())?;
    let kind = buf.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let code = buf
        .get(16..20)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match (n >= 20, kind, code) {
        (true, Some(NLMSG_ERROR), Some(0)) => Ok(()),
        (true, Some(NLMSG_ERROR), Some(errno)) => Err(std::io::Error::from_raw_os_error(-errno)),
        _ => Err(std::io::Error::other("unexpected netlink answer")),
    }
}
