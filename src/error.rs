//! One error story for the whole client, whichever layer gave up.

use std::time::Duration;

use crate::RateLimitInfo;
use crate::pacing::PacingError;
use crate::retry::{BodyFactoryError, RetryError, TimeoutError};

/// Why a polite client gave up on a request: the retry layer (the server asked for a wait above
/// the cap, or the next wait would pass the deadline: both carry the server's response; or an
/// attempt timed out and the request could not, or could no more, be sent again) or the
/// pacer (the wait for a permit would pass its maximum, the request costs more than the bucket
/// holds, or the shared store is unreachable and the policy fails closed).
///
/// # When the retries run out, the answer is `Ok`
///
/// A request whose retries (or the retry budget) ran out is not an error: the client returns
/// the server's last response, `Ok(response)`, as it came. Its status tells (429; or 408
/// or a 5xx, for a replay-safe request), and so does its [`RateLimitInfo`], parsed once and kept in the
/// response's extensions ([`RateLimitInfo::of_response`] reads it back): its
/// [`server_wait`](RateLimitInfo::server_wait) says when to come back. This error is for the
/// waits the client would not take and for the requests it could not send again.
///
/// # Which wait to sleep on
///
/// Before sending a request again (putting a job's item back in its queue), sleep
/// [`wait`](Self::wait) when it is there, else [`server_wait`](Self::server_wait):
///
/// - `wait()` is the crate's own wait that was refused, jitter included: the retry wait that
///   would have passed the deadline, from the last response; or the pacer's wait for a
///   permit, counted from when the request reached the pacer (its time in the queue included,
///   so it errs long, never short);
/// - `server_wait()` is the server's word, before jitter: for a wait above the cap, what the
///   last response asked for, from now; for a pacer refusal, what the response that paused the
///   partition asked for when it came, so part of it may have passed already.
///
/// Neither is there for a timeout, a body factory that failed without a stated wait, a
/// request that costs more than the bucket holds (it never passes) or an unreachable store.
///
/// # From the client's error
///
/// [`from_middleware`](Self::from_middleware) takes the client's `reqwest_middleware::Error`
/// and answers `Ok` with this error when it is the crate's (one of its layers gave up), or
/// `Err` with the error untouched when it is anything else: a connection error, a timeout on
/// a client without the retry layer, another middleware's error. `Ok` says the conversion
/// found the crate's error, as `Box<dyn Error>::downcast` answers.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::PoliteError;
/// use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let server = MockServer::start().await;
/// Mock::given(method("GET"))
///     .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "3600"))
///     .mount(&server)
///     .await;
/// let client = reqwest_polite::client();
///
/// // The server asks for an hour: the retry layer gives up at once, with its response...
/// let first = client.get(format!("{}/report", server.uri())).send().await.unwrap_err();
/// let first = PoliteError::from_middleware(first).unwrap();
/// assert!(first.is_rate_limited());
/// assert_eq!(first.server_wait(), Some(Duration::from_secs(3600)));
/// assert_eq!(first.response().map(|r| r.status().as_u16()), Some(429));
///
/// // ...and the host is paused for everyone: the next request is refused by the pacer, with
/// // the server's hour as stated and the wait it would have needed (that hour, jittered).
/// let next = client.get(format!("{}/items", server.uri())).send().await.unwrap_err();
/// let next = PoliteError::from_middleware(next).unwrap();
/// assert!(next.is_rate_limited() && next.response().is_none());
/// assert!(matches!(next, PoliteError::Pacing(_)), "the pacer gave up");
/// assert_eq!(next.server_wait(), Some(Duration::from_secs(3600)));
/// assert!(next.wait().unwrap() >= Duration::from_secs(3000));
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PoliteError {
    /// The retry layer stopped with the server's last response.
    #[error(transparent)]
    Retry(#[from] RetryError),
    /// The pacer refused a permit.
    #[error(transparent)]
    Pacing(#[from] PacingError),
    /// The retry layer could not make the body of a try ([`BodyFactory`](crate::retry::BodyFactory)
    /// failed), with the last try's outcome.
    #[error(transparent)]
    BodyFactory(#[from] BodyFactoryError),
    /// The retry layer gave up after an attempt timed out, saying whether the request may
    /// have reached the server.
    #[error(transparent)]
    Timeout(#[from] TimeoutError),
}

impl PoliteError {
    /// The polite client's error inside a middleware error: `Ok` with it when one of the
    /// crate's layers gave up, `Err` with `error` untouched when it is something else (a
    /// transport error, another middleware's), as `downcast` answers.
    ///
    /// ```
    /// use reqwest_polite::PoliteError;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // Nothing listens on port 9 of the loopback: the connection is refused.
    /// let error = reqwest_polite::client().get("http://127.0.0.1:9/").send().await.unwrap_err();
    ///
    /// match PoliteError::from_middleware(error) {
    ///     Ok(polite) => panic!("not the crate's error: {polite}"),
    ///     // reqwest's own error, as the client returned it.
    ///     Err(other) => assert!(other.is_connect()),
    /// }
    /// # }
    /// ```
    pub fn from_middleware(
        error: reqwest_middleware::Error,
    ) -> Result<PoliteError, reqwest_middleware::Error> {
        let error = match RetryError::from_middleware(error) {
            Ok(retry) => return Ok(PoliteError::Retry(retry)),
            Err(other) => other,
        };
        let error = match BodyFactoryError::from_middleware(error) {
            Ok(factory) => return Ok(PoliteError::BodyFactory(factory)),
            Err(other) => other,
        };
        let error = match TimeoutError::from_middleware(error) {
            Ok(timeout) => return Ok(PoliteError::Timeout(timeout)),
            Err(other) => other,
        };
        PacingError::from_middleware(error).map(PoliteError::Pacing)
    }

    /// Whether a rate limit stopped the request: the server's 429 (or its stated wait), or the
    /// pacer holding the request back for longer than it may wait.
    pub fn is_rate_limited(&self) -> bool {
        match self {
            PoliteError::Retry(error) => {
                error.status() == http::StatusCode::TOO_MANY_REQUESTS
                    || error.server_wait().is_some()
            }
            PoliteError::Pacing(error) => error.wait().is_some(),
            PoliteError::BodyFactory(error) => error
                .response()
                .is_some_and(|r| r.status() == http::StatusCode::TOO_MANY_REQUESTS),
            PoliteError::Timeout(_) => false,
        }
    }

    /// Whether an attempt timed out and the retry layer gave up; the
    /// [`TimeoutError`] says whether the request may have reached the server.
    pub fn is_timeout(&self) -> bool {
        matches!(self, PoliteError::Timeout(_))
    }

    /// Attempts the retry layer made, the first included (`None` for the pacer's refusals:
    /// the pacer does not count them).
    pub fn attempts(&self) -> Option<u32> {
        match self {
            PoliteError::Retry(error) => Some(error.attempts()),
            PoliteError::Pacing(_) => None,
            PoliteError::BodyFactory(error) => Some(error.attempts()),
            PoliteError::Timeout(error) => Some(error.attempts()),
        }
    }

    /// Whether the request may have reached the server, when this error knows: `Some(true)`
    /// when it answered, and for a timeout as [`TimeoutError::may_have_reached_server`] says
    /// (`false` only when every attempt failed to connect). `None` for the pacer's refusals
    /// (one may refuse a retry, after attempts that did reach the server) and a failed body
    /// factory without a response. A request that may have reached the server, and was not
    /// replay-safe, may have been processed.
    pub fn may_have_reached_server(&self) -> Option<bool> {
        match self {
            PoliteError::Retry(_) => Some(true),
            PoliteError::Pacing(_) => None,
            PoliteError::BodyFactory(error) => error.response().map(|_| true),
            PoliteError::Timeout(error) => Some(error.may_have_reached_server()),
        }
    }

    /// Whether the shared quota's store (Redis) was unreachable and the policy fails closed.
    pub fn is_store_unavailable(&self) -> bool {
        matches!(
            self,
            PoliteError::Pacing(PacingError::StoreUnavailable { .. })
        )
    }

    /// The wait the server asked for, as it stated it (before any jitter): from the response
    /// the retry layer gave up on (counted from now), or, for a pacer refusal, from the
    /// response that paused the key (counted from when it came, so part of it may have
    /// passed). `None` when the pause is the pacer's own (a configured rate, a silent server).
    /// Sleep on it before sending again when [`wait`](Self::wait) is `None`.
    pub fn server_wait(&self) -> Option<Duration> {
        match self {
            PoliteError::Retry(error) => error.server_wait(),
            PoliteError::Pacing(error) => error.server_wait(),
            PoliteError::BodyFactory(error) => error
                .response()
                .and_then(|r| RateLimitInfo::from_headers(r.headers()).server_wait()),
            PoliteError::Timeout(_) => None,
        }
    }

    /// Our own wait that was refused (jitter included): the retry wait that would have passed
    /// the deadline (counted from the last response), or the pacer's wait for a permit
    /// (counted from when the request reached the pacer, its time in the queue included). The
    /// wait to sleep on before sending the request again; `None` when the server's wait was
    /// above the cap (see [`server_wait`](Self::server_wait)) or nothing was waited for.
    pub fn wait(&self) -> Option<Duration> {
        match self {
            PoliteError::Retry(RetryError::DeadlineExceeded { wait, .. }) => Some(*wait),
            PoliteError::Retry(_) | PoliteError::BodyFactory(_) | PoliteError::Timeout(_) => None,
            PoliteError::Pacing(error) => error.wait(),
        }
    }

    /// The server's last response, when the retry layer gave up on one.
    pub fn response(&self) -> Option<&reqwest::Response> {
        match self {
            PoliteError::Retry(error) => Some(error.response()),
            PoliteError::Pacing(_) | PoliteError::Timeout(_) => None,
            PoliteError::BodyFactory(error) => error.response(),
        }
    }

    /// The server's last response, taken back, when there was one.
    pub fn into_response(self) -> Option<reqwest::Response> {
        match self {
            PoliteError::Retry(error) => Some(error.into_response()),
            PoliteError::Pacing(_) | PoliteError::Timeout(_) => None,
            PoliteError::BodyFactory(error) => error.into_last_outcome().and_then(Result::ok),
        }
    }
}
