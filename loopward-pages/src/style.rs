//! The pages' one inline stylesheet (no external resources, no JavaScript).

/// Shared by `audit.html` and `index.html`.
pub(crate) const CSS: &str = r#"
:root { --write:#2f9e44; --refusal:#e03131; --warning:#f08c00; --override:#7048e8;
  --violation:#a61e4d; --stopgate:#1971c2; --classjump:#0c8599; --cap:#495057;
  --ink:#1c1f23; --muted:#5c636a; --line:#dee2e6; --bg:#fff; --lane:#f8f9fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: var(--bg); }
main { max-width: 1240px; margin: 0 auto; padding: 16px 20px 40px; }
h1 { font-size: 22px; margin: 4px 0 4px; } h2 { font-size: 17px; margin: 26px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
p.task { margin: 0 0 10px; color: var(--muted); overflow-wrap: anywhere; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; background: var(--lane); border: 1px solid var(--line); }
.badge.ok { background: #d3f9d8; border-color: #8ce99a; } .badge.bad { background: #ffe3e3; border-color: #ffa8a8; }
.badge.warn { background: #fff3bf; border-color: #ffe066; }
dl.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); gap: 6px 18px; margin: 8px 0; }
dl.figures div { border-left: 3px solid var(--line); padding-left: 8px; }
dl.figures dt { color: var(--muted); font-size: 12px; } dl.figures dd { margin: 0; font-weight: 600; overflow-wrap: anywhere; }
code, .hash { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; overflow-wrap: anywhere; }
svg.swimlane { width: 100%; height: auto; display: block; border: 1px solid var(--line); border-radius: 4px; }
.lane-bg { fill: var(--bg); } g.lane:nth-child(even) .lane-bg, .mini .lane-bg:nth-child(even) { fill: var(--lane); }
.lane-label { font-size: 13px; font-weight: 600; fill: var(--ink); }
.turn { fill: #a5d8ff; stroke: #4dabf7; stroke-width: 1; }
.arrow { stroke: var(--ink); stroke-width: 1.6; fill: none; } .arrow.refused { stroke: var(--refusal); stroke-dasharray: 5 4; }
#head path { fill: var(--ink); }
.marker { stroke: #fff; stroke-width: 1.2; }
.marker.write { fill: var(--write); } .marker.refusal { fill: var(--refusal); } .marker.warning { fill: var(--warning); }
.marker.override { fill: var(--override); } .marker.violation { fill: var(--violation); } .marker.stopgate { fill: var(--stopgate); }
.marker.classjump { fill: var(--classjump); } .marker.cap { fill: var(--cap); }
ul.legend { list-style: none; padding: 0; margin: 6px 0; display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; color: var(--muted); }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin-right: 5px; vertical-align: -1px; }
.swatch.write { background: var(--write); } .swatch.refusal { background: var(--refusal); } .swatch.warning { background: var(--warning); }
.swatch.override { background: var(--override); } .swatch.violation { background: var(--violation); } .swatch.stopgate { background: var(--stopgate); }
.swatch.classjump { background: var(--classjump); } .swatch.cap { background: var(--cap); }
.swatch.arrow-stood, .swatch.arrow-refused { width: 22px; height: 0; border-radius: 0; border-top: 2px solid var(--ink); vertical-align: 3px; }
.swatch.arrow-refused { border-top: 2px dashed var(--refusal); }
table { border-collapse: collapse; width: 100%; } th, td { text-align: left; padding: 3px 6px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.matrix th.path { color: var(--ink); font-family: ui-monospace, monospace; font-weight: 400; overflow-wrap: anywhere; }
td.cell.write { background: #ebfbee; } td.cell.refusal { background: #fff5f5; } td.cell.warning { background: #fff9db; }
td.cell.override { background: #f3f0ff; } td.cell.violation { background: #fff0f6; }
table.events { table-layout: fixed; } table.events td.detail { overflow-wrap: anywhere; white-space: pre-wrap; }
table.events th:nth-child(1) { width: 52px; } table.events th:nth-child(2) { width: 112px; } table.events th:nth-child(3) { width: 44px; }
table.events th:nth-child(4) { width: 90px; } table.events th:nth-child(5) { width: 150px; }
table.events.inner td:nth-child(1) { width: 52px; } table.events.inner td:nth-child(2) { width: 112px; } table.events.inner td:nth-child(3) { width: 44px; }
table.events.inner td:nth-child(4) { width: 90px; } table.events.inner td:nth-child(5) { width: 150px; }
tr.folded > td { padding: 0; } tr.folded details { padding: 2px 6px; color: var(--muted); } tr.folded summary { cursor: pointer; font-size: 12px; }
tr.deny td.detail { color: var(--refusal); } tr.warn td.detail { color: #a35a00; } tr.override td.detail { color: var(--override); }
tr.human td.detail, tr.said td.detail { font-weight: 600; } tr.model td.detail { font-style: italic; } tr.edge td { border-top: 2px solid var(--line); }
tr:target { outline: 2px solid var(--stopgate); background: #e7f5ff; }
table.runs td { vertical-align: middle; } table.runs td.name { white-space: nowrap; } table.runs { font-size: 13px; } tr.invalid td { background: #fff5f5; }
svg.mini { display: block; max-width: 320px; height: auto; border: 1px solid var(--line); }
.mini .arrow { stroke-width: 1; }
p.none { color: var(--muted); }
footer { margin-top: 30px; color: var(--muted); font-size: 12px; }
"#;
