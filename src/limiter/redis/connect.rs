//! An eager start: reach Redis once before the first request, and say why when it cannot be
//! used, instead of finding out from the first call's timeout.
//!
//! A store that was never configured right (a wrong password, a TLS mismatch, a port that is
//! not Redis) is not an outage, and no failure policy should run it unpaced: the check fails
//! with a variant that names the cause, and its message says what to fix. When the Redis
//! client's own error names no cause (a reset, a reply it cannot parse, a TLS handshake that
//! never ends), the port is asked what speaks there ([`probe`](super::probe)).

use std::time::Duration;

use redis::{AsyncConnectionConfig, ConnectionAddr, ErrorKind, RedisError, Script};

use super::error::{is_denied_by_acl, is_refused_credentials};
use super::probe::{self, Speaker};
use super::{RedisOptions, RedisStore, RedisTls};

/// The longest a failed connection's port is asked what speaks there (the connect timeout
/// when shorter).
const PROBE_LIMIT: Duration = Duration::from_millis(500);

/// Why [`RedisStore::connect`] (or [`connect_tls`](RedisStore::connect_tls)) could not use
/// Redis. Each variant names the cause and its message says what to fix; the error from the
/// resolver or the Redis client, when there is one, is the
/// [`source`](std::error::Error::source).
///
/// Messages name the address (host and port, or socket path), never the URL's password.
///
/// ```
/// use reqwest_polite::limiter::redis::RedisConnectError;
///
/// let error = RedisConnectError::TlsRequired { address: "10.0.0.5:6380".into() };
/// assert_eq!(
///     error.to_string(),
///     "redis at 10.0.0.5:6380 speaks TLS only: use a rediss:// URL",
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisConnectError {
    /// The URL is not one the Redis client understands (a missing host, a bad port or
    /// database number…).
    #[error("not a valid redis URL")]
    InvalidUrl(#[source] RedisError),
    /// The URL's scheme is none of Redis's.
    #[error("`{scheme}:` is not a redis URL scheme: use redis://, rediss:// (TLS) or unix://")]
    UnknownScheme {
        /// The scheme, as the URL spells it.
        scheme: String,
    },
    /// A `rediss://` URL, in a build without TLS.
    #[error(
        "a rediss:// URL needs TLS, which this build lacks: enable the `rustls` or `native-tls` \
         feature of reqwest-polite"
    )]
    TlsNotBuilt,
    /// The [`RedisTls`] settings cannot be used: a PEM that does not parse, or TLS settings
    /// for a URL that is not `rediss://`.
    #[error("the TLS settings for redis cannot be used")]
    InvalidTls(#[source] RedisError),
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
    #[error(
        "redis at {address} refused to authenticate the connection: check the user and \
         password in the URL (redis://user:password@host:port)"
    )]
    Auth {
        /// Where the connection went.
        address: String,
        /// The client's error (`AuthenticationFailed`, `NOAUTH` or `WRONGPASS`).
        #[source]
        source: RedisError,
    },
    /// Redis knows the user, but its ACL denies what the limiters need.
    #[error(
        "redis at {address} denies this user what pacing needs: allow it the keys rp:* and \
         the commands +@read +@write +time +evalsha +eval +script|load"
    )]
    Permission {
        /// Where the connection went.
        address: String,
        /// The client's error (`NOPERM`, or an `ERR` for a command a script called).
        #[source]
        source: RedisError,
    },
    /// A plain `redis://` URL, and the server speaks TLS.
    #[error("redis at {address} speaks TLS only: use a rediss:// URL")]
    TlsRequired {
        /// Where the connection went.
        address: String,
    },
    /// A `rediss://` URL, and the server is Redis without TLS.
    #[error(
        "redis at {address} speaks no TLS: use a redis:// URL, or the port of the server's \
         TLS listener"
    )]
    TlsNotOffered {
        /// Where the connection went.
        address: String,
    },
    /// The server speaks TLS, and the handshake failed: most often a server certificate this
    /// client does not trust or one issued for another name, or a server that wants a client
    /// certificate.
    #[error(
        "the TLS handshake with redis at {address} failed: the server's certificate must be \
         issued for this host name by a CA this client trusts (RedisTls::with_root_certificates), \
         and a server that asks for a client certificate needs one \
         (RedisTls::with_client_certificate)"
    )]
    TlsHandshake {
        /// Where the connection went.
        address: String,
        /// The client's error (the TLS library's, under it).
        #[source]
        source: RedisError,
    },
    /// The server at the address is an HTTP server.
    #[error("the server at {address} speaks HTTP, not redis: check the host and port")]
    HttpServer {
        /// Where the connection went.
        address: String,
    },
    /// The server at the address answered in a way no Redis does.
    #[error("the server at {address} does not speak redis's protocol: check the host and port")]
    NotRedis {
        /// Where the connection went.
        address: String,
        /// The client's error.
        #[source]
        source: RedisError,
    },
    /// No answer to the connection and the check within the connect timeout.
    #[error("redis at {address} did not answer within {after:?}")]
    Timeout {
        /// Where the connection went.
        address: String,
        /// The connect timeout that ran out.
        after: Duration,
    },
    /// Any other failure on the way (a connection reset by a Redis, an error reply).
    #[error("cannot connect to redis at {address}")]
    Other {
        /// Where the connection went.
        address: String,
        /// The client's error.
        #[source]
        source: RedisError,
    },
}

/// What the check runs, as the limiters run their scripts (EVALSHA, and SCRIPT LOAD on
/// `NOSCRIPT`): a read of the server's clock and of a key under `rp:`, as every limiter script
/// does, so that an ACL that denies them fails the check.
static CHECK: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| {
    Script::new("redis.call('TIME') return redis.call('PTTL', KEYS[1])")
});
const CHECK_KEY: &str = "rp:{reqwest-polite}:connect-check";

impl RedisStore {
    /// A store on one Redis server, reached now: it resolves the host, connects (TLS for
    /// `rediss://`, trusting the platform's roots), authenticates with the URL's user and
    /// password, and runs a script as the limiters do, all within
    /// [`RedisOptions::connect_timeout`]. It fails with the cause when Redis cannot be used:
    /// refused, DNS, credentials, ACL, a TLS mismatch either way, a port that is not Redis,
    /// timeout. When the Redis client's error names no cause, the port is asked what speaks
    /// there, within 500 ms more at most.
    ///
    /// Made for start-up, where a wrong URL, a wrong password or a server that is down should
    /// stop the program with a clear message rather than leave it unpaced;
    /// [`standalone`](Self::standalone) starts even while Redis is down.
    ///
    /// The check uses a connection of its own, closed at once; the store then connects (and
    /// reconnects) as [`standalone`](Self::standalone) does.
    ///
    /// ```no_run
    /// use reqwest_polite::limiter::redis::{RedisConnectError, RedisOptions, RedisStore};
    ///
    /// # async fn run() {
    /// let url = "rediss://pacer:secret@redis.internal:6380";
    /// match RedisStore::connect(url, RedisOptions::default()).await {
    ///     Ok(store) => println!("pacing through {store:?}"),
    ///     Err(error @ RedisConnectError::Refused { .. }) => eprintln!("is Redis running? {error}"),
    ///     Err(error) => eprintln!("{error}"),
    /// }
    /// # }
    /// ```
    pub async fn connect(url: &str, opts: RedisOptions) -> Result<Self, RedisConnectError> {
        let client = open(url)?;
        Self::connect_client(client, opts).await
    }

    /// As [`connect`](Self::connect), to a `rediss://` URL with the TLS settings `tls`: a
    /// private certificate authority, a client certificate.
    ///
    /// ```no_run
    /// use reqwest_polite::limiter::redis::{RedisOptions, RedisStore, RedisTls};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let tls = RedisTls::default().with_root_certificates(std::fs::read("/etc/redis/ca.pem")?);
    /// let url = "rediss://pacer:secret@redis.internal:6380";
    /// let store = RedisStore::connect_tls(url, RedisOptions::default(), tls).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_tls(
        url: &str,
        opts: RedisOptions,
        tls: RedisTls,
    ) -> Result<Self, RedisConnectError> {
        open(url)?;
        tls.check().map_err(RedisConnectError::InvalidTls)?;
        let client = with_tls(url, &tls)?;
        Self::connect_client(client, opts).await
    }

    async fn connect_client(
        client: redis::Client,
        opts: RedisOptions,
    ) -> Result<Self, RedisConnectError> {
        check(&client, opts.connect_timeout).await?;
        let address = client.get_connection_info().addr().to_string();
        Self::lazy(client, opts).map_err(|source| RedisConnectError::Other { address, source })
    }
}

/// The client for `url`, or why there is none.
pub(super) fn open(url: &str) -> Result<redis::Client, RedisConnectError> {
    check_scheme(url)?;
    redis::Client::open(url).map_err(RedisConnectError::InvalidUrl)
}

/// Tells an unknown scheme, and a TLS scheme without TLS, from the rest of a bad URL.
fn check_scheme(url: &str) -> Result<(), RedisConnectError> {
    let Some((scheme, _)) = url.split_once(':') else {
        return Ok(());
    };
    match scheme.to_ascii_lowercase().as_str() {
        "redis" | "valkey" | "unix" | "redis+unix" | "valkey+unix" => Ok(()),
        "rediss" | "valkeys" if cfg!(any(feature = "rustls", feature = "native-tls")) => Ok(()),
        "rediss" | "valkeys" => Err(RedisConnectError::TlsNotBuilt),
        // not a scheme at all (`[::1]:6379`): the client's own error says more
        _ if !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            Ok(())
        }
        _ => Err(RedisConnectError::UnknownScheme {
            scheme: scheme.to_owned(),
        }),
    }
}

/// The client for `url` (already checked), with the TLS settings `tls`.
#[cfg(any(feature = "rustls", feature = "native-tls"))]
pub(super) fn with_tls(url: &str, tls: &RedisTls) -> Result<redis::Client, RedisConnectError> {
    redis::Client::build_with_tls(url, tls.certificates()).map_err(RedisConnectError::InvalidTls)
}

/// Without TLS, a `rediss://` URL was refused by [`open`]: `url` is a plain one.
#[cfg(not(any(feature = "rustls", feature = "native-tls")))]
pub(super) fn with_tls(_url: &str, _tls: &RedisTls) -> Result<redis::Client, RedisConnectError> {
    Err(RedisConnectError::InvalidTls(RedisError::from((
        ErrorKind::InvalidClientConfig,
        "TLS settings need a rediss:// URL",
    ))))
}

/// Resolves, connects, authenticates and runs [`CHECK`] within `timeout`; names the cause of a
/// failure, asking the port what speaks there when the client's error does not say.
async fn check(client: &redis::Client, timeout: Duration) -> Result<(), RedisConnectError> {
    let addr = client.get_connection_info().addr().clone();
    let address = addr.to_string();
    let unexplained = match tokio::time::timeout(timeout, attempt(client, &addr, timeout)).await {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(Failure::Dns(host, source))) => return Err(RedisConnectError::Dns { host, source }),
        Ok(Err(Failure::Redis(source))) if source.is_timeout() => None,
        Ok(Err(Failure::Redis(source))) => match explained(source, &addr) {
            Ok(error) => return Err(error),
            Err(source) => Some(source),
        },
        Err(_) => None,
    };
    let timed_out = RedisConnectError::Timeout {
        address: address.clone(),
        after: timeout,
    };
    let (host, port, tls) = match &addr {
        ConnectionAddr::Tcp(host, port) => (host, *port, false),
        ConnectionAddr::TcpTls { host, port, .. } => (host, *port, true),
        _ => {
            return Err(
                unexplained.map_or(timed_out, |source| RedisConnectError::Other {
                    address,
                    source,
                }),
            );
        }
    };
    // A plain URL that timed out found a silent server: asking again tells nothing new. A TLS
    // URL may have found a plain Redis waiting for the end of a line the handshake never sends.
    if unexplained.is_none() && !tls {
        return Err(timed_out);
    }
    let speaker = probe::speaker(host, port, PROBE_LIMIT.min(timeout)).await;
    Err(match (speaker, tls, unexplained) {
        (Speaker::Http, _, _) => RedisConnectError::HttpServer { address },
        (Speaker::Tls, false, _) => RedisConnectError::TlsRequired { address },
        (Speaker::PlainRedis, true, _) => RedisConnectError::TlsNotOffered { address },
        (Speaker::Tls, true, Some(source)) => RedisConnectError::TlsHandshake { address, source },
        (Speaker::Unknown, _, Some(source)) if source.kind() == ErrorKind::Parse => {
            RedisConnectError::NotRedis { address, source }
        }
        (_, _, Some(source)) => RedisConnectError::Other { address, source },
        (_, _, None) => timed_out,
    })
}

/// The error for a client error that names its cause; `Err` gives back one that does not.
fn explained(source: RedisError, addr: &ConnectionAddr) -> Result<RedisConnectError, RedisError> {
    let address = addr.to_string();
    if source.is_connection_refusal() {
        Ok(RedisConnectError::Refused { address, source })
    } else if is_refused_credentials(&source) {
        Ok(RedisConnectError::Auth { address, source })
    } else if is_denied_by_acl(&source) {
        Ok(RedisConnectError::Permission { address, source })
    } else if source.kind() == ErrorKind::InvalidClientConfig
        && matches!(addr, ConnectionAddr::TcpTls { .. })
    {
        // e.g. `#insecure` without the redis crate's feature for it: settings, not the server
        Ok(RedisConnectError::InvalidTls(source))
    } else {
        Err(source)
    }
}

/// What went wrong before the connect timeout.
enum Failure {
    Dns(String, std::io::Error),
    Redis(RedisError),
}

/// Resolves the host (so a name that does not resolve is told apart from the rest), connects
/// and runs [`CHECK`], the client's own timeouts no shorter than the caller's.
async fn attempt(
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
    CHECK
        .key(CHECK_KEY)
        .invoke_async::<i64>(&mut connection)
        .await
        .map(drop)
        .map_err(Failure::Redis)
}
