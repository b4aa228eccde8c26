//! The shared-bucket logic against an in-memory store that can be switched off, under tokio's
//! paused clock.

use std::sync::atomic::AtomicBool;

use http::StatusCode;

use super::health::PROBE_EVERY;
use super::lease::LEASE_LIFETIME;
use super::*;
use crate::RateLimitInfo;
use crate::pacing::test_waiters::abandon_a_thousand_waiters;
use crate::pacing::{Pacer, PacingError, PacingMode};
use crate::time::Jitter;
use crate::time::nz;

/// A token bucket in memory, standing in for Redis; it counts its calls and can be made
/// unreachable.
#[derive(Default)]
struct FakeStore {
    state: Mutex<FakeState>,
    down: AtomicBool,
    takes: AtomicU64,
    gate_reads: AtomicU64,
    /// How long a take travels before the store acts on it (a round trip's first half).
    delay: Mutex<Duration>,
    /// Takes that took tokens.
    taken: AtomicU64,
}

#[derive(Default)]
struct FakeState {
    tokens: f64,
    last: Option<tokio::time::Instant>,
    gate_until: Option<tokio::time::Instant>,
}

const CAPACITY: f64 = 10.0;
const REFILL_PER_SEC: f64 = 100.0;

impl FakeStore {
    fn refill(state: &mut FakeState) {
        let now = tokio::time::Instant::now();
        let elapsed = state.last.map_or(CAPACITY / REFILL_PER_SEC, |l| {
            now.duration_since(l).as_secs_f64()
        });
        state.tokens = (state.tokens + elapsed * REFILL_PER_SEC).min(CAPACITY);
        state.last = Some(now);
    }

    fn check_up(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            Err(StoreError::Unreachable(Arc::new(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "connection refused",
            ))))
        } else {
            Ok(())
        }
    }

    fn tokens(&self) -> f64 {
        let mut state = self.state.lock().unwrap();
        FakeStore::refill(&mut state);
        state.tokens
    }
}

#[async_trait::async_trait]
impl SharedStore for FakeStore {
    async fn take(&self, _key: &str, cost: u64) -> Result<StoreTake, StoreError> {
        self.check_up()?;
        self.takes.fetch_add(1, Ordering::SeqCst);
        let delay = *self.delay.lock().unwrap();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut state = self.state.lock().unwrap();
        FakeStore::refill(&mut state);
        let cost = cost as f64;
        if cost > CAPACITY {
            return Ok(StoreTake::Never);
        }
        if state.tokens >= cost {
            state.tokens -= cost;
            self.taken.fetch_add(1, Ordering::SeqCst);
            Ok(StoreTake::Taken {
                remaining: state.tokens.floor() as u64,
            })
        } else {
            let missing = cost - state.tokens;
            Ok(StoreTake::Wait(Duration::from_secs_f64(
                missing / REFILL_PER_SEC,
            )))
        }
    }

    async fn close_gate(&self, _key: &str, wait: Duration) -> Result<(), StoreError> {
        self.check_up()?;
        let until = tokio::time::Instant::now() + wait;
        let mut state = self.state.lock().unwrap();
        state.gate_until = Some(state.gate_until.map_or(until, |g| g.max(until)));
        Ok(())
    }

    async fn gate(&self, _key: &str) -> Result<Duration, StoreError> {
        self.check_up()?;
        self.gate_reads.fetch_add(1, Ordering::SeqCst);
        let state = self.state.lock().unwrap();
        Ok(state.gate_until.map_or(Duration::ZERO, |g| {
            g.saturating_duration_since(tokio::time::Instant::now())
        }))
    }
}

/// A store that refuses every take with "wait 0" (a fraction of a token, rounded down), and
/// panics if asked more than 1,000 times: a pacer that spins on it fails instead of hanging.
#[derive(Default)]
struct ZeroWaitStore {
    takes: AtomicU64,
}

#[async_trait::async_trait]
impl SharedStore for ZeroWaitStore {
    async fn take(&self, _key: &str, _cost: u64) -> Result<StoreTake, StoreError> {
        let n = self.takes.fetch_add(1, Ordering::SeqCst);
        assert!(n < 1000, "the pacer spins on a zero wait");
        Ok(StoreTake::Wait(Duration::ZERO))
    }

    async fn close_gate(&self, _key: &str, _wait: Duration) -> Result<(), StoreError> {
        Ok(())
    }

    async fn gate(&self, _key: &str) -> Result<Duration, StoreError> {
        Ok(Duration::ZERO)
    }
}

#[tokio::test(start_paused = true)]
async fn a_refusal_with_a_zero_wait_sleeps_a_timer_tick_instead_of_spinning() {
    let store = Arc::new(ZeroWaitStore::default());
    let pacer = Pacer::builder()
        .shared(SharedBucket::from_store(store.clone(), rate()))
        .mode(PacingMode::Wait { max_wait: ms(100) })
        .build();
    let refused = tokio::spawn(async move { pacer.acquire("k", 1).await.map(drop) });
    // The head asks once per millisecond until its maximum wait is spent.
    tokio::time::sleep(ms(150)).await;
    assert!(matches!(
        refused.await.unwrap(),
        Err(PacingError::WaitTooLong { .. })
    ));
    let takes = store.takes.load(Ordering::SeqCst);
    assert!((99..=102).contains(&takes), "{takes} takes");
}

fn rate() -> Rate {
    Rate::per_second(nz(REFILL_PER_SEC as u32)).with_burst(nz(CAPACITY as u32))
}

fn pacer_on(store: &Arc<FakeStore>, configure: impl FnOnce(SharedBucket) -> SharedBucket) -> Pacer {
    let bucket = configure(SharedBucket::from_store(store.clone(), rate()));
    Pacer::builder().shared(bucket).build()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn two_pacers_share_one_store_rate() {
    let store = Arc::new(FakeStore::default());
    let (a, b) = (pacer_on(&store, |s| s), pacer_on(&store, |s| s));
    let started = tokio::time::Instant::now();
    for _ in 0..105 {
        drop(a.acquire("k", 1).await.unwrap());
        drop(b.acquire("k", 1).await.unwrap());
    }
    // 210 permits: 10 from the full bucket, 200 at 100 per second.
    let elapsed = started.elapsed();
    assert!(elapsed >= ms(1990) && elapsed <= ms(2010), "{elapsed:?}");
}

#[tokio::test(start_paused = true)]
async fn a_lease_of_k_takes_one_round_trip_per_k_requests() {
    let store = Arc::new(FakeStore::default());
    let pacer = pacer_on(&store, |s| s.lease(10));
    for _ in 0..200 {
        drop(pacer.acquire("k", 1).await.unwrap());
    }
    assert_eq!(store.takes.load(Ordering::SeqCst), 20);
    // Gate reads ride along at most once per take and once per 100 ms.
    assert!(store.gate_reads.load(Ordering::SeqCst) <= 20);
}

#[tokio::test(start_paused = true)]
async fn unused_lease_tokens_lapse() {
    let store = Arc::new(FakeStore::default());
    let pacer = pacer_on(&store, |s| s.lease(10));
    drop(pacer.acquire("k", 1).await.unwrap());
    // Nine tokens leased: still there a while later, dropped once the key has been idle long.
    tokio::time::sleep(Duration::from_secs(5)).await;
    drop(pacer.acquire("k", 1).await.unwrap());
    assert_eq!(store.takes.load(Ordering::SeqCst), 1);
    tokio::time::sleep(LEASE_LIFETIME).await;
    drop(pacer.acquire("k", 1).await.unwrap());
    assert_eq!(store.takes.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn fail_open_lets_requests_through_and_returns_to_the_store_when_it_is_back() {
    let store = Arc::new(FakeStore::default());
    let pacer = pacer_on(&store, |s| s.on_failure(StoreFailure::FailOpen));
    store.down.store(true, Ordering::SeqCst);
    for _ in 0..500 {
        assert_eq!(
            pacer.acquire("k", 1).await.unwrap().waited(),
            Duration::ZERO
        );
    }
    // While it is down the store is not hammered: one try (a take and a gate read in one
    // round trip), then one per probe interval.
    let calls = pacer.shared_calls();
    assert_eq!((calls.takes, calls.gate_reads), (1, 1));
    // The program can see the outage without any tracing subscriber.
    let health = pacer.store_health().unwrap();
    assert!(!health.reachable);
    assert_eq!((health.outages, health.decided_without_store), (1, 500));
    store.down.store(false, Ordering::SeqCst);
    tokio::time::sleep(PROBE_EVERY).await;
    let before = store.takes.load(Ordering::SeqCst);
    drop(pacer.acquire("k", 1).await.unwrap());
    assert_eq!(store.takes.load(Ordering::SeqCst), before + 1);
    let health = pacer.store_health().unwrap();
    assert!(health.reachable);
    assert_eq!((health.outages, health.decided_without_store), (1, 500));
}

#[tokio::test(start_paused = true)]
async fn fail_closed_refuses_with_the_reason() {
    let store = Arc::new(FakeStore::default());
    let pacer = pacer_on(&store, |s| s.on_failure(StoreFailure::FailClosed));
    store.down.store(true, Ordering::SeqCst);
    for attempt in 0..3 {
        let error = pacer.acquire("k", 1).await.unwrap_err();
        let PacingError::StoreUnavailable { reason } = &error else {
            panic!("{error:?}");
        };
        // The first refusal carries the store's own error; the next ones, before the next
        // probe, say the store was set aside.
        if attempt == 0 {
            assert!(
                reason.is_unavailable() && !reason.is_set_aside(),
                "{reason:?}"
            );
            let source = std::error::Error::source(&error).map(ToString::to_string);
            assert_eq!(source.as_deref(), Some("the store is unreachable"));
            assert_eq!(
                Chain(&error).to_string(),
                "the shared quota store gave no answer and the policy is fail-closed: \
                 the store is unreachable: connection refused"
            );
        } else {
            assert_eq!(reason, &StoreError::SetAside);
        }
    }
    store.down.store(false, Ordering::SeqCst);
    tokio::time::sleep(PROBE_EVERY).await;
    assert!(pacer.acquire("k", 1).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn local_fallback_paces_at_the_shared_rate_divided_by_the_processes() {
    let store = Arc::new(FakeStore::default());
    let pacer = pacer_on(&store, |s| {
        s.on_failure(StoreFailure::LocalFallback { processes: 4 })
    });
    store.down.store(true, Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    for _ in 0..51 {
        drop(pacer.acquire("k", 1).await.unwrap());
    }
    // 100 per second shared by 4: 25 per second here, burst 2 (10 / 4).
    let elapsed = started.elapsed();
    assert!(elapsed >= ms(1950) && elapsed <= ms(2000), "{elapsed:?}");
}

#[tokio::test(start_paused = true)]
async fn one_process_429_pauses_the_other_through_the_store() {
    let store = Arc::new(FakeStore::default());
    let (a, b) = (pacer_on(&store, |s| s), pacer_on(&store, |s| s));
    drop(b.acquire("k", 1).await.unwrap());
    let told = RateLimitInfo {
        retry_after: Some(Duration::from_secs(2)),
        ..RateLimitInfo::default()
    };
    a.acquire("k", 1)
        .await
        .unwrap()
        .finish(StatusCode::TOO_MANY_REQUESTS, &told)
        .await;
    tokio::time::sleep(GATE_REFRESH).await;
    let waited = b.acquire("k", 1).await.unwrap().waited();
    assert!(waited >= ms(1900) && waited <= ms(2300), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn dropped_waiters_leave_the_store_tokens_as_they_were() {
    let store = Arc::new(FakeStore::default());
    let pacer = Pacer::builder()
        .shared(SharedBucket::from_store(store.clone(), rate()))
        .gate_jitter(Jitter::None)
        .mode(PacingMode::default())
        .build();
    for _ in 0..10 {
        drop(pacer.acquire("k", 1).await.unwrap());
    }
    abandon_a_thousand_waiters(&pacer, Duration::from_micros(1)).await;
    tokio::time::sleep(ms(100)).await;
    assert_eq!(store.takes.load(Ordering::SeqCst), 10);
    assert!(
        (store.tokens() - CAPACITY).abs() < 1e-9,
        "{}",
        store.tokens()
    );
}

#[tokio::test(start_paused = true)]
async fn waiters_dropped_anywhere_even_during_a_store_call_take_no_store_token() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let store = Arc::new(FakeStore::default());
    // Every take travels 3 ms before the store acts on it: a drop then takes nothing there.
    *store.delay.lock().unwrap() = ms(3);
    let local = Rate::per_second(nz(1000)).with_burst(nz(10));
    let pacer = Pacer::builder()
        .rate(local)
        .shared(SharedBucket::from_store(store.clone(), rate()))
        .build();
    let served = Arc::new(AtomicU64::new(0));
    let mut waiters: Vec<_> = (0..1000)
        .map(|_| {
            let (pacer, served) = (pacer.clone(), served.clone());
            tokio::spawn(async move {
                let permit = pacer.acquire("k", 1).await.unwrap();
                served.fetch_add(1, Ordering::SeqCst);
                drop(permit);
            })
        })
        .collect();
    // Drop 900 at random points of the queue and at random moments, many of them while the
    // head is inside its store call.
    let mut order: Vec<usize> = (0..1000).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    for chunk in order[..900].chunks(9) {
        for &i in chunk {
            waiters[i].abort();
        }
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..4_000))).await;
    }
    for waiter in waiters.drain(..) {
        let _ = waiter.await;
    }
    let served = served.load(Ordering::SeqCst);
    assert!(served >= 50, "{served} served");
    // The store gave tokens to exactly the requests that went.
    assert_eq!(store.taken.load(Ordering::SeqCst), served);
    // And the queue still works: the next request is served.
    drop(pacer.acquire("k", 1).await.unwrap());
    assert_eq!(store.taken.load(Ordering::SeqCst), served + 1);
}

#[tokio::test(start_paused = true)]
async fn tokens_taken_beside_a_closed_gate_wait_in_the_lease() {
    let store = Arc::new(FakeStore::default());
    store.close_gate("k", Duration::from_secs(1)).await.unwrap();
    let pacer = Pacer::builder()
        .shared(SharedBucket::from_store(store.clone(), rate()).lease(5))
        .learn_from_server(false)
        .gate_jitter(Jitter::None)
        .build();
    // Gate and tokens come back in one round trip: the request waits out the gate...
    let first = pacer.acquire("k", 1).await.unwrap();
    assert!(
        first.waited() >= Duration::from_secs(1),
        "{:?}",
        first.waited()
    );
    assert!(first.waited() <= ms(1010), "{:?}", first.waited());
    // ...and the leased tokens serve the next requests without another take.
    for _ in 0..4 {
        assert_eq!(
            pacer.acquire("k", 1).await.unwrap().waited(),
            Duration::ZERO
        );
    }
    assert_eq!(store.takes.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn without_learning_a_429_is_not_followed_but_a_manual_pause_is() {
    let store = Arc::new(FakeStore::default());
    let pacer = Pacer::builder()
        .shared(SharedBucket::from_store(store.clone(), rate()).lease(5))
        .learn_from_server(false)
        .gate_jitter(Jitter::None)
        .build();
    let told = RateLimitInfo {
        retry_after: Some(Duration::from_secs(2)),
        ..RateLimitInfo::default()
    };
    pacer
        .acquire("k", 1)
        .await
        .unwrap()
        .finish(StatusCode::TOO_MANY_REQUESTS, &told)
        .await;
    assert_eq!(
        pacer.acquire("k", 1).await.unwrap().waited(),
        Duration::ZERO
    );
    assert_eq!(store.gate("k").await.unwrap(), Duration::ZERO);
    pacer.pause("k", Duration::from_secs(2));
    assert_eq!(
        pacer.acquire("k", 1).await.unwrap().waited(),
        Duration::from_secs(2)
    );
}

/// Records every event's level and fields, to check what the pacer logs.
#[derive(Clone, Default)]
struct RecordEvents(Arc<Mutex<Vec<(tracing::Level, String)>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RecordEvents {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        let level = *event.metadata().level();
        self.0.lock().unwrap().push((level, fields.0));
    }
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_store_is_warned_about_once_per_ten_seconds_without_the_key() {
    use tracing_subscriber::layer::SubscriberExt;
    let events = RecordEvents::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));
    let store = Arc::new(FakeStore::default());
    let pacer = Pacer::builder()
        .shared(SharedBucket::from_store(store.clone(), rate()))
        .build();
    store.down.store(true, Ordering::SeqCst);
    let secret = "tenant-42/api-key-s3cr3t";
    let told = RateLimitInfo {
        retry_after: Some(ms(1)),
        ..RateLimitInfo::default()
    };
    for _ in 0..3000 {
        let permit = pacer.acquire(secret, 1).await.unwrap();
        permit.finish(StatusCode::TOO_MANY_REQUESTS, &told).await;
        tokio::time::sleep(ms(10)).await;
    }
    let events = events.0.lock().unwrap();
    let warnings = events
        .iter()
        .filter(|(level, _)| *level == tracing::Level::WARN)
        .count();
    // 30 s of outage: one warning at the start, then one per 10 s.
    assert!((3..=4).contains(&warnings), "{warnings} warnings");
    // Keys appear as digests only (the 429s are logged too).
    assert!(events.len() > 3000, "{} events", events.len());
    assert!(events.iter().all(|(_, fields)| !fields.contains(secret)));
}

/// A store without a rate: every take goes, and what is shared is recorded.
#[derive(Default)]
struct NotingStore {
    notes: Mutex<Vec<(String, SharedFacts)>>,
}

#[async_trait::async_trait]
impl SharedStore for NotingStore {
    async fn take(&self, _key: &str, _cost: u64) -> Result<StoreTake, StoreError> {
        Ok(StoreTake::Taken {
            remaining: u64::MAX,
        })
    }

    async fn close_gate(&self, _key: &str, _wait: Duration) -> Result<(), StoreError> {
        Ok(())
    }

    async fn gate(&self, _key: &str) -> Result<Duration, StoreError> {
        Ok(Duration::ZERO)
    }

    async fn note(&self, key: &str, facts: SharedFacts) -> Result<(), StoreError> {
        self.notes.lock().unwrap().push((key.to_owned(), facts));
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_bucket_without_a_rate_probes_new_keys_and_shares_what_responses_state() {
    let store = Arc::new(NotingStore::default());
    let pacer = Pacer::builder()
        .shared(SharedBucket::learned_from_store(store.clone()))
        .mode(PacingMode::FailFast)
        .build();
    let first = pacer.acquire("k", 1).await.unwrap();
    // Nothing is known yet, here or in the store: the first request goes alone.
    assert!(matches!(
        pacer.acquire("k", 1).await,
        Err(PacingError::Throttled { .. })
    ));
    let stated = RateLimitInfo {
        limit: Some(20),
        remaining: Some(19),
        reset: Some(Duration::from_secs(2)),
        window: Some(Duration::from_secs(2)),
        ..RateLimitInfo::default()
    };
    first.finish(StatusCode::OK, &stated).await;
    let notes = store.notes.lock().unwrap().clone();
    assert_eq!(
        notes,
        [(
            "k".to_owned(),
            SharedFacts {
                left: Some((19, Duration::from_secs(2))),
                quota: Some((20, Duration::from_secs(2))),
            }
        )]
    );
    assert_eq!(pacer.shared_calls().notes, 1);
    // A bucket with a rate shares only its gate: nothing is noted.
    let store = Arc::new(NotingStore::default());
    let rate = Rate::per_second(nz(10));
    let pacer = Pacer::builder()
        .shared(SharedBucket::from_store(store.clone(), rate))
        .build();
    let permit = pacer.acquire("k", 1).await.unwrap();
    permit.finish(StatusCode::OK, &stated).await;
    assert!(store.notes.lock().unwrap().is_empty());
}
