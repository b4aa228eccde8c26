use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::config::{BucketScope, PacingMode};
use super::error::PacingError;
use super::key::key_digest;
use super::keys::{KeyTable, Queue};
use super::learned::{Admission, Demand, Ticket};
use super::local::{LocalBucket, Take};
use super::permit::{Permit, Reservation};
use super::shared::{Asker, SharedBucket, SharedQuota, SharedTake};
#[cfg(any(feature = "redis", test))]
use super::shared::{SharedCalls, StoreHealthReport};
use super::turns::{Lanes, Weights};
use crate::observe::{EventHook, KeyLabels, Observer, PoliteEvent, QueueGauge};
use crate::time::Clock;
use crate::time::Jitter;
use crate::time::Rate;
use crate::time::TokioClock;

/// The shortest sleep after a refusal: one tick of tokio's timer.
const SHORTEST_SLEEP: Duration = Duration::from_millis(1);

/// Every this many acquires, idle per-key state is dropped (memory stays bounded without a
/// background task).
const HOUSEKEEPING_EVERY: u64 = 1024;

/// Client-side pacing: hands out permits so that requests go no faster than the configured
/// rate and the quota the server states, and pauses every task on a key once the server says
/// the quota is spent.
///
/// Permits on one key go out in arrival order: a request that arrives while others wait
/// queues behind them, and only the head of the queue looks at the buckets (see the
/// [module docs](super)).
///
/// Cheap to clone; clones share their buckets and what they learned.
///
/// ```
/// use std::num::NonZeroU32;
/// use std::time::Duration;
/// use reqwest_polite::pacing::{Pacer, PacingMode, PacingError};
/// use reqwest_polite::time::Rate;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pacer = Pacer::builder()
///     .rate(Rate::per_second(NonZeroU32::new(10).unwrap()))
///     .mode(PacingMode::FailFast)
///     .build();
/// let first = pacer.acquire("api.example.com:443", 1).await;
/// assert!(first.is_ok());
/// // One request per 100 ms: the next one, right now, would have to wait.
/// let second = pacer.acquire("api.example.com:443", 1).await;
/// assert!(matches!(second, Err(PacingError::Throttled { .. })));
/// # }
/// ```
#[derive(Clone)]
pub struct Pacer {
    pub(super) inner: Arc<PacerInner>,
}

impl Pacer {
    pub(super) fn inner(&self) -> &PacerInner {
        &self.inner
    }

    /// Sends events to `hook` too, unless the pacer has a hook already (the client builder's
    /// hook reaches a pacer built without one).
    pub(crate) fn hook(&self, hook: EventHook) {
        self.inner.observer.set(hook);
    }
}

pub(super) struct PacerInner {
    pub(super) clock: Arc<dyn Clock>,
    mode: PacingMode,
    /// Every key's queue, learned quota and (per-key scope) configured-rate bucket.
    pub(super) keys: KeyTable,
    /// The configured rate's one bucket in [`BucketScope::Whole`].
    whole: Option<Mutex<LocalBucket>>,
    /// Whether responses feed the learned quotas.
    pub(super) learn: bool,
    pub(super) shared: Option<SharedQuota>,
    /// How a pause is spread when the request carries no jitter of its own.
    pub(super) gate_jitter: Jitter,
    acquires: AtomicU64,
    /// The configured rate, as a snapshot reports it.
    pub(super) rate: Option<Rate>,
    /// Where events go (a hook, once set).
    pub(super) observer: Observer,
    /// The keys labelled on the queue gauge so far (feature `metrics`).
    labels: KeyLabels,
    /// The partitions' lanes to a shared quota's queue (the `turns` module).
    pub(super) lanes: Lanes,
    /// What the pauses' jitter is drawn from (seeded by [`PacerBuilder::seed`], or by the OS).
    rng: Mutex<StdRng>,
}

impl PacerInner {
    /// Draws a pause of `wait` spread by `jitter`.
    pub(super) fn spread(&self, jitter: Jitter, wait: Duration) -> Duration {
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        jitter.apply(wait, &mut *rng)
    }
}

/// Configures a [`Pacer`]. Start from [`Pacer::builder`].
pub struct PacerBuilder {
    rate: Option<Rate>,
    scope: BucketScope,
    mode: PacingMode,
    clock: Arc<dyn Clock>,
    learn: bool,
    gate_jitter: Jitter,
    shared: Option<SharedBucket>,
    hook: Option<EventHook>,
    weights: Option<Weights>,
    seed: Option<u64>,
}

impl PacerBuilder {
    /// Paces to `rate` in this process (governor GCRA). Without a rate the pacer only follows
    /// what the server states.
    pub fn rate(mut self, rate: Rate) -> Self {
        self.rate = Some(rate);
        self
    }

    #[cfg(any(feature = "redis", test))]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    /// Takes every permit from `bucket` too: a quota that many processes share (Redis), with
    /// its lease size and failure policy. The server's 429s are shared through it as well.
    pub fn shared(mut self, bucket: SharedBucket) -> Self {
        self.shared = Some(bucket);
        self
    }

    /// Whether the configured rate is per partition key (default) or one for all requests.
    pub fn scope(mut self, scope: BucketScope) -> Self {
        self.scope = scope;
        self
    }

    /// Wait (up to a maximum) or fail fast. Default: wait up to 60 s.
    pub fn mode(mut self, mode: PacingMode) -> Self {
        self.mode = mode;
        self
    }

    /// The clock the pacer reads (default: `TokioClock::new()`). A [`TokioClock`], because the
    /// pacer sleeps with tokio: a clock that did not follow tokio's time would make it spin.
    /// One that starts ahead ([`TokioClock::starting_at`], another machine's clock) is fine, as
    /// Redis only ever sees durations. Tests use tokio's paused time.
    pub fn clock(mut self, clock: TokioClock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Whether to follow the server's rate-limit headers and 429s (default: yes). Without,
    /// only the configured and shared buckets (and [`Pacer::pause`]) hold requests back.
    pub fn learn_from_server(mut self, learn: bool) -> Self {
        self.learn = learn;
        self
    }

    /// How a pause is spread when the request does not bring the retry layer's jitter with
    /// it. Default `Jitter::NotBefore(0.1)`: the same 20% width as the retry layer's ±10%,
    /// placed after the reset.
    ///
    /// One draw is made per pause, for every request of the key. After a 429 the retry
    /// layer's jitter is used (it travels with the request), and the retry layer waits that
    /// same draw, so clients told the same `Retry-After` spread as the retry policy says. A
    /// quota seen spent before any 429 (remaining 0) pauses until the reset or later, and at
    /// most 20 ms later whatever this jitter draws: every task and process takes from the
    /// budget the server states, so there is no herd to spread, and opening early would only
    /// earn the 429. (When the reset is stated in whole seconds and no window, one request
    /// alone may probe before it: see the [module docs](super).)
    pub fn gate_jitter(mut self, jitter: Jitter) -> Self {
        self.gate_jitter = jitter;
        self
    }

    /// Draws the pauses' jitter from a generator seeded with `seed`, not by the OS: with the
    /// same responses at the same instants (a simulation on tokio's paused clock, with the
    /// retry policy's [`with_seed`](crate::retry::RetryPolicy::with_seed) too), a run is the
    /// same every time, so a tail seen once can be replayed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Sends every [`PoliteEvent`] of this pacer to `hook`: rate-limited, paused, opened,
    /// model changed, and the shared store lost and back (see [`observe`](crate::observe)).
    pub fn on_event(mut self, hook: EventHook) -> Self {
        self.hook = Some(hook);
        self
    }

    /// How many turns each partition takes per round when several partitions draw on one
    /// quota the server counts together (learned from the responses: see the
    /// [module docs](super)). `weights` gives a partition key's weight; 0 counts as 1, and
    /// every partition has weight 1 by default (plain round-robin).
    ///
    /// ```
    /// use reqwest_polite::pacing::Pacer;
    ///
    /// // The paying tenant gets three turns for every other tenant's one.
    /// let pacer = Pacer::builder()
    ///     .turn_weights(|partition| if partition.starts_with("acme\u{1f}") { 3 } else { 1 })
    ///     .build();
    /// # drop(pacer);
    /// ```
    pub fn turn_weights(mut self, weights: impl Fn(&str) -> u32 + Send + Sync + 'static) -> Self {
        self.weights = Some(Arc::new(weights));
        self
    }

    /// The pacer.
    pub fn build(self) -> Pacer {
        let observer = Observer::new(self.hook);
        let per_key_rate = self.rate.filter(|_| self.scope == BucketScope::PerKey);
        let whole = self
            .rate
            .filter(|_| self.scope == BucketScope::Whole)
            .map(|rate| Mutex::new(LocalBucket::new(rate, self.clock.clone())));
        let shared = self
            .shared
            .map(|bucket| SharedQuota::new(bucket, self.clock.clone()).observed(&observer));
        // Probing a new key is for a pacer that knows nothing else: a configured rate or a
        // shared bucket already keeps a cold burst in check (one that only shares what is
        // learned does not).
        let probe_new_keys =
            self.learn && self.rate.is_none() && shared.as_ref().is_none_or(SharedQuota::learns);
        // Processes that share what they learn spend each key's quota together.
        let learned_together = shared.as_ref().is_some_and(SharedQuota::learns);
        Pacer {
            inner: Arc::new(PacerInner {
                keys: KeyTable::new(self.clock.clone(), per_key_rate, probe_new_keys)
                    .counted_with_others(learned_together),
                clock: self.clock,
                mode: self.mode,
                whole,
                learn: self.learn,
                shared,
                gate_jitter: self.gate_jitter,
                acquires: AtomicU64::new(0),
                rate: self.rate,
                observer,
                labels: KeyLabels::default(),
                lanes: Lanes::new(self.weights),
                rng: Mutex::new(self.seed.map_or_else(rand::make_rng, StdRng::seed_from_u64)),
            }),
        }
    }
}

impl Pacer {
    /// A builder with the defaults: no configured rate, learn from the server, wait up to 60 s.
    pub fn builder() -> PacerBuilder {
        PacerBuilder {
            rate: None,
            scope: BucketScope::default(),
            mode: PacingMode::default(),
            clock: Arc::new(TokioClock::new()),
            learn: true,
            gate_jitter: Jitter::NotBefore(0.1),
            shared: None,
            hook: None,
            weights: None,
            seed: None,
        }
    }

    /// Waits until a request of `cost` units (0 counts as 1; costs above `u32::MAX`, the
    /// largest burst, as `u32::MAX`) may go on `key`, then takes it. Costs are `u64`, as the
    /// limiters' are.
    ///
    /// Requests on one key are served in arrival order. Cancellation-safe: a request dropped
    /// while it waits in the queue has taken nothing and leaves the queue whole; one dropped
    /// at the head passes its turn on (tokens it took from this process's buckets are given
    /// back; a Redis call already sent is read by the next head, which uses what it took).
    pub async fn acquire(&self, key: &str, cost: u64) -> Result<Permit, PacingError> {
        self.acquire_by(key, cost, 0, None).await
    }

    /// [`acquire`](Self::acquire), waiting no later than `deadline` either (the retry layer's
    /// deadline, in [`PacingMiddleware`](super::PacingMiddleware)): a permit that could only
    /// come later is refused at once with [`PacingError::WaitTooLong`], whose `max_wait` is
    /// then the time that was left.
    pub(super) async fn acquire_by(
        &self,
        key: &str,
        cost: u64,
        bytes: u64,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Permit, PacingError> {
        let cost = u32::try_from(cost).unwrap_or(u32::MAX).max(1);
        self.housekeeping();
        let started = self.inner.clock.now();
        let mode = match (self.inner.mode, deadline) {
            (PacingMode::Wait { max_wait }, Some(deadline)) => PacingMode::Wait {
                max_wait: max_wait
                    .min(deadline.saturating_duration_since(tokio::time::Instant::now())),
            },
            (mode, _) => mode,
        };
        let partition = key;
        loop {
            // Partitions that share one server quota queue on one entry (the `scope` module).
            let quota = self.inner.keys.quota_key(partition);
            let key = quota.as_deref().unwrap_or(partition);
            // Partitions of one shared quota take turns at its queue (the `turns` module).
            let shared = quota.is_some() || self.inner.keys.scopes.is_shared(partition);
            let _place = match shared {
                true => Some(self.take_lane(partition, started, mode).await?),
                false => None,
            };
            let served = self
                .queue_on(partition, key, cost, bytes, started, mode)
                .await?;
            if let Some(permit) = served {
                return Ok(permit);
            }
        }
    }

    /// Waits in `key`'s queue, then serves its head; `None` when `partition` was moved to
    /// another quota entry meanwhile (it queues there then).
    async fn queue_on(
        &self,
        partition: &str,
        key: &str,
        cost: u32,
        bytes: u64,
        started: Duration,
        mode: PacingMode,
    ) -> Result<Option<Permit>, PacingError> {
        // The key's queue, and its label on the queue gauge (feature `metrics`; nothing
        // without), in one look at the table.
        let labels = &self.inner.labels;
        let (queue, label) = self.inner.keys.with(key, |state| {
            let label = state.label.get(labels, || key_digest(key));
            (state.queue.clone(), label)
        });
        let _counted = QueueGauge::enter(label);
        // Nobody waiting: the turn is free at once, without arming a timer.
        let free = queue.turn.try_acquire();
        // Counted while it waits: the head takes from a shared bucket for the queue behind it.
        let waiting = match (&free, &self.inner.shared) {
            (Err(_), Some(shared)) => shared.wait_in_queue(key),
            _ => None,
        };
        let turn = match (free, mode) {
            (Ok(turn), _) => Ok(turn),
            (Err(_), PacingMode::Wait { max_wait }) => {
                match tokio::time::timeout(max_wait, queue.turn.acquire()).await {
                    Ok(turn) => turn,
                    Err(_) => {
                        tracing::debug!(key = %key_digest(key), "pacing: rejected, queue too long");
                        let now = self.inner.clock.now();
                        return Err(PacingError::WaitTooLong {
                            wait: now.saturating_sub(started),
                            max_wait,
                            server_wait: self.server_wait(key, now),
                        });
                    }
                }
            }
            (Err(_), PacingMode::FailFast) => queue.turn.acquire().await,
        };
        // The semaphore is never closed.
        let _turn = turn.expect("a pacing queue is never closed");
        drop(waiting);
        self.serve_head(partition, key, cost, bytes, started, &queue, mode)
            .await
    }

    /// The head of the queue: looks at the buckets until the request may go.
    #[allow(clippy::too_many_arguments)]
    async fn serve_head(
        &self,
        partition: &str,
        key: &str,
        cost: u32,
        bytes: u64,
        started: Duration,
        queue: &Queue,
        mode: PacingMode,
    ) -> Result<Option<Permit>, PacingError> {
        // When the last wait should have ended: a wake-up after it is the timer's lateness.
        let mut due: Option<Duration> = None;
        let asker = self.inner.shared.as_ref().map_or(0, SharedQuota::asker);
        loop {
            if self.inner.keys.moved(partition, key) {
                return Ok(None);
            }
            let now = self.inner.clock.now();
            let late = due.map_or(Duration::ZERO, |due| now.saturating_sub(due));
            let waited = now.saturating_sub(started);
            let ask = Asker { id: asker, waited };
            let wait = match self.try_admit(key, cost, bytes, now, late, ask).await? {
                Ok(reservation) => {
                    return Ok(Some(Permit {
                        waited,
                        reservation: Some(reservation),
                    }));
                }
                Err(wait) => wait,
            };
            let total = now.saturating_sub(started).saturating_add(wait);
            match mode {
                PacingMode::FailFast => {
                    tracing::debug!(key = %key_digest(key), ?wait, "pacing: rejected, fail fast");
                    return Err(PacingError::Throttled {
                        wait,
                        server_wait: self.server_wait(key, now),
                    });
                }
                // The key is looked up again only for a wait that is already too long.
                PacingMode::Wait { max_wait }
                    if total > max_wait
                        && total.saturating_sub(self.gate_jitter(key, now, wait)) > max_wait =>
                {
                    tracing::debug!(key = %key_digest(key), ?total, "pacing: rejected, wait too long");
                    return Err(PacingError::WaitTooLong {
                        wait: total,
                        max_wait,
                        server_wait: self.server_wait(key, now),
                    });
                }
                PacingMode::Wait { .. } => {
                    tracing::trace!(key = %key_digest(key), ?wait, "pacing: waiting");
                    due = Some(now.saturating_add(wait));
                    // News about the key (a response) may let the request go sooner.
                    // A refusal that says "wait 0" (a fraction of a token rounded down) must
                    // not spin: the timer's tick is the shortest wait there is.
                    tokio::select! {
                        () = tokio::time::sleep(wait.max(SHORTEST_SLEEP)) => {}
                        () = queue.news.notified() => {}
                    }
                }
            }
        }
    }

    /// The jitter in `wait`, when what holds the request is the gate of a server's stated
    /// wait: `max_wait` bounds the wait the server asks, not the spread drawn on top of it
    /// (with it, a quota spent for a minute would refuse every request under the default
    /// `max_wait` of 60 s).
    fn gate_jitter(&self, key: &str, now: Duration, wait: Duration) -> Duration {
        self.inner
            .keys
            .with_existing(key, |state| {
                // The gate holds the request when the wait ends with it (to the timer's tick).
                let gate = state.quota.gate_after(now);
                if gate + SHORTEST_SLEEP >= wait {
                    state.quota.gate_jitter_left(now)
                } else {
                    Duration::ZERO
                }
            })
            .unwrap_or(Duration::ZERO)
    }

    /// The wait the server stated with the pause that holds `key` now, if one does.
    fn server_wait(&self, key: &str, now: Duration) -> Option<Duration> {
        self.inner
            .keys
            .with_existing(key, |state| state.quota.gate_stated(now))
            .flatten()
    }

    /// Pauses every request on `key` in this process for `wait` (what a 429 does by itself,
    /// through [`Permit::finish`], which also shares it through a shared bucket, feature
    /// `redis`).
    pub fn pause(&self, key: &str, wait: Duration) {
        let now = self.inner.clock.now();
        // A partition that shares a quota pauses the quota it shares.
        let quota = self.inner.keys.quota_key(key);
        let key = quota.as_deref().unwrap_or(key);
        self.inner
            .keys
            .with(key, |state| state.quota.close_gate(now, wait));
    }

    #[cfg(any(feature = "redis", test))]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    /// Calls made to the shared store so far, by kind (all zero without a shared bucket).
    pub fn shared_calls(&self) -> SharedCalls {
        self.inner
            .shared
            .as_ref()
            .map_or_else(SharedCalls::default, SharedQuota::calls)
    }

    #[cfg(any(feature = "redis", test))]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    /// How the shared bucket's store (Redis) has fared, when there is one: whether it answers,
    /// how many outages there were, and how many requests the failure policy decided. An
    /// outage is also told as a `tracing` warning, and on stderr when the program installed no
    /// `tracing` subscriber.
    pub fn store_health(&self) -> Option<StoreHealthReport> {
        self.inner.shared.as_ref().map(SharedQuota::health)
    }

    /// How many keys the pacer holds state for (queues, learned quotas, local buckets); idle
    /// ones are dropped every 1,024 acquires, and never more than 1,000,000 are held idle.
    pub fn keys_held(&self) -> usize {
        self.inner.keys.len()
    }

    /// One round for the head of the queue: a reservation, or the wait before the next round.
    async fn try_admit(
        &self,
        key: &str,
        cost: u32,
        bytes: u64,
        now: Duration,
        late: Duration,
        asker: Asker,
    ) -> Result<Result<Reservation, Duration>, PacingError> {
        let observer = &self.inner.observer;
        let learns = self.inner.shared.as_ref().is_some_and(|s| s.learns());
        let admitted = self.inner.keys.with(key, |state| {
            let demand = Demand {
                requests: u64::from(cost),
                bytes,
                behind: state.queued().saturating_sub(1),
            };
            let ticket = match state.quota.reserve(now, demand) {
                Admission::Reserved(ticket) => ticket,
                Admission::WaitUntil(until) => return Ok(Err(until.saturating_sub(now))),
            };
            if state.quota.is_probe(ticket.serial) {
                state.probes += 1;
            }
            if let Some(local) = &mut state.local {
                match local.try_take_late(cost, late) {
                    Take::Taken => {}
                    Take::Wait(wait) => {
                        state.quota.give_back(ticket, demand);
                        return Ok(Err(wait));
                    }
                    Take::Never { burst } => {
                        state.quota.give_back(ticket, demand);
                        return Err(PacingError::CostTooHigh {
                            cost: u64::from(cost),
                            burst,
                        });
                    }
                }
            }
            if learns {
                state.taking += u64::from(cost);
            }
            // A pause told to the hook ends with this request (told once the lock is let go).
            let opened = std::mem::take(&mut state.pause_told);
            Ok(Ok((ticket, opened)))
        });
        let ticket: Ticket = match admitted? {
            Ok((taken, opened)) => {
                if opened {
                    observer.emit(|| PoliteEvent::Opened {
                        key: key_digest(key),
                    });
                }
                taken
            }
            Err(wait) => return Ok(Err(wait)),
        };
        // Counted in `taking` until the shared take answers (or this future is dropped).
        let _taking = learns.then(|| Taking {
            inner: &self.inner,
            key,
            cost,
        });
        tracing::trace!(key = %key_digest(key), serial = ticket.serial, "pacing: reserved");
        // From here, dropping `reservation` gives back the budget and the local tokens.
        let mut reservation = Reservation {
            pacer: self.inner.clone(),
            key: key.into(),
            ticket,
            cost,
            bytes,
            whole_taken: false,
            sent: false,
            asker: asker.id,
        };
        if let Some(whole) = &self.inner.whole {
            let take = whole
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .try_take(cost);
            match take {
                Take::Taken => reservation.whole_taken = true,
                Take::Wait(wait) => return Ok(Err(wait)),
                Take::Never { burst } => {
                    return Err(PacingError::CostTooHigh {
                        cost: u64::from(cost),
                        burst,
                    });
                }
            }
        }
        // Last, as it is the only await: a drop during the call refunds what was taken here.
        if let Some(shared) = &self.inner.shared {
            match shared.take(key, cost, asker).await {
                SharedTake::Taken => {}
                SharedTake::Wait { wait, gated: false } => return Ok(Err(wait)),
                SharedTake::Wait { wait, gated: true } => {
                    // Another process saw the quota spent: the key waits here too.
                    self.pause(key, wait);
                    return Ok(Err(wait));
                }
                SharedTake::Never { burst } => {
                    return Err(PacingError::CostTooHigh {
                        cost: u64::from(cost),
                        burst,
                    });
                }
                SharedTake::Unavailable(reason) => {
                    return Err(PacingError::StoreUnavailable { reason });
                }
                SharedTake::Misconfigured(reason) => {
                    return Err(PacingError::StoreMisconfigured { reason });
                }
            }
        }
        Ok(Ok(reservation))
    }

    /// Gives back what `reservation` took from this process's buckets.
    pub(super) fn refund(inner: &PacerInner, reservation: &Reservation) {
        let cost = reservation.cost;
        inner.keys.with_existing(&reservation.key, |state| {
            let demand = Demand {
                requests: u64::from(cost),
                bytes: reservation.bytes,
                behind: 0,
            };
            state.quota.give_back(reservation.ticket, demand);
            if let Some(local) = &mut state.local {
                local.refund(cost);
            }
        });
        if reservation.whole_taken
            && let Some(whole) = &inner.whole
        {
            whole.lock().unwrap_or_else(|e| e.into_inner()).refund(cost);
        }
    }

    fn housekeeping(&self) {
        let n = self.inner.acquires.fetch_add(1, Ordering::Relaxed);
        if n % HOUSEKEEPING_EVERY == HOUSEKEEPING_EVERY - 1 {
            self.inner.keys.prune(self.inner.clock.now());
            self.inner.lanes.prune();
        }
    }
}

/// A request's take from a shared learned count on its way ([`KeyState::taking`]).
///
/// [`KeyState::taking`]: super::keys::KeyState::taking
struct Taking<'a> {
    inner: &'a PacerInner,
    key: &'a str,
    cost: u32,
}

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        self.inner.keys.with_existing(self.key, |state| {
            state.taking = state.taking.saturating_sub(u64::from(self.cost));
        });
    }
}

impl std::fmt::Debug for Pacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pacer")
            .field("mode", &self.inner.mode)
            .field("learn", &self.inner.learn)
            .field("keys", &self.inner.keys.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
