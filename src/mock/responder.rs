use std::error::Error as _;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::{HeaderName, HeaderValue};
use sha2::{Digest, Sha256};
use wiremock::{Request, Respond, ResponseTemplate};

use super::layer::{LayerError, LayerOutcome};
use super::{Answer, Layer, LoggedRequest, Partition, RequestLog};
use crate::headers::{HeaderDialect, QuotaState, render_retry_after_ms, retry_after_seconds};
use crate::limiter::Decision;

/// A wiremock [`Respond`]er that enforces its [`Layer`]s, speaks the header dialects asked
/// for, and logs every request. Clones share the layers' counts and the log.
///
/// Build one with [`RateLimitedApi::responder`](super::RateLimitedApi::responder) to mount it
/// with matchers of your own; see the [module docs](super) for what it answers.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::mock::RateLimitedApi;
/// use wiremock::matchers::{method, path};
/// use wiremock::{Mock, MockServer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Arrange: only GET /search is limited, to 1 per minute per client.
/// let server = MockServer::start().await;
/// let responder = RateLimitedApi::per_client_ip(1, Duration::from_secs(60)).responder()?;
/// Mock::given(method("GET"))
///     .and(path("/search"))
///     .respond_with(responder.clone())
///     .mount(&server)
///     .await;
/// let client = reqwest::Client::new();
/// let search = || client.get(format!("{}/search", server.uri())).header("x-forwarded-for", "192.0.2.1");
///
/// // Act
/// let first = search().send().await?;
/// let second = search().send().await?;
///
/// // Assert
/// assert_eq!(first.status(), 200);
/// assert_eq!(second.status(), 429);
/// assert_eq!(responder.log().rejected(), 1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RateLimitResponder {
    inner: Arc<Inner>,
}

struct Inner {
    layers: Vec<Layer>,
    dialects: Vec<HeaderDialect>,
    admitted: Reply,
    style: RefusalStyle,
    log: RequestLog,
    /// Draws of the latency so far (the next draw's index).
    draws: std::sync::atomic::AtomicU64,
}

/// One answer, before it goes out through wiremock or, in process, straight to the client.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    status: u16,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The body and its content type.
    body: Option<(Vec<u8>, &'static str)>,
}

impl Reply {
    pub(crate) fn new(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: None,
        }
    }

    pub(crate) fn body(mut self, bytes: impl Into<Vec<u8>>, content_type: &'static str) -> Self {
        self.body = Some((bytes.into(), content_type));
        self
    }

    pub(crate) fn json(self, value: &serde_json::Value) -> Self {
        self.body(value.to_string(), "application/json")
    }

    /// Sets `name` to `value`, replacing what it had.
    fn header(mut self, name: HeaderName, value: impl Into<HeaderValue>) -> Self {
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value.into()));
        self
    }

    fn into_template(self) -> ResponseTemplate {
        let mut template = ResponseTemplate::new(self.status);
        for (name, value) in self.headers {
            template = template.insert_header(name, value);
        }
        match self.body {
            Some((bytes, content_type)) => template.set_body_raw(bytes, content_type),
            None => template,
        }
    }

    /// The response a server would have sent at `date`, with its `Date` header.
    fn into_response(self, date: SystemTime) -> http::Response<Vec<u8>> {
        let mut response = http::Response::new(Vec::new());
        *response.status_mut() =
            http::StatusCode::from_u16(self.status).expect("the mock answers known statuses");
        let headers = response.headers_mut();
        let stamp = HeaderValue::from_str(&httpdate::fmt_http_date(date))
            .expect("an HTTP-date is a valid header value");
        headers.insert(http::header::DATE, stamp);
        for (name, value) in self.headers {
            headers.insert(name, value);
        }
        if let Some((bytes, content_type)) = self.body {
            headers.insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static(content_type),
            );
            headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
            *response.body_mut() = bytes;
        }
        response
    }
}

/// How a mock words its refusals (and, when silent, its admissions).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RefusalStyle {
    /// `retry-after-ms` beside `Retry-After`.
    pub(crate) retry_after_ms: bool,
    /// `Retry-After` as an HTTP-date rather than seconds.
    pub(crate) retry_after_date: bool,
    /// Resets stated as the whole second after them, ⌊t⌋ + 1 (Flask-Limiter's).
    pub(crate) reset_second_after: bool,
    /// Bare 429s: no `Retry-After`, no quota field, on any response.
    pub(crate) silent: bool,
    /// With `silent`: the same `Retry-After` on every 429 (a proxy's static one), in whole
    /// seconds, and still no quota field.
    pub(crate) static_retry_after: Option<Duration>,
    /// 429 bodies as `application/problem+json` of type `quota-exceeded`.
    pub(crate) problem_details: bool,
    /// Each way's delay, drawn per request between these bounds (see [`Latency`]).
    pub(crate) latency: Option<Latency>,
}

/// The one-way delay of each request and of each answer: drawn between `least` and `most` from
/// a fixed sequence, so a simulated run is the same every time. In process both ways are slept
/// (on tokio's clock, paused or not); through wiremock the answer's way only, since the
/// request has crossed a real socket already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Latency {
    pub(crate) least: Duration,
    pub(crate) most: Duration,
}

impl Latency {
    /// The `n`-th draw: splitmix64 of `n`, scaled into the bounds.
    fn draw(&self, n: u64) -> Duration {
        let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let spread = self.most.saturating_sub(self.least);
        let fraction = (z >> 11) as f64 / (1u64 << 53) as f64;
        self.least + spread.mul_f64(fraction)
    }
}

/// What the layers concluded about one request.
enum Outcome<'a> {
    /// Every layer that applies admitted it; their outcomes, in layer order.
    Admitted(Vec<Decided<'a>>),
    /// The last layer asked rejected it; those asked before admitted it.
    Rejected {
        by: Decided<'a>,
        before: Vec<Decided<'a>>,
    },
    /// The last layer asked could not decide.
    Failed {
        layer: &'a Layer,
        key: String,
        error: LayerError,
    },
}

struct Decided<'a> {
    layer: &'a Layer,
    key: String,
    decision: Decision,
}

/// The status of an admitted request.
const ADMITTED_STATUS: u16 = 200;

impl RateLimitResponder {
    pub(crate) fn new(
        layers: Vec<Layer>,
        dialects: Vec<HeaderDialect>,
        admitted: Reply,
        style: RefusalStyle,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                layers,
                dialects,
                admitted,
                style,
                log: RequestLog::new(),
                draws: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// The log of every request this responder (and its clones) answered.
    pub fn log(&self) -> RequestLog {
        self.inner.log.clone()
    }

    fn admitted(&self) -> Reply {
        self.inner.admitted.clone()
    }

    fn finish(
        &self,
        request: &Request,
        at: Instant,
        at_system: SystemTime,
        entry: Entry,
        response: Reply,
    ) -> Reply {
        self.inner.log.push(LoggedRequest {
            at,
            at_system,
            method: request.method.clone(),
            path: request.url.path().to_owned(),
            layer: entry.layer,
            key: entry.key,
            answer: entry.answer,
            status: entry.status,
            decision: entry.decision,
        });
        response
    }

    /// Asks each layer that applies, in order, stopping at the first that does not admit.
    fn decide<'a>(&'a self, request: &Request) -> Outcome<'a> {
        let mut admitted = Vec::new();
        for layer in self.inner.layers.iter().filter(|l| l.applies_to(request)) {
            let LayerOutcome { key, result } = layer.check(request);
            match result {
                Ok(decision) if decision.allowed => admitted.push(Decided {
                    layer,
                    key,
                    decision,
                }),
                Ok(decision) => {
                    return Outcome::Rejected {
                        by: Decided {
                            layer,
                            key,
                            decision,
                        },
                        before: admitted,
                    };
                }
                Err(error) => return Outcome::Failed { layer, key, error },
            }
        }
        Outcome::Admitted(admitted)
    }

    /// The 429 for a request `by` rejected, after `before` admitted it.
    fn too_many_requests(
        &self,
        by: &Decided<'_>,
        before: &[Decided<'_>],
        now: SystemTime,
    ) -> Reply {
        if self.inner.style.silent {
            let reply = Reply::new(429).body("Too Many Requests", "text/plain");
            return match self.inner.style.static_retry_after {
                Some(wait) => {
                    reply.header(http::header::RETRY_AFTER, retry_after_seconds(wait).max(1))
                }
                None => reply,
            };
        }
        let wait = self.stated_wait(now, by.decision.retry_after.unwrap_or(by.decision.reset));
        // Never "0": a client told to wait 0 s would come straight back.
        let seconds = retry_after_seconds(wait).max(1);
        let response = Reply::new(429);
        let mut response = if self.inner.style.problem_details {
            let body = quota_exceeded_problem(by, seconds).to_string();
            response.body(body, "application/problem+json")
        } else {
            response.json(&too_many_requests_body(by, seconds))
        }
        .header(http::header::RETRY_AFTER, seconds);
        if self.inner.style.retry_after_date {
            // The instant the wait ends, rounded up: a server never names a time too early.
            let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
            let until = since_epoch.saturating_add(wait);
            let whole = until.as_secs() + u64::from(until.subsec_nanos() > 0);
            let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(whole));
            let date = HeaderValue::from_str(&date).expect("an HTTP-date is a valid header value");
            response = response.header(http::header::RETRY_AFTER, date);
        }
        if self.inner.style.retry_after_ms {
            let (name, value) = render_retry_after_ms(wait.max(Duration::from_millis(1)));
            response = response.header(name, value);
        }
        self.quota_headers(by, before, now, response)
    }

    /// A wait of `wait` from `now` as this mock states it: as it is, or (with
    /// `reset_second_after`) up to the whole second after the instant it ends.
    fn stated_wait(&self, now: SystemTime, wait: Duration) -> Duration {
        if !self.inner.style.reset_second_after {
            return wait;
        }
        let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        let after = Duration::from_secs(since_epoch.saturating_add(wait).as_secs() + 1);
        after.saturating_sub(since_epoch)
    }

    /// The quota headers: the stated layer first, then (IETF only) the others that decided.
    fn quota_headers(
        &self,
        stated: &Decided<'_>,
        others: &[Decided<'_>],
        now: SystemTime,
        mut response: Reply,
    ) -> Reply {
        if self.inner.style.silent {
            return response;
        }
        let quota = |d: &Decided<'_>| QuotaState {
            policy: d.layer.name().to_owned(),
            limit: d.decision.limit,
            remaining: d.decision.remaining,
            reset: self.stated_wait(now, d.decision.reset),
            window: d.layer.window(),
            partition_key: stated_partition_key(d),
        };
        let first = [quota(stated)];
        let every: Vec<QuotaState> = first
            .iter()
            .cloned()
            .chain(others.iter().map(quota))
            .collect();
        for dialect in &self.inner.dialects {
            let quotas = if *dialect == HeaderDialect::Ietf {
                &every[..]
            } else {
                &first[..]
            };
            for (name, value) in dialect.render(quotas, now) {
                response = response.header(name, value);
            }
        }
        response
    }
}

impl Respond for RateLimitResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let (reply, _) = self.answer(request);
        match self.one_way() {
            Some(delay) => reply.into_template().set_delay(delay),
            None => reply.into_template(),
        }
    }
}

/// The responder as the innermost middleware of a client: it answers every request itself,
/// in the same process, with no socket. Requests and answers are exactly those of a server
/// started with [`RateLimitedApi::start`](super::RateLimitedApi::start), plus the `Date`
/// header a server adds.
///
/// Its clocks are tokio's: inside a runtime with paused time (`#[tokio::test(start_paused =
/// true)]`), windows, resets, dates and the client's sleeps all move together on the paused
/// clock, so a test of a client against a quota of minutes runs in milliseconds and gives the
/// same figures every run.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::PoliteClientBuilder;
/// use reqwest_polite::mock::RateLimitedApi;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Arrange: 5 requests per 10 s, answered in process, on tokio's paused clock.
/// let api = RateLimitedApi::global(5, Duration::from_secs(10)).responder()?;
/// let client = PoliteClientBuilder::new().with_inner(api.clone()).build();
/// let started = tokio::time::Instant::now();
///
/// // Act: 12 requests, so the client must wait for a third window.
/// for _ in 0..12 {
///     let response = client.get("http://api.test/items").send().await?;
///     assert_eq!(response.status(), 200);
/// }
///
/// // Assert: every request got through; the waits were slept on the paused clock.
/// assert_eq!(api.log().admitted(), 12);
/// assert!(started.elapsed() >= Duration::from_secs(10));
/// # Ok(())
/// # }
/// ```
#[async_trait::async_trait]
impl reqwest_middleware::Middleware for RateLimitResponder {
    async fn handle(
        &self,
        request: reqwest::Request,
        _extensions: &mut http::Extensions,
        _next: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let body = request
            .body()
            .and_then(|body| body.as_bytes())
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        let seen = Request {
            url: request.url().clone(),
            method: request.method().clone(),
            headers: request.headers().clone(),
            body,
        };
        if let Some(delay) = self.one_way() {
            tokio::time::sleep(delay).await;
        }
        let (reply, date) = self.answer(&seen);
        if let Some(delay) = self.one_way() {
            tokio::time::sleep(delay).await;
        }
        Ok(reqwest::Response::from(reply.into_response(date)))
    }
}

impl RateLimitResponder {
    /// The next one-way delay, when the API has a latency.
    fn one_way(&self) -> Option<Duration> {
        let latency = self.inner.style.latency?;
        let n = self
            .inner
            .draws
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(latency.draw(n))
    }

    /// Decides, logs, and words the answer to `request`; returns it with the wall-clock time
    /// it was given.
    fn answer(&self, request: &Request) -> (Reply, SystemTime) {
        let at = tokio::time::Instant::now().into_std();
        let at_system = crate::time::wall_now();
        let outcome = self.decide(request);
        let (response, entry) = match outcome {
            Outcome::Admitted(mut decided) => match closest_to_limit(&decided) {
                Some(closest) => {
                    let stated = decided.remove(closest);
                    let response =
                        self.quota_headers(&stated, &decided, at_system, self.admitted());
                    (
                        response,
                        Entry::of(&stated, Answer::Admitted, ADMITTED_STATUS),
                    )
                }
                // No layer applies: nothing to state.
                None => (
                    self.admitted(),
                    Entry::bare(Answer::Admitted, ADMITTED_STATUS),
                ),
            },
            Outcome::Rejected { by, before } => {
                let response = self.too_many_requests(&by, &before, at_system);
                (response, Entry::of(&by, Answer::Rejected, 429))
            }
            Outcome::Failed { layer, key, error } => {
                tracing::warn!(
                    layer = layer.name(),
                    error = %error,
                    "mock rate-limit store failed: answering 503"
                );
                let body = unavailable_body(layer, &error);
                let response = if self.inner.style.problem_details {
                    let problem = reduced_capacity_problem(&body);
                    Reply::new(503).body(problem.to_string(), "application/problem+json")
                } else {
                    Reply::new(503).json(&body)
                };
                let entry = Entry {
                    layer: Some(layer.name().to_owned()),
                    key: Some(key),
                    decision: None,
                    ..Entry::bare(Answer::Unavailable, 503)
                };
                (response, entry)
            }
        };
        (
            self.finish(request, at, at_system, entry, response),
            at_system,
        )
    }
}

/// The log fields that depend on the outcome.
struct Entry {
    layer: Option<String>,
    key: Option<String>,
    decision: Option<Decision>,
    answer: Answer,
    status: u16,
}

impl Entry {
    fn bare(answer: Answer, status: u16) -> Self {
        Self {
            layer: None,
            key: None,
            decision: None,
            answer,
            status,
        }
    }

    fn of(decided: &Decided<'_>, answer: Answer, status: u16) -> Self {
        Self {
            layer: Some(decided.layer.name().to_owned()),
            key: Some(decided.key.clone()),
            decision: Some(decided.decision),
            answer,
            status,
        }
    }
}

/// The index of the decision with the smallest `remaining / limit`; ties go to the first.
fn closest_to_limit(decided: &[Decided<'_>]) -> Option<usize> {
    let mut best: Option<(usize, &Decision)> = None;
    for (index, d) in decided.iter().enumerate() {
        let closer = best.is_none_or(|(_, b)| {
            // a.r / a.l < b.r / b.l without division; u64 products fit in u128
            u128::from(d.decision.remaining) * u128::from(b.limit)
                < u128::from(b.remaining) * u128::from(d.decision.limit)
        });
        if closer {
            best = Some((index, &d.decision));
        }
    }
    best.map(|(index, _)| index)
}

fn too_many_requests_body(by: &Decided<'_>, retry_after: u64) -> serde_json::Value {
    serde_json::json!({
        "error": "rate_limit_exceeded",
        "message": format!(
            "Rate limit '{}' exceeded: {} requests per {}. Retry in {} s.",
            by.layer.name(),
            by.decision.limit,
            describe_window(by.layer.window()),
            retry_after
        ),
        "retry_after": retry_after,
    })
}

/// The draft-11 problem details of a 429: type `quota-exceeded`, the layer as the violated
/// policy (the name its `RateLimit-Policy` item has), and the same fields as the plain body.
fn quota_exceeded_problem(by: &Decided<'_>, retry_after: u64) -> serde_json::Value {
    let plain = too_many_requests_body(by, retry_after);
    serde_json::json!({
        "type": "https://iana.org/assignments/http-problem-types#quota-exceeded",
        "title": "Quota exceeded",
        "status": 429,
        "detail": plain["message"],
        "violated-policies": [by.layer.name()],
        "retry_after": retry_after,
    })
}

/// The `pk` of a layer's quota: none for a global layer (one quota for all), else the first
/// 8 bytes of SHA-256 over the layer's name and the request's key, so the header tells clients
/// apart without echoing an address or an API key.
fn stated_partition_key(decided: &Decided<'_>) -> Option<Vec<u8>> {
    if *decided.layer.partition() == Partition::Global {
        return None;
    }
    let mut hasher = Sha256::new();
    hasher.update(decided.layer.name().as_bytes());
    hasher.update([0]);
    hasher.update(decided.key.as_bytes());
    Some(hasher.finalize()[..8].to_vec())
}

fn unavailable_body(layer: &Layer, error: &LayerError) -> serde_json::Value {
    let mut cause = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        cause = format!("{cause}: {inner}");
        source = inner.source();
    }
    serde_json::json!({
        "error": "rate_limiter_unavailable",
        "message": format!("The store of rate limit '{}' failed: {cause}", layer.name()),
    })
}

/// The draft-11 problem details of a 503 whose layer could not decide: type
/// `temporary-reduced-capacity`, the plain body's message as `detail`.
fn reduced_capacity_problem(plain: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "type": "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity",
        "title": "Temporary reduced capacity",
        "status": 503,
        "detail": plain["message"],
    })
}

fn describe_window(window: Duration) -> String {
    let millis = window.as_millis();
    if millis.is_multiple_of(1000) {
        format!("{} s", window.as_secs())
    } else {
        format!("{millis} ms")
    }
}

impl fmt::Debug for RateLimitResponder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitResponder")
            .field("layers", &self.inner.layers)
            .field("dialects", &self.inner.dialects)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::FixedWindow;
    use crate::time::ManualClock;

    fn decided(layer: &Layer, remaining: u64, limit: u64) -> Decided<'_> {
        Decided {
            layer,
            key: "k".into(),
            decision: Decision {
                allowed: true,
                limit,
                remaining,
                reset: Duration::ZERO,
                retry_after: None,
            },
        }
    }

    #[test]
    fn closest_to_limit_compares_fractions_and_keeps_the_first_on_ties() {
        let layer = Layer::global(1, Duration::from_secs(1));
        let list = [
            decided(&layer, 99, 100),
            decided(&layer, 9, 10),
            decided(&layer, 990, 1000),
            decided(&layer, 1, 1),
        ];
        assert_eq!(closest_to_limit(&list), Some(1));
        assert_eq!(closest_to_limit(&list[2..]), Some(0));
        assert_eq!(closest_to_limit(&[]), None);
        let huge = [
            decided(&layer, u64::MAX, u64::MAX),
            decided(&layer, u64::MAX - 1, u64::MAX),
        ];
        assert_eq!(closest_to_limit(&huge), Some(1));
    }

    #[test]
    fn windows_are_described_in_seconds_or_milliseconds() {
        assert_eq!(describe_window(Duration::from_secs(3600)), "3600 s");
        assert_eq!(describe_window(Duration::from_millis(250)), "250 ms");
    }

    #[test]
    fn a_rejection_names_the_layer_and_the_wait() {
        let clock = ManualClock::new();
        let limiter = FixedWindow::new(1, Duration::from_secs(60))
            .unwrap()
            .with_clock(clock);
        let layer = Layer::new("orders", Partition::Global, limiter);
        let mut by = decided(&layer, 0, 1);
        by.decision.allowed = false;
        let body = too_many_requests_body(&by, 42);
        assert_eq!(body["error"], "rate_limit_exceeded");
        assert_eq!(body["retry_after"], 42);
        assert_eq!(
            body["message"],
            "Rate limit 'orders' exceeded: 1 requests per 60 s. Retry in 42 s."
        );
    }
}
