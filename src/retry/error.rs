use std::time::Duration;

use http::StatusCode;

/// Why the retry layer stopped early with an error instead of returning the last outcome: a
/// wait it would not take.
///
/// When the retries or the [budget](super::RetryBudget) run out, there is no error: the layer
/// returns the last outcome as it came, so a request refused to the end is `Ok` with the
/// server's last 429 (its status and its [`RateLimitInfo`](crate::RateLimitInfo) say so).
///
/// Both variants carry the last response, so nothing the server sent is lost: take it back with
/// [`RetryError::into_response`]. Reach this error from a `reqwest_middleware::Error` with
/// [`RetryError::from_middleware`], or [`PoliteError`](crate::PoliteError) (which also says
/// which wait to sleep on before sending again).
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

    /// The `RetryError` inside a middleware error: `Ok` with it, or `Err` with `error` untouched
    /// when it is something else, as `downcast` answers.
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

/// An attempt timed out and the retry layer gave up on the request: it was not safe to send
/// again, or the retries, the budget or the deadline ran out.
///
/// It says what a caller needs to decide what to do next: how many attempts were made,
/// whether the request may have reached the server (attempts that all timed out or failed
/// while connecting sent nothing; past connecting, the server may have received the request
/// and processed it, so a POST that timed out may have been done), and whether it was safe to
/// replay. reqwest's error for the last attempt is its [`source`](std::error::Error::source).
///
/// A timeout while the caller reads a body ([`reqwest::Response::bytes`] and the like) is
/// the caller's: it comes from reqwest as it is, after the retry layer has returned.
///
/// Reach this error from a `reqwest_middleware::Error` with [`TimeoutError::from_middleware`]
/// (or through [`PoliteError`](crate::PoliteError)). The middleware error itself is
/// `reqwest_middleware::Error::Middleware`, for which `is_timeout()` answers `false`.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.describe())]
pub struct TimeoutError {
    method: http::Method,
    attempts: u32,
    elapsed: Duration,
    reached: bool,
    replay_safe: bool,
    #[source]
    source: reqwest::Error,
}

impl TimeoutError {
    /// The retry layer gave up on a `method` request whose last attempt ended in `source`, a
    /// timeout, after `attempts` attempts and `elapsed` since the first; `reached` says
    /// whether any attempt may have reached the server.
    pub(super) fn new(
        method: http::Method,
        attempts: u32,
        elapsed: Duration,
        reached: bool,
        replay_safe: bool,
        source: reqwest::Error,
    ) -> Self {
        TimeoutError {
            method,
            attempts,
            elapsed,
            reached,
            replay_safe,
            source,
        }
    }

    /// Attempts made, the first one included.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Time from the first attempt to the end of the last, waits between them included.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// The request's method.
    pub fn method(&self) -> &http::Method {
        &self.method
    }

    /// Whether the request may have reached the server, in any attempt. Only attempts that
    /// all failed while connecting (TCP, TLS, a proxy) say it was never sent; past that, the
    /// server may have received it and acted on it, whatever it did not answer.
    pub fn may_have_reached_server(&self) -> bool {
        self.reached
    }

    /// Whether the last attempt timed out while connecting (so that attempt sent nothing).
    pub fn is_connect(&self) -> bool {
        self.source.is_connect()
    }

    /// Whether sending it again was safe: an idempotent method or an `Idempotency-Key`. A
    /// request that was not is never re-sent after a timeout.
    pub fn is_replay_safe(&self) -> bool {
        self.replay_safe
    }

    /// reqwest's error for the last attempt (its URL, its causes).
    pub fn reqwest_error(&self) -> &reqwest::Error {
        &self.source
    }

    /// reqwest's error for the last attempt, taken back.
    pub fn into_reqwest_error(self) -> reqwest::Error {
        self.source
    }

    /// The `TimeoutError` inside a middleware error, or the error back when it is something
    /// else.
    pub fn from_middleware(
        error: reqwest_middleware::Error,
    ) -> Result<TimeoutError, reqwest_middleware::Error> {
        match error {
            reqwest_middleware::Error::Middleware(inner) => inner
                .downcast::<TimeoutError>()
                .map_err(reqwest_middleware::Error::Middleware),
            other => Err(other),
        }
    }

    fn describe(&self) -> String {
        let (method, attempts, elapsed) = (&self.method, self.attempts, self.elapsed);
        let phase = if self.is_connect() {
            "connecting"
        } else {
            "waiting for the response"
        };
        let head =
            format!("{method} timed out {phase}, after {attempts} attempt(s) in {elapsed:?}");
        if !self.reached {
            format!("{head}: the request was never sent")
        } else if self.replay_safe {
            format!("{head}: the server may have received it")
        } else {
            format!(
                "{head}: the server may have received and processed it, so it was not sent \
                 again ({method} without Idempotency-Key)"
            )
        }
    }
}
