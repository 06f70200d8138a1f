//! Part 5's section: how the two sides were run, how much the machine drifted, the paired
//! ratios against the target.

use super::*;

/// How part 5 runs and times the two sides on a CPU, for the report.
pub(super) fn together_method(rounds: usize, reps: usize) -> String {
    format!(
        "Both sides run in one child process at the same time, pinned to the same single CPU: \
             the kernel interleaves them every few milliseconds, so the machine's speed, which \
             drifts by several per cent over seconds on this kind of machine, is the same for \
             both; each side is timed by the CPU time of the threads doing its work \
             (`/proc/self/task/<tid>/schedstat`: the direct loop's thread; loopward's inference \
             thread and the thread awaiting its reply), and rates are tokens per CPU-second (sharing \
             one CPU's caches, each side runs slower than alone: the rates compare the sides, they \
             do not size a machine). \
             One after the other, the drift between requests seconds apart was larger than the \
             gap being measured; this run's own figures for both are in the notes. Each leg of a pair starts \
             when the other side's does (a barrier); {rounds} children one after another, \
             {reps} pairs each after a warm-up pair. The target is the geometric mean of the \
             pairs' ratios, with a 95% bootstrap interval (4,000 resamples of the pairs): it is \
             met only when the whole interval is at or above the target, and not shown when \
             only the estimate is; the table's rates pool the pairs' summed tokens and times. \
             The direct loop is a minimal llama-cpp-2 0.1.160 program (tokenize, prefill in \
             batches, `LlamaSampler::greedy`, decode one token at a time); loopward is \
             `loopward_llama::LlamaModel` called as a tower service. Each pair changes the \
             prompt's first line, so both sides' short requests reuse only the few cached \
             tokens before it (the direct loop keeps its cache the way LLAMA.md's KV-reuse \
             recipe says, as the backend does) and prefill the rest; rates count only what was \
             actually prefilled."
    )
}

/// How much the machine moved under the measurement, from this run's own pairs: the direct
/// loop's decode rate from one pair to the next in a child (what comparing the sides one after
/// the other would have carried), against loopward ÷ direct within a pair.
pub(super) fn drift_note(pairs: &[(Rep, Rep)], reps: usize) -> String {
    let sd = |v: &[f64]| {
        let n = v.len().max(1) as f64;
        let mean = v.iter().sum::<f64>() / n;
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt()
    };
    let next: Vec<f64> = pairs
        .chunks(reps.max(1))
        .flat_map(|c| {
            c.windows(2)
                .map(|w| (w[1].0.decode_rate() / w[0].0.decode_rate().max(1e-9)).ln())
                .collect::<Vec<_>>()
        })
        .filter(|x| x.is_finite())
        .collect();
    let within: Vec<f64> = pairs
        .iter()
        .map(|(d, o)| (o.decode_rate() / d.decode_rate().max(1e-9)).ln())
        .filter(|x| x.is_finite())
        .collect();
    let seconds: Vec<f64> = pairs
        .iter()
        .map(|(d, o)| (d.short_ns + d.long_ns + o.short_ns + o.long_ns) as f64 / 1e9)
        .collect();
    format!(
        "How much the machine moved (standard deviation of the log ratio, decode): the direct \
         loop's own rate from one pair to the next, about {:.0} s apart, {:.1}% ({} steps); \
         loopward ÷ direct within a pair, both running at once, {:.2}% ({} pairs).",
        crate::ratio::median(&seconds),
        100.0 * sd(&next),
        next.len(),
        100.0 * sd(&within),
        within.len()
    )
}

/// Tokens a side's long requests prefilled, on average.
pub(super) fn mean_long_prefill(reps: &[Rep]) -> f64 {
    reps.iter().map(|r| r.long_prefilled as f64).sum::<f64>() / reps.len().max(1) as f64
}

/// The smallest, median and largest of `f` over `reps`.
pub(super) fn min_med_max(reps: &[Rep], f: fn(&Rep) -> f64) -> (f64, f64, f64) {
    let mut v: Vec<f64> = reps.iter().map(f).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let med = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (v[0], med, v[n - 1])
}

pub(super) fn section(
    model: &Path,
    timing: Timing,
    (rounds, reps): (usize, usize),
    pairs: &[(Rep, Rep)],
    conv: &[ConvTurn],
) -> Section {
    let direct: Vec<Rep> = pairs.iter().map(|p| p.0).collect();
    let ours: Vec<Rep> = pairs.iter().map(|p| p.1).collect();
    let (direct, ours) = (&direct[..], &ours[..]);
    let (direct_all, ours_all) = (direct, ours);
    let rate = |reps: &[Rep], f: fn(&Rep) -> f64| f(&Rep::pooled(reps));
    let (dp, dd) = (
        rate(direct, Rep::prefill_rate),
        rate(direct, Rep::decode_rate),
    );
    let (op, od) = (rate(ours, Rep::prefill_rate), rate(ours, Rep::decode_rate));
    let tokens = |reps: &[Rep]| reps.first().map_or(0, |r| r.prefilled);
    let rows = vec![
        vec![
            "prefill".into(),
            format!("{dp:.0} tok/s"),
            format!("{op:.0} tok/s"),
            fmt_ratio(op / dp),
        ],
        vec![
            "decode".into(),
            format!("{dd:.1} tok/s"),
            format!("{od:.1} tok/s"),
            fmt_ratio(od / dd),
        ],
    ];
    let threads = PAIRED_THREADS;
    let range = |reps: &[Rep], f: fn(&Rep) -> f64| {
        let v: Vec<f64> = reps.iter().map(f).collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        (lo, hi)
    };
    let most_waits = |reps: &[Rep]| reps.iter().map(|r| r.long_waits).max().unwrap_or(0);
    // Only CPU time can miss a wait; the wall clock counts it.
    let waits_ok =
        timing == Timing::InTurn || most_waits(direct_all).max(most_waits(ours_all)) <= MAX_WAITS;
    let share = |what: &str, f: fn(&Rep) -> f64| {
        let per_request = |reps: &[Rep]| reps.iter().map(f).collect::<Vec<f64>>();
        let r = paired_ratio(&per_request(ours_all), &per_request(direct_all));
        let pooled = rate(ours_all, f) / rate(direct_all, f);
        let (olo, ohi) = range(ours_all, f);
        let (dlo, dhi) = range(direct_all, f);
        let spread = format!(
            "single requests ranged {olo:.1}–{ohi:.1} tok/s through loopward and {dlo:.1}–{dhi:.1} tok/s direct"
        );
        let verdict = match r.verdict(TARGET_SHARE) {
            Verdict::Met if !waits_ok => Verdict::NotShown,
            v => v,
        };
        Target {
            what: format!(
                "local inference {what} through loopward ÷ direct llama-cpp-2 loop (geometric mean of paired requests' ratios, 95% interval)"
            ),
            target: format!("≥ {TARGET_SHARE:.2}"),
            measured: format!(
                "{:.3} [{:.3}–{:.3}] (pooled {pooled:.3})",
                r.point, r.low, r.high
            ),
            verdict,
            reason: match verdict {
                Verdict::Met | Verdict::NotMeasured => None,
                Verdict::NotShown if !waits_ok => Some(format!(
                    "not shown: a side's threads blocked more than {MAX_WAITS} times during a \
                     request, and its CPU time leaves the waiting out (see the notes)"
                )),
                Verdict::NotShown => Some(format!(
                    "not shown: the estimate meets {TARGET_SHARE:.2} but the interval reaches below \
                     it — this run's noise is larger than the gap ({spread}; a shared machine: \
                     rerun when it is quiet)"
                )),
                Verdict::Missed if r.below(TARGET_SHARE) => Some(format!(
                    "missed: the whole interval is below {TARGET_SHARE:.2} — loopward is slower \
                     here; {spread}"
                )),
                Verdict::Missed => Some(format!(
                    "missed: the estimate is below {TARGET_SHARE:.2}, though the interval reaches \
                     above it ({spread}; a shared machine: rerun when it is quiet)"
                )),
            },
        }
    };
    // KV reuse: what each turn prefilled against what was new since the previous turn's cache.
    let mut kv_rows = vec![];
    let mut worst = 0i64;
    let mut prev: Option<&ConvTurn> = None;
    for (i, t) in conv.iter().enumerate() {
        let new = prev.map_or(t.input, |p| t.input.saturating_sub(p.input + p.output));
        let prefilled = t.input - t.cached;
        let excess = prefilled as i64 - new as i64;
        if i > 0 {
            worst = worst.max(excess);
        }
        kv_rows.push(vec![
            (i + 1).to_string(),
            t.input.to_string(),
            new.to_string(),
            prefilled.to_string(),
            format!("{excess:+}"),
            format!("{:.0} ms", t.ns as f64 / 1e6),
        ]);
        prev = Some(t);
    }
    let kv_met = worst <= KV_SLACK as i64;
    let spread = |what: &str, f: fn(&Rep) -> f64| {
        let (d, o) = (min_med_max(direct_all, f), min_med_max(ours_all, f));
        format!(
            "| {what} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            d.0,
            d.1,
            d.2,
            o.0,
            o.1,
            o.2,
            fmt_ratio(o.1 / d.1.max(1e-9))
        )
    };
    let mut notes = vec![format!(
        "Per request pair ({} a side, each side's own spread), tok/s: min / median / max.\n\n| | direct min | direct median | direct max | loopward min | loopward median | loopward max | median ÷ median |\n|---|---:|---:|---:|---:|---:|---:|---:|\n{}\n{}",
        direct_all.len().min(ours_all.len()),
        spread("prefill", Rep::prefill_rate),
        spread("decode", Rep::decode_rate)
    )];
    let pair_ratios = |f: fn(&Rep) -> f64| {
        let v: Vec<f64> = pairs.iter().map(|(d, o)| f(o) / f(d).max(1e-9)).collect();
        let (lo, hi) = v.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &r| {
            (lo.min(r), hi.max(r))
        });
        format!("{lo:.3} / {:.3} / {hi:.3}", crate::ratio::median(&v))
    };
    // Each child's own decode ratio: a child-wide offset (something the two sides did not share
    // for that process's lifetime, such as where their buffers landed) would show here as
    // children that disagree.
    let per_child: Vec<String> = pairs
        .chunks(reps.max(1))
        .map(|c| {
            let (d, o): (Vec<f64>, Vec<f64>) = c
                .iter()
                .map(|(d, o)| (d.decode_rate(), o.decode_rate()))
                .unzip();
            format!("{:.3}", paired_ratio(&o, &d).point)
        })
        .collect();
    notes.push(format!(
        "Loopward ÷ direct within each pair (min / median / max over {} pairs): prefill {}, \
         decode {}. Decode per child process (geometric mean of its {reps} pairs): {}.",
        pairs.len(),
        pair_ratios(Rep::prefill_rate),
        pair_ratios(Rep::decode_rate),
        per_child.join(", ")
    ));
    notes.push(drift_note(pairs, reps));
    notes.push(format!(
        "Waiting: during a long request ({} tokens) the direct loop's thread blocked at most {} \
         times, loopward's threads (its inference thread and the one awaiting the reply) at \
         most {}. {}",
        1 + DECODE,
        most_waits(direct),
        most_waits(ours),
        if waits_ok {
            format!(
                "At most {MAX_WAITS} is the hand-over of a request and of its reply, not a \
                 wait per token: neither side waits between tokens, so its CPU time is its \
                 whole time."
            )
        } else {
            format!(
                "More than {MAX_WAITS}: a side waits within a request, and CPU time leaves that \
                 time out, so the ratios are not shown."
            )
        }
    ));
    notes.push(format!(
        "Prompt: {} tokens prefilled per request by the direct loop, {} by loopward (the same \
         ChatML text, which loopward renders from messages with the model's template, less the \
         few cached tokens before the changed first line). Decode: the long request repeats \
         the prompt and generates up to {} tokens, greedy, on both sides; it prefilled {:.1} tokens \
         on average directly and {:.1} through loopward (the rest came from the cache).",
        tokens(direct),
        tokens(ours),
        1 + DECODE,
        mean_long_prefill(direct),
        mean_long_prefill(ours)
    ));
    notes.push(format!(
        "KV reuse over a 10-turn conversation through loopward ({ANSWER} tokens at most per answer): \"without\" is \
         the whole prompt, what a backend without reuse prefills each turn. Over the ten \
         turns: {} tokens prefilled with reuse against {} without ({} as many).\n\n| turn | whole prompt (without reuse) | new since last turn | prefilled with reuse | excess | time |\n|---:|---:|---:|---:|---:|---:|\n{}",
        conv.iter().map(|t| t.input - t.cached).sum::<u64>(),
        conv.iter().map(|t| t.input).sum::<u64>(),
        fmt_ratio(
            conv.iter().map(|t| t.input).sum::<u64>() as f64
                / conv.iter().map(|t| t.input - t.cached).sum::<u64>().max(1) as f64
        ),
        kv_rows.iter().map(|r| format!("| {} |", r.join(" | "))).collect::<Vec<_>>().join("\n")
    ));
    Section {
        part: 5,
        title: "Local inference".into(),
        method: format!(
            "`{}` on {threads} thread a side, context {N_CTX}, batch {BATCH}, greedy, {}",
            model
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            match timing {
                Timing::Together => format!("CPU. {}", together_method(rounds, reps)),
                Timing::InTurn => format!(
                    "every layer offloaded to the GPU. Both sides run in one child process, one \
                     after the other pair by pair, the side that goes first alternating, timed \
                     by the wall clock (on a GPU both would queue on it at once, and its time is \
                     no thread's CPU time); {rounds} children, {reps} pairs each after a warm-up \
                     pair; the target is the geometric mean of the pairs' ratios with a 95% \
                     bootstrap interval (4,000 resamples of the pairs), met only when the whole \
                     interval is at or above it."
                ),
            }
        ),
        columns: ["", "direct llama-cpp-2", "loopward", "loopward ÷ direct"]
            .map(String::from)
            .to_vec(),
        rows,
        targets: vec![
            share("prefill", Rep::prefill_rate),
            share("decode", Rep::decode_rate),
            Target {
                what:
                    "KV reuse: tokens a turn prefills beyond its new tokens (worst of turns 2–10)"
                        .into(),
                target: format!("≤ {KV_SLACK}"),
                measured: format!("{worst:+}"),
                verdict: Verdict::met_if(kv_met),
                reason: (!kv_met).then(|| "missed: see the turn table below".to_string()),
            },
        ],
        notes,
        data: json!({ "direct": direct, "loopward": ours, "conversation": conv,
            "prefill_tok_s": {"direct": dp, "loopward": op}, "decode_tok_s": {"direct": dd, "loopward": od} }),
    }
}
