//! A llama-server of the test's own, on a free port, ended when dropped; waiting on children.

use super::*;

/// `GET /health` answered 200.
pub(crate) fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    reply.starts_with("HTTP/1.1 200") || reply.starts_with("HTTP/1.0 200")
}

/// Where a test's own servers run: a free port of 127.0.0.1, and a folder for their logs.
pub(crate) struct Spot {
    pub(crate) port: u16,
    /// `http://127.0.0.1:<port>`.
    pub(crate) url: String,
    logs: tempfile::TempDir,
}

impl Spot {
    pub(crate) fn free() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self {
            port,
            url: format!("http://127.0.0.1:{port}"),
            logs: tempfile::tempdir().unwrap(),
        }
    }

    /// The log file `name` in the logs folder.
    pub(crate) fn log(&self, name: &str) -> PathBuf {
        self.logs.path().join(name)
    }

    /// Starts a server here ([`OwnServer::start`]), logging to the log file `log`.
    pub(crate) fn start(&self, e: &Env, log: &str, template: Option<&Path>) -> OwnServer {
        OwnServer::start(e, self.port, &self.log(log), template)
    }
}

/// A `llama-server` this test starts and stops itself (by its own child handle).
pub(crate) struct OwnServer {
    child: Child,
}

impl OwnServer {
    /// Starts it on `port`, logging to `log`, with the model's own chat template or `template`.
    pub(crate) fn start(e: &Env, port: u16, log: &Path, template: Option<&Path>) -> Self {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(&e.bin)
            .args(["-m"])
            .arg(&e.model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "-c", "4096", "-np", "1", "--temp", "0", "--seed", "1", "-t", "1",
            ])
            .args(["--jinja", "--no-webui", "--api-key", &e.key])
            .args(
                template
                    .map(|t| [Path::new("--chat-template-file"), t])
                    .into_iter()
                    .flatten(),
            )
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", e.bin.display()));
        let server = Self { child };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !healthy(port) {
            assert!(
                Instant::now() < deadline,
                "llama-server on port {port} is not healthy after 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// Ends it now (as dropping it does).
    pub(crate) fn stop(self) {
        drop(self);
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap()
}

/// Waits for `child` up to `limit`; kills it (and fails) past that.
pub(crate) fn wait_for(mut child: Child, limit: Duration, what: &str) -> Output {
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("{what} took over {limit:?}:\n{}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
