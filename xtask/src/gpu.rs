//! `cargo xtask gpu-check`: the one prepared script for a machine with an NVIDIA GPU.
//!
//! 1. Refuses in seconds where there is no GPU or driver (`nvidia-smi` must list a GPU).
//! 2. Builds `loopward-bench --release --features cuda` for `CMAKE_CUDA_ARCHITECTURES`
//!    (default 90: H100/H200) with the system CUDA toolkit (`CUDA_PATH`, or `nvcc` on `PATH`;
//!    CUDA is linked statically, so at run time only the driver is needed), unless a build
//!    carried with the working tree is found (`--bench-bin PATH`).
//! 3. Writes a 27B-shaped GGUF (Gemma 3 27B's shapes, random Q4_0 weights; see `gguf.rs`)
//!    under `target/gpu-check/`, reused when it is already there.
//! 4. Runs the bench's local-inference part on it with every layer offloaded: prefill and
//!    decode through loopward's backend against a direct llama-cpp-2 loop; and llama.cpp's own
//!    `llama-bench` on the same file when one is found (`--llama-bench PATH`, or on `PATH`).
//! 5. Writes `bench/gpu.md` (GPU, driver, CUDA version, figures, ratios).

use crate::gguf;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// What the command line asked for.
#[derive(Debug, PartialEq)]
pub(crate) struct Args {
    /// The model shape to generate.
    pub(crate) shape: gguf::Shape,
    /// Where the report goes.
    pub(crate) out: PathBuf,
    /// A prebuilt `loopward-bench` (built with `--features cuda`) to use instead of building.
    pub(crate) bench_bin: Option<PathBuf>,
    /// llama.cpp's `llama-bench`, if not on `PATH`.
    pub(crate) llama_bench: Option<PathBuf>,
}

pub(crate) const USAGE: &str = "usage: cargo xtask gpu-check [--shape gemma3-27b|tiny] \
[--out bench/gpu.md] [--bench-bin PATH] [--llama-bench PATH]";

/// Reads the flags after `gpu-check`.
pub(crate) fn parse(root: &Path, args: &[String]) -> Result<Args> {
    let mut parsed = Args {
        shape: gguf::GEMMA3_27B,
        out: root.join("bench").join("gpu.md"),
        bench_bin: None,
        llama_bench: None,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .with_context(|| format!("{flag} needs a value; {USAGE}"))
        };
        match flag.as_str() {
            "--shape" => parsed.shape = gguf::shape(&value()?)?,
            "--out" => parsed.out = PathBuf::from(value()?),
            "--bench-bin" => parsed.bench_bin = Some(PathBuf::from(value()?)),
            "--llama-bench" => parsed.llama_bench = Some(PathBuf::from(value()?)),
            other => bail!("unknown flag {other:?}; {USAGE}"),
        }
    }
    Ok(parsed)
}

/// The GPU as `nvidia-smi` reports it.
#[derive(Debug, PartialEq)]
pub(crate) struct Gpu {
    pub(crate) name: String,
    pub(crate) driver: String,
    pub(crate) memory: String,
}

/// Reads `nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader`.
pub(crate) fn parse_gpus(csv: &str) -> Vec<Gpu> {
    csv.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            (f.len() >= 3 && !f[0].is_empty()).then(|| Gpu {
                name: f[0].to_owned(),
                driver: f[1].to_owned(),
                memory: f[2].to_owned(),
            })
        })
        .collect()
}

/// The first GPU, or the refusal that says why there is none.
pub(crate) fn probe_gpu(smi: &str) -> Result<Gpu> {
    let refusal = |why: String| {
        anyhow::anyhow!(
            "gpu-check needs an NVIDIA GPU with its driver, and {why}. Run it on the machine \
             lent for GPU checks (it has an H200); nothing was built or written"
        )
    };
    let out = Command::new(smi)
        .args([
            "--query-gpu=name,driver_version,memory.total",
            "--format=csv,noheader",
        ])
        .output()
        .map_err(|e| {
            refusal(format!(
                "`{smi}` could not be run ({e}): no NVIDIA driver here"
            ))
        })?;
    if !out.status.success() {
        return Err(refusal(format!(
            "`{smi}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    parse_gpus(&String::from_utf8_lossy(&out.stdout))
        .into_iter()
        .next()
        .ok_or_else(|| refusal(format!("`{smi}` lists no GPU")))
}

/// The CUDA toolkit to build with: `CUDA_PATH`, else the directory above `nvcc` on `PATH`.
fn cuda_toolkit() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("CUDA_PATH").map(PathBuf::from) {
        if p.join("bin").join("nvcc").exists() {
            return Ok(p);
        }
    }
    let out = Command::new("sh")
        .args(["-c", "command -v nvcc"])
        .output()
        .context("could not look for nvcc")?;
    let nvcc = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    match nvcc.parent().and_then(Path::parent) {
        Some(root) if out.status.success() => Ok(root.to_path_buf()),
        _ => bail!(
            "no CUDA toolkit: set CUDA_PATH (with bin/nvcc) or put nvcc on PATH, or pass \
             --bench-bin with a loopward-bench built with `--features cuda` elsewhere"
        ),
    }
}

fn cuda_version(toolkit: &Path) -> String {
    Command::new(toolkit.join("bin").join("nvcc"))
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .find(|l| l.contains("release"))
                .map(|l| l.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Runs the whole check.
pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let started = Instant::now();
    let args = parse(root, args)?;
    let gpu = probe_gpu("nvidia-smi")?;
    println!("GPU: {} (driver {}, {})", gpu.name, gpu.driver, gpu.memory);
    let work = root.join("target").join("gpu-check");
    std::fs::create_dir_all(&work).with_context(|| work.display().to_string())?;

    let (bench, cuda) = match &args.bench_bin {
        Some(bin) => (
            bin.clone(),
            "carried build (see its own build notes)".to_owned(),
        ),
        None => {
            let toolkit = cuda_toolkit()?;
            let version = cuda_version(&toolkit);
            let arch = std::env::var("CMAKE_CUDA_ARCHITECTURES").unwrap_or_else(|_| "90".into());
            let t = Instant::now();
            let target = work.join("build");
            let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .current_dir(root)
                .args(["build", "--release", "-p", "loopward-bench", "--bins"])
                .args(["--features", "cuda", "--target-dir"])
                .arg(&target)
                .env("CUDA_PATH", &toolkit)
                .env("CMAKE_CUDA_ARCHITECTURES", &arch)
                .status()
                .context("could not run cargo")?;
            if !status.success() {
                bail!("building loopward-bench --features cuda failed ({status})");
            }
            println!("built in {:.0} s", t.elapsed().as_secs_f64());
            (
                target.join("release").join("loopward-bench"),
                format!("{version}; sm_{arch}; CUDA linked statically (driver only at run time)"),
            )
        }
    };

    let model = work.join(format!("{}.gguf", args.shape.name));
    let t = Instant::now();
    if !model.exists() {
        let bytes = gguf::write(&model, &args.shape, 27)?;
        println!(
            "wrote {} ({:.1} GB) in {:.0} s",
            model.display(),
            bytes as f64 / 1e9,
            t.elapsed().as_secs_f64()
        );
    }

    let json = work.join("part5.json");
    let status = Command::new(&bench)
        .args(["--only", "5", "--only", "6", "--model"])
        .arg(&model)
        .arg("--out")
        .arg(&json)
        .env("GGML_NO_BACKTRACE", "1")
        .status()
        .with_context(|| format!("could not run {}", bench.display()))?;
    if !status.success() {
        bail!("{} failed ({status})", bench.display());
    }
    let part5: serde_json::Value = serde_json::from_slice(&std::fs::read(&json)?)?;

    let llama_bench = args.llama_bench.clone().or_else(|| {
        Command::new("sh")
            .args(["-c", "command -v llama-bench"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
    });
    let reference = match &llama_bench {
        Some(bin) => {
            let out = Command::new(bin)
                .args(["-p", "512", "-n", "128", "-ngl", "99", "-o", "md", "-m"])
                .arg(&model)
                .output()
                .with_context(|| format!("could not run {}", bin.display()))?;
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
        None => "not run: no `llama-bench` was found (pass --llama-bench PATH)\n".to_owned(),
    };

    let report = render(&gpu, &cuda, &args.shape, &part5, &reference, started);
    std::fs::write(&args.out, report).with_context(|| args.out.display().to_string())?;
    println!(
        "wrote {} in {:.0} s in all",
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn render(
    gpu: &Gpu,
    cuda: &str,
    shape: &gguf::Shape,
    part5: &serde_json::Value,
    reference: &str,
    started: Instant,
) -> String {
    let rows_of = |part: u64| -> Vec<String> {
        let section = part5["sections"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["part"] == part))
            .cloned()
            .unwrap_or_default();
        section["rows"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .map(|r| {
                        let cells: Vec<&str> = r
                            .as_array()
                            .map(|c| c.iter().filter_map(|v| v.as_str()).collect())
                            .unwrap_or_default();
                        format!("| {} |", cells.join(" | "))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let rows = rows_of(5);
    let concurrent = rows_of(6);
    format!(
        "# GPU check\n\nWritten by `cargo xtask gpu-check` ({:.0} s in all).\n\n\
         - GPU: {} (driver {}, {})\n- CUDA: {cuda}\n- Model: random Q4_0 weights in the shape \
         `{}` ({} blocks, {} wide), every layer offloaded\n\n\
         ## Through loopward against a direct llama-cpp-2 loop\n\n\
         | | direct llama-cpp-2 | loopward | loopward ÷ direct |\n|---|---:|---:|---:|\n{}\n\n\
         ## llama.cpp's own llama-bench (pp512, tg128)\n\n{reference}\n\
         ## Concurrent runs on one model, one batch (1/4/16)\n\n\
         | runs | one after another | at once (one batch) | at once ÷ one after another (range) | at once ÷ one run |\n\
         |---:|---:|---:|---:|---:|\n{}\n",
        started.elapsed().as_secs_f64(),
        gpu.name,
        gpu.driver,
        gpu.memory,
        shape.name,
        shape.n_layer,
        shape.n_embd,
        rows.join("\n"),
        concurrent.join("\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn flags_parse_and_unknown_ones_are_refused() {
        let root = Path::new("/repo");
        let a = parse(root, &[]).unwrap();
        assert_eq!(a.shape, gguf::GEMMA3_27B);
        assert_eq!(a.out, root.join("bench/gpu.md"));
        let a = parse(
            root,
            &strings(&["--shape", "tiny", "--out", "x.md", "--bench-bin", "b"]),
        )
        .unwrap();
        assert_eq!((a.shape, a.out), (gguf::TINY, PathBuf::from("x.md")));
        assert_eq!(a.bench_bin, Some(PathBuf::from("b")));
        let e = parse(root, &strings(&["--gpu"])).unwrap_err().to_string();
        assert!(
            e.contains("unknown flag \"--gpu\"") && e.contains("usage"),
            "{e}"
        );
        let e = parse(root, &strings(&["--out"])).unwrap_err().to_string();
        assert!(e.contains("--out needs a value"), "{e}");
    }

    #[test]
    fn without_a_driver_the_check_refuses_at_once() {
        let t = Instant::now();
        let e = probe_gpu("/nonexistent/nvidia-smi")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("needs an NVIDIA GPU") && e.contains("no NVIDIA driver"),
            "{e}"
        );
        assert!(t.elapsed().as_secs() < 2);
        // A driver tool that fails (no device) is refused the same way.
        let e = probe_gpu("false").unwrap_err().to_string();
        assert!(e.contains("failed"), "{e}");
    }

    #[test]
    fn nvidia_smi_lines_are_read() {
        let gpus = parse_gpus("NVIDIA H200, 570.124.06, 143771 MiB\n");
        assert_eq!(
            gpus,
            vec![Gpu {
                name: "NVIDIA H200".into(),
                driver: "570.124.06".into(),
                memory: "143771 MiB".into()
            }]
        );
        assert!(parse_gpus("").is_empty());
    }
}
