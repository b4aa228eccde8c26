use std::time::Duration;

#[cfg(any(feature = "rustls", feature = "native-tls"))]
use super::certificates::TestCertificates;
use super::ports::free_port;
use super::process::RedisProcess;

/// A standalone `redis-server` on a free loopback port, killed on drop.
///
/// Panics (never skips) when `redis-server` is missing, with the command to install it.
pub struct RedisServer {
    process: RedisProcess,
}

/// How a [`RedisServer::start_tls`] server lets clients in.
#[cfg(any(feature = "rustls", feature = "native-tls"))]
pub struct TlsServerSetup<'a> {
    /// Its certificate, and the CA that signed it (and the clients' certificates).
    pub certificates: &'a TestCertificates,
    /// The default user's password (`requirepass`).
    pub password: &'a str,
    /// ACL users, each as the rules of one `user` directive: `["pacer", "on", ">secret",
    /// "~rp:*", "+@all"]`.
    pub users: &'a [&'a [&'a str]],
    /// Whether a client must show a certificate the CA signed (`tls-auth-clients`).
    pub client_certificates: bool,
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

    #[cfg(any(feature = "rustls", feature = "native-tls"))]
    /// Starts a server that speaks TLS only (`--port 0`, `--tls-port`), with the password and
    /// ACL users of `setup`, and waits until it answers PING (over TLS, with the password).
    /// Panics, after 5 tries on other ports, when it cannot start: a `redis-server` built
    /// without TLS says so in the message.
    pub fn start_tls(setup: &TlsServerSetup<'_>) -> RedisServer {
        let certificates = setup.certificates;
        let path = |file: std::path::PathBuf| file.to_str().expect("a UTF-8 path").to_owned();
        let (cert, key, ca) = (
            path(certificates.server_file()),
            path(certificates.server_key_file()),
            path(certificates.ca_file()),
        );
        let auth_clients = if setup.client_certificates {
            "yes"
        } else {
            "no"
        };
        let mut failures = Vec::new();
        for _ in 0..5 {
            let port = free_port();
            let tls_port = port.to_string();
            // `--port 0` after the support's own `--port`: the last one counts
            let mut args = vec!["--port", "0", "--tls-port", &tls_port];
            args.extend(["--tls-cert-file", &cert, "--tls-key-file", &key]);
            args.extend([
                "--tls-ca-cert-file",
                &ca,
                "--tls-auth-clients",
                auth_clients,
            ]);
            args.extend(["--requirepass", setup.password]);
            for user in setup.users {
                args.push("--user");
                args.extend(user.iter().copied());
            }
            let url = format!("rediss://:{}@127.0.0.1:{port}", setup.password);
            let client_tls = setup.client_certificates.then(|| redis::ClientTlsConfig {
                client_cert: certificates.client_pem.clone().into_bytes(),
                client_key: certificates.client_key_pem.clone().into_bytes(),
            });
            let tls = redis::TlsCertificates {
                client_tls,
                root_cert: Some(certificates.ca_pem.clone().into_bytes()),
            };
            let client = redis::Client::build_with_tls(url, tls)
                .unwrap_or_else(|err| panic!("no TLS client for the test server: {err}"));
            match RedisProcess::start_reached_by(port, &args, client) {
                Ok(process) => return RedisServer { process },
                Err(err) => failures.push(err),
            }
        }
        panic!("redis-server with TLS did not start after 5 tries: {failures:#?}")
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

    /// Forgets the server's command statistics (`CONFIG RESETSTAT`).
    pub fn reset_stats(&self) {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut self.connection())
            .unwrap_or_else(|err| panic!("CONFIG RESETSTAT failed: {err}"));
    }

    /// Script calls the server ran to completion since the last [`reset_stats`](Self::reset_stats)
    /// (`EVALSHA` and `EVAL`, from `INFO commandstats`; failed ones, such as the `NOSCRIPT`
    /// that makes a client load a script, are not counted).
    pub fn script_calls(&self) -> u64 {
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.connection())
            .unwrap_or_else(|err| panic!("INFO commandstats failed: {err}"));
        stats
            .lines()
            .filter(|line| {
                line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:")
            })
            .map(|line| {
                let field = |name: &str| -> u64 {
                    line.split([':', ','])
                        .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
                        .and_then(|value| value.parse().ok())
                        .unwrap_or(0)
                };
                field("calls") - field("failed_calls")
            })
            .sum()
    }

    /// A fresh synchronous connection, for arranging and inspecting state in tests (over TLS
    /// and with the password, for a [`start_tls`](Self::start_tls) server).
    pub fn connection(&self) -> redis::Connection {
        self.process
            .client()
            .get_connection_with_timeout(Duration::from_secs(1))
            .unwrap_or_else(|err| panic!("cannot connect to redis on port {}: {err}", self.port()))
    }
}
