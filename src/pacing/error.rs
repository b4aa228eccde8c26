use std::time::Duration;

use super::StoreError;

/// Why the pacer refused a request instead of letting it through.
///
/// Each variant carries the facts a caller needs, first of all the wait that was refused.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::pacing::PacingError;
///
/// let error = PacingError::Throttled {
///     wait: Duration::from_millis(250),
///     server_wait: None,
/// };
/// assert_eq!(error.wait(), Some(Duration::from_millis(250)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PacingError {
    /// Fail-fast mode: the request would have had to wait, so it was rejected at once.
    #[error("rate limited: the request would wait {wait:?} and the pacer fails fast")]
    Throttled {
        /// How long the request would have waited for its permit.
        wait: Duration,
        /// The wait the server stated (before jitter) when the key is paused on its word.
        server_wait: Option<Duration>,
    },
    /// Wait mode: the permit would come later than the pacer's maximum wait allows.
    #[error("rate limited: the request would wait {wait:?}, more than the maximum {max_wait:?}")]
    WaitTooLong {
        /// The total wait the request would have needed (already waited plus still to wait).
        wait: Duration,
        /// The pacer's configured maximum wait.
        max_wait: Duration,
        /// The wait the server stated (before jitter) when the key is paused on its word: a
        /// 429's `Retry-After`, or the reset of a spent quota, as that response said it.
        server_wait: Option<Duration>,
    },
    /// The request costs more than the bucket can ever hold: it would never be allowed.
    #[error("a request of cost {cost} can never pass a bucket of burst {burst}")]
    CostTooHigh {
        /// The cost asked for.
        cost: u64,
        /// The most the bucket admits at once.
        burst: u32,
    },
    /// The shared quota's store (Redis) is out of reach and its policy is fail-closed.
    #[error("the shared quota store gave no answer and the policy is fail-closed")]
    StoreUnavailable {
        /// What went wrong, without keys or secrets.
        #[source]
        reason: StoreError,
    },
    /// The shared quota's store (Redis) refuses this client's settings (credentials, ACL):
    /// a configuration error, whatever the failure policy, since a job let through would run
    /// unpaced on a quota its owner believes shared.
    #[error(
        "the shared quota store refuses this client's settings: fix its credentials or \
         permissions (no failure policy applies)"
    )]
    StoreMisconfigured {
        /// What the store refused ([`StoreError::Misconfigured`]), without keys or secrets.
        #[source]
        reason: StoreError,
    },
}

impl PacingError {
    /// The wait that was refused, when there is one.
    pub fn wait(&self) -> Option<Duration> {
        match self {
            PacingError::Throttled { wait, .. } | PacingError::WaitTooLong { wait, .. } => {
                Some(*wait)
            }
            PacingError::CostTooHigh { .. }
            | PacingError::StoreUnavailable { .. }
            | PacingError::StoreMisconfigured { .. } => None,
        }
    }

    /// The wait the server stated (before jitter) behind a refusal, when the key was paused on
    /// the server's word rather than by the configured rate or a silent server's estimate.
    pub fn server_wait(&self) -> Option<Duration> {
        match self {
            PacingError::Throttled { server_wait, .. }
            | PacingError::WaitTooLong { server_wait, .. } => *server_wait,
            PacingError::CostTooHigh { .. }
            | PacingError::StoreUnavailable { .. }
            | PacingError::StoreMisconfigured { .. } => None,
        }
    }

    /// The `PacingError` inside a middleware error, or the error back when it is something
    /// else. [`PoliteError::from_middleware`](crate::PoliteError::from_middleware) reaches the
    /// retry layer's errors too.
    pub fn from_middleware(
        error: reqwest_middleware::Error,
    ) -> Result<PacingError, reqwest_middleware::Error> {
        match error {
            reqwest_middleware::Error::Middleware(inner) => inner
                .downcast::<PacingError>()
                .map_err(reqwest_middleware::Error::Middleware),
            other => Err(other),
        }
    }
}
