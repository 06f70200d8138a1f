//! Property: no change to a keyed ledger or to the index verifies without the key.

use super::*;
use loopward_runner::audit::{Durability, GENESIS};
use proptest::prelude::*;

const RUNS: [(&str, usize); 3] = [("r1", 5), ("r2", 3), ("r3", 4)];

/// Three finished keyed runs; returns (runs dir, state dir holding the index head).
fn three_runs() -> (tempfile::TempDir, tempfile::TempDir) {
    let runs = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    for (run, n) in RUNS {
        let opts = LedgerOptions {
            durability: Durability::NoSync,
            index_head: Some(state.path().join("head.json")),
            ..LedgerOptions::keyed(the_key())
        };
        let id = RunId::new(run).unwrap();
        let ledger = Ledger::create(runs.path(), &id, opts).unwrap();
        let scope = Scope {
            run: id,
            turn: None,
            agent: None,
        };
        for i in 0..n {
            let content = (&loopward_core::Person::at_the_keyboard()
                .says(format!("{run} message {i}")))
                .into();
            ledger
                .record(&scope, &AuditEvent::HumanMessage { content })
                .unwrap();
        }
        ledger.finish().unwrap();
    }
    (runs, state)
}

#[derive(Clone, Debug)]
enum Edit {
    Flip { line: usize, at: usize, xor: u8 },
    Delete { line: usize },
    Duplicate { from: usize, to: usize },
    Swap { a: usize, b: usize },
    Truncate { keep: usize },
}

#[derive(Clone, Debug)]
enum Rechain {
    No,
    Keyless,
    OwnKey,
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<usize>(), 1u8..=255).prop_map(|(line, at, xor)| Edit::Flip {
            line,
            at,
            xor
        }),
        any::<usize>().prop_map(|line| Edit::Delete { line }),
        (any::<usize>(), any::<usize>()).prop_map(|(from, to)| Edit::Duplicate { from, to }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap { a, b }),
        any::<usize>().prop_map(|keep| Edit::Truncate { keep }),
    ]
}

fn rechain() -> impl Strategy<Value = Rechain> {
    prop_oneof![
        Just(Rechain::No),
        Just(Rechain::Keyless),
        Just(Rechain::OwnKey)
    ]
}

/// Applies `e` to a file's bytes; the result always differs from the input.
fn apply(bytes: &[u8], e: &Edit) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = bytes
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    let n = lines.len();
    match *e {
        Edit::Flip { line, at, xor } => {
            let l = &mut lines[line % n];
            let i = at % (l.len() - 1); // not the newline: a torn line is Truncate's job
            l[i] ^= xor;
        }
        Edit::Delete { line } => {
            lines.remove(line % n);
        }
        Edit::Duplicate { from, to } => {
            let l = lines[from % n].clone();
            lines.insert(to % (n + 1), l);
        }
        Edit::Swap { a, b } => {
            let (a, mut b) = (a % n, b % n);
            if a == b {
                b = (a + 1) % n;
            }
            lines.swap(a, b);
        }
        Edit::Truncate { keep } => {
            let mut all = lines.concat();
            all.truncate(keep % bytes.len());
            return all;
        }
    }
    lines.concat()
}

fn forger_chain(r: &Rechain) -> Option<Chain> {
    match r {
        Rechain::No => None,
        Rechain::Keyless => Some(Chain::Sha256),
        Rechain::OwnKey => Some(Chain::Hmac(
            LedgerKey::from_bytes(vec![0xEEu8; 32]).unwrap(),
        )),
    }
}

/// Re-chains a ledger's parseable records with `chain` and anchors the new end under it.
fn rechain_ledger(runs: &Path, run: &str, chain: &Chain) {
    let path = runs.join(run).join("events.jsonl");
    let bytes = std::fs::read(&path).unwrap();
    let mut prev = GENESIS.to_string();
    let mut out = Vec::new();
    let mut seq = 0;
    for line in bytes.split(|b| *b == b'\n') {
        let Ok((r, _)) = Record::parse_line(line) else {
            continue;
        };
        let Ok(event) = r.event() else { continue };
        seq += 1;
        let (rec, l) = Record::seal(chain, seq, &r.time, &r.scope(), &event, &prev).unwrap();
        prev = rec.hash;
        out.extend_from_slice(&l);
    }
    std::fs::write(&path, out).unwrap();
    append_anchor(runs, &Anchor::new(run, seq, prev, "T"), chain, None, None).unwrap();
}

/// Re-chains the index lines that still parse as JSON objects with `chain`.
fn rechain_index(runs: &Path, chain: &Chain) {
    let path = runs.join(INDEX_FILE);
    let text = std::fs::read(&path).unwrap_or_default();
    let anchors: Vec<Anchor> = text
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            Some(Anchor::new(
                v["run"].as_str()?,
                v["final_seq"].as_u64()?,
                v["final_hash"].as_str()?,
                "T",
            ))
        })
        .collect();
    std::fs::remove_file(&path).ok();
    for a in &anchors {
        append_anchor(runs, a, chain, None, None).unwrap();
    }
}

fn check(runs: &Path, state: &Path) -> Vec<String> {
    let opts = keyed().head(state.join("head.json"));
    verify_all(runs, &opts)
        .unwrap()
        .into_iter()
        .filter(|v| v.result.is_ok())
        .map(|v| v.run)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn any_change_to_a_keyed_ledger_fails_verify_without_the_key(
        run in 0usize..3, e in edit(), r in rechain()
    ) {
        let (runs, state) = three_runs();
        prop_assert_eq!(check(runs.path(), state.path()).len(), 3);
        let (name, _) = RUNS[run];
        let path = runs.path().join(name).join("events.jsonl");
        let before = std::fs::read(&path).unwrap();
        std::fs::write(&path, apply(&before, &e)).unwrap();
        if let Some(chain) = forger_chain(&r) {
            rechain_ledger(runs.path(), name, &chain);
        }
        let ok = check(runs.path(), state.path());
        prop_assert!(!ok.contains(&name.to_string()), "{name} still verifies after {e:?} / {r:?}");
    }

    #[test]
    fn any_change_to_the_index_fails_verify_without_the_key(
        e in edit(), r in rechain()
    ) {
        let (runs, state) = three_runs();
        let path = runs.path().join(INDEX_FILE);
        let before = std::fs::read(&path).unwrap();
        std::fs::write(&path, apply(&before, &e)).unwrap();
        if let Some(chain) = forger_chain(&r) {
            rechain_index(runs.path(), &chain);
        }
        let ok = check(runs.path(), state.path());
        prop_assert!(ok.len() < 3, "every run still verifies after {e:?} / {r:?}: {ok:?}");
    }
}
