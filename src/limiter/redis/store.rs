use std::fmt;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{FromRedisValue, Script};

use super::{RedisLimitError, RedisTls};

/// Timeouts for talking to Redis. Build with [`Default`] and the `with_*` setters.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::limiter::redis::RedisOptions;
///
/// let opts = RedisOptions::default().with_command_timeout(Duration::from_millis(20));
/// assert_eq!(opts.command_timeout, Duration::from_millis(20));
/// assert_eq!(opts.connect_timeout, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisOptions {
    /// Longest wait for one call, reconnection and script upload included (default 50 ms): a
    /// limiter that waits longer than that is worse than none.
    pub command_timeout: Duration,
    /// Longest wait to open one connection (default 1 s).
    pub connect_timeout: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            command_timeout: Duration::from_millis(50),
            connect_timeout: Duration::from_secs(1),
        }
    }
}

impl RedisOptions {
    /// Sets the longest wait for one call.
    pub const fn with_command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Sets the longest wait to open one connection.
    pub const fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
}

/// A cheap-to-clone handle on standalone Redis or Redis Cluster, through which every limiter
/// script runs: each call is bounded by [`RedisOptions::command_timeout`], and lost connections
/// are re-established by the client in the background.
///
/// ```no_run
/// use reqwest_polite::limiter::redis::{RedisOptions, RedisStore};
///
/// # async fn run() -> Result<(), reqwest_polite::limiter::redis::RedisLimitError> {
/// let store = RedisStore::standalone("redis://127.0.0.1:6379", RedisOptions::default()).await?;
/// let script = redis::Script::new("return redis.call('INCR', KEYS[1])");
/// let n: i64 = store.eval(&script, &["rp:{demo}:n".to_string()], &[]).await?;
/// assert!(n >= 1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    connection: Connection,
    opts: RedisOptions,
}

#[derive(Clone)]
enum Connection {
    Standalone(ConnectionManager),
    Cluster(ClusterConnection),
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.connection {
            Connection::Standalone(_) => "standalone",
            Connection::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisStore")
            .field("kind", &kind)
            .field("opts", &self.opts)
            .finish()
    }
}

impl RedisStore {
    /// A store on one Redis server, e.g. `redis://127.0.0.1:6379`.
    ///
    /// It connects lazily: a server that is down now gives errors on calls (within the command
    /// timeout), not here, and is picked up once it comes back. Only a malformed URL fails here;
    /// [`connect`](Self::connect) reaches the server first, and says why it cannot.
    ///
    /// A store that cannot work at all (a wrong password, a TLS mismatch) looks down from here:
    /// the client retries its connection until each call times out. In production, where a
    /// misconfigured store must stop the program rather than leave it to a failure policy,
    /// start with [`connect`](Self::connect).
    pub async fn standalone(url: &str, opts: RedisOptions) -> Result<Self, RedisLimitError> {
        let client = redis::Client::open(url).map_err(RedisLimitError::Redis)?;
        Self::lazy(client, opts).map_err(RedisLimitError::Redis)
    }

    /// A standalone store on `client`'s server, connecting on first use.
    pub(super) fn lazy(client: redis::Client, opts: RedisOptions) -> redis::RedisResult<Self> {
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(opts.command_timeout))
            .set_connection_timeout(Some(opts.connect_timeout))
            // reconnect quickly and keep trying: a restarted Redis should be used within ~100 ms
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(100));
        let manager = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Self {
            connection: Connection::Standalone(manager),
            opts,
        })
    }

    /// A store on a Redis Cluster, given one or more of its nodes' URLs (`rediss://` for TLS,
    /// trusting the platform's roots).
    ///
    /// It connects now, to learn the cluster's slots: an unreachable cluster fails here, within
    /// the connect timeout, and so do credentials Redis refuses
    /// ([`RedisLimitError::is_misconfigured`]).
    pub async fn cluster(urls: &[&str], opts: RedisOptions) -> Result<Self, RedisLimitError> {
        Self::cluster_with(ClusterClientBuilder::new(urls.iter().copied()), opts).await
    }

    /// As [`cluster`](Self::cluster), with the TLS settings `tls` for every node (`rediss://`
    /// URLs): a private certificate authority, a client certificate. The redis crate takes
    /// them for a cluster with rustls only: with the `native-tls` feature alone, this fails
    /// with an error of kind `InvalidClientConfig`.
    pub async fn cluster_tls(
        urls: &[&str],
        opts: RedisOptions,
        tls: RedisTls,
    ) -> Result<Self, RedisLimitError> {
        tls.check().map_err(RedisLimitError::Redis)?;
        let builder = with_certificates(ClusterClientBuilder::new(urls.iter().copied()), &tls)?;
        Self::cluster_with(builder, opts).await
    }

    async fn cluster_with(
        builder: ClusterClientBuilder,
        opts: RedisOptions,
    ) -> Result<Self, RedisLimitError> {
        let client = builder
            .connection_timeout(opts.connect_timeout)
            .response_timeout(opts.command_timeout)
            // a redirect or two after a topology change; the call's timeout bounds the rest
            .retries(2)
            .build()
            .map_err(RedisLimitError::Redis)?;
        let connect = client.get_async_connection();
        let connection = tokio::time::timeout(opts.connect_timeout, connect)
            .await
            .map_err(|_| RedisLimitError::Timeout {
                after: opts.connect_timeout,
            })?
            .map_err(|err| RedisLimitError::from_redis(err, opts.connect_timeout))?;
        Ok(Self {
            connection: Connection::Cluster(connection),
            opts,
        })
    }

    /// The timeouts this store was built with.
    pub fn options(&self) -> RedisOptions {
        self.opts
    }

    /// Runs `script` atomically (EVALSHA, uploading it on `NOSCRIPT`) within the command
    /// timeout. On a cluster, all `keys` must share one `{hash tag}`.
    ///
    /// Other modules run their own scripts through this, so they get the same timeout and
    /// reconnection behaviour as the limiters.
    pub async fn eval<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &[String],
        args: &[String],
    ) -> Result<T, RedisLimitError> {
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        for arg in args {
            invocation.arg(arg);
        }
        let timeout = self.opts.command_timeout;
        let call = async {
            match &self.connection {
                Connection::Standalone(manager) => {
                    invocation.invoke_async(&mut manager.clone()).await
                }
                Connection::Cluster(cluster) => invocation.invoke_async(&mut cluster.clone()).await,
            }
        };
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| RedisLimitError::Timeout { after: timeout })?
            .map_err(|err| RedisLimitError::from_redis(err, timeout))
    }
}

/// `builder` with the TLS settings `tls`.
#[cfg(feature = "rustls")]
fn with_certificates(
    builder: ClusterClientBuilder,
    tls: &RedisTls,
) -> Result<ClusterClientBuilder, RedisLimitError> {
    Ok(builder.certs(tls.certificates()))
}

/// The redis crate takes a cluster's TLS settings with rustls only.
#[cfg(not(feature = "rustls"))]
fn with_certificates(
    _builder: ClusterClientBuilder,
    _tls: &RedisTls,
) -> Result<ClusterClientBuilder, RedisLimitError> {
    Err(RedisLimitError::Redis(redis::RedisError::from((
        redis::ErrorKind::InvalidClientConfig,
        "TLS settings for a Redis Cluster need the `rustls` feature",
    ))))
}
