use std::time::Duration;

use super::ports::free_port;
use super::process::RedisProcess;

/// A standalone `redis-server` on a free loopback port, killed on drop.
///
/// Panics (never skips) when `redis-server` is missing, with the command to install it.
pub struct RedisServer {
    process: RedisProcess,
}

impl RedisServer {
    /// Starts a server and waits until it answers PING. Retries on another port if another
    /// process took the chosen one first.
    pub fn start() -> RedisServer {
        let mut failures = Vec::new();
        for _ in 0..5 {
            match RedisProcess::start(free_port(), &[]) {
                Ok(process) => return RedisServer { process },
                Err(err) => failures.push(err),
            }
        }
        panic!("redis-server did not start after 5 tries: {failures:#?}")
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        self.process.url()
    }

    /// The port it listens on (kept across [`restart`](Self::restart)).
    pub fn port(&self) -> u16 {
        self.process.port()
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Kills the server; the port stays reserved for [`restart`](Self::restart).
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Starts the server again on the same port (empty: no persistence), waiting for PING.
    pub fn restart(&mut self) {
        let mut last = String::new();
        // the old socket may linger for a moment
        for _ in 0..20 {
            match self.process.spawn() {
                Ok(()) => return,
                Err(err) => last = err,
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "redis-server did not restart on port {}: {last}",
            self.port()
        )
    }

    /// A fresh synchronous connection, for arranging and inspecting state in tests.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(1)))
            .unwrap_or_else(|err| panic!("cannot connect to {}: {err}", self.url()))
    }
}
