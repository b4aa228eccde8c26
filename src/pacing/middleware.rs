use std::sync::Arc;

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use super::key::{PartitionKey, PerHost};
use super::pacer::Pacer;
use super::problem_body::with_problem_details;
use crate::headers::RateLimitInfo;
use crate::observe::record;
use crate::time::{DrawnWait, RequestDeadline, RequestJitter};

/// Paces every attempt of a request: awaits a permit for the request's partition key, sends,
/// then feeds the response's [`RateLimitInfo`] back to the [`Pacer`].
///
/// A 429 or 503 with a small `application/problem+json` body (up to
/// [`PROBLEM_BODY_LIMIT`](crate::headers::PROBLEM_BODY_LIMIT), stated or not, arriving within
/// 100 ms) also gets its [`ProblemDetails`](crate::headers::ProblemDetails) in its extensions:
/// the body is read once and given back to the caller byte for byte (what was read, then the
/// rest of the stream, when it was longer or slower). Other bodies are not touched.
///
/// It also learns the quota's scope from the answers: partitions on one host that the
/// server counts under one quota (one `pk`, or one counter falling across them) are paced as
/// one and take turns (see the [module docs](super)).
///
/// Put it under the retry middleware so that retries are paced too. On a 429 it tells the
/// retry layer, through the response's extensions, the pause it put on the key, drawn once
/// with the retry layer's jitter (which the retry layer puts in the request's extensions), so
/// the retry waits that same draw. A refused permit becomes
/// `reqwest_middleware::Error::Middleware` wrapping a [`PacingError`](super::PacingError).
///
/// ```
/// use std::num::NonZeroU32;
/// use reqwest_polite::pacing::{Pacer, PacingMiddleware};
/// use reqwest_polite::time::Rate;
/// use wiremock::{Mock, MockServer, ResponseTemplate, matchers::any};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let server = MockServer::start().await;
/// Mock::given(any()).respond_with(ResponseTemplate::new(200)).mount(&server).await;
/// let pacer = Pacer::builder().rate(Rate::per_second(NonZeroU32::new(50).unwrap())).build();
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(PacingMiddleware::new(pacer))
///     .build();
///
/// let started = std::time::Instant::now();
/// for _ in 0..3 {
///     let response = client.get(server.uri()).send().await.unwrap();
///     assert_eq!(response.status(), 200);
/// }
/// // 50 per second, evenly spaced: three requests span at least 40 ms.
/// assert!(started.elapsed() >= std::time::Duration::from_millis(39));
/// # }
/// ```
#[derive(Clone)]
pub struct PacingMiddleware {
    pacer: Pacer,
    partition: Arc<dyn PartitionKey>,
    /// The partitions are the hosts themselves: no two share a host, so there is no quota
    /// scope to learn (the `scope` module compares partitions on one host), and its work on
    /// every request is skipped.
    per_host: bool,
}

impl PacingMiddleware {
    /// Paces with `pacer`, one quota per host ([`PerHost`]).
    pub fn new(pacer: Pacer) -> Self {
        Self {
            pacer,
            partition: Arc::new(PerHost),
            per_host: true,
        }
    }

    /// Partitions requests with `partition` instead (tenant, API key, route…).
    pub fn with_partition(mut self, partition: impl PartitionKey) -> Self {
        self.partition = Arc::new(partition);
        self.per_host = false;
        self
    }

    /// The same partition, paced by `pacer` instead.
    pub fn with_pacer(mut self, pacer: Pacer) -> Self {
        self.pacer = pacer;
        self
    }

    /// The pacer behind this middleware.
    pub fn pacer(&self) -> &Pacer {
        &self.pacer
    }
}

impl std::fmt::Debug for PacingMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacingMiddleware")
            .field("pacer", &self.pacer)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Middleware for PacingMiddleware {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let key = self.partition.key_of(&request);
        let deadline = extensions.get::<RequestDeadline>().map(|d| d.0);
        let permit = match self
            .pacer
            .acquire_by(&key, 1, declared_bytes(&request), deadline)
            .await
        {
            Ok(permit) => permit,
            Err(refused) => {
                record::request("refused");
                return Err(reqwest_middleware::Error::middleware(refused));
            }
        };
        record::pacing_wait(permit.waited());
        let jitter = extensions.get::<RequestJitter>().map(|j| j.0);
        let sending = match self.per_host {
            true => None,
            false => self.pacer.sending(&key, &PerHost.key_of(&request)),
        };
        let response = match next.run(request, extensions).await {
            Ok(response) => response,
            Err(error) => {
                record::request("error");
                return Err(error);
            }
        };
        record::request(outcome_of(response.status()));
        // Before anyone looks: the pacer and the caller both read the details from here.
        let mut response = with_problem_details(response)
            .await
            .map_err(reqwest_middleware::Error::Reqwest)?;
        let status = response.status();
        let info = RateLimitInfo::of_response(&mut response);
        // Before the permit is finished: the next request already draws on the quota learned.
        if let Some(sending) = sending {
            self.pacer.answered(sending, info);
        }
        let held = permit.finish_with(status, info, jitter).await;
        if let Some(wait) = held {
            // The key is paused for this long, for every request: the retry layer above
            // waits this same draw instead of drawing its own.
            response.extensions_mut().insert(DrawnWait(wait));
        }
        Ok(response)
    }
}

/// The `outcome` label of a response with `status`.
fn outcome_of(status: http::StatusCode) -> &'static str {
    match status.as_u16() {
        429 => "rate_limited",
        400..=499 => "client_error",
        500..=599 => "server_error",
        _ => "success",
    }
}

/// The content bytes a request declares, for a server's `content-bytes` quota: its
/// `Content-Length`, else its body's length when the body is in memory, else none (a stream
/// of unknown length is counted by the server's answers alone).
fn declared_bytes(request: &Request) -> u64 {
    let stated = request
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    stated
        .or_else(|| {
            let body = request.body()?.as_bytes()?;
            u64::try_from(body.len()).ok()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_declares_its_content_length_or_its_body() {
        let client = reqwest::Client::new();
        let url = "http://127.0.0.1:9/upload";
        let body = client.post(url).body(vec![0u8; 1234]).build().unwrap();
        assert_eq!(declared_bytes(&body), 1234);
        let stated = client
            .post(url)
            .header("content-length", "77")
            .body(vec![0u8; 77])
            .build()
            .unwrap();
        assert_eq!(declared_bytes(&stated), 77);
        assert_eq!(declared_bytes(&client.get(url).build().unwrap()), 0);
        let bad = client
            .get(url)
            .header("content-length", "lots")
            .build()
            .unwrap();
        assert_eq!(declared_bytes(&bad), 0);
    }
}
