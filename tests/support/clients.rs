//! HTTP clients for tests that talk to the mocks directly.

use std::time::Duration;

/// A plain `reqwest` client, no middleware: what the mocks answer is seen as sent. The timeout
/// makes a mock that hangs fail its test instead of holding up the run.
pub fn bare_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}
