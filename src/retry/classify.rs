use std::error::Error as _;

use http::{Method, StatusCode};

/// Why an attempt may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryReason {
    /// 429: the server refused without processing; safe for every method.
    RateLimited,
    /// 408, 500, 502, 503, 504: the server may have processed the request.
    ServerError(StatusCode),
    /// The attempt timed out: connecting, waiting for the response (reqwest's read timeout),
    /// or as a whole (its total timeout, or the policy's attempt timeout).
    Timeout,
    /// The connection failed or was lost before a response arrived.
    Connection,
}

impl RetryReason {
    /// A short name for logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            RetryReason::RateLimited => "rate_limited",
            RetryReason::ServerError(_) => "server_error",
            RetryReason::Timeout => "timeout",
            RetryReason::Connection => "connection",
        }
    }
}

/// What a classifier says of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Return this outcome to the caller.
    Done,
    /// Retry, for this reason (the policy still decides whether and when).
    Retry(RetryReason),
}

/// The facts of a request a classifier may look at (the request itself is already sent).
#[derive(Debug, Clone)]
pub struct RequestFacts {
    /// The request's method.
    pub method: Method,
    /// Whether it carries an `Idempotency-Key` header.
    pub has_idempotency_key: bool,
}

impl RequestFacts {
    /// The facts of `request`.
    pub fn of(request: &reqwest::Request) -> Self {
        RequestFacts {
            method: request.method().clone(),
            has_idempotency_key: request.headers().contains_key("idempotency-key"),
        }
    }

    /// Whether re-sending cannot do harm: an idempotent method, or an `Idempotency-Key`.
    pub fn is_replay_safe(&self) -> bool {
        self.has_idempotency_key || is_idempotent(&self.method)
    }
}

/// The methods RFC 9110 defines as idempotent: GET, HEAD, OPTIONS, PUT, DELETE, TRACE.
pub(crate) fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE | Method::TRACE
    )
}

/// Decides which outcomes are worth retrying. Replace it to change what is retried; the policy
/// (how often, how long) stays separate.
///
/// ```
/// use reqwest_polite::retry::{Classify, DefaultClassifier, RequestFacts, RetryReason, Verdict};
///
/// /// Also retries 409 Conflict for idempotent requests.
/// struct RetryConflicts;
/// impl Classify for RetryConflicts {
///     fn classify(
///         &self,
///         request: &RequestFacts,
///         outcome: Result<&reqwest::Response, &reqwest_middleware::Error>,
///     ) -> Verdict {
///         match outcome {
///             Ok(r) if r.status() == 409 && request.is_replay_safe() => {
///                 Verdict::Retry(RetryReason::ServerError(r.status()))
///             }
///             _ => DefaultClassifier.classify(request, outcome),
///         }
///     }
/// }
/// ```
pub trait Classify: Send + Sync + 'static {
    /// The verdict on one attempt's outcome.
    fn classify(
        &self,
        request: &RequestFacts,
        outcome: Result<&reqwest::Response, &reqwest_middleware::Error>,
    ) -> Verdict;
}

/// The default rules: 429 for every method; 408, 500, 502, 503, 504, timeouts and connection
/// errors only when replay-safe ([`RequestFacts::is_replay_safe`]); nothing else.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultClassifier;

impl Classify for DefaultClassifier {
    fn classify(
        &self,
        request: &RequestFacts,
        outcome: Result<&reqwest::Response, &reqwest_middleware::Error>,
    ) -> Verdict {
        let reason = match outcome {
            Ok(response) => DefaultClassifier::reason_for_status(response.status()),
            Err(error) => DefaultClassifier::reason_for_error(error),
        };
        match reason {
            Some(RetryReason::RateLimited) => Verdict::Retry(RetryReason::RateLimited),
            Some(reason) if request.is_replay_safe() => Verdict::Retry(reason),
            _ => Verdict::Done,
        }
    }
}

/// What hyper (under reqwest) says when the connection went with the request in flight: the
/// peer hung up before the response was complete, the request was dropped with its
/// connection, the connection's task is gone. Read as text through `std::error::Error`, so no
/// copy of hyper of our own has to match reqwest's for a downcast; `tests/basics/retry.rs` hangs up
/// on real requests, so a reworded message fails a test instead of silently ending retries.
const CONNECTION_LOST: [&str; 3] = [
    "connection closed before message completed",
    "operation was canceled",
    "channel closed",
];

/// What hyper-util's plain-TCP connector says of an https URL: reqwest was built without a TLS
/// feature (this crate's `rustls` or `native-tls`, or reqwest's own). It comes as a connect
/// error, "error sending request", before any connection is tried.
const NO_TLS: &str = "invalid URL, scheme is not http";

/// An https request that this build of reqwest cannot send at all.
fn is_https_without_tls(error: &reqwest::Error) -> bool {
    let mut source = error.source();
    while let Some(cause) = source {
        if cause.to_string() == NO_TLS {
            return true;
        }
        source = cause.source();
    }
    false
}

/// A connection reset, closed or broken while the request was in flight.
fn is_connection_lost(error: &reqwest::Error) -> bool {
    use std::io::ErrorKind;
    if !error.is_request() && !error.is_body() {
        return false;
    }
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::BrokenPipe
                    | ErrorKind::UnexpectedEof
            );
        }
        // Each error's own message: hyper's do not repeat their sources'.
        if CONNECTION_LOST.contains(&cause.to_string().as_str()) {
            return true;
        }
        source = cause.source();
    }
    false
}

/// The default rules, one piece at a time, for a [`Classify`] that changes only some of them.
impl DefaultClassifier {
    /// The retry reason a status stands for, if any (before looking at the method).
    pub fn reason_for_status(status: StatusCode) -> Option<RetryReason> {
        match status.as_u16() {
            429 => Some(RetryReason::RateLimited),
            408 | 500 | 502 | 503 | 504 => Some(RetryReason::ServerError(status)),
            _ => None,
        }
    }

    /// The retry reason a transport error stands for, if any (before looking at the method).
    /// Errors raised by other middleware are never retried, nor an https request in a build of
    /// reqwest without TLS (it would fail the same way every time).
    pub fn reason_for_error(error: &reqwest_middleware::Error) -> Option<RetryReason> {
        let reqwest_middleware::Error::Reqwest(error) = error else {
            return None;
        };
        if error.is_timeout() {
            Some(RetryReason::Timeout)
        } else if is_https_without_tls(error) {
            // A build without TLS refuses every https URL the same way: no retry can help.
            None
        } else if error.is_connect() || is_connection_lost(error) {
            Some(RetryReason::Connection)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests;
