//! The machine a run happened on, and how busy it was.

use serde::Serialize;
use std::path::Path;

/// Where and under what load the benchmarks ran.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// `model name` from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Cores this process may use.
    pub cores: usize,
    /// `/proc/loadavg`'s 1-minute figure when the run started.
    pub load_at_start: Option<f64>,
    /// The same when it ended.
    pub load_at_end: Option<f64>,
}

impl Machine {
    /// Reads the CPU model, core count and current load.
    pub fn probe() -> Self {
        Self {
            cpu_model: cpu_model().unwrap_or_else(|| "unknown".into()),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            load_at_start: load_average(),
            load_at_end: None,
        }
    }
}

fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// The 1-minute load average, from `/proc/loadavg`.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`).
pub fn proc_status_bytes(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The `write` system calls this process has made so far (`syscw` in `/proc/self/io`).
pub fn write_syscalls() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("syscw:"))?
        .trim()
        .parse()
        .ok()
}

/// The file system type `path` lives on (longest mount point in `/proc/mounts` that holds it).
pub fn fs_type(path: &Path) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    let path = path.canonicalize().ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_dev, at, kind) = (f.next()?, f.next()?, f.next()?);
            path.starts_with(at).then(|| (at.len(), kind.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, kind)| kind)
}
