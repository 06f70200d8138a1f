//! `cargo xtask build-cuda`: proves the `cuda` feature compiles and links without a system CUDA
//! install. It pip-installs the CUDA 13 toolkit wheels into `target/cuda-toolkit/wheels`,
//! merges them into a conventional `CUDA_PATH` tree (`target/cuda-toolkit/cuda`: `bin`,
//! `include`, `lib64`, `nvvm`) of symlinks, and builds `loopward-runner --features cuda` for
//! sm_90 (H100/H200) into `target/cuda`. Slow (nvcc over all of ggml-cuda); not part of CI.

use crate::model::{pip, run};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The wheels that make up a toolkit able to build ggml-cuda.
const WHEELS: &[&str] = &[
    "nvidia-cuda-nvcc==13.*",
    "nvidia-cuda-crt==13.*",
    "nvidia-nvvm==13.*",
    "nvidia-cuda-runtime==13.*",
    "nvidia-cuda-cccl==13.*",
    "nvidia-cublas==13.*",
];

pub(crate) fn build_cuda(root: &Path) -> Result<()> {
    let base = root.join("target").join("cuda-toolkit");
    let wheels = base.join("wheels");
    if !wheels.join(".complete").exists() {
        run(Command::new(pip())
            .args(["install", "--no-deps", "--upgrade", "--target"])
            .arg(&wheels)
            .args(WHEELS))?;
        std::fs::write(wheels.join(".complete"), WHEELS.join("\n"))?;
    }
    let cuda = base.join("cuda");
    if cuda.exists() {
        std::fs::remove_dir_all(&cuda)?;
    }
    // Each wheel is a partial toolkit under nvidia/<part>/; merge their trees.
    let nvidia = wheels.join("nvidia");
    let parts = std::fs::read_dir(&nvidia)
        .with_context(|| format!("no {} after pip install", nvidia.display()))?;
    for part in parts {
        let part = part?.path();
        for sub in ["bin", "include", "lib", "nvvm"] {
            let from = part.join(sub);
            if from.is_dir() {
                let to = cuda.join(if sub == "lib" { "lib64" } else { sub });
                link_tree(&from, &to)?;
            }
        }
    }
    let nvcc = cuda.join("bin").join("nvcc");
    if !nvcc.exists() {
        bail!(
            "the wheels did not provide bin/nvcc under {}",
            nvidia.display()
        );
    }
    // Unversioned names that CMake's FindCUDAToolkit looks for.
    let lib = cuda.join("lib64");
    for entry in std::fs::read_dir(&lib)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(stem) = name.split(".so.").next().filter(|_| name.contains(".so.")) {
            let plain = lib.join(format!("{stem}.so"));
            if !plain.exists() {
                std::os::unix::fs::symlink(&path, &plain)?;
            }
        }
    }
    let path = format!(
        "{}:{}",
        cuda.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(root)
            .args([
                "build",
                "-p",
                "loopward-runner",
                "--features",
                "cuda",
                "--target-dir",
            ])
            .arg(root.join("target").join("cuda"))
            .env("CUDA_PATH", &cuda)
            .env("CUDAToolkit_ROOT", &cuda)
            .env("CMAKE_CUDA_COMPILER", &nvcc)
            .env("CMAKE_CUDA_ARCHITECTURES", "90")
            .env(
                "LIBRARY_PATH",
                lib.join("stubs").display().to_string() + ":" + &lib.display().to_string(),
            )
            .env("PATH", path),
    )?;
    println!(
        "built loopward-runner --features cuda for sm_90 into target/cuda (CUDA_PATH={})",
        cuda.display()
    );
    Ok(())
}

/// Mirrors `from` into `to` as symlinks to files, merging with what is already there.
fn link_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let src: PathBuf = entry.path();
        let dst = to.join(entry.file_name());
        if src.is_dir() {
            link_tree(&src, &dst)?;
        } else if !dst.exists() {
            std::os::unix::fs::symlink(&src, &dst)
                .with_context(|| format!("could not link {}", dst.display()))?;
        }
    }
    Ok(())
}
