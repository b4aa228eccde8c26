//! One task's 429 pauses every task on the key, over real sockets (wiremock on 127.0.0.1).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest_polite::pacing::{Pacer, PacingMiddleware};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Answers the first request with 429 + `Retry-After: 1`, every later one with 200, and
/// records when each request arrived.
#[derive(Clone)]
struct FirstRequestThrottled {
    arrivals: Arc<Mutex<Vec<Instant>>>,
}

impl Respond for FirstRequestThrottled {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let mut arrivals = self.arrivals.lock().unwrap();
        arrivals.push(Instant::now());
        if arrivals.len() == 1 {
            ResponseTemplate::new(429).insert_header("retry-after", "1")
        } else {
            ResponseTemplate::new(200)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_429_pauses_all_tasks_and_their_wake_ups_are_spread() {
    let server = MockServer::start().await;
    let responder = FirstRequestThrottled {
        arrivals: Arc::default(),
    };
    Mock::given(any())
        .respond_with(responder.clone())
        .mount(&server)
        .await;
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(PacingMiddleware::new(Pacer::builder().build()))
        .build();

    let first = client.get(server.uri()).send().await.unwrap();
    assert_eq!(first.status(), 429);
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let client = client.clone();
            let url = server.uri();
            tokio::spawn(async move { client.get(url).send().await.unwrap().status() })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200);
    }

    let arrivals = responder.arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), 11);
    let after: Vec<Duration> = arrivals[1..].iter().map(|t| *t - arrivals[0]).collect();
    // Nobody comes back before the server's second, and (the gate's not-before jitter, 20%
    // wide) everyone by 1.2 s plus scheduling slack.
    for wait in &after {
        assert!(*wait >= Duration::from_millis(990), "{after:?}");
        assert!(*wait <= Duration::from_millis(1300), "{after:?}");
    }
    let spread = *after.iter().max().unwrap() - *after.iter().min().unwrap();
    assert!(
        spread >= Duration::from_millis(20),
        "wake-ups not spread: {after:?}"
    );
}
