//! One `redis-server` child process in its own temporary directory.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

const NOT_FOUND: &str = "redis-server not found on PATH: install it (apt-get install redis-server), scripts/test.sh does this";
/// How long a fresh server may take to answer PING.
const STARTUP_LIMIT: Duration = Duration::from_secs(5);

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// Panics with the install hint when `program` cannot be run.
pub(crate) fn require(program: &str) {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(found, "{}", NOT_FOUND.replacen("redis-server", program, 1));
}

/// A running (or stopped) `redis-server` on a fixed port.
pub(crate) struct RedisProcess {
    port: u16,
    dir: PathBuf,
    extra_args: Vec<String>,
    child: Option<Child>,
}

impl RedisProcess {
    /// Starts a server on `port` and waits until it answers PING; `Err` if it exits or stays
    /// silent (the port was taken meanwhile, say).
    pub(crate) fn start(port: u16, extra_args: &[&str]) -> Result<Self, String> {
        require("redis-server");
        let dir = std::env::temp_dir().join(format!(
            "reqwest-polite-redis-{}-{port}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&dir).map_err(|err| format!("cannot create {dir:?}: {err}"))?;
        let mut process = Self {
            port,
            dir,
            extra_args: extra_args.iter().map(|arg| arg.to_string()).collect(),
            child: None,
        };
        process.spawn()?;
        Ok(process)
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// (Re)starts the server on the same port, in the same directory.
    pub(crate) fn spawn(&mut self) -> Result<(), String> {
        self.stop();
        let log = fs::File::create(self.dir.join("redis.log"))
            .map_err(|err| format!("cannot create log: {err}"))?;
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra_args)
            .stdout(log.try_clone().map_err(|err| err.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|err| format!("{NOT_FOUND} ({err})"))?;
        self.child = Some(child);
        self.wait_for_ping()
    }

    fn wait_for_ping(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + STARTUP_LIMIT;
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!(
                    "redis-server on port {} exited ({status}): {}",
                    self.port,
                    self.log()
                ));
            }
            if self.ping() {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(10));
        }
        self.stop();
        Err(format!(
            "redis-server on port {} did not answer PING within {STARTUP_LIMIT:?}: {}",
            self.port,
            self.log()
        ))
    }

    fn ping(&self) -> bool {
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        let Ok(mut connection) = client.get_connection_with_timeout(Duration::from_millis(200))
        else {
            return false;
        };
        redis::cmd("PING")
            .query::<String>(&mut connection)
            .is_ok_and(|reply| reply == "PONG")
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    /// Kills the server and waits for it to be gone.
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        self.stop();
        let _ = fs::remove_dir_all(&self.dir);
    }
}
