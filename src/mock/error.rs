use crate::limiter::LimiterConfigError;

/// Why a rate-limited mock could not be built.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::mock::{MockConfigError, RateLimitedApi};
///
/// let err = RateLimitedApi::per_api_key(0, Duration::from_secs(60)).responder().unwrap_err();
///
/// assert!(matches!(err, MockConfigError::Limiter { ref layer, .. } if layer == "per-api-key"));
/// assert_eq!(err.to_string(), "layer 'per-api-key' cannot limit with these numbers");
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MockConfigError {
    /// A layer was given a limit or window its limiter rejects (zero, say).
    #[error("layer '{layer}' cannot limit with these numbers")]
    Limiter {
        /// The layer's name.
        layer: String,
        /// What the limiter rejected.
        #[source]
        source: LimiterConfigError,
    },
}
