//! What the processes learned from the server, shared on Redis, with no rate configured: the
//! gate (the token bucket's key and closing script; read by the take), what is left in the
//! current window until its end, and the quota per window.
//!
//! Every key of one partition key shares the `{hash tag}` of the token bucket's keys (one
//! Cluster slot), the identity enters only as a digest, and every time is a TTL kept by the
//! Redis server: the callers' clocks never enter Redis.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Script;

use super::redis::{RedisGate, field, millis as reply_millis, store_error, unexpected};
use super::{
    Answer, Left, Noted, SharedBucket, SharedFacts, SharedStore, StoreError, StoreTake, TakeAsk,
};
use crate::limiter::redis::RedisStore;
use crate::limiter::redis::keys as redis_keys;

static TAKE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("learned_take.lua")));
static NOTE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("learned_note.lua")));

/// How long one process's probe may be out before another process sends one: an answer comes
/// well within it, and a process that died with its probe out holds the others no longer.
const PROBE_OUT: Duration = Duration::from_secs(1);
/// How often the others look again while a probe is out (its answer usually comes within a
/// few milliseconds on a near server; each look is one script call per waiting process).
const PROBE_POLL: Duration = Duration::from_millis(20);
/// How often the slow start of all the processes together doubles its cap on the requests
/// in flight, while nothing is measured of a silent server (each process's own slow start
/// steps as often).
const FLEET_RAMP_STEP: Duration = Duration::from_millis(100);

/// From a learned count, every process's head that finds the window spent (or the shared
/// gate closed) waits for the same end, and whoever asks first then takes first: left to the
/// race, a request could lose window after window (measured: 50 processes, 2 tasks each, 30
/// per 3 s: a slowest request of 49 s, when each waits 10 s on average). So the store tells
/// each head refused to ask again later by up to this spread, in the order the heads began to
/// wait (`learned_take.lua`). Against a stated quota, every head by the spread halved for each
/// [`TURN_HALVING`] it has waited. Against a silent server, by the spread halved for each
/// `TURN_HALVING` it began to wait after the request in line that began first, which asks at
/// once: the store measures a silent server's windows by when their first requests went, and a
/// delay for every head lengthened each window measured (against nginx at 10 r/s, four
/// processes were held to windows of one request 139-147 ms long).
const TURN_SPREAD: Duration = Duration::from_millis(64);
const TURN_HALVING: Duration = Duration::from_secs(6);

/// How long a quota per window is kept without news: many windows, and at least a minute.
fn quota_kept(window: Duration) -> Duration {
    window.saturating_mul(10).max(Duration::from_secs(60))
}

impl SharedBucket {
    /// No rate: every process that uses the same store and name shares what it learns from
    /// the server about each key. A 429 or a spent quota closes the key for all (as with
    /// [`SharedBucket::redis`]); a stated `remaining` and reset become a count that every
    /// process takes from until the window ends (a TTL). When nothing is known of the window
    /// (the key's first request, or the window just ended), one request of all the processes
    /// goes alone and the others wait for its answer (at most a second): a probe for all, not
    /// one each, and a window's end guessed early costs one 429, not a quota of them. An
    /// answer of a window that ended since never overwrites the count of the current one.
    ///
    /// A server that states nothing is learned by all the processes as one, in Redis (each
    /// process alone would measure its share, not the quota): until its first refusal, a
    /// slow start of all together caps the requests in flight (one, doubling every 100 ms);
    /// what all of them were admitted until then is the quota per window; the gate closes
    /// for all with one pause (250 ms, ×1.5 for each probe refused), past which one request
    /// of all probes, and the probe admitted bounds the window. Each window is then a count
    /// of the quota, opened by one request alone at the midpoint of the window known too
    /// short and the one known enough (until they are a sixteenth apart); a refusal inside a
    /// window lowers the quota to what that window admitted. Each process's own silent model
    /// stands aside meanwhile.
    ///
    /// Keys are hashed before they reach Redis; every time is the Redis server's. While Redis
    /// is out of reach, each process paces by what it learns alone ([`StoreFailure`]'s
    /// fail-open and local fallback), or refuses (fail-closed).
    ///
    /// [`StoreFailure`]: super::StoreFailure
    ///
    /// ```no_run
    /// use reqwest_polite::limiter::redis::{RedisOptions, RedisStore};
    /// use reqwest_polite::pacing::{Pacer, SharedBucket};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::standalone("redis://127.0.0.1:6379", RedisOptions::default()).await?;
    /// let pacer = Pacer::builder()
    ///     .shared(SharedBucket::redis_learned(store, "partner-api"))
    ///     .build();
    /// let permit = pacer.acquire("partner.example.com:443", 1).await?;
    /// # drop(permit);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn redis_learned(store: RedisStore, name: &str) -> SharedBucket {
        let learned = RedisLearned {
            gate: RedisGate::new(store.clone(), name),
            store,
            name: name.to_owned(),
        };
        SharedBucket::learned_from_store(Arc::new(learned))
    }
}

struct RedisLearned {
    gate: RedisGate,
    store: RedisStore,
    name: String,
}

impl RedisLearned {
    /// `rp:{<name>:<digest>}:left`, `…:quota` and `…:probe`; the gate, and a silent server's
    /// estimate (`…:silent`) and the requests in flight against it (`…:flying`).
    fn keys(&self, key: &str) -> Vec<String> {
        let prefix = redis_keys::key_prefix(&self.name, key);
        vec![
            redis_keys::key(&prefix, "left"),
            redis_keys::key(&prefix, "quota"),
            redis_keys::key(&prefix, "probe"),
            RedisGate::key_under(&prefix),
            redis_keys::key(&prefix, "silent"),
            redis_keys::key(&prefix, "flying"),
        ]
    }

    /// The keys of a take: the count, the quota, the gate, the probe, the line of the
    /// requests refused, a silent server's estimate, the requests in flight and when each
    /// request in line began to wait (one digest of the key for all eight).
    fn take_keys(&self, key: &str) -> Vec<String> {
        let prefix = redis_keys::key_prefix(&self.name, key);
        vec![
            redis_keys::key(&prefix, "left"),
            redis_keys::key(&prefix, "quota"),
            RedisGate::key_under(&prefix),
            redis_keys::key(&prefix, "probe"),
            redis_keys::key(&prefix, "line"),
            redis_keys::key(&prefix, "silent"),
            redis_keys::key(&prefix, "flying"),
            redis_keys::key(&prefix, "since"),
        ]
    }
}

fn silent(silent: bool) -> String {
    if silent { "1" } else { "" }.to_owned()
}

fn millis(duration: Duration) -> String {
    duration.as_millis().max(1).to_string()
}

#[async_trait::async_trait]
impl SharedStore for RedisLearned {
    async fn take(&self, key: &str, ask: TakeAsk) -> Result<StoreTake, StoreError> {
        // Takes from a count are not batched (see `SharedQuota::wait_in_queue`), and tokens
        // held here that lapse are not given back: a count has no clock to bound what may go
        // back (it is low by them, never high, until the window ends).
        let args = [
            ask.cost.to_string(),
            ask.want.to_string(),
            millis(PROBE_OUT),
            millis(PROBE_POLL),
            format!("{:x}", ask.asker),
            ask.waited.as_millis().to_string(),
            millis(FLEET_RAMP_STEP),
            millis(TURN_SPREAD),
            millis(TURN_HALVING),
        ];
        let reply: Vec<String> = self
            .store
            .eval(&TAKE, &self.take_keys(key), &args)
            .await
            .map_err(store_error)?;
        match reply.first().map(String::as_str) {
            Some("1") => {
                let left: i64 = field(&reply, 2)?;
                Ok(StoreTake::Taken {
                    granted: field(&reply, 1)?,
                    left: match u64::try_from(left) {
                        Ok(count) => Left {
                            tokens: count as f64,
                            at_micros: 0,
                        },
                        Err(_) => Left::UNBOUNDED,
                    },
                })
            }
            Some("0") => Ok(StoreTake::Wait(reply_millis(&reply, 1)?)),
            Some("2") => Ok(StoreTake::Gated(reply_millis(&reply, 1)?)),
            _ => Err(unexpected(&reply)),
        }
    }

    async fn close_gate(&self, key: &str, wait: Duration) -> Result<(), StoreError> {
        self.gate.close(key, wait).await
    }

    async fn note(
        &self,
        key: &str,
        facts: SharedFacts,
        answer: Answer,
    ) -> Result<Noted, StoreError> {
        let (left, ends) = match facts.left {
            Some((left, ends)) => (left.to_string(), millis(ends)),
            None => (String::new(), String::new()),
        };
        let (limit, window, kept) = match facts.quota {
            Some((limit, window)) => (
                limit.to_string(),
                millis(window),
                millis(quota_kept(window)),
            ),
            None => (
                String::new(),
                String::new(),
                millis(quota_kept(Duration::ZERO)),
            ),
        };
        let reply: Vec<i64> = self
            .store
            .eval(
                &NOTE,
                &self.keys(key),
                &[
                    left,
                    ends,
                    limit,
                    window,
                    kept,
                    silent(facts.silent),
                    silent(answer.bare_refusal),
                    format!("{:x}", answer.asker),
                ],
            )
            .await
            .map_err(store_error)?;
        let pause = reply.get(1).copied().unwrap_or(0);
        Ok(Noted {
            fleet: reply.first() == Some(&1),
            pause: (pause > 0).then(|| Duration::from_millis(pause as u64)),
        })
    }
}
