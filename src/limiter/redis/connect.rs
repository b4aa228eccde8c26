//! An eager start: reach Redis once before the first request, and say why when it cannot be
//! reached, instead of finding out from the first call's timeout.

use std::time::Duration;

use redis::{AsyncConnectionConfig, ConnectionAddr, ErrorKind, RedisError};

use super::{RedisOptions, RedisStore};

/// Why [`RedisStore::connect`] could not reach Redis. Each variant names the cause; the
/// error from the resolver or the Redis client is the [`source`](std::error::Error::source).
///
/// Messages name the address (host and port, or socket path), never the URL's password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisConnectError {
    /// The URL is not one the Redis client understands.
    #[error("not a valid redis URL")]
    InvalidUrl(#[source] RedisError),
    /// The host name did not resolve to any address.
    #[error("cannot resolve the redis host {host}")]
    Dns {
        /// The host name that did not resolve.
        host: String,
        /// The resolver's error.
        #[source]
        source: std::io::Error,
    },
    /// Nothing listens at the address (or the socket file does not exist).
    #[error("redis at {address} refused the connection")]
    Refused {
        /// Where the connection went.
        address: String,
        /// The client's error (an I/O error of kind `ConnectionRefused`).
        #[source]
        source: RedisError,
    },
    /// Redis refused the credentials, or asked for some the URL does not carry.
    #[error("redis at {address} refused to authenticate the connection")]
    Auth {
        /// Where the connection went.
        address: String,
        /// The client's error (`AuthenticationFailed`, `NOAUTH` or `WRONGPASS`).
        #[source]
        source: RedisError,
    },
    /// No answer to the connection and a `PING` within the connect timeout.
    #[error("redis at {address} did not answer within {after:?}")]
    Timeout {
        /// Where the connection went.
        address: String,
        /// The connect timeout that ran out.
        after: Duration,
    },
    /// Any other failure on the way (a connection reset, TLS, an error reply to `PING`).
    #[error("cannot connect to redis at {address}")]
    Other {
        /// Where the connection went.
        address: String,
        /// The client's error.
        #[source]
        source: RedisError,
    },
}

impl RedisStore {
    /// A store on one Redis server, reached now: it resolves the host, connects and sends a
    /// `PING`, all within [`RedisOptions::connect_timeout`], and fails with the cause
    /// (refused, DNS, authentication, timeout) when Redis cannot be used. Made for start-up,
    /// where a wrong URL or a server that is down should stop the program with a clear
    /// message; [`standalone`](Self::standalone) starts even while Redis is down.
    ///
    /// The check uses a connection of its own, closed at once; the store then connects (and
    /// reconnects) as [`standalone`](Self::standalone) does.
    ///
    /// ```no_run
    /// use reqwest_polite::limiter::redis::{RedisConnectError, RedisOptions, RedisStore};
    ///
    /// # async fn run() {
    /// match RedisStore::connect("redis://127.0.0.1:6379", RedisOptions::default()).await {
    ///     Ok(store) => println!("pacing through {store:?}"),
    ///     Err(error @ RedisConnectError::Refused { .. }) => eprintln!("is Redis running? {error}"),
    ///     Err(error) => eprintln!("{error}"),
    /// }
    /// # }
    /// ```
    pub async fn connect(url: &str, opts: RedisOptions) -> Result<Self, RedisConnectError> {
        let client = redis::Client::open(url).map_err(RedisConnectError::InvalidUrl)?;
        let addr = client.get_connection_info().addr().clone();
        let address = addr.to_string();
        let after = opts.connect_timeout;
        tokio::time::timeout(after, ping(&client, &addr, after))
            .await
            .map_err(|_| RedisConnectError::Timeout {
                address: address.clone(),
                after,
            })?
            .map_err(|failure| failure.into_error(address.clone(), after))?;
        Self::lazy(client, opts).map_err(|source| RedisConnectError::Other { address, source })
    }
}

/// What went wrong before the connect timeout.
enum Failure {
    Dns(String, std::io::Error),
    Redis(RedisError),
}

impl Failure {
    fn into_error(self, address: String, after: Duration) -> RedisConnectError {
        match self {
            Failure::Dns(host, source) => RedisConnectError::Dns { host, source },
            Failure::Redis(source) if source.is_timeout() => {
                RedisConnectError::Timeout { address, after }
            }
            Failure::Redis(source) if source.is_connection_refusal() => {
                RedisConnectError::Refused { address, source }
            }
            Failure::Redis(source) if is_auth(&source) => {
                RedisConnectError::Auth { address, source }
            }
            Failure::Redis(source) => RedisConnectError::Other { address, source },
        }
    }
}

/// Resolves the host (so a name that does not resolve is told apart from the rest), connects
/// and pings, the client's own timeouts no shorter than the caller's.
async fn ping(
    client: &redis::Client,
    addr: &ConnectionAddr,
    timeout: Duration,
) -> Result<(), Failure> {
    if let ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } = addr {
        let resolved = tokio::net::lookup_host((host.as_str(), *port)).await;
        match resolved.map(|mut addresses| addresses.next()) {
            Ok(Some(_)) => {}
            Ok(None) => {
                let none = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
                return Err(Failure::Dns(host.clone(), none));
            }
            Err(error) => return Err(Failure::Dns(host.clone(), error)),
        }
    }
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    let mut connection = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(Failure::Redis)?;
    redis::cmd("PING")
        .query_async::<()>(&mut connection)
        .await
        .map_err(Failure::Redis)
}

/// Whether Redis refused the credentials: at the handshake, or by answering `NOAUTH` to the
/// first command when the URL carries none.
fn is_auth(error: &RedisError) -> bool {
    error.kind() == ErrorKind::AuthenticationFailed
        || matches!(error.code(), Some("NOAUTH" | "WRONGPASS"))
}
