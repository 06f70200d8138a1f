//! `cargo xtask build-cuda`: proves the `cuda` feature compiles and links without a system CUDA
//! install. It pip-installs NVIDIA's CUDA 13 toolkit wheels into `target/cuda-toolkit/wheels`
//! (they unpack to one toolkit tree, `nvidia/cu13`: `bin/nvcc`, `include`, `lib`, `nvvm`), adds
//! the names CMake looks for (`lib64`, unversioned `.so` links), and builds
//! `loopward-llama --features cuda` for sm_90 (H100/H200) into `target/cuda`.
//!
//! The wheels ship cuBLAS only as shared libraries and no driver stub, so this build uses
//! llama-cpp-2's `dynamic-link` (llama.cpp as shared libraries, linked against the wheel's
//! `libcudart.so.13`/`libcublas.so.13`) and `cuda-no-vmm` (no link against the driver's
//! `libcuda.so`). A system toolkit can instead link CUDA statically (plain `--features cuda`,
//! see README "Local models"). Slow (nvcc over all of ggml-cuda); not part of CI. Extra
//! `CMAKE_*`/`GGML_*` variables in the environment reach llama.cpp's CMake
//! (e.g. `GGML_CUDA_FA=OFF` skips the flash-attention kernels for a faster smoke build).

use crate::model::{pip, run};
use anyhow::{bail, Result};
use std::path::Path;
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

const FEATURES: &str = "cuda,llama-cpp-2/dynamic-link,llama-cpp-2/cuda-no-vmm";

pub(crate) fn build_cuda(root: &Path) -> Result<()> {
    let wheels = root.join("target").join("cuda-toolkit").join("wheels");
    let cuda = wheels.join("nvidia").join("cu13");
    if !cuda.join("bin").join("nvcc").exists() {
        run(Command::new(pip())
            .args(["install", "--no-deps", "--upgrade", "--target"])
            .arg(&wheels)
            .args(WHEELS))?;
    }
    let nvcc = cuda.join("bin").join("nvcc");
    if !nvcc.exists() {
        bail!("the CUDA wheels did not provide {}", nvcc.display());
    }
    let lib = cuda.join("lib");
    let lib64 = cuda.join("lib64");
    if !lib64.exists() {
        std::os::unix::fs::symlink("lib", &lib64)?;
    }
    // `-lcudart` and CMake's FindCUDAToolkit want unversioned names.
    for entry in std::fs::read_dir(&lib)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some((stem, _version)) = name.split_once(".so.") {
            let plain = lib.join(format!("{stem}.so"));
            if !plain.exists() {
                std::os::unix::fs::symlink(&name, &plain)?;
            }
        }
    }
    let path = format!(
        "{}:{}",
        cuda.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let target_dir = root.join("target").join("cuda");
    run(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(root)
            // The test executable proves the whole chain links, not just the library.
            .args(["build", "-p", "loopward-llama", "--features", FEATURES])
            .args(["--lib", "--test", "llama_local"])
            .arg("--target-dir")
            .arg(&target_dir)
            .env("CUDA_PATH", &cuda)
            .env("CUDAToolkit_ROOT", &cuda)
            .env("CUDACXX", &nvcc)
            .env("CMAKE_CUDA_COMPILER", &nvcc)
            .env("CMAKE_CUDA_ARCHITECTURES", "90")
            .env("LIBRARY_PATH", &lib)
            .env("PATH", path),
    )?;
    println!(
        "built loopward-llama --features {FEATURES} for sm_90 into {}\n\
         run its executables with LD_LIBRARY_PATH set to llama.cpp's shared libraries \
         ({}/debug/build/llama-cpp-sys-2-*/out/lib) and {} (the wheels' CUDA runtime and \
         cuBLAS); on a machine with the NVIDIA driver the layers run on the GPU",
        target_dir.display(),
        target_dir.display(),
        lib.display()
    );
    Ok(())
}
