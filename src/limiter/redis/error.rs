use std::time::Duration;

use crate::limiter::LimiterConfigError;

/// Why a Redis limiter (or a script run through a [`RedisStore`](super::RedisStore)) gave no
/// decision.
///
/// No variant ever carries a caller identity in clear: keys are hashed before they reach Redis,
/// and replies are described by their shape only.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::limiter::redis::RedisLimitError;
///
/// let err = RedisLimitError::Timeout { after: Duration::from_millis(50) };
/// assert!(err.is_unavailable());
/// assert_eq!(err.to_string(), "redis did not answer within 50ms");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisLimitError {
    /// Redis gave no answer within the command timeout (down, slow, or unreachable).
    #[error("redis did not answer within {after:?}")]
    Timeout {
        /// The timeout that ran out.
        after: Duration,
    },
    /// Redis or the client library reported an error (connection refused, script error,
    /// credentials refused…).
    #[error("redis error")]
    Redis(#[source] redis::RedisError),
    /// Redis answered, but not with what the script returns: a bug or a foreign script.
    #[error("unexpected reply from redis: {detail}")]
    UnexpectedReply {
        /// The shape of the reply that did not fit (never the keys that were asked about).
        detail: String,
    },
    /// A limiter was configured with values it cannot work with (the same rules as the
    /// in-memory limiters').
    #[error("invalid redis limiter configuration: {0}")]
    InvalidConfig(LimiterConfigError),
}

impl From<LimiterConfigError> for RedisLimitError {
    fn from(error: LimiterConfigError) -> Self {
        Self::InvalidConfig(error)
    }
}

impl RedisLimitError {
    /// Whether Redis could not be reached or did not answer in time, as opposed to a bug or a
    /// bad configuration: the case a fail-open or local-fallback policy is for.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Timeout { .. } => true,
            _ if self.is_misconfigured() => false,
            Self::Redis(err) => {
                err.is_io_error()
                    || err.is_timeout()
                    || err.is_connection_refusal()
                    || err.is_connection_dropped()
                    || err.is_unrecoverable_error()
            }
            Self::UnexpectedReply { .. } | Self::InvalidConfig(_) => false,
        }
    }

    /// Whether Redis refused this client's settings: its credentials (`NOAUTH`, `WRONGPASS`, a
    /// failed `AUTH`), its user's ACL (`NOPERM`), or settings the client itself cannot use
    /// (TLS without the crate's TLS feature, say). Not an outage: the store was never
    /// configured right, and waiting will not mend it.
    ///
    /// ```
    /// use reqwest_polite::limiter::redis::RedisLimitError;
    ///
    /// let refused = redis::RedisError::from((redis::ErrorKind::AuthenticationFailed, "bad"));
    /// let error = RedisLimitError::Redis(refused);
    /// assert!(error.is_misconfigured() && !error.is_unavailable());
    /// ```
    pub fn is_misconfigured(&self) -> bool {
        match self {
            Self::Redis(err) => {
                is_refused_credentials(err)
                    || is_denied_by_acl(err)
                    || err.kind() == redis::ErrorKind::InvalidClientConfig
            }
            Self::Timeout { .. } | Self::UnexpectedReply { .. } | Self::InvalidConfig(_) => false,
        }
    }

    /// Maps a client error, turning the client's own response timeout into [`Self::Timeout`].
    pub(crate) fn from_redis(err: redis::RedisError, timeout: Duration) -> Self {
        if err.is_timeout() {
            Self::Timeout { after: timeout }
        } else {
            Self::Redis(err)
        }
    }
}

/// Whether Redis refused the credentials: at the handshake, or by answering `NOAUTH` to the
/// first command when the client sent none; or, to a command of more than 10 arguments sent
/// with none (a script with its keys and arguments), by a protocol error that says so (and
/// closing the connection).
pub(super) fn is_refused_credentials(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(err.code(), Some("NOAUTH" | "WRONGPASS"))
        || err.to_string().contains("unauthenticated multibulk length")
}

/// Whether the user's ACL denied a command or a key: `NOPERM` for what the client sends, an
/// `ERR` naming the user for what a script calls.
pub(super) fn is_denied_by_acl(err: &redis::RedisError) -> bool {
    err.code() == Some("NOPERM")
        || (err.code() == Some("ERR")
            && err
                .detail()
                .is_some_and(|detail| detail.starts_with("The user executing the script can't")))
}
