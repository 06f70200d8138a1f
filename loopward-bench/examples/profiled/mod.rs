//! What the profiling loops share: how long to run, from their one argument.

/// The seconds to run, from the first argument (default 3); at least 1.
pub(crate) fn seconds() -> anyhow::Result<u64> {
    let secs: u64 = std::env::args().nth(1).map_or(Ok(3), |s| s.parse())?;
    anyhow::ensure!(
        secs > 0,
        "run for at least 1 second (the argument is seconds)"
    );
    Ok(secs)
}
