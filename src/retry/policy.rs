use std::time::Duration;

use crate::time::Jitter;

/// Exponential backoff for failures that came with no server-dictated wait.
///
/// The n-th retry (counting from 0) waits `min(base × factor^n, max)`, then jittered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The first wait.
    pub base: Duration,
    /// The growth per retry (1.0 keeps the wait constant).
    pub factor: f64,
    /// The largest wait backoff ever asks for.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(200),
            factor: 2.0,
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    /// The wait before retry number `retry` (0 for the first retry), before jitter.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::retry::Backoff;
    ///
    /// let b = Backoff { base: Duration::from_millis(100), factor: 2.0, max: Duration::from_secs(1) };
    /// assert_eq!(b.delay(0), Duration::from_millis(100));
    /// assert_eq!(b.delay(3), Duration::from_millis(800));
    /// assert_eq!(b.delay(60), Duration::from_secs(1));
    /// ```
    pub fn delay(&self, retry: u32) -> Duration {
        let factor = if self.factor.is_finite() && self.factor >= 1.0 {
            self.factor
        } else {
            1.0
        };
        let grown = self.base.as_secs_f64() * factor.powi(retry.min(1024) as i32);
        Duration::try_from_secs_f64(grown)
            .unwrap_or(Duration::MAX)
            .min(self.max)
    }
}

/// When and how long to retry.
///
/// A wait the policy will not take (above [the cap](Self::with_max_server_wait), past
/// [the deadline](Self::with_deadline)) ends the request with a
/// [`RetryError`](super::RetryError) at once; retries that run out end it with the last
/// response, `Ok`, as the server sent it. A policy is built like a sentence:
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::retry::RetryPolicy;
/// use reqwest_polite::time::Jitter;
///
/// let policy = RetryPolicy::new()
///     .with_max_retries(5)
///     .with_max_server_wait(Duration::from_secs(30))
///     .with_deadline(Duration::from_secs(120))
///     .with_jitter(Jitter::NotBefore(0.1))
///     .with_seed(42);
/// assert_eq!(policy.max_retries(), 5);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    pub(crate) max_retries: u32,
    pub(crate) max_held_retries: u32,
    pub(crate) max_wait: Duration,
    pub(crate) deadline: Option<Duration>,
    pub(crate) attempt_timeout: Option<Duration>,
    pub(crate) backoff: Backoff,
    pub(crate) jitter: Jitter,
    pub(crate) seed: Option<u64>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::new()
    }
}

impl RetryPolicy {
    /// The defaults: 3 retries (and up to 20 more for 429s the pacer holds back), a 60 s cap on
    /// one wait, no total deadline, no whole-attempt timeout (the client's connect and read
    /// timeouts bound each attempt), backoff from 200 ms doubling up to 30 s, ±10% jitter, an
    /// RNG seeded by the OS.
    pub const fn new() -> Self {
        RetryPolicy {
            max_retries: 3,
            max_held_retries: 20,
            max_wait: Duration::from_secs(60),
            deadline: None,
            attempt_timeout: None,
            backoff: Backoff {
                base: Duration::from_millis(200),
                factor: 2.0,
                max: Duration::from_secs(30),
            },
            jitter: Jitter::Symmetric(0.1),
            seed: None,
        }
    }

    /// Retries after the first attempt, at most (0: never retry). When they run out, the last
    /// outcome comes back as it came: `Ok` with the server's last response, a 429 say, not an
    /// error (see [`PoliteError`](crate::PoliteError) for what is an error).
    pub const fn with_max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// Retries of 429s that the pacer holds back (it paused the key), at most, beyond
    /// `max_retries` (default 20). Such a retry waits its turn in the pacer: it is bounded
    /// by this, the deadline, and the pacer's own maximum wait, not by the retry count.
    pub const fn with_max_held_retries(mut self, retries: u32) -> Self {
        self.max_held_retries = retries;
        self
    }

    /// The longest wait a server may ask for that is slept (named apart from the pacer's
    /// `PacingMode::Wait { max_wait }`, the longest a request waits for its permit). A server
    /// asking for more gets an immediate
    /// [`RetryError::ServerWaitTooLong`](super::RetryError::ServerWaitTooLong) carrying its wait.
    pub const fn with_max_server_wait(mut self, cap: Duration) -> Self {
        self.max_wait = cap;
        self
    }

    /// A total budget of time from the first attempt: no wait is started that would end past it,
    /// the pacer's wait for a permit included (it refuses at once a permit it could only grant
    /// later).
    pub const fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// A bound on each attempt as a whole, from connecting to the last byte of the body: set
    /// as the attempt's own reqwest timeout (a shorter `.timeout()` on the request is kept),
    /// so it starts when the attempt leaves the pacer and never counts the wait for a permit.
    ///
    /// An attempt that runs out before the response's headers is retried as any timeout is
    /// (replay-safe requests only); one that runs out while the caller reads the body ends
    /// that read with a timeout error, which no retry can follow. For a download that may
    /// take long, leave it unset: the client's read timeout already ends a response that
    /// stops coming, however long one that keeps moving takes. On a `reqwest::Client` of
    /// your own it takes the place of its `ClientBuilder::timeout`, as a request's
    /// `.timeout()` does.
    pub const fn with_attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = Some(timeout);
        self
    }

    /// The backoff used when the server gave no wait.
    pub const fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// How every wait (server-dictated or backoff) is spread.
    pub const fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// Seeds the jitter RNG, for reproducible waits.
    pub const fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Retries after the first attempt, at most.
    pub const fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// Retries of 429s held back by the pacer, at most, beyond `max_retries`.
    pub const fn max_held_retries(&self) -> u32 {
        self.max_held_retries
    }

    /// The cap on one wait.
    pub const fn max_server_wait(&self) -> Duration {
        self.max_wait
    }

    /// The total deadline, if any.
    pub const fn deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// The bound on each attempt as a whole, if any.
    pub const fn attempt_timeout(&self) -> Option<Duration> {
        self.attempt_timeout
    }

    /// The backoff for waits the server did not dictate.
    pub const fn backoff(&self) -> Backoff {
        self.backoff
    }

    /// The jitter applied to every wait.
    pub const fn jitter(&self) -> Jitter {
        self.jitter
    }
}
