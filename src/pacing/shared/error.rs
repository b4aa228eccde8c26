use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why a shared bucket's store (Redis) gave no answer.
///
/// It never holds a key: keys are hashed before they reach the store, and the messages say what
/// failed, not what was asked. The store's own error, when there is one, is the
/// [`source`](std::error::Error::source) (with the `redis` feature, a
/// `limiter::redis::RedisLimitError`).
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::pacing::StoreError;
///
/// let error = StoreError::Timeout { after: Duration::from_millis(50) };
/// assert!(error.is_timeout() && error.is_unavailable());
/// assert_eq!(error.to_string(), "the store did not answer within 50ms");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum StoreError {
    /// The store did not answer within its command timeout (down, slow, or unreachable).
    Timeout {
        /// The timeout that ran out.
        after: Duration,
    },
    /// The store could not be reached, or the connection to it broke.
    Unreachable(Arc<dyn Error + Send + Sync>),
    /// The store answered with an error or a reply that does not fit: a bug rather than an
    /// outage.
    Failed(Arc<dyn Error + Send + Sync>),
    /// The store refused this client's settings: its credentials (`NOAUTH`, `WRONGPASS`), its
    /// user's ACL (`NOPERM`), or settings the client cannot use. A configuration error, not an
    /// outage: no failure policy runs requests past it.
    Misconfigured(Arc<dyn Error + Send + Sync>),
    /// Not asked: the store failed at the last try and is set aside until its next probe
    /// (every 200 ms).
    SetAside,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout { after } => write!(f, "the store did not answer within {after:?}"),
            Self::Unreachable(_) => f.write_str("the store is unreachable"),
            Self::Failed(_) => f.write_str("the store failed"),
            Self::Misconfigured(_) => {
                f.write_str("the store refused this client's settings (credentials or permissions)")
            }
            Self::SetAside => {
                f.write_str("the store failed at the last try; set aside until the next probe")
            }
        }
    }
}

// By hand rather than with thiserror: its `#[source]` would hand out the `Arc` itself, and a
// caller could not downcast the source to the store's own error type.
impl Error for StoreError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Unreachable(source) | Self::Failed(source) | Self::Misconfigured(source) => {
                Some(&**source)
            }
            Self::Timeout { .. } | Self::SetAside => None,
        }
    }
}

impl StoreError {
    /// Whether the store ran out of time.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout { .. })
    }

    /// Whether the store was set aside after an earlier failure, and not asked.
    pub fn is_set_aside(&self) -> bool {
        matches!(self, Self::SetAside)
    }

    /// Whether the store is out of reach (timed out, unreachable, or set aside), as opposed to
    /// answering wrongly or refusing this client: the case a fail-open or local-fallback
    /// policy is for.
    pub fn is_unavailable(&self) -> bool {
        !matches!(self, Self::Failed(_) | Self::Misconfigured(_))
    }

    /// Whether the store refused this client's settings (credentials, ACL): a configuration
    /// error, which no failure policy lets requests past.
    pub fn is_misconfigured(&self) -> bool {
        matches!(self, Self::Misconfigured(_))
    }
}

/// Two store errors are equal when they say the same: the same kind, the same timeout, and
/// sources with the same messages (the sources themselves are not comparable).
impl PartialEq for StoreError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Timeout { after: a }, Self::Timeout { after: b }) => a == b,
            (Self::Unreachable(a), Self::Unreachable(b))
            | (Self::Failed(a), Self::Failed(b))
            | (Self::Misconfigured(a), Self::Misconfigured(b)) => {
                Chain(a.as_ref()).to_string() == Chain(b.as_ref()).to_string()
            }
            (Self::SetAside, Self::SetAside) => true,
            _ => false,
        }
    }
}

impl Eq for StoreError {}

/// An error and its sources on one line, `outer: inner: …`, for logs.
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> StoreError {
        StoreError::Unreachable(Arc::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        )))
    }

    #[test]
    fn says_which_failures_are_outages() {
        let failed = StoreError::Failed(Arc::new(std::fmt::Error));
        let misconfigured = StoreError::Misconfigured(Arc::new(std::fmt::Error));
        assert!(refused().is_unavailable() && !refused().is_timeout());
        assert!(!refused().is_misconfigured());
        assert!(StoreError::SetAside.is_unavailable() && StoreError::SetAside.is_set_aside());
        assert!(!failed.is_unavailable() && !failed.is_set_aside() && !failed.is_misconfigured());
        assert!(misconfigured.is_misconfigured() && !misconfigured.is_unavailable());
        assert_ne!(failed, misconfigured);
    }

    #[test]
    fn keeps_its_source_and_lists_it_in_the_chain() {
        let error = refused();
        let source = error.source().unwrap();
        assert_eq!(source.to_string(), "connection refused");
        assert!(
            source.is::<std::io::Error>(),
            "the source itself, not its Arc"
        );
        assert_eq!(
            Chain(&error).to_string(),
            "the store is unreachable: connection refused"
        );
    }

    #[test]
    fn equal_when_they_say_the_same() {
        assert_eq!(refused(), refused());
        let reset = StoreError::Unreachable(Arc::new(std::io::Error::other("connection reset")));
        assert_ne!(refused(), reset);
        assert_ne!(StoreError::SetAside, refused());
        assert_ne!(
            StoreError::Timeout {
                after: Duration::from_millis(1)
            },
            StoreError::Timeout {
                after: Duration::from_millis(2)
            }
        );
    }
}
