//! `cargo xtask readme [--check]`: the demo page's output section (`docs/demo.md`, linked from
//! the README), regenerated from the real demo output (never pasted by hand).
//!
//! The section sits between `<!-- demo-output:start -->` and `<!-- demo-output:end -->`. The
//! demo runs with a fixed scratch folder whose path is then shown as `<scratch>`; everything
//! else in its output is deterministic (fixed run ids, a fixed clock), so `--check` (which
//! `cargo xtask ci` runs) fails exactly when the demo's behaviour changed and the page did not.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// The page that shows the demo's whole output.
pub(crate) const DEMO_PAGE: &str = "docs/demo.md";

/// The marker that opens the section.
pub(crate) const START: &str = "<!-- demo-output:start -->";
/// The marker that closes it.
pub(crate) const END: &str = "<!-- demo-output:end -->";

/// Runs the demo and returns its output, scratch path normalised.
pub(crate) fn demo_output(root: &Path) -> Result<String> {
    let scratch = tempfile_dir()?;
    let dir = scratch.join("scratch");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "run",
            "--quiet",
            "-p",
            "loopward-demo",
            "--bin",
            "loopward-demo",
            "--",
            "--dir",
        ])
        .arg(&dir)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .output()
        .context("could not run the demo")?;
    let _ = std::fs::remove_dir_all(&scratch);
    if !out.status.success() {
        bail!(
            "the demo failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8(out.stdout).context("the demo printed something not UTF-8")?;
    Ok(text.replace(&dir.display().to_string(), "<scratch>"))
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let base = std::env::temp_dir().join(format!("loopward-readme-{}", std::process::id()));
    std::fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
    Ok(base)
}

/// `readme` with the section replaced by `output`.
pub(crate) fn splice(readme: &str, output: &str) -> Result<String> {
    let (Some(a), Some(b)) = (readme.find(START), readme.find(END)) else {
        bail!("the demo page has no {START} … {END} section");
    };
    if b < a {
        bail!("the demo page has {END} before {START}");
    }
    let body = format!(
        "{START}\n```text\n$ cargo run -p loopward-demo\n{}```\n",
        output.trim_end().to_string() + "\n"
    );
    Ok(format!("{}{body}{}", &readme[..a], &readme[b..]))
}

/// Whether the page's section is what the demo prints now.
pub(crate) fn check(root: &Path) -> Result<()> {
    let path = root.join(DEMO_PAGE);
    let readme = std::fs::read_to_string(&path).context("cannot read the demo page")?;
    let want = splice(&readme, &demo_output(root)?)?;
    if want != readme {
        bail!("docs/demo.md is out of date; run `cargo xtask readme` and commit it");
    }
    Ok(())
}

/// `cargo xtask readme [--check]`.
pub(crate) fn run(root: &Path, check_only: bool) -> Result<()> {
    if check_only {
        return check(root);
    }
    let path = root.join(DEMO_PAGE);
    let readme = std::fs::read_to_string(&path).context("cannot read the demo page")?;
    let updated = splice(&readme, &demo_output(root)?)?;
    std::fs::write(&path, updated).context("cannot write the demo page")?;
    eprintln!("docs/demo.md: demo output regenerated");
    Ok(())
}
