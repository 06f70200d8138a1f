//! The console's pages (maud: every string escaped). Self-contained: one inline stylesheet and
//! `/console.js`, nothing fetched from elsewhere; laid out for a phone's 375 px first.

use crate::watch::{RunRow, Snapshot, Waiting};
use axum::http::StatusCode;
use maud::{html, Markup, PreEscaped, DOCTYPE};

/// The console's stylesheet (the run page also carries `audit.html`'s own).
pub(crate) const CSS: &str = r#"
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1c1f23; }
.console { max-width: 1240px; margin: 0 auto; padding: 12px 14px 30px; }
.console header { display: flex; flex-wrap: wrap; gap: 8px; align-items: baseline; justify-content: space-between; }
.console h1 { font-size: 20px; margin: 4px 0; } .console h2 { font-size: 16px; margin: 20px 0 8px; border-bottom: 1px solid #dee2e6; }
.gate { border: 2px solid #1971c2; border-radius: 8px; padding: 10px; margin: 8px 0; background: #e7f5ff; }
.gate .what { font-weight: 600; overflow-wrap: anywhere; } .gate code { overflow-wrap: anywhere; font-size: 12px; }
form.inline { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; margin: 6px 0 0; }
input[type=text], input[type=password], input:not([type]) { font: inherit; padding: 6px 8px; min-width: 0; flex: 1 1 140px; border: 1px solid #adb5bd; border-radius: 6px; }
button { font: inherit; font-weight: 600; padding: 8px 14px; border-radius: 6px; border: 1px solid #495057; background: #f8f9fa; cursor: pointer; }
button.approve { background: #2f9e44; color: #fff; border-color: #2b8a3e; } button.deny, button.stop { background: #e03131; color: #fff; border-color: #c92a2a; }
.scroll { overflow-x: auto; } table { border-collapse: collapse; width: 100%; font-size: 14px; }
th, td { text-align: left; padding: 4px 6px; border-bottom: 1px solid #dee2e6; vertical-align: top; } th { font-size: 12px; color: #5c636a; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } td.name { white-space: nowrap; } td.task { overflow-wrap: anywhere; max-width: 420px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; border: 1px solid #dee2e6; background: #f8f9fa; }
.badge.ok { background: #d3f9d8; } .badge.bad { background: #ffe3e3; } .badge.warn { background: #fff3bf; } .badge.live { background: #d0ebff; }
.note { color: #5c636a; font-size: 13px; } .refused { color: #c92a2a; font-size: 13px; overflow-wrap: anywhere; }
details.grant { margin: 10px 0; } .flash { background: #d3f9d8; border: 1px solid #8ce99a; border-radius: 6px; padding: 6px 10px; } details.grant form { display: grid; gap: 6px; max-width: 520px; }
"#;

/// The JavaScript the pages load: live refresh from the server-sent events, the name a person
/// gave remembered in this browser. The pages work without it (forms are plain HTML).
pub(crate) const JS: &str = r#"(() => {
  const by = localStorage.getItem('loopward.by') || '';
  for (const i of document.querySelectorAll('input[name=by]')) { if (!i.value) i.value = by; }
  document.addEventListener('submit', e => {
    const i = e.target.querySelector('input[name=by]');
    if (i && i.value) localStorage.setItem('loopward.by', i.value);
  });
  const live = document.getElementById('console-live');
  if (!live || !window.EventSource) return;
  const swap = live.dataset.swap.split(',');
  let timer = null, busy = false, again = false;
  async function refresh() {
    timer = null;
    if (busy) { again = true; return; }
    busy = true;
    try {
      const r = await fetch(location.pathname, { credentials: 'same-origin' });
      if (!r.ok) return;
      const doc = new DOMParser().parseFromString(await r.text(), 'text/html');
      for (const sel of swap) {
        const now = document.querySelector(sel), next = doc.querySelector(sel);
        if (now && next && !now.contains(document.activeElement)) now.replaceWith(document.importNode(next, true));
      }
      document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
    } finally {
      busy = false;
      if (again) { again = false; if (!timer) timer = setTimeout(refresh, Number(live.dataset.throttle || 300)); }
    }
  }
  const es = new EventSource(live.dataset.live);
  es.addEventListener('changed', () => { if (!timer) timer = setTimeout(refresh, Number(live.dataset.throttle || 300)); });
})();"#;

fn head(title: &str) -> Markup {
    html! {
        meta charset="utf-8";
        meta name="viewport" content="width=device-width, initial-scale=1";
        title { (title) " · loopward console" }
        style { (PreEscaped(CSS)) }
    }
}

/// A page saying what went wrong (no credentials needed to read it; it holds no data).
pub(crate) fn error_page(status: StatusCode, message: &str) -> String {
    html! {
        (DOCTYPE)
        html lang="en" { head { (head("Refused")) } body { div.console {
            h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
            p #error { (message) }
            p.note { "Nothing was changed. " a href="/" { "Back to the runs" } }
        } } }
    }
    .into_string()
}

/// The passphrase sign-in form (`said`: why the last try was refused).
pub(crate) fn sign_in_page(said: Option<&str>) -> String {
    html! {
        (DOCTYPE)
        html lang="en" { head { (head("Sign in")) } body { div.console {
            h1 { "loopward console" }
            @if let Some(why) = said { p.refused #error role="alert" { (why) } }
            form.inline method="post" action="/login" {
                input type="password" name="passphrase" required autocomplete="current-password"
                    aria-label="passphrase" placeholder="passphrase";
                button type="submit" { "Sign in" }
            }
            p.note { "Or open the link `loopward serve` printed (it carries the token)." }
        } } }
    }
    .into_string()
}

fn status_badge(row: &RunRow) -> Markup {
    let class = match row.status.as_str() {
        "completed" => "badge ok",
        "running" => "badge live",
        "awaiting_approval" => "badge warn",
        _ => "badge bad",
    };
    html! { span class=(class) data-status=(row.status) title=[row.reason.as_deref()] { (row.status.replace('_', " ")) } }
}

/// Approve / Deny for one waiting gate: the form carries the exact action it answers.
pub(crate) fn gate_card(run: &str, w: &Waiting, csrf: &str) -> Markup {
    html! {
        div.gate id=(format!("gate-{}", w.id)) data-gate=(w.gate) data-run=(run) {
            div.what { "Run " a href=(format!("/runs/{run}")) { (run) } " · gate " strong { (w.gate) } " · " (w.agent) }
            div { (w.summary) }
            div { "Allows exactly: " code.action { (w.action) } }
            @if !w.requested_at.is_empty() { div.note { "asked " (w.requested_at) } }
            @if let Some(on) = &w.on { div.note.on { "waits on " (on) } }
            @if let Some(done) = &w.answered {
                p.answered { "Answered: " (done) ". The run goes on when a worker takes it." }
            } @else {
                // One name, two answers: each button posts the same form to its own address.
                form.inline method="post" action=(format!("/gates/{}/approve", w.id)) {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="action" value=(w.action);
                    input name="by" placeholder="your name" required aria-label="your name";
                    button.approve type="submit" { "Approve" }
                    button.deny type="submit" formaction=(format!("/gates/{}/deny", w.id)) { "Deny" }
                }
            }
        }
    }
}

/// The stop button of one run (a person's decision, honoured at its next turn boundary).
pub(crate) fn stop_form(run: &str, csrf: &str, console_runs_it: bool) -> Markup {
    html! {
        form.inline.stop method="post" action=(format!("/runs/{run}/stop")) {
            input type="hidden" name="csrf" value=(csrf);
            input name="by" placeholder="your name" required aria-label="your name";
            input name="reason" placeholder="why" required aria-label="why";
            @if console_runs_it {
                label.note { input type="checkbox" name="now" value="1"; " end its processes now" }
            }
            button.stop type="submit" { "Stop this run" }
        }
    }
}

/// What the last answer did, said on the page it led to (a fixed set: nothing from the URL is
/// shown as it came).
pub(crate) fn flash(done: Option<&str>) -> Option<&'static str> {
    Some(match done? {
        "approved" => "Approved. The run goes on once no other gate of it waits.",
        "denied" => "Denied. The run is refused that action when it goes on.",
        "stop" => {
            "Stop requested: the run stops at its next turn boundary, recorded as your decision."
        }
        "granted" => "Override granted: one write, once, before its TTL runs out.",
        _ => return None,
    })
}

/// An override waiting to be used, as the runs page lists it.
pub(crate) struct Usable {
    pub(crate) id: String,
    pub(crate) agent: String,
    pub(crate) path: String,
    pub(crate) reason: String,
    pub(crate) expires: String,
}

/// The runs list: waiting gates first, then every run, live.
pub(crate) fn runs_page(
    snap: &Snapshot,
    csrf: &str,
    agents: &[String],
    done: Option<&str>,
    overrides: &[Usable],
) -> String {
    let waiting: Vec<(&str, &Waiting)> = snap
        .runs
        .iter()
        .flat_map(|r| r.waiting.iter().map(move |w| (r.run.as_str(), w)))
        .collect();
    let open = snap.runs.iter().filter(|r| r.is_open()).count();
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                (head(&if waiting.is_empty() { "Runs".to_string() } else { format!("({}) Runs", waiting.len()) }))
                meta name="csrf" content=(csrf);
            }
            body { div.console {
                header {
                    h1 { "loopward · runs" }
                    span.note #summary { (snap.runs.len()) " runs · " (open) " running · " (waiting.len()) " waiting for you" }
                }
                @if let Some(said) = flash(done) { p.flash role="status" { (said) } }
                section #waiting {
                    h2 { "Waiting for a person" }
                    @if waiting.is_empty() { p.note { "No stop-gate is waiting." } }
                    @for (run, w) in &waiting { (gate_card(run, w, csrf)) }
                }
                section #runs {
                    h2 { "Runs" }
                    div.scroll { table.runs {
                        thead { tr { th { "run" } th { "status" } th.num { "records" } th.num { "turns" } th { "agent" } th { "last record" } th { "task" } } }
                        tbody { @for r in &snap.runs {
                            tr data-run=(r.run) {
                                td.name { a href=(format!("/runs/{}", r.run)) { (r.run) } }
                                td { (status_badge(r))
                                    @if r.stop_requested { " " span.badge.warn { "stop requested" } }
                                    @if let Some(p) = &r.problem { " " span.badge.bad title=(p) { "unreadable record" } }
                                    @if let Some(on) = &r.elsewhere { " " span.badge title=(format!("its ledger is not in this workspace; it waits on {on}")) { "elsewhere" } } }
                                td.num { (r.records) } td.num { (r.turns) }
                                td { (r.agent.as_deref().unwrap_or("")) } td.note { (r.last_at) }
                                td.task { (r.task) }
                            }
                        } }
                    } }
                    @if snap.runs.is_empty() { p.note { "No runs yet in this workspace." } }
                    @for why in &snap.refused { p.refused { "refused record: " (why) } }
                    @if let Some(why) = &snap.remote_problem { p.refused #remote-problem { "cannot list the waits elsewhere: " (why) } }
                }
                section #kill {
                    h2 { "Kill switch" }
                    p.note { "Asks every running run to stop at its next turn boundary, as your decision, recorded in each ledger." }
                    form.inline method="post" action="/stop-all" {
                        input type="hidden" name="csrf" value=(csrf);
                        input name="by" placeholder="your name" required aria-label="your name";
                        input name="reason" placeholder="why" required aria-label="why";
                        button.stop type="submit" { "Stop every run" }
                    }
                }
                details.grant open[!overrides.is_empty()] {
                    summary { "One-shot overrides" }
                    @if overrides.is_empty() { p.note { "None waits to be used." } }
                    ul #overrides { @for o in overrides {
                        li { code { (o.id) } " " (o.agent) " → " code { (o.path) } " until " (o.expires) " — " (o.reason) }
                    } }
                    form method="post" action="/overrides" {
                        input type="hidden" name="csrf" value=(csrf);
                        label { "agent " select name="agent" { @for a in agents { option { (a) } } } }
                        input name="path" placeholder="path (workspace-relative)" required;
                        input name="reason" placeholder="reason (recorded when used)" required;
                        input name="ttl" value="15m" aria-label="valid for";
                        button type="submit" { "Grant" }
                    }
                }
                div #console-live hidden data-live=(format!("/live?since={}", snap.version)) data-swap="title,#summary,#waiting,#runs" {}
                script src="/console.js" {}
            } }
        }
    }
    .into_string()
}

/// The console panel put on top of a run's `audit.html`: its waiting gates, the stop button.
pub(crate) fn run_panel(
    row: &RunRow,
    csrf: &str,
    console_runs_it: bool,
    done: Option<&str>,
) -> String {
    html! {
        meta name="csrf" content=(csrf);
        style { (PreEscaped(CSS)) }
        div.console #console-panel {
            header {
                span { a href="/" { "← runs" } }
                span { (status_badge(row)) @if row.stop_requested { " " span.badge.warn { "stop requested" } }
                    " " span.note { (row.records) " records" } }
            }
            @if let Some(said) = flash(done) { p.flash role="status" { (said) } }
            @for w in &row.waiting { (gate_card(&row.run, w, csrf)) }
            @if let Some(on) = &row.elsewhere {
                p.note { "This run's ledger is kept by its workers on " (on) ", not in this workspace; answer its gate here, follow its records there." }
            } @else if row.is_open() || !row.waiting.is_empty() { (stop_form(&row.run, csrf, console_runs_it)) }
        }
    }
    .into_string()
}

/// The page of a run waiting elsewhere whose ledger is not here: the panel alone, live.
pub(crate) fn elsewhere_page(row: &RunRow, csrf: &str, done: Option<&str>, version: u64) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head { (head(&row.run)) }
            body { main {
                (PreEscaped(run_panel(row, csrf, false, done)))
                (PreEscaped(run_live(&row.run, version, 1000)))
            } }
        }
    }
    .into_string()
}

/// The live hook at the bottom of a run's page: its stream, what it swaps, the script.
pub(crate) fn run_live(run: &str, version: u64, throttle: u32) -> String {
    html! {
        div #console-live hidden data-live=(format!("/live?run={run}&since={version}"))
            data-throttle=(throttle)
            data-swap="#console-panel,h1,dl.figures,svg.swimlane,table.matrix,table.events" {}
        script src="/console.js" {}
    }
    .into_string()
}

/// What a person's answer did, for a client that asked for JSON (a browser is sent on to the run).
pub(crate) fn done_json(what: &str, run: &str, extra: serde_json::Value) -> serde_json::Value {
    serde_json::json!({ "done": what, "run": run, "detail": extra })
}
