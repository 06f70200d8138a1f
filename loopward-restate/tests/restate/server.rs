//! A Restate server for the test: the binary `.ci/run` installs (`scripts/restate-install.sh`),
//! on 127.0.0.1 ports of its own, stopped by its PID.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct Server {
    child: Child,
    pub(crate) ingress: String,
    pub(crate) admin: String,
    pub(crate) log: PathBuf,
}

/// Where `scripts/restate-install.sh` puts the server.
pub(crate) fn binary() -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin =
        root.join(".restate/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server");
    if bin.exists() {
        Ok(bin)
    } else {
        Err(format!(
            "the Restate server is not installed at {}; run `bash scripts/restate-install.sh` (npm, pinned version; .ci/run does it)",
            bin.display()
        ))
    }
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Server {
    pub(crate) fn start(dir: &Path) -> Result<Self, String> {
        let bin = binary()?;
        let (node, admin, ingress) = (free_port(), free_port(), free_port());
        let config = dir.join("restate.toml");
        std::fs::write(
            &config,
            format!(
                r#"cluster-name = "loopward-test"
node-name = "n1"
base-dir = "{data}"
default-num-partitions = 1
disable-telemetry = true
rocksdb-total-memory-size = "256 MiB"
log-filter = "warn"
bind-address = "127.0.0.1:{node}"
advertised-address = "http://127.0.0.1:{node}/"

[worker.invoker]
# Suspend an invocation that waits (for a person) after 2s, so no worker holds it.
inactivity-timeout = "2s"

[default-retry-policy]
initial-interval = "100ms"
exponentiation-factor = 2.0
max-attempts = 10000
max-interval = "1s"

[admin]
bind-address = "127.0.0.1:{admin}"
disable-web-ui = true

[ingress]
bind-address = "127.0.0.1:{ingress}"
"#,
                data = dir.join("data").display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let log = dir.join("restate-server.log");
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .arg("--config-file")
            .arg(&config)
            .args(["--listen-mode", "tcp", "--no-logo"])
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(|e| e.to_string())?)
            .stderr(out)
            .spawn()
            .map_err(|e| format!("restate-server did not start: {e}"))?;
        let server = Self {
            child,
            ingress: format!("http://127.0.0.1:{ingress}"),
            admin: format!("http://127.0.0.1:{admin}"),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            let up = |port: u16| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
            if up(admin) && up(ingress) {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(format!(
            "restate-server did not listen within 90s; its log: {}",
            server.log.display()
        ))
    }
}

impl Server {
    /// Registers the worker (or proxy) listening on `port` as a deployment.
    pub(crate) async fn register(&self, port: u16) -> Result<(), String> {
        loopward_restate::ingress::register(&self.admin, &format!("http://127.0.0.1:{port}"))
            .await
            .map_err(|e| e.to_string())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Ours, by PID.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
