//! One `redis-server` child process in its own temporary directory, tied to the life of the test
//! process: killed with it, however it ends (panic, CI timeout, SIGTERM, SIGKILL), and its files
//! removed.
//!
//! Two mechanisms, because a killed process runs no `Drop`:
//!
//! - every server is spawned with `PR_SET_PDEATHSIG = SIGKILL`, so the kernel kills it when its
//!   parent dies. The kernel ties that signal to the *thread* that forked, not the process, and
//!   test threads end with their tests; so all servers are forked by one spawner thread that
//!   lives as long as the process.
//! - every server directory lives under one root per test process, and a guard `sh` child
//!   removes that root once the pipe on its stdin closes. The test process holds the pipe's
//!   only write end until it exits, by any means; the kernel then closes it.

use std::fs;
use std::io;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
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

/// The directory holding every server directory of this test process; removed by the guard
/// when the process ends.
pub fn temp_root() -> &'static Path {
    static ROOT: OnceLock<(PathBuf, Mutex<Child>)> = OnceLock::new();
    let (root, _guard) = ROOT.get_or_init(|| {
        let root =
            std::env::temp_dir().join(format!("reqwest-polite-redis-{}", std::process::id()));
        fs::create_dir_all(&root).unwrap_or_else(|err| panic!("cannot create {root:?}: {err}"));
        // `cat` returns when the pipe closes, i.e. when this process is gone; the loop outlasts
        // a server that was still writing its files when it was killed. Signals sent to the
        // whole process group (Ctrl-C, `timeout`) are ignored: the guard must outlive the group.
        let script = r#"trap '' HUP INT QUIT TERM
cat >/dev/null
for _ in 1 2 3 4 5 6 7 8 9 10; do
  rm -rf -- "$1" 2>/dev/null
  [ -e "$1" ] || exit 0
  sleep 0.1
done"#;
        let guard = Command::new("sh")
            .args(["-c", script, "reqwest-polite-cleanup"])
            .arg(&root)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // its own process group, out of reach of signals sent to the test's group
            .process_group(0)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start the cleanup guard: {err}"));
        // Kept, with the write end of its stdin, in a static that is never dropped: only the
        // process's end closes the pipe. Rust opens pipes close-on-exec, so no other child
        // inherits that end and keeps the guard waiting. Never waited for: it outlives us.
        (root, Mutex::new(guard))
    });
    root
}

/// A command for the spawner thread, and where to send the child back.
type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `command` from the process-long spawner thread, its child killed when this process
/// dies.
pub(crate) fn spawn_tied_to_this_process(command: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<SpawnRequest>();
        thread::Builder::new()
            .name("redis-spawner".into())
            // Never joined: it must outlive every test thread, so it ends with the process.
            .spawn(move || {
                for (mut command, reply) in incoming {
                    let _ = reply.send(spawn_with_parent_death_signal(&mut command));
                }
            })
            .expect("cannot start the spawner thread");
        Mutex::new(requests)
    });
    let (reply, answer) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .send((command, reply))
        .expect("the spawner thread is gone");
    answer.recv().expect("the spawner thread dropped a request")
}

fn spawn_with_parent_death_signal(command: &mut Command) -> io::Result<Child> {
    // Linux pids fit in pid_t.
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and only makes two system
    // calls (prctl, getppid) and builds io::Errors from error numbers: no allocation, no lock,
    // nothing that is unsafe between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then no signal will ever come.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    command.spawn()
}

/// A running (or stopped) `redis-server` on a fixed port.
pub(crate) struct RedisProcess {
    port: u16,
    dir: PathBuf,
    extra_args: Vec<String>,
    /// How to reach it: plain and without a password, unless started with another client.
    client: redis::Client,
    child: Option<Child>,
}

impl RedisProcess {
    /// Starts a server on `port` and waits until it answers PING; `Err` if it exits or stays
    /// silent (the port was taken meanwhile, say).
    pub(crate) fn start(port: u16, extra_args: &[&str]) -> Result<Self, String> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .map_err(|err| format!("no client for port {port}: {err}"))?;
        Self::start_reached_by(port, extra_args, client)
    }

    /// As [`start`](Self::start), for a server that `client` reaches (TLS, a password): the
    /// PING that says it is up goes through `client`.
    pub(crate) fn start_reached_by(
        port: u16,
        extra_args: &[&str],
        client: redis::Client,
    ) -> Result<Self, String> {
        require("redis-server");
        let dir = temp_root().join(format!(
            "{port}-{}",
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&dir).map_err(|err| format!("cannot create {dir:?}: {err}"))?;
        let mut process = Self {
            port,
            dir,
            extra_args: extra_args.iter().map(|arg| arg.to_string()).collect(),
            client,
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

    /// The server's process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// (Re)starts the server on the same port, in the same directory.
    pub(crate) fn spawn(&mut self) -> Result<(), String> {
        self.stop();
        let log = fs::File::create(self.dir.join("redis.log"))
            .map_err(|err| format!("cannot create log: {err}"))?;
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|err| err.to_string())?)
            .stderr(log);
        let child =
            spawn_tied_to_this_process(command).map_err(|err| format!("{NOT_FOUND} ({err})"))?;
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

    /// The client that reaches the server.
    pub(crate) fn client(&self) -> &redis::Client {
        &self.client
    }

    fn ping(&self) -> bool {
        let Ok(mut connection) = self
            .client
            .get_connection_with_timeout(Duration::from_millis(200))
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
