//! For tests of the retry layer: a sleeper that records waits, and a server that refuses first.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest_polite::time::Sleeper;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Records each wait the retry layer asks for and returns at once.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<Duration>>>);

impl Recorder {
    /// The waits asked for so far, in order.
    pub fn waits(&self) -> Vec<Duration> {
        self.0.lock().unwrap().clone()
    }
}

impl Sleeper for Recorder {
    fn sleep(&self, wait: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        self.0.lock().unwrap().push(wait);
        Box::pin(std::future::ready(()))
    }
}

/// A server on 127.0.0.1 that answers `first` to the first `times` requests, then 200.
pub async fn server_answering(first: ResponseTemplate, times: u64) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(first)
        .up_to_n_times(times)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    server
}
