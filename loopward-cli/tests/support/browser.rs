//! A real browser for the console's tests: chromedriver with a headless Chromium at a phone's
//! 375 px (Debian's `chromium` and `chromium-driver`, which `.ci/run` installs), driven through
//! fantoccini; every process in its own group, ended by its recorded PID. Shared by
//! `loopward-cli/tests/console.rs` and `loopward-restate`'s test (`#[path]`).

#![allow(dead_code)]

use fantoccini::{Client, ClientBuilder, Locator};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A process ended by its recorded PID (its whole process group) when dropped.
pub(crate) struct Owned(pub(crate) Child);

impl Drop for Owned {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.0.wait();
    }
}

pub(crate) fn on_path(names: &[&str], env: &str, install: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    for name in names {
        for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "no {} found: `apt-get install {install}` (bash .ci/run does), or set {env}",
        names[0]
    );
}

/// chromedriver on a free 127.0.0.1 port, and a headless Chromium session at 375 px.
pub(crate) async fn browser() -> (Owned, Client) {
    use std::os::unix::process::CommandExt;
    let driver = on_path(
        &["chromedriver"],
        "LOOPWARD_CHROMEDRIVER",
        "chromium-driver",
    );
    let chromium = on_path(&["chromium"], "LOOPWARD_CHROMIUM_BROWSER", "chromium");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .arg("--allowed-ips=127.0.0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let owned = Owned(child);
    let profile = std::env::temp_dir().join(format!("loopward-console-{port}"));
    let caps = serde_json::json!({
        "goog:chromeOptions": {
            "binary": chromium,
            // A phone's viewport (a desktop window is never narrower than 500 px).
            "mobileEmulation": { "deviceMetrics": { "width": 375, "height": 812, "pixelRatio": 2.0 } },
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", "--hide-scrollbars", "--window-size=375,812",
                     format!("--user-data-dir={}", profile.display())],
        }
    });
    let mut builder = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
    builder.capabilities(caps.as_object().unwrap().clone());
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if let Ok(client) = builder.connect(&url).await {
            return (owned, client);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not start on {url}");
}

/// Waits (up to 60 s) until `script` returns `want` in the page, without reloading it: what
/// changes, changes through the console's live refresh.
pub(crate) async fn until(c: &Client, script: &str, want: &str) {
    let mut last = serde_json::Value::Null;
    for _ in 0..600 {
        last = c.execute(script, vec![]).await.unwrap();
        if last.as_str() == Some(want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let page = c.source().await.unwrap_or_default();
    panic!("{script} is {last}, not {want:?}, after 60 s; the page: {page}");
}

/// Clears the input at `css` and types `value` into it.
pub(crate) async fn fill(c: &Client, css: &str, value: &str) {
    let field = c.find(Locator::Css(css)).await.unwrap();
    field.clear().await.unwrap();
    field.send_keys(value).await.unwrap();
}

/// Answers the gate of `run` on the runs page: the person's name, then the button.
pub(crate) async fn answer(c: &Client, run: &str, button: &str, by: &str) {
    let form = format!("div.gate[data-run='{run}'] form:has(button.{button})");
    fill(c, &format!("{form} input[name=by]"), by).await;
    c.find(Locator::Css(&format!("{form} button.{button}")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}
