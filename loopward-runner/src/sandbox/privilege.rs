//! What a sandboxed command may not do to other processes, even as root: the capabilities it
//! never holds, and the supervisor made non-dumpable.

use super::SandboxError;

/// Makes this process's memory and environment (`/proc/<pid>/environ`, `mem`, `maps`)
/// unreadable to the commands it sandboxes: they run without `CAP_SYS_PTRACE`, and a process
/// that is not dumpable is only inspected with it. Call it once, early, in a program that holds
/// secrets in its environment or memory (an API key, the ledger key) and runs sandboxed
/// commands; it also keeps core dumps of that program from being written.
pub fn hide_this_process() -> Result<(), SandboxError> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable).map_err(
        |e| SandboxError::Unsupported {
            why: format!("cannot make this process non-dumpable: {e}"),
        },
    )
}

/// The capabilities a sandboxed command never holds, even as root: inspecting other processes
/// (`SYS_PTRACE`), leaving its namespaces or mounting (`SYS_ADMIN`), reconfiguring the network
/// (`NET_ADMIN`), opening files by handle past the path rules (`DAC_READ_SEARCH`), loading
/// kernel code (`SYS_MODULE`, `BPF`, `PERFMON`) and raw device access (`SYS_RAWIO`).
fn dropped() -> rustix::thread::CapabilitySet {
    use rustix::thread::CapabilitySet as C;
    C::SYS_PTRACE
        | C::SYS_ADMIN
        | C::NET_ADMIN
        | C::DAC_READ_SEARCH
        | C::SYS_MODULE
        | C::BPF
        | C::PERFMON
        | C::SYS_RAWIO
}

/// Takes [`dropped`] from the calling thread and from everything it starts (the bounding set,
/// where this thread may change it): a sandboxed command run as root could otherwise read
/// another process's environment and memory, or step back into the host's network namespace.
pub(super) fn drop_introspection() -> Result<(), SandboxError> {
    use rustix::thread as t;
    let fail = |e: rustix::io::Errno| SandboxError::Unsupported {
        why: format!("cannot drop the command's privileged capabilities before starting it: {e}"),
    };
    for cap in dropped().iter() {
        if t::capability_is_in_bounding_set(cap).unwrap_or(false) {
            match t::remove_capability_from_bounding_set(cap) {
                // Without CAP_SETPCAP the bounding set stays, but then the thread is not root
                // and an `exec` gives it nothing from the bounding set.
                Ok(()) | Err(rustix::io::Errno::PERM) => {}
                // A capability this kernel does not know.
                Err(rustix::io::Errno::INVAL) => {}
                Err(e) => return Err(fail(e)),
            }
        }
    }
    let mut sets = t::capabilities(None).map_err(fail)?;
    let held = sets.effective | sets.permitted | sets.inheritable;
    if held.intersects(dropped()) {
        sets.effective.remove(dropped());
        sets.permitted.remove(dropped());
        sets.inheritable.remove(dropped());
        t::set_capabilities(None, sets).map_err(fail)?;
    }
    Ok(())
}
