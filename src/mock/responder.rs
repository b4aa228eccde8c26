use std::error::Error as _;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    admitted: ResponseTemplate,
    style: RefusalStyle,
    log: RequestLog,
}

/// How a mock words its refusals (and, when silent, its admissions).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RefusalStyle {
    /// `retry-after-ms` beside `Retry-After`.
    pub(crate) retry_after_ms: bool,
    /// `Retry-After` as an HTTP-date rather than seconds.
    pub(crate) retry_after_date: bool,
    /// Bare 429s: no `Retry-After`, no quota field, on any response.
    pub(crate) silent: bool,
    /// 429 bodies as `application/problem+json` of type `quota-exceeded`.
    pub(crate) problem_details: bool,
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
        admitted: ResponseTemplate,
        style: RefusalStyle,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                layers,
                dialects,
                admitted,
                style,
                log: RequestLog::new(),
            }),
        }
    }

    /// The log of every request this responder (and its clones) answered.
    pub fn log(&self) -> RequestLog {
        self.inner.log.clone()
    }

    fn admitted(&self) -> ResponseTemplate {
        self.inner.admitted.clone()
    }

    fn finish(
        &self,
        request: &Request,
        at: Instant,
        at_system: SystemTime,
        entry: Entry,
        response: ResponseTemplate,
    ) -> ResponseTemplate {
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
    ) -> ResponseTemplate {
        if self.inner.style.silent {
            return ResponseTemplate::new(429).set_body_string("Too Many Requests");
        }
        let wait = by.decision.retry_after.unwrap_or(by.decision.reset);
        // Never "0": a client told to wait 0 s would come straight back.
        let seconds = retry_after_seconds(wait).max(1);
        let response = ResponseTemplate::new(429);
        let mut response = if self.inner.style.problem_details {
            let body = quota_exceeded_problem(by, seconds).to_string();
            response.set_body_raw(body, "application/problem+json")
        } else {
            response.set_body_json(too_many_requests_body(by, seconds))
        }
        .insert_header(http::header::RETRY_AFTER, seconds);
        if self.inner.style.retry_after_date {
            // The instant the wait ends, rounded up: a server never names a time too early.
            let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
            let until = since_epoch.saturating_add(wait);
            let whole = until.as_secs() + u64::from(until.subsec_nanos() > 0);
            let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(whole));
            response = response.insert_header(http::header::RETRY_AFTER, date);
        }
        if self.inner.style.retry_after_ms {
            let (name, value) = render_retry_after_ms(wait.max(Duration::from_millis(1)));
            response = response.insert_header(name, value);
        }
        self.quota_headers(by, before, now, response)
    }

    /// The quota headers: the stated layer first, then (IETF only) the others that decided.
    fn quota_headers(
        &self,
        stated: &Decided<'_>,
        others: &[Decided<'_>],
        now: SystemTime,
        mut response: ResponseTemplate,
    ) -> ResponseTemplate {
        if self.inner.style.silent {
            return response;
        }
        let quota = |d: &Decided<'_>| QuotaState {
            policy: d.layer.name().to_owned(),
            limit: d.decision.limit,
            remaining: d.decision.remaining,
            reset: d.decision.reset,
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
                response = response.insert_header(name, value);
            }
        }
        response
    }
}

impl Respond for RateLimitResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let at = Instant::now();
        let at_system = SystemTime::now();
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
                let response =
                    ResponseTemplate::new(503).set_body_json(unavailable_body(layer, &error));
                let entry = Entry {
                    layer: Some(layer.name().to_owned()),
                    key: Some(key),
                    decision: None,
                    ..Entry::bare(Answer::Unavailable, 503)
                };
                (response, entry)
            }
        };
        self.finish(request, at, at_system, entry, response)
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
