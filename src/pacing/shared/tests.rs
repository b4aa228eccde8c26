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

/// A token bucket in memory, standing in for Redis (the arithmetic of `bucket_take.lua`, gate
/// and give-backs included); it counts its calls and tokens and can be made unreachable.
struct FakeStore {
    state: Mutex<FakeState>,
    refill_per_sec: f64,
    down: AtomicBool,
    takes: AtomicU64,
    /// How long a take travels before the store acts on it (a round trip's first half).
    delay: Mutex<Duration>,
    /// Tokens taken, offered back by give-backs, and put back (those the bucket had not
    /// refilled over).
    taken: AtomicU64,
    offered_back: AtomicU64,
    given_back: AtomicU64,
}

struct FakeState {
    tokens: f64,
    last: Option<tokio::time::Instant>,
    gate_until: Option<tokio::time::Instant>,
    /// The store's own clock starts here.
    origin: tokio::time::Instant,
}

const CAPACITY: f64 = 10.0;
const REFILL_PER_SEC: f64 = 100.0;

impl Default for FakeStore {
    fn default() -> FakeStore {
        FakeStore::refilling(REFILL_PER_SEC)
    }
}

impl FakeStore {
    /// A full bucket of [`CAPACITY`] refilled at `per_sec`.
    fn refilling(per_sec: f64) -> FakeStore {
        FakeStore {
            state: Mutex::new(FakeState {
                tokens: CAPACITY,
                last: None,
                gate_until: None,
                origin: tokio::time::Instant::now(),
            }),
            refill_per_sec: per_sec,
            down: AtomicBool::new(false),
            takes: AtomicU64::new(0),
            delay: Mutex::default(),
            taken: AtomicU64::new(0),
            offered_back: AtomicU64::new(0),
            given_back: AtomicU64::new(0),
        }
    }

    fn refill(&self, state: &mut FakeState) {
        let now = tokio::time::Instant::now();
        let elapsed = state
            .last
            .map_or(0.0, |l| now.duration_since(l).as_secs_f64());
        state.tokens = (state.tokens + elapsed * self.refill_per_sec).min(CAPACITY);
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
        self.refill(&mut state);
        state.tokens
    }

    /// Tokens taken and kept (not put back).
    fn kept(&self) -> u64 {
        self.taken.load(Ordering::SeqCst) - self.given_back.load(Ordering::SeqCst)
    }

    /// How long the gate stays closed.
    fn gate(&self) -> Duration {
        let state = self.state.lock().unwrap();
        state.gate_until.map_or(Duration::ZERO, |until| {
            until.saturating_duration_since(tokio::time::Instant::now())
        })
    }
}

#[async_trait::async_trait]
impl SharedStore for FakeStore {
    async fn take(&self, _key: &str, ask: TakeAsk) -> Result<StoreTake, StoreError> {
        self.check_up()?;
        self.takes.fetch_add(1, Ordering::SeqCst);
        let delay = *self.delay.lock().unwrap();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut state = self.state.lock().unwrap();
        self.refill(&mut state);
        let now = tokio::time::Instant::now();
        let micros = now.duration_since(state.origin).as_micros() as u64;
        if let Some(back) = ask.give_back {
            self.offered_back.fetch_add(back.tokens, Ordering::SeqCst);
            let since = micros.saturating_sub(back.after.at_micros) as f64 / 1e6;
            let room = CAPACITY - back.after.tokens - since * self.refill_per_sec;
            let back = (back.tokens as f64).min(room.floor()).max(0.0);
            state.tokens = (state.tokens + back).min(CAPACITY);
            self.given_back.fetch_add(back as u64, Ordering::SeqCst);
        }
        if let Some(until) = state.gate_until.filter(|until| *until > now) {
            return Ok(StoreTake::Gated(until - now));
        }
        let cost = ask.cost as f64;
        if cost > CAPACITY {
            return Ok(StoreTake::Never);
        }
        if state.tokens >= cost {
            let granted = (ask.want.max(ask.cost) as f64).min(state.tokens.floor());
            state.tokens -= granted;
            self.taken.fetch_add(granted as u64, Ordering::SeqCst);
            Ok(StoreTake::Taken {
                granted: granted as u64,
                left: Left {
                    tokens: state.tokens,
                    at_micros: micros,
                },
            })
        } else {
            let missing = cost - state.tokens;
            Ok(StoreTake::Wait(Duration::from_secs_f64(
                missing / self.refill_per_sec,
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
}

/// A store that refuses every take with "wait 0" (a fraction of a token, rounded down), and
/// panics if asked more than 1,000 times: a pacer that spins on it fails instead of hanging.
#[derive(Default)]
struct ZeroWaitStore {
    takes: AtomicU64,
}

#[async_trait::async_trait]
impl SharedStore for ZeroWaitStore {
    async fn take(&self, _key: &str, _ask: TakeAsk) -> Result<StoreTake, StoreError> {
        let n = self.takes.fetch_add(1, Ordering::SeqCst);
        assert!(n < 1000, "the pacer spins on a zero wait");
        Ok(StoreTake::Wait(Duration::ZERO))
    }

    async fn close_gate(&self, _key: &str, _wait: Duration) -> Result<(), StoreError> {
        Ok(())
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
    assert_eq!(pacer.shared_calls().takes, 20);
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
    // While it is down the store is not hammered: one try, then one per probe interval.
    assert_eq!(pacer.shared_calls().takes, 1);
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
    // The gate is read with every take: the other's next request waits at once, for the
    // server's 2 s and the pacer's spread after it (up to 20%).
    let waited = b.acquire("k", 1).await.unwrap().waited();
    assert!(waited >= ms(2000) && waited <= ms(2400), "{waited:?}");
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
    // The queue still works: the next request is served, once the tokens taken for requests
    // that were dropped have lapsed, and carries them back to the store.
    tokio::time::sleep(ms(10)).await;
    drop(pacer.acquire("k", 1).await.unwrap());
    // Every token the store gave went to a request that was served, or was offered back
    // (some of those offered back were refilled over meanwhile: not put back, not lost).
    let taken = store.taken.load(Ordering::SeqCst);
    let offered = store.offered_back.load(Ordering::SeqCst);
    assert_eq!(
        taken,
        served + 1 + offered,
        "{taken} taken, {offered} offered back"
    );
    assert!(
        pacer.shared_calls().takes < served,
        "the queue's takes were batched"
    );
}

#[tokio::test(start_paused = true)]
async fn a_closed_gate_takes_no_token_and_the_request_waits_it_out() {
    let store = Arc::new(FakeStore::default());
    store.close_gate("k", Duration::from_secs(1)).await.unwrap();
    let pacer = Pacer::builder()
        .shared(SharedBucket::from_store(store.clone(), rate()).lease(5))
        .learn_from_server(false)
        .gate_jitter(Jitter::None)
        .build();
    // The take comes back gated, with nothing taken: the request waits out the gate...
    let first = pacer.acquire("k", 1).await.unwrap();
    assert!(
        first.waited() >= Duration::from_secs(1),
        "{:?}",
        first.waited()
    );
    assert!(first.waited() <= ms(1010), "{:?}", first.waited());
    // ...then takes its lease, which serves the next requests without another take.
    for _ in 0..4 {
        assert_eq!(
            pacer.acquire("k", 1).await.unwrap().waited(),
            Duration::ZERO
        );
    }
    assert_eq!(store.takes.load(Ordering::SeqCst), 2);
    assert_eq!(store.taken.load(Ordering::SeqCst), 5);
}

#[tokio::test(start_paused = true)]
async fn the_head_takes_for_the_requests_queued_behind_it_and_they_go_in_order() {
    let store = Arc::new(FakeStore::default());
    // A take travels 3 ms: the requests that arrive meanwhile queue behind its head.
    *store.delay.lock().unwrap() = ms(3);
    let pacer = pacer_on(&store, |s| s);
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (pacer, order) = (pacer.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let permit = pacer.acquire("k", 1).await.unwrap();
            order.lock().unwrap().push(i);
            drop(permit);
        }));
        // Arrival order is spawn order.
        tokio::task::yield_now().await;
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..8).collect::<Vec<_>>());
    // The first head took alone (nobody queued yet); the second took for the six behind it.
    assert_eq!(store.takes.load(Ordering::SeqCst), 2);
    assert_eq!(store.taken.load(Ordering::SeqCst), 8);
    // The bucket had 10: 8 taken, none in excess.
    assert!((store.tokens() - 2.0).abs() < 0.7, "{}", store.tokens());
}

#[tokio::test(start_paused = true)]
async fn a_request_dropped_behind_a_head_leaves_its_token_to_go_back() {
    // A bucket that refills slowly (1 per second): what goes back is not refilled over.
    let store = Arc::new(FakeStore::refilling(1.0));
    *store.delay.lock().unwrap() = ms(3);
    let rate = Rate::per_second(nz(1)).with_burst(nz(CAPACITY as u32));
    let pacer = Pacer::builder()
        .shared(SharedBucket::from_store(store.clone(), rate))
        .build();
    let first = tokio::spawn({
        let pacer = pacer.clone();
        async move { pacer.acquire("k", 1).await.map(drop) }
    });
    tokio::task::yield_now().await;
    // Five queue behind the first head while its take travels; they are taken for with the
    // next take, and two of them are dropped before their turn.
    let queued: Vec<_> = (0..5)
        .map(|_| {
            let pacer = pacer.clone();
            tokio::spawn(async move { pacer.acquire("k", 1).await.map(drop) })
        })
        .collect();
    tokio::task::yield_now().await;
    first.await.unwrap().unwrap();
    queued[1].abort();
    queued[3].abort();
    for (i, task) in queued.into_iter().enumerate() {
        match task.await {
            Ok(outcome) => assert!(outcome.is_ok() && i != 1 && i != 3),
            Err(error) => assert!(error.is_cancelled() && (i == 1 || i == 3)),
        }
    }
    assert_eq!(store.taken.load(Ordering::SeqCst), 1 + 5);
    // The two spare tokens lapse with the batch's hold (100 ms at 1 per second) and go back
    // with the next take.
    tokio::time::sleep(ms(100)).await;
    drop(pacer.acquire("k", 1).await.unwrap());
    assert_eq!(store.given_back.load(Ordering::SeqCst), 2);
    // Kept: one token for each of the five requests that went.
    assert_eq!(store.kept(), 5);
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
    assert_eq!(store.gate(), Duration::ZERO);
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
    async fn take(&self, _key: &str, ask: TakeAsk) -> Result<StoreTake, StoreError> {
        Ok(StoreTake::Taken {
            granted: ask.want,
            left: Left::UNBOUNDED,
        })
    }

    async fn close_gate(&self, _key: &str, _wait: Duration) -> Result<(), StoreError> {
        Ok(())
    }

    async fn note(
        &self,
        key: &str,
        facts: SharedFacts,
        _answer: Answer,
    ) -> Result<Noted, StoreError> {
        self.notes.lock().unwrap().push((key.to_owned(), facts));
        Ok(Noted::default())
    }
}

/// A learned count that answers after 3 ms and records what each take asked.
#[derive(Default)]
struct SlowCountStore {
    asks: Mutex<Vec<TakeAsk>>,
}

#[async_trait::async_trait]
impl SharedStore for SlowCountStore {
    async fn take(&self, _key: &str, ask: TakeAsk) -> Result<StoreTake, StoreError> {
        self.asks.lock().unwrap().push(ask);
        tokio::time::sleep(ms(3)).await;
        Ok(StoreTake::Taken {
            granted: ask.want,
            left: Left {
                tokens: 100.0,
                at_micros: 0,
            },
        })
    }

    async fn close_gate(&self, _key: &str, _wait: Duration) -> Result<(), StoreError> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn takes_from_a_learned_count_are_not_batched() {
    let store = Arc::new(SlowCountStore::default());
    let pacer = Pacer::builder()
        .shared(SharedBucket::learned_from_store(store.clone()))
        .learn_from_server(false)
        .build();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let pacer = pacer.clone();
            tokio::spawn(async move { drop(pacer.acquire("k", 1).await.unwrap()) })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let asks = store.asks.lock().unwrap();
    assert_eq!(asks.len(), 8);
    assert!(asks.iter().all(|ask| ask.want == 1), "{asks:?}");
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
                silent: false,
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

/// A pacer that shares what it learns through a [`NotingStore`], and the store.
fn noting_learner() -> (Arc<NotingStore>, Pacer) {
    let store = Arc::new(NotingStore::default());
    let pacer = Pacer::builder()
        .shared(SharedBucket::learned_from_store(store.clone()))
        .build();
    (store, pacer)
}

/// An answer of a window of 20 per 2 s that states `remaining` left and a reset in 2 s.
fn twenty_per_two_seconds(remaining: u64) -> RateLimitInfo {
    RateLimitInfo {
        limit: Some(20),
        remaining: Some(remaining),
        reset: Some(Duration::from_secs(2)),
        window: Some(Duration::from_secs(2)),
        ..RateLimitInfo::default()
    }
}

/// A window that counted more than this process sent into it (other processes' requests).
/// What it shares is what the answer states less only its own requests still out that were
/// sent after the one answered (those sent before reached the server first, and are counted
/// in it): the store keeps a window's least count, and each request taken off twice (once
/// read as a window that frees slot by slot, the requests answered while each one was out
/// were taken off too) idled a slot there for the window.
#[tokio::test(start_paused = true)]
async fn an_answer_shares_what_it_states_less_only_the_requests_still_out() {
    let (store, pacer) = noting_learner();
    let stated = twenty_per_two_seconds;
    let first = pacer.acquire("k", 1).await.unwrap();
    first.finish(StatusCode::OK, &stated(19)).await;
    // The next window: its first answer counts five, one of them ours.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let first = pacer.acquire("k", 1).await.unwrap();
    first.finish(StatusCode::OK, &stated(15)).await;
    let a = pacer.acquire("k", 1).await.unwrap();
    let b = pacer.acquire("k", 1).await.unwrap();
    let c = pacer.acquire("k", 1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    // `b` counted with `a`, sent before it and still out: 12 left, less `c` only, sent after.
    b.finish(StatusCode::OK, &stated(12)).await;
    let notes = store.notes.lock().unwrap().clone();
    let shared = notes.last().and_then(|(_, facts)| facts.left);
    assert_eq!(shared.map(|(left, _)| left), Some(11), "{notes:?}");
    tokio::time::sleep(Duration::from_millis(1)).await;
    // Counted before `b`, answered after it: 13 left then, and `c` still out.
    a.finish(StatusCode::OK, &stated(13)).await;
    let notes = store.notes.lock().unwrap().clone();
    let shared = notes.last().and_then(|(_, facts)| facts.left);
    assert_eq!(shared.map(|(left, _)| left), Some(12), "{notes:?}");
    c.finish(StatusCode::OK, &stated(11)).await;
}

/// A pacer sharing what it learns marks its keys as spent by other processes too: the first
/// answer after its roll that counts the whole quota spent, one request of it ours, is the
/// others' (one of them began the window 60 ms after the roll), and the end shared is the
/// one that answer states, not the end the roll projected (the first window's plus a
/// window, early: the answer came at 2.06 s, and the window it counts in ends 2 s after it
/// began).
#[tokio::test(start_paused = true)]
async fn a_learning_pacer_takes_a_full_count_after_its_roll_for_the_other_processes() {
    let (store, pacer) = noting_learner();
    let stated = twenty_per_two_seconds;
    let first = pacer.acquire("k", 1).await.unwrap();
    first.finish(StatusCode::OK, &stated(19)).await;
    tokio::time::sleep(Duration::from_millis(2060)).await;
    let ours = pacer.acquire("k", 1).await.unwrap();
    ours.finish(StatusCode::OK, &stated(0)).await;
    let notes = store.notes.lock().unwrap().clone();
    let ends = notes
        .last()
        .and_then(|(_, facts)| facts.left)
        .map(|(_, ends)| ends);
    // Read as a sliding log's leftovers, the window ended at the roll's 2 s plus 2 s: 1.94 s
    // from this answer.
    assert_eq!(ends, Some(Duration::from_secs(2)), "{notes:?}");
}

/// A learned count that records notes and gates, and whose takes wait while `hold` is set
/// (a take on its way, as over a slow network).
#[derive(Default)]
struct HoldingStore {
    notes: Mutex<Vec<SharedFacts>>,
    gates: Mutex<Vec<Duration>>,
    hold: std::sync::atomic::AtomicBool,
    release: tokio::sync::Notify,
}

#[async_trait::async_trait]
impl SharedStore for HoldingStore {
    async fn take(&self, _key: &str, ask: TakeAsk) -> Result<StoreTake, StoreError> {
        if self.hold.load(Ordering::SeqCst) {
            self.release.notified().await;
        }
        Ok(StoreTake::Taken {
            granted: ask.cost,
            left: Left::UNBOUNDED,
        })
    }

    async fn close_gate(&self, _key: &str, wait: Duration) -> Result<(), StoreError> {
        self.gates.lock().unwrap().push(wait);
        Ok(())
    }

    async fn note(
        &self,
        _key: &str,
        facts: SharedFacts,
        _answer: Answer,
    ) -> Result<Noted, StoreError> {
        self.notes.lock().unwrap().push(facts);
        Ok(Noted::default())
    }
}

fn stating(remaining: u64) -> RateLimitInfo {
    RateLimitInfo {
        limit: Some(20),
        remaining: Some(remaining),
        reset: Some(Duration::from_secs(2)),
        window: Some(Duration::from_secs(2)),
        ..RateLimitInfo::default()
    }
}

/// A learning pacer on a fresh [`HoldingStore`].
fn holding_pacer() -> (Arc<HoldingStore>, Pacer) {
    let store = Arc::new(HoldingStore::default());
    let pacer = Pacer::builder()
        .shared(SharedBucket::learned_from_store(store.clone()))
        .build();
    (store, pacer)
}

#[tokio::test(start_paused = true)]
async fn a_note_counts_back_the_requests_whose_take_is_on_its_way() {
    let (store, pacer) = holding_pacer();
    let first = pacer.acquire("k", 1).await.unwrap();
    first.finish(StatusCode::OK, &stating(19)).await;
    let second = pacer.acquire("k", 1).await.unwrap();
    // A third request is reserved here; its take from the count is on its way.
    store.hold.store(true, Ordering::SeqCst);
    let third = tokio::spawn({
        let pacer = pacer.clone();
        async move { pacer.acquire("k", 1).await.map(drop) }
    });
    tokio::time::sleep(ms(1)).await;
    assert!(!third.is_finished());
    // The server counted the second: 18 left. The third is not counted there, nor taken from
    // the count yet: the others may take 18, and the third's take will leave 17.
    second.finish(StatusCode::OK, &stating(18)).await;
    let told = store.notes.lock().unwrap().last().unwrap().left;
    assert_eq!(told.map(|(left, _)| left), Some(18));
    store.release.notify_one();
    third.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_quota_seen_spent_is_left_to_the_learned_count_and_a_429_closes_the_gate() {
    let (store, pacer) = holding_pacer();
    let permit = pacer.acquire("k", 1).await.unwrap();
    permit.finish(StatusCode::OK, &stating(0)).await;
    // The note carries the spent count and its end; no gate holds the others to this
    // process's end of the window.
    let told = store.notes.lock().unwrap().last().unwrap().left;
    assert_eq!(told.map(|(left, _)| left), Some(0));
    assert!(store.gates.lock().unwrap().is_empty());
    // A 429 pauses every process.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let permit = pacer.acquire("k", 1).await.unwrap();
    let refused = RateLimitInfo {
        retry_after: Some(Duration::from_secs(1)),
        ..stating(0)
    };
    permit.finish(StatusCode::TOO_MANY_REQUESTS, &refused).await;
    assert_eq!(store.gates.lock().unwrap().len(), 1);
}

/// A store whose own estimate paces a silent server: every take goes, and a bare refusal
/// closes its gate for 700 ms (it says so in its answer to the note).
#[derive(Default)]
struct FleetStore {
    answers: Mutex<Vec<Answer>>,
    gates: Mutex<Vec<Duration>>,
}

#[async_trait::async_trait]
impl SharedStore for FleetStore {
    async fn take(&self, _key: &str, ask: TakeAsk) -> Result<StoreTake, StoreError> {
        Ok(StoreTake::Taken {
            granted: ask.cost,
            left: Left::UNBOUNDED,
        })
    }

    async fn close_gate(&self, _key: &str, wait: Duration) -> Result<(), StoreError> {
        self.gates.lock().unwrap().push(wait);
        Ok(())
    }

    async fn note(
        &self,
        _key: &str,
        facts: SharedFacts,
        answer: Answer,
    ) -> Result<Noted, StoreError> {
        self.answers.lock().unwrap().push(answer);
        Ok(Noted {
            fleet: facts.silent || answer.bare_refusal,
            pause: answer.bare_refusal.then_some(Duration::from_millis(700)),
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_silent_server_paced_by_the_store_is_paced_by_its_estimate_alone() {
    let store = Arc::new(FleetStore::default());
    let pacer = Pacer::builder()
        .shared(SharedBucket::learned_from_store(store.clone()))
        .mode(PacingMode::FailFast)
        .build();
    let silent = RateLimitInfo::default();
    let first = pacer.acquire("k", 1).await.unwrap();
    first.finish(StatusCode::OK, &silent).await;
    // The store paces the key: this process's slow start (one in flight at first) stands
    // aside, and four go at once.
    let mut permits = Vec::new();
    for _ in 0..4 {
        permits.push(pacer.acquire("k", 1).await.unwrap());
    }
    let refused = permits.pop().unwrap();
    refused.finish(StatusCode::TOO_MANY_REQUESTS, &silent).await;
    // The store closed the gate for all with its own pause; this process wrote none of its
    // own (its model would have paused 250 ms), and waits the store's.
    assert!(store.gates.lock().unwrap().is_empty());
    match pacer.acquire("k", 1).await {
        Err(PacingError::Throttled { wait, .. }) => {
            assert_eq!(wait, Duration::from_millis(700));
        }
        other => panic!("{other:?}"),
    }
    for permit in permits {
        permit.finish(StatusCode::OK, &silent).await;
    }
    // Each answer named its request (its takes' asker), and only the 429 was a bare refusal.
    let answers = store.answers.lock().unwrap().clone();
    let askers: std::collections::HashSet<u128> = answers.iter().map(|a| a.asker).collect();
    assert_eq!(askers.len(), 5);
    assert_eq!(answers.iter().filter(|a| a.bare_refusal).count(), 1);
}
