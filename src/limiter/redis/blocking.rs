use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::{ConnectionLike, FromRedisValue, Script};

use super::{RedisLimitError, RedisOptions};

/// A blocking handle on standalone Redis or Redis Cluster, for code that cannot `.await`
/// (wiremock's `Respond` is synchronous). Clones share one connection, used under a lock.
///
/// Each round trip is bounded by [`RedisOptions::command_timeout`] (socket read and write
/// timeouts); a broken connection is dropped and reopened on the next call, within
/// [`RedisOptions::connect_timeout`].
///
/// ```no_run
/// use reqwest_polite::limiter::redis::{BlockingRedisStore, RedisOptions};
///
/// let store = BlockingRedisStore::standalone("redis://127.0.0.1:6379", RedisOptions::default())?;
/// let script = redis::Script::new("return redis.call('INCR', KEYS[1])");
/// let n: i64 = store.eval(&script, &["rp:{demo}:n".to_string()], &[])?;
/// assert!(n >= 1);
/// # Ok::<(), reqwest_polite::limiter::redis::RedisLimitError>(())
/// ```
#[derive(Clone)]
pub struct BlockingRedisStore {
    target: Arc<Target>,
    connection: Arc<Mutex<Option<Box<dyn ConnectionLike + Send>>>>,
    opts: RedisOptions,
}

enum Target {
    // Boxed as the cluster's: with TLS, a client holds its certificates inline.
    Standalone(Box<redis::Client>),
    Cluster(Box<ClusterClient>),
}

impl fmt::Debug for BlockingRedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match *self.target {
            Target::Standalone(_) => "standalone",
            Target::Cluster(_) => "cluster",
        };
        f.debug_struct("BlockingRedisStore")
            .field("kind", &kind)
            .field("opts", &self.opts)
            .finish()
    }
}

impl BlockingRedisStore {
    /// A store on one Redis server. It connects on first use, so a server that is down now
    /// gives errors on calls, not here.
    pub fn standalone(url: &str, opts: RedisOptions) -> Result<Self, RedisLimitError> {
        let client = redis::Client::open(url).map_err(RedisLimitError::Redis)?;
        Ok(Self::new(Target::Standalone(Box::new(client)), opts))
    }

    /// A store on a Redis Cluster, given one or more of its nodes' URLs. It connects now, to
    /// learn the cluster's slots.
    pub fn cluster(urls: &[&str], opts: RedisOptions) -> Result<Self, RedisLimitError> {
        let client = ClusterClientBuilder::new(urls.iter().copied())
            .connection_timeout(opts.connect_timeout)
            .response_timeout(opts.command_timeout)
            .retries(1)
            .build()
            .map_err(RedisLimitError::Redis)?;
        let store = Self::new(Target::Cluster(Box::new(client)), opts);
        let connection = store.connect()?;
        *store.lock() = Some(connection);
        Ok(store)
    }

    fn new(target: Target, opts: RedisOptions) -> Self {
        Self {
            target: Arc::new(target),
            connection: Arc::new(Mutex::new(None)),
            opts,
        }
    }

    /// The timeouts this store was built with.
    pub fn options(&self) -> RedisOptions {
        self.opts
    }

    fn lock(&self) -> MutexGuard<'_, Option<Box<dyn ConnectionLike + Send>>> {
        // a panic elsewhere while holding the lock leaves at worst a broken connection, which
        // the next error replaces
        self.connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn connect(&self) -> Result<Box<dyn ConnectionLike + Send>, RedisLimitError> {
        let timeout = self.opts.connect_timeout;
        let map = |err| RedisLimitError::from_redis(err, timeout);
        match &*self.target {
            Target::Standalone(client) => {
                let connection = client.get_connection_with_timeout(timeout).map_err(map)?;
                let round_trip = Some(self.opts.command_timeout);
                connection.set_read_timeout(round_trip).map_err(map)?;
                connection.set_write_timeout(round_trip).map_err(map)?;
                Ok(Box::new(connection))
            }
            Target::Cluster(client) => Ok(Box::new(client.get_connection().map_err(map)?)),
        }
    }

    /// Runs `script` atomically (EVALSHA, uploading it on `NOSCRIPT`). On a cluster, all `keys`
    /// must share one `{hash tag}`.
    pub fn eval<T: FromRedisValue>(
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
        let mut slot = self.lock();
        let connection = match slot.as_mut() {
            Some(connection) => connection,
            None => slot.insert(self.connect()?),
        };
        let result = invocation.invoke(connection.as_mut());
        if let Err(err) = &result {
            // after a timeout or I/O error the connection may hold a stale reply: start afresh
            if !matches!(err.kind(), redis::ErrorKind::Server(_)) {
                *slot = None;
            }
        }
        result.map_err(|err| RedisLimitError::from_redis(err, self.opts.command_timeout))
    }
}
