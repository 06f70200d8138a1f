//! The demo's pages in a real browser (Debian's `chromium-headless-shell`, installed by
//! `.ci/run`; or `chromium`, or the binary named by `LOOPWARD_CHROMIUM`): the DOM the browser
//! built has the lanes, arrows and markers the ledger implies, the page fits 1280 px with
//! readable lane labels, and markup in a tool argument stays text.
//!
//! `LOOPWARD_SCREENSHOTS=<dir>` also keeps a 1280 px screenshot of each chapter there
//! (`docs/pages/` holds the ones shown in the README).

use loopward_core::{AgentId, AuditEvent, AuditSink, RunId, Scope, TurnNumber};
use loopward_demo::demo::Options;
use loopward_runner::audit::{Ledger, LedgerOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

mod support;

/// The browser, or a failure that says how to get one.
fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("LOOPWARD_CHROMIUM") {
        return PathBuf::from(p);
    }
    for name in ["chromium-headless-shell", "chromium", "chromium-browser"] {
        for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "no headless Chromium found: `apt-get install chromium-headless-shell` (bash .ci/run \
         does), or set LOOPWARD_CHROMIUM to a Chromium binary"
    );
}

/// Runs the browser on `page` with a fresh profile, nothing in the background, 1280 px wide.
fn browse(page: &Path, what: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1280,760",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(what)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("start chromium");
    assert!(out.status.success(), "chromium failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Dumps the DOM of a copy of `page` carrying a probe that records layout figures as
/// attributes (the page itself has no script).
fn probe(page: &Path) -> (String, Layout) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("probe.html");
    let html = std::fs::read_to_string(page).unwrap().replace(
        "</body>",
        "<script>(() => { const b = document.body, s = document.querySelector('svg.swimlane'), \
         l = document.querySelector('.lane-label'); \
         b.setAttribute('data-scroll-width', document.documentElement.scrollWidth); \
         b.setAttribute('data-label-px', l ? l.getBoundingClientRect().height.toFixed(1) : '0'); \
         b.setAttribute('data-svg-width', s ? s.getBoundingClientRect().width.toFixed(0) : '0'); \
         b.setAttribute('data-images', document.images.length); \
         b.setAttribute('data-scripts', document.scripts.length); })()</script></body>",
    );
    std::fs::write(&copy, html).unwrap();
    let dom = browse(&copy, "--dump-dom");
    let attr = |name: &str| -> f64 {
        let key = format!("{name}=\"");
        let at = dom
            .find(&key)
            .unwrap_or_else(|| panic!("no {name} in the DOM"))
            + key.len();
        dom[at..].split('"').next().unwrap().parse().unwrap()
    };
    let layout = Layout {
        scroll_width: attr("data-scroll-width"),
        label_px: attr("data-label-px"),
        svg_width: attr("data-svg-width"),
        images: attr("data-images"),
        scripts: attr("data-scripts"),
    };
    (dom, layout)
}

#[derive(Debug)]
struct Layout {
    scroll_width: f64,
    label_px: f64,
    svg_width: f64,
    images: f64,
    scripts: f64,
}

fn count(dom: &str, needle: &str) -> usize {
    dom.matches(needle).count()
}

fn play() -> tempfile::TempDir {
    support::play_with(Options::default()).1
}

/// (run, lanes, stood arrows, refused arrows, [(marker class, count)]) as the chapters tell it.
type Chapter = (
    &'static str,
    usize,
    usize,
    usize,
    &'static [(&'static str, usize)],
);

const CHAPTERS: &[Chapter] = &[
    ("ch1-enforced", 2, 1, 0, &[("refusal", 2), ("write", 1)]),
    (
        "ch2-override",
        1,
        0,
        0,
        &[("refusal", 1), ("override", 1), ("write", 1)],
    ),
    ("ch3-sprawl", 1, 0, 0, &[("refusal", 1), ("write", 4)]),
    ("ch4-review", 3, 2, 1, &[("refusal", 1), ("write", 1)]),
    ("ch5-one-handoff", 3, 1, 1, &[("refusal", 1)]),
    ("ch6-shell", 2, 1, 0, &[]),
    ("ch7-anti-loop", 1, 0, 0, &[("classjump", 6)]),
    ("ch8-stop-gate", 2, 1, 0, &[("stopgate", 1), ("write", 1)]),
];

#[test]
fn demo_pages_in_a_browser_have_their_lanes_arrows_and_markers_and_fit_1280px() {
    let scratch = play();
    let runs = scratch.path().join("runs");
    let shots = std::env::var_os("LOOPWARD_SCREENSHOTS").map(PathBuf::from);
    for (run, lanes, stood, refused, markers) in CHAPTERS {
        let page = runs.join(run).join("audit.html");
        let (dom, layout) = probe(&page);
        let drawn = [
            ("<g class=\"lane\"", *lanes, "lanes"),
            ("class=\"arrow stood\"", *stood, "stood arrows"),
            ("class=\"arrow refused\"", *refused, "refused arrows"),
        ];
        for (needle, n, what) in drawn {
            assert_eq!(count(&dom, needle), n, "{run}: {what}");
        }
        let all: usize = markers.iter().map(|(_, n)| n).sum();
        assert_eq!(count(&dom, "class=\"marker "), all, "{run}: markers");
        for (class, n) in *markers {
            assert_eq!(
                count(&dom, &format!("class=\"marker {class}\"")),
                *n,
                "{run}: {class}"
            );
        }
        // Readable at 1280 px: nothing scrolls sideways, the swimlane uses the width, lane
        // labels are at least 10 px tall on screen.
        assert!(layout.scroll_width <= 1280.0, "{run}: {layout:?}");
        assert!(layout.svg_width >= 1000.0, "{run}: {layout:?}");
        assert!(layout.label_px >= 10.0, "{run}: {layout:?}");
        if let Some(dir) = &shots {
            screenshot(&page, &dir.join(format!("{run}.png")));
        }
    }
    let (dom, layout) = probe(&runs.join("index.html"));
    assert_eq!(count(&dom, "<tr class=\"run\""), 12);
    assert_eq!(count(&dom, "<svg class=\"mini\""), 12);
    assert!(layout.scroll_width <= 1280.0, "index: {layout:?}");
    if let Some(dir) = &shots {
        screenshot(&runs.join("index.html"), &dir.join("index.png"));
    }
}

/// A 1280 × 760 screenshot of `page`.
fn screenshot(page: &Path, shot: &Path) {
    std::fs::create_dir_all(shot.parent().unwrap()).unwrap();
    browse(page, &format!("--screenshot={}", shot.display()));
    assert!(shot.is_file(), "no screenshot at {}", shot.display());
}

#[test]
fn markup_in_a_tool_argument_stays_text_in_the_browser() {
    let runs = tempfile::tempdir().unwrap();
    let run = RunId::new("xss").unwrap();
    let opts = LedgerOptions {
        pages: loopward::pages::pages(),
        ..LedgerOptions::default()
    };
    let ledger = Ledger::create(runs.path(), &run, opts).unwrap();
    let builder = AgentId::new("builder").unwrap();
    let scope = Scope {
        run: run.clone(),
        turn: Some(TurnNumber(1)),
        agent: Some(builder.clone()),
    };
    let events = [
        AuditEvent::RunStarted {
            task: "<b>task</b>".into(),
            agent: builder.clone(),
        },
        AuditEvent::TurnStarted { agent: builder },
        AuditEvent::ToolRequested {
            call_id: "c1".into(),
            tool: "write_file".into(),
            arguments: serde_json::json!({
                "path": "x\"><img src=x onerror=\"document.title='owned'\">",
                "content": "</td></tr></table><script>document.title='owned'</script>",
            }),
        },
    ];
    for e in &events {
        ledger.record(&scope, e).unwrap();
    }
    ledger.finish().unwrap();
    let (dom, layout) = probe(&runs.path().join("xss/audit.html"));
    assert_eq!(
        layout.images, 0.0,
        "an <img> from a tool argument became an element"
    );
    assert_eq!(
        layout.scripts, 1.0,
        "only the test's own probe may be a script"
    );
    assert!(
        dom.contains("&lt;script&gt;document.title='owned'&lt;/script&gt;"),
        "{dom}"
    );
    assert!(dom.contains("<title>Run xss · loopward</title>"));
}
