use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// How the retry layer waits. The one hook through which it sleeps, so a test can record the
/// waits it asked for instead of sleeping them.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use reqwest_polite::time::Sleeper;
///
/// #[derive(Default, Clone)]
/// struct Recorder(Arc<Mutex<Vec<Duration>>>);
/// impl Sleeper for Recorder {
///     fn sleep(&self, wait: Duration) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
///         self.0.lock().unwrap().push(wait);
///         Box::pin(std::future::ready(()))
///     }
/// }
/// ```
pub trait Sleeper: Send + Sync + 'static {
    /// A future that completes after `wait`.
    fn sleep(&self, wait: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// Sleeps with `tokio::time::sleep` (so paused tokio time in tests applies).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, wait: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(tokio::time::sleep(wait))
    }
}
