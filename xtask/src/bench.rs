//! `cargo xtask bench`: builds `loopward-bench` in release mode, runs its two binaries, merges
//! their JSON into `bench/results.json` and renders `bench/results.md` from it. Nothing in
//! `bench/` is edited by hand.
//!
//! Flags: `--quick` (every code path, few samples; writes under `target/bench/` only),
//! `--no-llama` (skip part 5 even when the model file is present), `--only N` (repeatable:
//! measure these parts again and put them into the last whole run's results, which then say
//! which parts were measured when, at which commit and load).

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::model::MODEL_FILE;

pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let (mut quick, mut no_llama, mut only) = (false, false, Vec::<u8>::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--no-llama" => no_llama = true,
            "--only" => only.push(part_number(it.next())?),
            bad => bail!(
                "unknown flag {bad:?}; usage: cargo xtask bench [--quick] [--no-llama] [--only N]..."
            ),
        }
    }
    only.sort_unstable();
    only.dedup();
    // Parts measured again go into the last whole run's results: there must be one.
    let previous = if only.is_empty() || quick {
        None
    } else {
        let path = root.join("bench/results.json");
        let doc = read_json(&path).with_context(|| {
            format!(
                "`--only` updates the last whole run's {}; run `cargo xtask bench` once first",
                path.display()
            )
        })?;
        if doc["quick"].as_bool().unwrap_or(false) {
            bail!(
                "{} is a quick run's; run a whole `cargo xtask bench` first",
                path.display()
            );
        }
        Some(doc)
    };
    let model = root.join(MODEL_FILE);
    let llama = !no_llama && model.is_file();
    let scratch = root.join("target").join("bench");
    std::fs::create_dir_all(&scratch).with_context(|| scratch.display().to_string())?;
    let (timing, scale) = (scratch.join("timing.json"), scratch.join("scale.json"));

    let mut build = vec!["build", "--release", "-p", "loopward-bench", "--bins"];
    if llama {
        build.extend(["--features", "llama"]);
    }
    crate::cargo(root, &build)?;
    // Parts 10 and 12 start the release `loopward` and `loopward-hook` binaries beside the
    // bench's (the hook through `contain`'s channel, and one hook call): built on their own,
    // with their default features, as `cargo install --path loopward-cli` builds them (a
    // `llama` build also loads libstdc++ and libgomp, which a start pays on every hook call).
    crate::cargo(
        root,
        &[
            "build",
            "--release",
            "-p",
            "loopward-cli",
            "--bin",
            "loopward",
            "--bin",
            "loopward-hook",
        ],
    )?;
    let mut timing_args = vec!["--out".to_string(), timing.display().to_string()];
    if llama {
        timing_args.extend(["--model".to_string(), model.display().to_string()]);
    }
    let mut scale_args = vec!["--out".to_string(), scale.display().to_string()];
    if quick {
        timing_args.push("--quick".into());
        scale_args.push("--quick".into());
    }
    for n in &only {
        timing_args.extend(["--only".to_string(), n.to_string()]);
    }
    let release = target_dir(root).join("release");
    run_bin(root, &release.join("loopward-bench"), &timing_args)?;
    // Part 4 is the scale binary's.
    let scale_wanted = only.is_empty() || only.contains(&4);
    if scale_wanted {
        run_bin(root, &release.join("loopward-bench-scale"), &scale_args)?;
    }

    let timing = read_json(&timing)?;
    let scale = if scale_wanted {
        read_json(&scale)?
    } else {
        json!({"sections": [], "machine": timing["machine"]})
    };
    let sections: Vec<Value> = [&timing, &scale]
        .iter()
        .flat_map(|d| d["sections"].as_array().cloned().unwrap_or_default())
        .filter(|s| only.is_empty() || only.contains(&(s["part"].as_u64().unwrap_or(0) as u8)))
        .collect();
    let mut machine = timing["machine"].clone();
    machine["load_at_end"] = scale["machine"]["load_at_end"].clone();
    let commit = git(root, &["rev-parse", "--short=12", "HEAD"])?;
    let dirty = !git(root, &["status", "--porcelain", "--", ".", ":!bench"])?.is_empty();
    let features = if llama { vec!["llama"] } else { vec![] };
    let doc = match previous {
        Some(previous) => remeasured(
            previous,
            sections,
            json!({
                "parts": only,
                "date": timing["started_at"],
                "commit": commit,
                "uncommitted_changes": dirty,
                "features": features,
                "load_at_start": machine["load_at_start"],
                "load_at_end": machine["load_at_end"],
            }),
        ),
        None => json!({
            "generated_by": "cargo xtask bench",
            "quick": quick,
            "date": timing["started_at"],
            "commit": commit,
            "uncommitted_changes": dirty,
            "rustc": rustc_version(),
            "features": features,
            "machine": machine,
            "timer_overhead_ns": timing["timer_overhead_ns"],
            "sections": sorted(sections),
        }),
    };
    let out = if quick {
        scratch.clone()
    } else {
        root.join("bench")
    };
    std::fs::create_dir_all(&out).with_context(|| out.display().to_string())?;
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&doc)? + "\n",
    )?;
    std::fs::write(out.join("results.md"), render(&doc))?;
    println!(
        "wrote {} and {}",
        out.join("results.json").display(),
        out.join("results.md").display()
    );
    Ok(())
}

/// A part's number after `--only`.
fn part_number(arg: Option<&String>) -> Result<u8> {
    let arg = arg.context("--only needs a part number (1 to 12)")?;
    match arg.parse::<u8>() {
        Ok(n @ 1..=12) => Ok(n),
        _ => bail!("--only {arg:?}: the parts are numbered 1 to 12 (bench/results.md)"),
    }
}

fn sorted(mut sections: Vec<Value>) -> Vec<Value> {
    sections.sort_by_key(|s| s["part"].as_u64().unwrap_or(0));
    sections
}

/// The last whole run's results with `sections` measured again put in place of theirs, and a
/// line saying when, at which commit and load (`results.md` shows it above the targets).
fn remeasured(mut doc: Value, sections: Vec<Value>, when: Value) -> Value {
    let parts: Vec<u64> = sections.iter().filter_map(|s| s["part"].as_u64()).collect();
    let kept = doc["sections"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|s| !parts.contains(&s["part"].as_u64().unwrap_or(0)));
    doc["sections"] = Value::Array(sorted(kept.chain(sections).collect()));
    // A part measured again replaces its earlier line.
    let mut lines: Vec<Value> = doc["remeasured"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|mut l| {
            let left: Vec<Value> = l["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|p| !parts.contains(&p.as_u64().unwrap_or(0)))
                .collect();
            (!left.is_empty()).then(|| {
                l["parts"] = Value::Array(left);
                l
            })
        })
        .collect();
    lines.push(when);
    doc["remeasured"] = Value::Array(lines);
    doc
}

fn target_dir(root: &Path) -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), Into::into)
}

fn run_bin(root: &Path, bin: &Path, args: &[String]) -> Result<()> {
    eprintln!("$ {} {}", bin.display(), args.join(" "));
    let status = Command::new(bin)
        .args(args)
        .current_dir(root)
        .env("GGML_NO_BACKTRACE", "1")
        .status()
        .with_context(|| format!("could not run {}", bin.display()))?;
    if !status.success() {
        bail!("{} failed ({status})", bin.display());
    }
    Ok(())
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

fn git(root: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .context("could not run git")?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn rustc_version() -> String {
    Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("-V")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// A target's verdict (`loopward_bench::report::Verdict`, in snake case) as `results.md` says it;
/// `unmeasured` for a target not measured in the run.
fn verdict<'a>(target: &Value, unmeasured: &'a str) -> &'a str {
    match target["verdict"].as_str() {
        Some("met") => "met",
        Some("not_shown") => "not shown",
        Some("missed") => "**missed**",
        _ => unmeasured,
    }
}

/// Renders `results.md` from the merged JSON.
fn render(doc: &Value) -> String {
    let m = &doc["machine"];
    let cores = m["cores"].as_u64().unwrap_or(0);
    let load = |k: &str| m[k].as_f64().map_or("?".to_string(), |l| format!("{l:.2}"));
    let mut md = String::new();
    let _ = writeln!(md, "# loopward benchmarks: the cost of governance\n");
    let _ = writeln!(
        md,
        "Generated by `cargo xtask bench` from `bench/results.json`; regenerate it, never edit it by hand.\n"
    );
    let _ = writeln!(md, "| | |\n|---|---|");
    let _ = writeln!(md, "| date | {} |", s(&doc["date"]));
    let dirty = if doc["uncommitted_changes"].as_bool().unwrap_or(false) {
        " (with uncommitted changes)"
    } else {
        ""
    };
    let _ = writeln!(md, "| commit | `{}`{dirty} |", s(&doc["commit"]));
    let _ = writeln!(md, "| machine | {}, {cores} cores |", s(&m["cpu_model"]));
    let _ = writeln!(md, "| toolchain | {} |", s(&doc["rustc"]));
    let _ = writeln!(
        md,
        "| load (1-minute average) | {} at start, {} at end |",
        load("load_at_start"),
        load("load_at_end")
    );
    let _ = writeln!(
        md,
        "| timer | two clock reads cost {:.0} ns; every per-operation sample includes them |",
        doc["timer_overhead_ns"].as_f64().unwrap_or(0.0)
    );
    let features = doc["features"]
        .as_array()
        .map(|f| f.iter().map(s).collect::<Vec<_>>().join(", "))
        .unwrap_or_default();
    let _ = writeln!(
        md,
        "| features | {} |",
        if features.is_empty() {
            "(none)"
        } else {
            &features
        }
    );
    let _ = writeln!(md);
    for r in doc["remeasured"].as_array().into_iter().flatten() {
        let parts: Vec<String> = r["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| p.to_string())
            .collect();
        let dirty = if r["uncommitted_changes"].as_bool().unwrap_or(false) {
            " (with uncommitted changes)"
        } else {
            ""
        };
        let num = |k: &str| r[k].as_f64().map_or("?".to_string(), |l| format!("{l:.2}"));
        let _ = writeln!(
            md,
            "**Measured again** (`cargo xtask bench --only {}`): part{} {} on {} at `{}`{dirty}, load {} at start and {} at end; every other part is from the run above.\n",
            parts.join(" --only "),
            if parts.len() > 1 { "s" } else { "" },
            parts.join(", "),
            s(&r["date"]),
            s(&r["commit"]),
            num("load_at_start"),
            num("load_at_end"),
        );
    }
    if doc["quick"].as_bool().unwrap_or(false) {
        let _ = writeln!(
            md,
            "**Quick run** (`--quick`): few samples; not for comparison.\n"
        );
    }
    if m["load_at_start"].as_f64().is_some_and(|l| l > 0.5) {
        let _ = writeln!(
            md,
            "**The machine was shared and noisy**: other processes ran at the same time — the \
             1-minute load average was {} when the run started, on {cores} cores. Each subject runs \
             interleaved with its baseline, so ratios are fairer than absolute times, which are \
             inflated; p99s especially.\n",
            load("load_at_start")
        );
    }
    let _ = writeln!(
        md,
        "Reproduce: `cargo xtask bench` (release build; the first one takes minutes, with the \
         `llama` feature about ten). Part 5 runs when `{MODEL_FILE}` exists (`cargo xtask \
         fetch-model`); `--no-llama` skips it, `--quick` makes a smoke run under `target/bench/`.\n"
    );
    let sections = doc["sections"].as_array().cloned().unwrap_or_default();
    let _ = writeln!(
        md,
        "## Targets\n\n| part | what | target | measured | |\n|---|---|---|---|---|"
    );
    for sec in &sections {
        for t in sec["targets"].as_array().into_iter().flatten() {
            let verdict = verdict(t, "—");
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {verdict} |",
                sec["part"],
                s(&t["what"]),
                s(&t["target"]),
                s(&t["measured"])
            );
        }
    }
    let _ = writeln!(md);
    for sec in &sections {
        let _ = writeln!(
            md,
            "## {}. {}\n\n{}\n",
            sec["part"],
            s(&sec["title"]),
            s(&sec["method"])
        );
        let cols: Vec<&str> = sec["columns"]
            .as_array()
            .into_iter()
            .flatten()
            .map(s)
            .collect();
        if !cols.is_empty() {
            let _ = writeln!(md, "| {} |", cols.join(" | "));
            let _ = writeln!(
                md,
                "|{}|",
                cols.iter()
                    .enumerate()
                    .map(|(i, _)| if i == 0 { "---" } else { "---:" })
                    .collect::<Vec<_>>()
                    .join("|")
            );
            for row in sec["rows"].as_array().into_iter().flatten() {
                let cells: Vec<&str> = row.as_array().into_iter().flatten().map(s).collect();
                let _ = writeln!(md, "| {} |", cells.join(" | "));
            }
            let _ = writeln!(md);
        }
        for t in sec["targets"].as_array().into_iter().flatten() {
            let verdict = verdict(t, "not judged");
            let _ = writeln!(
                md,
                "- Target — {}: {}; measured {} — {verdict}.",
                s(&t["what"]),
                s(&t["target"]),
                s(&t["measured"])
            );
            if let Some(r) = t["reason"].as_str() {
                let _ = writeln!(md, "  {r}");
            }
        }
        for n in sec["notes"].as_array().into_iter().flatten() {
            let _ = writeln!(md, "- {}", s(n));
        }
        let _ = writeln!(md);
    }
    md.trim_end().to_string() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_md_states_targets_misses_and_skipped_parts() {
        let doc = json!({
            "date": "2026-11-30T06:00:00Z", "commit": "abc123", "uncommitted_changes": false,
            "rustc": "rustc 1.95.0", "features": [], "timer_overhead_ns": 20.0, "quick": false,
            "machine": {"cpu_model": "AMD EPYC", "cores": 2, "load_at_start": 3.5, "load_at_end": 2.0},
            "sections": [
                {"part": 2, "title": "Stack overhead per turn", "method": "m",
                 "columns": ["variant", "median"], "rows": [["bare", "270 ns"]],
                 "targets": [{"what": "overhead", "target": "≤ 10.00 µs", "measured": "17.91 µs",
                              "verdict": "missed", "reason": "missed: the ledger"}],
                 "notes": ["a note"]},
                {"part": 4, "title": "Local inference", "method": "m", "columns": [], "rows": [],
                 "targets": [{"what": "decode", "target": "≥ 0.97", "measured": "0.984 [0.963–1.007]",
                              "verdict": "not_shown", "reason": "not shown: the interval"},
                             {"what": "KV reuse", "target": "≤ 2", "measured": "+0",
                              "verdict": "met", "reason": null},
                             {"what": "batching", "target": "—", "measured": "1.9×",
                              "verdict": "not_measured", "reason": null}],
                 "notes": []},
                {"part": 5, "title": "Local inference", "method": "skipped: no model",
                 "columns": [], "rows": [], "targets": [], "notes": []}
            ]
        });
        let md = render(&doc);
        assert!(
            md.contains("| 2 | overhead | ≤ 10.00 µs | 17.91 µs | **missed** |"),
            "{md}"
        );
        assert!(md.contains("  missed: the ledger"), "{md}");
        // An estimate that meets its target with an interval that does not: not shown, not missed.
        assert!(
            md.contains("| 4 | decode | ≥ 0.97 | 0.984 [0.963–1.007] | not shown |"),
            "{md}"
        );
        assert!(
            md.contains("- Target — decode: ≥ 0.97; measured 0.984 [0.963–1.007] — not shown.\n  not shown: the interval"),
            "{md}"
        );
        assert!(md.contains("| 4 | KV reuse | ≤ 2 | +0 | met |"), "{md}");
        assert!(md.contains("| 4 | batching | — | 1.9× | — |"), "{md}");
        assert!(md.contains("measured 1.9× — not judged."), "{md}");
        assert!(md.contains("| bare | 270 ns |"), "{md}");
        assert!(
            md.contains("## 5. Local inference\n\nskipped: no model"),
            "{md}"
        );
        assert!(md.contains("shared and noisy"), "{md}");
        assert!(md.contains("| commit | `abc123` |"), "{md}");
    }

    #[test]
    fn parts_measured_again_replace_theirs_and_say_when() {
        let part = |n: u64, m: &str| {
            json!({"part": n, "title": "t", "method": m, "columns": [],
            "rows": [], "targets": [], "notes": []})
        };
        let doc = json!({"date": "d0", "commit": "c0", "quick": false, "machine": {},
            "sections": [part(10, "old"), part(11, "old"), part(12, "old")]});
        let when = |parts: Vec<u64>, commit: &str| {
            json!({"parts": parts, "date": "d1",
            "commit": commit, "uncommitted_changes": true, "load_at_start": 0.2, "load_at_end": 0.3})
        };
        let doc = remeasured(
            doc,
            vec![part(12, "new"), part(10, "new")],
            when(vec![10, 12], "c1"),
        );
        let methods: Vec<(u64, &str)> = doc["sections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["part"].as_u64().unwrap(), s["method"].as_str().unwrap()))
            .collect();
        assert_eq!(methods, [(10, "new"), (11, "old"), (12, "new")]);
        let md = render(&doc);
        assert!(
            md.contains("**Measured again** (`cargo xtask bench --only 10 --only 12`): parts 10, 12 on d1 at `c1` (with uncommitted changes), load 0.20 at start and 0.30 at end"),
            "{md}"
        );
        // Part 12 measured once more: its earlier line keeps only part 10.
        let doc = remeasured(doc, vec![part(12, "newer")], when(vec![12], "c2"));
        let lines = doc["remeasured"].as_array().unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["parts"], json!([10]));
        assert_eq!(lines[1]["commit"], "c2");
    }

    #[test]
    fn only_takes_a_part_number() {
        assert_eq!(part_number(Some(&"10".to_string())).unwrap(), 10);
        for bad in ["0", "13", "ten"] {
            let e = part_number(Some(&bad.to_string())).unwrap_err().to_string();
            assert!(e.contains("1 to 12"), "{e}");
        }
        assert!(part_number(None).is_err());
    }
}
