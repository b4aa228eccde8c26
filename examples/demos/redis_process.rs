//! A private `redis-server` for a demo run: a free loopback port, a temporary directory, no
//! persistence; killed (and its directory removed) when dropped, so on every way out of
//! `main` that unwinds or returns.

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to get a Redis when none is given and none can be started.
pub const INSTALL_HINT: &str = "needs Redis: pass --redis URL, or install redis-server \
     (apt-get install redis-server) so that a private one is started on a free loopback port";

/// How long a fresh server may take to answer PING.
const STARTUP_LIMIT: Duration = Duration::from_secs(5);

/// A `redis-server` child process on 127.0.0.1.
pub struct PrivateRedis {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl PrivateRedis {
    /// Whether `redis-server` can be run from PATH.
    pub fn available() -> bool {
        Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Starts one and waits until it answers PING; tries three ports (another process may
    /// take a free port first). The error is one line.
    pub fn start() -> Result<PrivateRedis, String> {
        let mut last = String::new();
        for _ in 0..3 {
            match Self::start_on(free_port()?) {
                Ok(redis) => return Ok(redis),
                Err(error) => last = error,
            }
        }
        Err(last)
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn start_on(port: u16) -> Result<PrivateRedis, String> {
        let dir = std::env::temp_dir().join(format!(
            "reqwest-polite-demo-redis-{}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).map_err(|error| format!("cannot create {dir:?}: {error}"))?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot start redis-server: {error}"))?;
        let mut redis = PrivateRedis { child, port, dir };
        redis.wait_for_ping()?;
        Ok(redis)
    }

    fn wait_for_ping(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + STARTUP_LIMIT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "redis-server on port {} exited at once ({status})",
                    self.port
                ));
            }
            let answered = redis::Client::open(self.url())
                .and_then(|client| client.get_connection_with_timeout(Duration::from_millis(200)))
                .and_then(|mut connection| redis::cmd("PING").query::<String>(&mut connection))
                .is_ok_and(|reply| reply == "PONG");
            if answered {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "redis-server on port {} did not answer PING within {STARTUP_LIMIT:?}",
            self.port
        ))
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port free on 127.0.0.1 right now (the kernel's pick for port 0).
fn free_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|error| format!("cannot bind a loopback port: {error}"))
}
