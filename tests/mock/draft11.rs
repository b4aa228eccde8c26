//! The IETF `RateLimit` draft-11: its fields read beside draft-08's, `Retry-After` over the
//! effective window, cached responses, and problem details read from a refusal's body without
//! taking the body from the caller; end to end through the crate's mock and a real client.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::mpsc;
use std::time::{Duration, UNIX_EPOCH};

use reqwest_middleware::ClientWithMiddleware;
use reqwest_polite::headers::{
    PROBLEM_BODY_LIMIT, PolicySource, ProblemDetails, ProblemKind, QuotaUnit,
};
use reqwest_polite::mock::{Layer, RateLimitedApi};
use reqwest_polite::{Pacer, PacingMiddleware, RateLimitInfo};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::server_answering;

const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";
/// A guard against a client that would wait for a body the server holds back: far above the
/// few milliseconds the loopback needs, it only turns a hang into a failure.
const HANG_GUARD: Duration = Duration::from_secs(10);

fn parse(pairs: &[(&'static str, &str)]) -> RateLimitInfo {
    let mut headers = http::HeaderMap::new();
    for (name, value) in pairs {
        headers.append(*name, value.parse().unwrap());
    }
    RateLimitInfo::from_headers_at(&headers, UNIX_EPOCH + Duration::from_secs(1_800_000_000))
}

fn secs(s: u64) -> Option<Duration> {
    Some(Duration::from_secs(s))
}

/// A client that paces (and so reads problem details) but learns nothing from the server and
/// never retries: each response reaches the test as the server sent it.
fn pacing_client() -> ClientWithMiddleware {
    let pacer = Pacer::builder().learn_from_server(false).build();
    reqwest_middleware::ClientBuilder::new(
        reqwest::Client::builder()
            .timeout(HANG_GUARD)
            .build()
            .unwrap(),
    )
    .with(PacingMiddleware::new(pacer))
    .build()
}

#[test]
fn draft11_several_policies_with_units_and_partition_keys() {
    let info = parse(&[
        (
            "ratelimit-policy",
            r#""burst";q=100;w=60, "daily";q=1000;w=86400, "upload";q=65536;qu="content-bytes";w=10"#,
        ),
        (
            "ratelimit",
            r#""burst";r=0;t=12;pk=:dXNlcjE=:, "daily";r=900;t=40000;pk=:dXNlcjE=:, "upload";r=512;t=4"#,
        ),
    ]);
    let names: Vec<_> = info.policies.iter().map(|p| p.name.as_deref()).collect();
    assert_eq!(names, [Some("burst"), Some("daily"), Some("upload")]);
    let daily = &info.policies[1];
    assert_eq!((daily.quota, daily.window), (Some(1000), secs(86_400)));
    assert_eq!((daily.remaining, daily.reset), (Some(900), secs(40_000)));
    assert_eq!(daily.partition_key.as_deref(), Some(&b"user1"[..]));
    assert_eq!(info.policies[2].quota_unit, QuotaUnit::ContentBytes);
    assert_eq!(info.policies[2].partition_key, None);
    // The spent burst governs: nothing more within its 12 s effective window.
    assert_eq!((info.limit, info.remaining), (Some(100), Some(0)));
    assert_eq!(info.server_wait(), secs(12));
}

#[test]
fn draft11_remaining_without_an_effective_window_dictates_no_wait() {
    let info = parse(&[("ratelimit", r#""default";r=999;pk=:dHJpYWw=:"#)]);
    assert_eq!(info.remaining, Some(999));
    assert_eq!(info.reset, None);
    assert_eq!(info.server_wait(), None);
    assert_eq!(
        info.policies[0].partition_key.as_deref(),
        Some(&b"trial"[..])
    );
}

#[test]
fn draft08_reset_and_draft11_effective_window_read_alike() {
    // Draft-08 wrote token names and meant `t` as the reset; draft-11 writes strings and means
    // the effective window. Either way: 0 left for the next 30 s.
    let draft08 = parse(&[
        ("ratelimit-policy", "permin;q=50;w=60"),
        ("ratelimit", "permin;r=0;t=30"),
    ]);
    let draft11 = parse(&[
        ("ratelimit-policy", r#""permin";q=50;w=60"#),
        ("ratelimit", r#""permin";r=0;t=30"#),
    ]);
    assert_eq!(draft08, draft11);
    assert_eq!(draft11.server_wait(), secs(30));
    assert_eq!(draft11.window, secs(60));
}

#[test]
fn retry_after_takes_precedence_over_the_effective_window() {
    for (retry_after, t) in [("2", "3600"), ("90", "5")] {
        let state = format!(r#""burst";r=0;t={t}"#);
        let info = parse(&[
            ("ratelimit-policy", r#""burst";q=10;w=3600"#),
            ("ratelimit", &state),
            ("retry-after", retry_after),
        ]);
        let (retry_after, t): (u64, u64) = (retry_after.parse().unwrap(), t.parse().unwrap());
        assert_eq!(info.server_wait(), secs(retry_after));
        // A longer `t` is cut to `Retry-After`; a shorter one is kept.
        assert_eq!(info.reset, secs(t.min(retry_after)));
    }
}

#[test]
fn retry_after_cuts_only_spent_ietf_resets() {
    let info = parse(&[
        ("ratelimit", r#""hourly";r=0;t=3600, "daily";r=40;t=80000"#),
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", "3600"),
        ("retry-after", "60"),
    ]);
    let resets: Vec<_> = info.policies.iter().map(|p| (p.source, p.reset)).collect();
    assert_eq!(
        resets,
        [
            (PolicySource::Ietf, secs(60)),
            // 40 more within 80,000 s must not become 40 within 60 s.
            (PolicySource::Ietf, secs(80_000)),
            (PolicySource::XRateLimit, secs(3600)),
        ]
    );
}

#[tokio::test]
async fn a_response_from_a_cache_states_no_quota_through_the_client() {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("age", "30")
                .insert_header("ratelimit-policy", r#""burst";q=10;w=60"#)
                .insert_header("ratelimit", r#""burst";r=0;t=45"#),
        )
        .mount(&server)
        .await;

    let response = pacing_client().get(server.uri()).send().await.unwrap();

    let info = response.extensions().get::<RateLimitInfo>().unwrap();
    assert_eq!(info, &RateLimitInfo::default());
}

#[tokio::test]
async fn a_client_honours_retry_after_over_an_hour_long_effective_window() {
    let refusal = ResponseTemplate::new(429)
        .insert_header("retry-after", "1")
        .insert_header("ratelimit-policy", r#""hourly";q=10;w=3600"#)
        .insert_header("ratelimit", r#""hourly";r=0;t=3600"#);
    let server = server_answering(refusal, 1).await;

    // The default client refuses to wait longer than its cap: had it taken `t` over
    // `Retry-After`, it would fail at once instead of retrying after a second.
    let response = reqwest_polite::client().get(server.uri()).send().await;

    let response = response.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn problem_details_are_read_and_the_caller_gets_the_same_bytes() {
    let body = format!(
        "{{\n  \"type\": \"{QUOTA_EXCEEDED}\",\n  \"title\": \"Quota über\",\n  \"violated-policies\": [\"daily\", \"bandwidth\"]\n}}\n"
    );
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(
            ResponseTemplate::new(429)
                .set_body_raw(body.clone(), "application/problem+json")
                .insert_header("ratelimit", r#""daily";r=0;t=60"#)
                .insert_header("x-request-id", "abc-123"),
        )
        .mount(&server)
        .await;
    let url = format!("{}/orders?page=2", server.uri());

    let response = pacing_client().get(&url).send().await.unwrap();

    assert_eq!(response.status(), 429);
    assert_eq!(response.url().as_str(), url);
    assert_eq!(response.version(), http::Version::HTTP_11);
    assert_eq!(response.remote_addr(), Some(*server.address()));
    assert_eq!(response.headers()["x-request-id"], "abc-123");
    assert_eq!(response.content_length(), Some(body.len() as u64));
    let details = response
        .extensions()
        .get::<ProblemDetails>()
        .unwrap()
        .clone();
    assert_eq!(details.kind, ProblemKind::QuotaExceeded);
    assert_eq!(details.title.as_deref(), Some("Quota über"));
    assert_eq!(details.violated_policies, ["daily", "bandwidth"]);
    let info = response.extensions().get::<RateLimitInfo>().unwrap();
    assert_eq!(info.remaining, Some(0));
    assert_eq!(response.bytes().await.unwrap(), body.as_bytes());
}

#[tokio::test]
async fn a_malformed_or_foreign_body_is_given_back_untouched_without_details() {
    let bodies: [(u16, &str, Vec<u8>); 4] = [
        (
            429,
            "application/problem+json",
            b"{\"type\": \"quota-exc".to_vec(),
        ),
        (
            429,
            "application/problem+json",
            vec![0xff, 0xfe, 0x00, 0x7b],
        ),
        (
            429,
            "application/json",
            format!(r#"{{"type":"{QUOTA_EXCEEDED}"}}"#).into(),
        ),
        (
            400,
            "application/problem+json",
            format!(r#"{{"type":"{QUOTA_EXCEEDED}"}}"#).into(),
        ),
    ];
    for (status, content_type, body) in bodies {
        let server = MockServer::start().await;
        Mock::given(any())
            .respond_with(ResponseTemplate::new(status).set_body_raw(body.clone(), content_type))
            .mount(&server)
            .await;

        let response = pacing_client().get(server.uri()).send().await.unwrap();

        assert_eq!(response.status(), status);
        assert!(response.extensions().get::<ProblemDetails>().is_none());
        assert_eq!(
            response.bytes().await.unwrap(),
            body,
            "{status} {content_type}"
        );
    }
}

/// A one-connection HTTP/1.1 server on loopback that sends `head` and `first`, then holds the
/// rest of the body back until the test says so.
fn holding_server(head: String, first: Vec<u8>, rest: Vec<u8>) -> (SocketAddr, mpsc::Sender<()>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let address = listener.local_addr().unwrap();
    let (release, released) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 2 {
            line.clear();
        }
        let mut stream = stream;
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&first).unwrap();
        stream.flush().unwrap();
        // Sent only once the client has its response: a client that buffered the body first
        // would still be waiting for these bytes.
        if released.recv_timeout(HANG_GUARD).is_ok() {
            stream.write_all(&rest).unwrap();
        }
    });
    (address, release)
}

/// A chunk of a chunked body.
fn chunk(bytes: &[u8]) -> Vec<u8> {
    [format!("{:x}\r\n", bytes.len()).as_bytes(), bytes, b"\r\n"].concat()
}

#[tokio::test]
async fn a_problem_body_above_the_limit_is_not_read() {
    let body = format!(
        r#"{{"type":"{QUOTA_EXCEEDED}","pad":"{}"}}"#,
        "x".repeat(PROBLEM_BODY_LIMIT)
    )
    .into_bytes();
    let head = format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let (first, rest) = body.split_at(100);
    let (address, release) = holding_server(head, first.to_vec(), rest.to_vec());

    let response = tokio::time::timeout(
        HANG_GUARD,
        pacing_client().get(format!("http://{address}/")).send(),
    )
    .await
    .expect("the response came before its whole body")
    .unwrap();

    assert_eq!(response.status(), 429);
    assert!(response.extensions().get::<ProblemDetails>().is_none());
    release.send(()).unwrap();
    assert_eq!(response.bytes().await.unwrap(), body);
}

/// A 429 whose problem body has no length (chunked, as HTTP/2 and streaming servers send) is
/// read when it comes at once, and the caller still gets every byte.
#[tokio::test]
async fn a_chunked_problem_body_that_comes_at_once_is_read() {
    let problem = format!(r#"{{"type":"{QUOTA_EXCEEDED}","violated-policies":["burst"]}}"#);
    let head = "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/problem+json\r\n\
                transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        .to_owned();
    let (first, second) = problem.as_bytes().split_at(20);
    let rest = [chunk(second), b"0\r\n\r\n".to_vec()].concat();
    let (address, release) = holding_server(head, chunk(first), rest);
    release.send(()).unwrap();
    let response = pacing_client()
        .get(format!("http://{address}/"))
        .send()
        .await
        .unwrap();
    let details = response.extensions().get::<ProblemDetails>().unwrap();
    assert_eq!(details.violated_policies, ["burst"]);
    assert_eq!(response.text().await.unwrap(), problem);
}

/// A body of unknown length is not waited for past a short bound (the caller may never read
/// it): a 200's is never read, a 429's problem body held back by the server comes back as a
/// stream, its first chunk read and given back first.
#[tokio::test]
async fn bodies_of_unknown_length_stay_streams() {
    let problem = format!(r#"{{"type":"{QUOTA_EXCEEDED}","violated-policies":["burst"]}}"#);
    for (status_line, content_type) in [
        ("200 OK", "text/plain"),
        ("429 Too Many Requests", "application/problem+json"),
    ] {
        let head = format!(
            "HTTP/1.1 {status_line}\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        );
        let (first, second) = problem.as_bytes().split_at(20);
        let rest = [chunk(second), b"0\r\n\r\n".to_vec()].concat();
        let (address, release) = holding_server(head, chunk(first), rest);

        let mut response = tokio::time::timeout(
            HANG_GUARD,
            pacing_client().get(format!("http://{address}/")).send(),
        )
        .await
        .expect("the response came before its whole body")
        .unwrap();

        assert!(response.extensions().get::<ProblemDetails>().is_none());
        assert_eq!(response.chunk().await.unwrap().unwrap(), first);
        release.send(()).unwrap();
        assert_eq!(response.chunk().await.unwrap().unwrap(), second);
        assert_eq!(response.chunk().await.unwrap(), None);
    }
}

#[tokio::test]
async fn the_mock_speaks_draft11_and_its_problem_details_reach_the_caller() {
    let api = RateLimitedApi::new()
        .layer(Layer::per_api_key(2, Duration::from_secs(60)))
        .layer(Layer::global(100, Duration::from_secs(60)))
        .problem_details()
        .start()
        .await
        .unwrap();
    let client = pacing_client();
    let send = |key: &'static str| client.get(api.uri()).header("x-api-key", key).send();

    let a1 = send("a").await.unwrap();
    let b1 = send("b").await.unwrap();
    let a2 = send("a").await.unwrap();
    let a3 = send("a").await.unwrap();

    // Several policies at once; the keyed one names its partition, the global one does not.
    let info = |response: &reqwest::Response| {
        response
            .extensions()
            .get::<RateLimitInfo>()
            .unwrap()
            .clone()
    };
    let pk = |response: &reqwest::Response, name: &str| {
        let info = info(response);
        let policy = info
            .policies
            .iter()
            .find(|p| p.name.as_deref() == Some(name));
        policy.unwrap().partition_key.clone()
    };
    assert_eq!(info(&a1).policies.len(), 2);
    assert_eq!(pk(&a1, "global"), None);
    let key_a = pk(&a1, "per-api-key").unwrap();
    assert_eq!(key_a.len(), 8);
    assert_ne!(pk(&b1, "per-api-key").unwrap(), key_a);
    assert_eq!(pk(&a2, "per-api-key").unwrap(), key_a);
    // The refusing layer stops the others: only its policy is stated, under the same key.
    assert_eq!(info(&a3).policies.len(), 1);
    assert_eq!(pk(&a3, "per-api-key").unwrap(), key_a);
    // The refusal explains itself, and still hands over its JSON.
    assert_eq!(a3.status(), 429);
    let details = a3.extensions().get::<ProblemDetails>().unwrap().clone();
    assert_eq!(details.kind, ProblemKind::QuotaExceeded);
    assert_eq!(details.type_uri, QUOTA_EXCEEDED);
    assert_eq!(details.violated_policies, ["per-api-key"]);
    let info = a3.extensions().get::<RateLimitInfo>().unwrap().clone();
    assert_eq!(
        info.governing_policy().unwrap().name.as_deref(),
        Some("per-api-key")
    );
    assert_eq!(info.remaining, Some(0));
    let retry_after: u64 = a3.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&a3.bytes().await.unwrap()).unwrap();
    assert_eq!(body["retry_after"], retry_after);
    assert_eq!(
        body["violated-policies"],
        serde_json::json!(["per-api-key"])
    );
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("'per-api-key' exceeded")
    );
}
