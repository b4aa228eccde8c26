use std::time::Duration;

use http::StatusCode;

/// Why the retry layer stopped early with an error instead of returning the last outcome.
///
/// Both variants carry the last response, so nothing the server sent is lost: take it back with
/// [`RetryError::into_response`]. Reach this error from a `reqwest_middleware::Error` with
/// [`RetryError::from_middleware`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RetryError {
    /// The server asked for a wait longer than the policy's cap; it was not slept.
    #[error(
        "server answered {status} and asked to wait {server_wait:?}, above the cap of {cap:?}; \
         gave up after {attempts} attempt(s)"
    )]
    ServerWaitTooLong {
        /// The status of the last response.
        status: StatusCode,
        /// The wait the server asked for (before jitter).
        server_wait: Duration,
        /// The policy's cap on one wait.
        cap: Duration,
        /// Attempts made, the first one included.
        attempts: u32,
        /// The last response, as it came.
        response: Box<reqwest::Response>,
    },
    /// The next wait would have ended past the policy's total deadline; it was not started.
    #[error(
        "server answered {status}; waiting {wait:?} more would pass the deadline of {deadline:?} \
         ({elapsed:?} spent); gave up after {attempts} attempt(s)"
    )]
    DeadlineExceeded {
        /// The status of the last response.
        status: StatusCode,
        /// The wait that was not started (after jitter).
        wait: Duration,
        /// The wait the server asked for, if it said one.
        server_wait: Option<Duration>,
        /// Time spent since the first attempt.
        elapsed: Duration,
        /// The policy's deadline.
        deadline: Duration,
        /// Attempts made, the first one included.
        attempts: u32,
        /// The last response, as it came.
        response: Box<reqwest::Response>,
    },
}

impl RetryError {
    /// Attempts made, the first one included.
    pub fn attempts(&self) -> u32 {
        match self {
            RetryError::ServerWaitTooLong { attempts, .. }
            | RetryError::DeadlineExceeded { attempts, .. } => *attempts,
        }
    }

    /// The wait the server asked for, if it said one.
    pub fn server_wait(&self) -> Option<Duration> {
        match self {
            RetryError::ServerWaitTooLong { server_wait, .. } => Some(*server_wait),
            RetryError::DeadlineExceeded { server_wait, .. } => *server_wait,
        }
    }

    /// The status of the last response.
    pub fn status(&self) -> StatusCode {
        match self {
            RetryError::ServerWaitTooLong { status, .. }
            | RetryError::DeadlineExceeded { status, .. } => *status,
        }
    }

    /// The last response, as the server sent it (borrowed).
    pub fn response(&self) -> &reqwest::Response {
        match self {
            RetryError::ServerWaitTooLong { response, .. }
            | RetryError::DeadlineExceeded { response, .. } => response,
        }
    }

    /// The last response, as the server sent it.
    pub fn into_response(self) -> reqwest::Response {
        match self {
            RetryError::ServerWaitTooLong { response, .. }
            | RetryError::DeadlineExceeded { response, .. } => *response,
        }
    }

    /// The `RetryError` inside a middleware error, or the error back when it is something else.
    pub fn from_middleware(
        error: reqwest_middleware::Error,
    ) -> Result<RetryError, reqwest_middleware::Error> {
        match error {
            reqwest_middleware::Error::Middleware(inner) => inner
                .downcast::<RetryError>()
                .map_err(reqwest_middleware::Error::Middleware),
            other => Err(other),
        }
    }
}
