//! A worker: this binary started again in a worker mode, serving a team on a port of its own
//! until it is killed by its PID.

use restate_sdk::prelude::{Endpoint, HttpServer};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Serves the endpoint `build` makes from the worker's workspace, runs and control folders, on
/// the port its arguments name, until killed: `<mode> <workspace> <runs> <ctl> <port>`.
pub(crate) fn serve(
    mode: &str,
    args: &[String],
    build: impl FnOnce(&Path, &Path, &Path) -> Endpoint,
) {
    let [ws, runs, ctl, port] = args else {
        panic!("{mode} <workspace> <runs> <ctl> <port>");
    };
    let port: u16 = port.parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let endpoint = build(Path::new(ws), Path::new(runs), Path::new(ctl));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        HttpServer::new(endpoint).serve(listener).await;
    });
}

pub(crate) struct Worker {
    pub(crate) child: Child,
    pub(crate) name: &'static str,
}

impl Worker {
    pub(crate) fn start(name: &'static str, dir: &Path, port: u16) -> Result<Self, String> {
        Self::start_as("worker", name, dir, port)
    }

    /// Starts this binary again as `mode` (`worker`, `worker-quota`).
    pub(crate) fn start_as(
        mode: &str,
        name: &'static str,
        dir: &Path,
        port: u16,
    ) -> Result<Self, String> {
        let log = std::fs::File::create(dir.join(format!("worker-{name}.log")))
            .map_err(|e| e.to_string())?;
        let child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
            .arg(mode)
            .arg(dir.join("ws"))
            .arg(dir.join("runs"))
            .arg(dir.join("ctl"))
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("worker {name} did not start: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(format!("worker {name} did not listen on {port} within 30s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Self { child, name })
    }

    /// Kills it by its PID (SIGKILL: no cleanup, as when a machine dies).
    pub(crate) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
