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
    RetryPolicy, TimeoutError, Verdict,
};
use crate::headers::RateLimitInfo;
use crate::observe::{EventHook, GiveUpReason, Observer, PoliteEvent, record};
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
    /// Send once, whatever happens (within the client policy's
    /// [attempt timeout](RetryPolicy::with_attempt_timeout), if it has one).
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
/// - When retries run out (count, [`RetryBudget`] or deadline), the last outcome is returned
///   as it came, except a timeout: the caller gets a [`TimeoutError`] with the attempts made
///   and whether the request may have reached the server. A timeout draws on the budget as
///   any retry does, so an upstream that hangs for everyone gets no storm of retries.
/// - With an [attempt timeout](RetryPolicy::with_attempt_timeout), each attempt carries it as
///   its reqwest timeout, which starts below the pacer: the wait for a permit never counts.
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
    observer: Observer,
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
            observer: Observer::default(),
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

    /// Sends every retry and every give-up to `hook` as a [`PoliteEvent`] (see
    /// [`observe`](crate::observe)).
    pub fn on_event(mut self, hook: EventHook) -> Self {
        self.observer = Observer::new(Some(hook));
        self
    }

    /// The hook given by the client builder, unless this layer has one.
    pub(crate) fn hook(&self, hook: EventHook) {
        self.observer.set(hook);
    }

    /// Tells the hook and the metrics that the request was given up for `reason`.
    fn gave_up(&self, attempts: u32, reason: GiveUpReason, status: Option<u16>) {
        record::gave_up(reason.as_str());
        self.observer.emit(|| PoliteEvent::GaveUp {
            attempts,
            reason,
            status,
        });
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

/// Gives every attempt of `request` the policy's attempt timeout as its reqwest timeout,
/// keeping a shorter one the request already has. reqwest starts it when the attempt reaches
/// the network, below the pacer, so a wait for a permit is never counted against it.
fn bound_attempts(request: &mut Request, timeout: Option<std::time::Duration>) {
    if let Some(timeout) = timeout {
        let own = request.timeout_mut();
        *own = Some(own.map_or(timeout, |own| own.min(timeout)));
    }
}

/// The attempts of one call so far: how many, since when, and whether any may have reached
/// the server.
struct Tries {
    start: Instant,
    attempts: u32,
    reached: bool,
}

impl Tries {
    fn start() -> Self {
        Tries {
            start: Instant::now(),
            attempts: 0,
            reached: false,
        }
    }

    /// Counts an attempt that ended in `outcome`. A connect failure did not leave; nor did an
    /// error of another layer (the pacer's refusal), which the default classifier never
    /// retries, so only a custom one can make it an earlier attempt of a timeout.
    fn record(&mut self, outcome: &Result<Response>) {
        self.attempts += 1;
        self.reached |= match outcome {
            Ok(_) => true,
            Err(Error::Reqwest(error)) => !error.is_connect(),
            Err(Error::Middleware(_)) => false,
        };
    }

    /// The outcome for the caller: as it came, except a timeout, which becomes a
    /// [`TimeoutError`] saying how far the request got.
    fn give_back(&self, facts: &RequestFacts, outcome: Result<Response>) -> Result<Response> {
        match outcome {
            Err(Error::Reqwest(error)) if error.is_timeout() => {
                let error = TimeoutError::new(
                    facts.method.clone(),
                    self.attempts,
                    self.start.elapsed(),
                    self.reached,
                    facts.is_replay_safe(),
                    error,
                );
                tracing::info!(%error, "giving up after a timeout");
                Err(Error::middleware(error))
            }
            other => other,
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
        let facts = RequestFacts::of(&req);
        let policy = match extensions.get::<RetryOverride>() {
            Some(RetryOverride::Disabled) => {
                bound_attempts(&mut req, self.policy.attempt_timeout);
                bodies.fill(&mut req).map_err(Error::middleware)?;
                let mut tries = Tries::start();
                let outcome = next.run(req, extensions).await;
                tries.record(&outcome);
                return tries.give_back(&facts, outcome);
            }
            Some(RetryOverride::Policy(p)) => p.clone(),
            None => self.policy.clone(),
        };
        bound_attempts(&mut req, policy.attempt_timeout);
        // An overriding policy with its own seed gets its own reproducible RNG.
        let mut own_rng =
            (policy.seed.is_some() && policy.seed != self.policy.seed).then(|| rng_for(&policy));
        let mut tries = Tries::start();
        let start = tries.start;
        if let Some(budget) = &self.budget {
            budget.deposit();
        }
        // An inner layer that pauses the key on a 429 spreads that pause as this policy says.
        extensions.insert(RequestJitter(policy.jitter));
        // An inner layer that makes the request wait (the pacer) does not wait past this.
        if let Some(deadline) = policy.deadline {
            extensions.insert(RequestDeadline(start + deadline));
        }
        let mut held_retries: u32 = 0;
        loop {
            let Some(mut attempt) = req.try_clone() else {
                tracing::debug!(
                    method = %facts.method,
                    "request body cannot be cloned and no BodyFactory: sent once, never retried"
                );
                let outcome = next.run(req, extensions).await;
                tries.record(&outcome);
                return tries.give_back(&facts, outcome);
            };
            bodies.fill(&mut attempt).map_err(Error::middleware)?;
            let mut outcome = next.clone().run(attempt, extensions).await;
            tries.record(&outcome);
            let attempts = tries.attempts;
            let Verdict::Retry(reason) = self.classifier.classify(&facts, outcome.as_ref()) else {
                return tries.give_back(&facts, outcome);
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
                self.gave_up(attempts, GiveUpReason::RetriesExhausted, status);
                return tries.give_back(&facts, outcome);
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
                self.gave_up(attempts, GiveUpReason::ServerWaitTooLong, status);
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
                    self.gave_up(attempts, GiveUpReason::Deadline, status);
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
                        error => tries.give_back(&facts, error),
                    };
                }
            }
            if counted
                && let Some(budget) = &self.budget
                && !budget.try_withdraw()
            {
                tracing::warn!(attempts, ?status, "retry budget exhausted: not retrying");
                self.gave_up(attempts, GiveUpReason::BudgetExhausted, status);
                return tries.give_back(&facts, outcome);
            }
            if let Err(source) = bodies.prepare() {
                tracing::warn!(attempts, ?status, "body factory failed: not retrying");
                self.gave_up(attempts, GiveUpReason::BodyFactory, status);
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
            record::retry(reason.as_str(), !counted, wait);
            self.observer.emit(|| PoliteEvent::Retrying {
                attempt: attempts,
                reason,
                status,
                wait,
                server_wait,
                held: !counted,
            });
            if !counted {
                held_retries += 1;
            }
            drop(outcome);
            self.sleeper.sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn request_with(own: Option<Duration>) -> Request {
        let mut request = reqwest::Client::new()
            .get("http://127.0.0.1:9/")
            .build()
            .unwrap();
        *request.timeout_mut() = own;
        request
    }

    #[test]
    fn an_attempt_timeout_keeps_a_shorter_one_of_the_request() {
        let (short, long) = (Duration::from_secs(1), Duration::from_secs(5));
        let cases = [
            (None, None, None),
            (Some(long), None, Some(long)),
            (None, Some(long), Some(long)),
            (Some(short), Some(long), Some(short)),
            (Some(long), Some(short), Some(short)),
        ];
        for (own, policy, expected) in cases {
            let mut request = request_with(own);
            bound_attempts(&mut request, policy);
            assert_eq!(request.timeout().copied(), expected, "{own:?}, {policy:?}");
        }
    }
}
