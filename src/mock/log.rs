use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime};

use http::Method;

use crate::limiter::Decision;

/// What a rate-limited mock answered one request (named apart from the client's
/// [`retry::Verdict`](crate::retry::Verdict), which decides whether to retry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Answer {
    /// Every layer that applies admitted it (or none applies): the admitted response was sent.
    Admitted,
    /// A layer's quota was spent: 429 with `Retry-After`.
    Rejected,
    /// A layer's store (Redis) failed or did not answer in time: 503.
    Unavailable,
}

/// One request as a rate-limited mock saw it, for assertions and plots.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoggedRequest {
    /// When it arrived, on the monotonic clock (for intervals).
    pub at: Instant,
    /// When it arrived, on the wall clock (for plots against other logs).
    pub at_system: SystemTime,
    /// Its method.
    pub method: Method,
    /// Its path, without the query.
    pub path: String,
    /// The layer whose headers were sent: the one that rejected (or failed), else the one
    /// closest to its limit. `None` when no layer applies to the request.
    pub layer: Option<String>,
    /// That layer's partition key, as given in the request (an API key in clear, say).
    pub key: Option<String>,
    /// What was done.
    pub answer: Answer,
    /// The status sent.
    pub status: u16,
    /// That layer's decision (`None` when no layer applies, or its store failed).
    pub decision: Option<Decision>,
}

/// The requests a rate-limited mock answered, in the order it decided on them. Clones share
/// one log.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::mock::{RateLimitedApi, Answer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Arrange: one request per minute for everyone.
/// let api = RateLimitedApi::global(1, Duration::from_secs(60)).start().await?;
/// let client = reqwest::Client::new();
///
/// // Act
/// for _ in 0..3 {
///     client.get(api.uri()).send().await?;
/// }
///
/// // Assert
/// let log = api.log();
/// let answers: Vec<Answer> = log.iter().map(|r| r.answer).collect();
/// assert_eq!(answers, [Answer::Admitted, Answer::Rejected, Answer::Rejected]);
/// assert_eq!(log[1].status, 429);
/// assert_eq!(log[1].key.as_deref(), Some("global"));
/// assert_eq!((api.admitted(), api.rejected()), (1, 2));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct RequestLog {
    entries: Arc<Mutex<Vec<LoggedRequest>>>,
}

impl RequestLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of every entry so far.
    pub fn entries(&self) -> Vec<LoggedRequest> {
        self.lock().clone()
    }

    /// How many requests were admitted.
    pub fn admitted(&self) -> usize {
        self.count(Answer::Admitted)
    }

    /// How many requests were rejected with 429.
    pub fn rejected(&self) -> usize {
        self.count(Answer::Rejected)
    }

    /// How many requests got 503 because a layer's store failed.
    pub fn unavailable(&self) -> usize {
        self.count(Answer::Unavailable)
    }

    /// How many requests got `answer`.
    pub fn count(&self, answer: Answer) -> usize {
        self.lock().iter().filter(|r| r.answer == answer).count()
    }

    /// Forgets every entry (between phases of a test, say).
    pub fn clear(&self) {
        self.lock().clear();
    }

    pub(crate) fn push(&self, entry: LoggedRequest) {
        self.lock().push(entry);
    }

    fn lock(&self) -> MutexGuard<'_, Vec<LoggedRequest>> {
        // A panic while pushing leaves at worst one entry missing: keep logging.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
