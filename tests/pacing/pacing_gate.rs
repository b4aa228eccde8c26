//! One task's 429 pauses every task on the key, over real sockets (wiremock on 127.0.0.1).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest_polite::pacing::{Pacer, PacingMiddleware};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::support::take_turn;

/// When a request arrived, and the task that sent it.
type Arrival = (Instant, Option<String>);

/// Answers the first request with 429 + `Retry-After: 1`, every later one with 200, and
/// records when each request arrived and its `x-task` header.
#[derive(Clone)]
struct FirstRequestThrottled {
    arrivals: Arc<Mutex<Vec<Arrival>>>,
}

impl Respond for FirstRequestThrottled {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut arrivals = self.arrivals.lock().unwrap();
        let task = request
            .headers
            .get("x-task")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        arrivals.push((Instant::now(), task));
        if arrivals.len() == 1 {
            ResponseTemplate::new(429).insert_header("retry-after", "1")
        } else {
            ResponseTemplate::new(200)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_429_pauses_all_tasks_then_one_probes_and_the_rest_go_in_arrival_order() {
    let _turn = take_turn(module_path!()).await;
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
    let mut tasks = Vec::new();
    for i in 0..10 {
        let client = client.clone();
        let url = server.uri();
        tasks.push(tokio::spawn(async move {
            let response = client.get(url).header("x-task", i.to_string()).send();
            response.await.unwrap().status()
        }));
        // Arrivals 5 ms apart (well within the 1 s pause), so their order is known.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200);
    }

    let arrivals = responder.arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), 11);
    let after: Vec<Duration> = arrivals[1..]
        .iter()
        .map(|(t, _)| *t - arrivals[0].0)
        .collect();
    // Nobody comes back before the server's second, and (one not-before draw for the key,
    // 20% wide) everyone by 1.2 s, plus 100 ms of slack for a loaded 2-core machine.
    for wait in &after {
        assert!(*wait >= Duration::from_millis(990), "{after:?}");
        assert!(*wait <= Duration::from_millis(1300), "{after:?}");
    }
    // The first task to ask goes first and alone (a probe: the server said nothing about what
    // is left after the pause); the others are released after its answer. (Their permits are
    // handed out in order, but then race over separate connections, so the server's arrival
    // order among them is not the pacer's to keep.)
    let tasks: Vec<&str> = arrivals[1..]
        .iter()
        .filter_map(|(_, t)| t.as_deref())
        .collect();
    assert_eq!(tasks[0], "0", "{tasks:?}");
    let mut rest: Vec<i32> = tasks[1..].iter().map(|t| t.parse().unwrap()).collect();
    rest.sort();
    assert_eq!(rest, (1..10).collect::<Vec<_>>());
    let probe_answered = after[0];
    assert!(after[1..].iter().all(|t| *t > probe_answered), "{after:?}");
}
