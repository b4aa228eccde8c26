use std::sync::{Arc, Mutex};

use http::Extensions;
use rand::SeedableRng;
use rand::rngs::StdRng;
use reqwest::{Request, Response};
use reqwest_middleware::{Error, Middleware, Next, Result};
use tokio::time::Instant;

use super::factory::Bodies;
use super::{
    BodyFactoryError, Classify, DefaultClassifier, RequestFacts, RetryBudget, RetryError,
    RetryPolicy, Verdict,
};
use crate::headers::RateLimitInfo;
use crate::time::{DrawnWait, RequestDeadline, RequestJitter, Sleeper, TokioSleeper};

/// A per-request override of the client's retry behaviour, set as a request extension.
///
/// ```
/// use reqwest_polite::retry::{RetryOverride, RetryPolicy};
///
/// # async fn run(client: reqwest_middleware::ClientWithMiddleware) {
/// // This one request is never retried:
/// let _ = client.post("http://127.0.0.1:9/charge").with_extension(RetryOverride::Disabled).send().await;
/// // This one may be retried 10 times:
/// let patient = RetryOverride::Policy(RetryPolicy::new().with_max_retries(10));
/// let _ = client.get("http://127.0.0.1:9/report").with_extension(patient).send().await;
/// # }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RetryOverride {
    /// Send once, whatever happens.
    Disabled,
    /// Use this policy instead of the client's (the classifier and budget stay the client's).
    Policy(RetryPolicy),
}

/// The retry layer: loops attempts, decides retry or give up, waits with jitter.
///
/// - 429 is retried for every method; 408/5xx, timeouts and lost connections only for
///   idempotent methods or requests carrying `Idempotency-Key` (see [`DefaultClassifier`]).
/// - It waits what the server said (`Retry-After`, or the reset when nothing remains), jittered
///   by the policy's [`Jitter`](crate::time::Jitter); with no server wait, exponential backoff.
/// - A server wait above the cap, or a wait that would end past the deadline, is not slept: the
///   caller gets a [`RetryError`] at once, carrying the server's wait and the response.
/// - A 429 that the pacing layer below answered by pausing the key (it marks the response with
///   with the pause it drew) is the request waiting its turn, not a failure: the retry waits exactly
///   that drawn pause (one draw per server wait, however many layers), and neither counts it
///   against `max_retries` nor draws from the budget, up to
///   [`max_held_retries`](RetryPolicy::with_max_held_retries) such retries. The budget is
///   there to stop outage storms; a request the pacer is already holding back adds no load.
/// - When retries run out (count or [`RetryBudget`]), the last outcome is returned as it came.
/// - A request whose body cannot be cloned (a stream) is sent once and its outcome returned
///   untouched, unless it carries a [`BodyFactory`](super::BodyFactory) that makes the body
///   anew for each retry (every other rule above still applies).
///
/// ```
/// use reqwest_polite::retry::{RetryMiddleware, RetryPolicy};
///
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(RetryMiddleware::new(RetryPolicy::new().with_max_retries(5)))
///     .build();
/// # drop(client);
/// ```
pub struct RetryMiddleware {
    policy: RetryPolicy,
    classifier: Arc<dyn Classify>,
    sleeper: Arc<dyn Sleeper>,
    budget: Option<Arc<RetryBudget>>,
    rng: Mutex<StdRng>,
}

impl std::fmt::Debug for RetryMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryMiddleware")
            .field("policy", &self.policy)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl RetryMiddleware {
    /// The layer with `policy`, the default classifier, tokio sleeps and the default budget.
    pub fn new(policy: RetryPolicy) -> Self {
        RetryMiddleware {
            rng: Mutex::new(rng_for(&policy)),
            policy,
            classifier: Arc::new(DefaultClassifier),
            sleeper: Arc::new(TokioSleeper),
            budget: Some(Arc::new(RetryBudget::default())),
        }
    }

    /// Replaces what is considered retryable.
    pub fn with_classifier(mut self, classifier: impl Classify) -> Self {
        self.classifier = Arc::new(classifier);
        self
    }

    /// Replaces how waits are slept (tests record them instead).
    pub fn with_sleeper(mut self, sleeper: impl Sleeper) -> Self {
        self.sleeper = Arc::new(sleeper);
        self
    }

    /// Uses `budget`, which may be shared with other clients through the `Arc`.
    pub fn with_budget(mut self, budget: Arc<RetryBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Turns the retry budget off: only the retry count bounds retries.
    pub fn without_budget(mut self) -> Self {
        self.budget = None;
        self
    }

    /// The client-wide policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    fn draw_wait(
        &self,
        policy: &RetryPolicy,
        own_rng: &mut Option<StdRng>,
        base: std::time::Duration,
    ) -> std::time::Duration {
        match own_rng {
            Some(rng) => policy.jitter.apply(base, rng),
            None => {
                let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
                policy.jitter.apply(base, &mut *rng)
            }
        }
    }
}

fn rng_for(policy: &RetryPolicy) -> StdRng {
    match policy.seed {
        Some(seed) => StdRng::seed_from_u64(seed),
        None => rand::make_rng(),
    }
}

#[async_trait::async_trait]
impl Middleware for RetryMiddleware {
    async fn handle(
        &self,
        mut req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<Response> {
        // A streamed body set aside for the first try, when a factory can make the others.
        let mut bodies = Bodies::split(&mut req, extensions);
        let policy = match extensions.get::<RetryOverride>() {
            Some(RetryOverride::Disabled) => {
                bodies.fill(&mut req).map_err(Error::middleware)?;
                return next.run(req, extensions).await;
            }
            Some(RetryOverride::Policy(p)) => p.clone(),
            None => self.policy.clone(),
        };
        // An overriding policy with its own seed gets its own reproducible RNG.
        let mut own_rng =
            (policy.seed.is_some() && policy.seed != self.policy.seed).then(|| rng_for(&policy));
        let facts = RequestFacts::of(&req);
        let start = Instant::now();
        if let Some(budget) = &self.budget {
            budget.deposit();
        }
        // An inner layer that pauses the key on a 429 spreads that pause as this policy says.
        extensions.insert(RequestJitter(policy.jitter));
        // An inner layer that makes the request wait (the pacer) does not wait past this.
        if let Some(deadline) = policy.deadline {
            extensions.insert(RequestDeadline(start + deadline));
        }
        let mut attempts: u32 = 0;
        let mut held_retries: u32 = 0;
        loop {
            let Some(mut attempt) = req.try_clone() else {
                tracing::debug!(
                    method = %facts.method,
                    "request body cannot be cloned and no BodyFactory: sent once, never retried"
                );
                return next.run(req, extensions).await;
            };
            bodies.fill(&mut attempt).map_err(Error::middleware)?;
            attempts += 1;
            let mut outcome = next.clone().run(attempt, extensions).await;
            let Verdict::Retry(reason) = self.classifier.classify(&facts, outcome.as_ref()) else {
                return outcome;
            };
            let status = outcome.as_ref().ok().map(|r| r.status().as_u16());
            // A 429 that the pacer below answered by pausing the key: the request waits its
            // turn there. That is pacing, not a failure: it does not count as a retry and draws
            // nothing from the budget, within its own bound.
            let held = match &outcome {
                Ok(response) if response.status() == http::StatusCode::TOO_MANY_REQUESTS => {
                    response.extensions().get::<DrawnWait>().map(|d| d.0)
                }
                _ => None,
            };
            let counted = held.is_none() || held_retries >= policy.max_held_retries;
            if counted && attempts > policy.max_retries + held_retries {
                tracing::info!(
                    attempts,
                    reason = reason.as_str(),
                    ?status,
                    "retries exhausted"
                );
                return outcome;
            }
            let server_wait = match &mut outcome {
                Ok(response) => RateLimitInfo::of_response(response).server_wait(),
                Err(_) => None,
            };
            if let Some(server_wait) = server_wait
                && server_wait > policy.max_wait
                && outcome.is_ok()
            {
                tracing::warn!(
                    attempts,
                    ?status,
                    server_wait_ms = server_wait.as_millis() as u64,
                    cap_ms = policy.max_wait.as_millis() as u64,
                    "server wait above the cap: giving up at once"
                );
                let response = outcome.expect("matched Ok above");
                return Err(reqwest_middleware::Error::middleware(
                    RetryError::ServerWaitTooLong {
                        status: response.status(),
                        server_wait,
                        cap: policy.max_wait,
                        attempts,
                        response: Box::new(response),
                    },
                ));
            }
            let wait = match held {
                // The pacer drew the key's pause once, with this policy's jitter: wait that.
                Some(drawn) if !counted => drawn,
                _ => {
                    let retry = attempts - 1 - held_retries;
                    let base = server_wait.unwrap_or_else(|| policy.backoff.delay(retry));
                    self.draw_wait(&policy, &mut own_rng, base)
                }
            };
            if let Some(deadline) = policy.deadline {
                let elapsed = start.elapsed();
                if elapsed.saturating_add(wait) > deadline {
                    tracing::info!(
                        attempts,
                        ?status,
                        wait_ms = wait.as_millis() as u64,
                        "next wait would pass the deadline: giving up"
                    );
                    return match outcome {
                        Ok(response) => Err(reqwest_middleware::Error::middleware(
                            RetryError::DeadlineExceeded {
                                status: response.status(),
                                wait,
                                server_wait,
                                elapsed,
                                deadline,
                                attempts,
                                response: Box::new(response),
                            },
                        )),
                        Err(error) => Err(error),
                    };
                }
            }
            if counted
                && let Some(budget) = &self.budget
                && !budget.try_withdraw()
            {
                tracing::warn!(attempts, ?status, "retry budget exhausted: not retrying");
                return outcome;
            }
            if let Err(source) = bodies.prepare() {
                tracing::warn!(attempts, ?status, "body factory failed: not retrying");
                let error = BodyFactoryError::new(attempts, Some(outcome), source);
                return Err(Error::middleware(error));
            }
            tracing::info!(
                attempt = attempts,
                reason = reason.as_str(),
                ?status,
                wait_ms = wait.as_millis() as u64,
                server_said = server_wait.is_some(),
                "retrying"
            );
            if !counted {
                held_retries += 1;
            }
            drop(outcome);
            self.sleeper.sleep(wait).await;
        }
    }
}
