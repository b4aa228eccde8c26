//! What the pacer knows of each key, for a progress bar or a status page: the quota it paces
//! to, what is left, when the key opens, and the work ahead of it.

use std::time::Duration;

use super::key::key_digest;
use super::keys::KeyState;
use super::pacer::Pacer;
use crate::time::Rate;

/// The quota a key is paced to, and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum QuotaModel {
    /// Nothing known yet: no configured rate, and the server has stated nothing and refused
    /// nothing (the pacer starts slow, see the [module docs](super)).
    Unknown,
    /// Only the configured rate ([`PacerBuilder::rate`](super::PacerBuilder::rate)) holds the
    /// key back.
    Configured {
        /// The configured rate.
        rate: Rate,
    },
    /// The server stated its quota in rate-limit headers: as sure as it gets.
    Stated {
        /// The requests per window, when stated (some servers state only what is left).
        quota: Option<u64>,
        /// The window, when stated.
        window: Option<Duration>,
    },
    /// Inferred from the server's bare 429s: what a window admitted, and how long a window
    /// lasts once probes have bounded it. A bucket with a burst, once the burst is spent, is
    /// paced at a rate: one request per `window`, the time one request takes to refill.
    Inferred {
        /// The requests per window, as estimated now (1 for a bucket paced at its rate).
        quota: u64,
        /// The window, once a probe has bounded it.
        window: Option<Duration>,
        /// Whether the estimate is settled: a whole window admitted its quota without a
        /// refusal and the window's bounds have met (for a rate: its bounds are within 2%),
        /// so the pacer no longer probes for it.
        settled: bool,
    },
}

impl QuotaModel {
    /// The requests per second this model allows in the long run, when it says.
    pub fn per_second(&self) -> Option<f64> {
        if let QuotaModel::Configured { rate } = *self {
            return Some(rate.units_per_second());
        }
        let (quota, window) = self.windowed()?;
        (!window.is_zero()).then(|| quota as f64 / window.as_secs_f64())
    }

    /// The quota per window, when the model is one (stated or inferred, both known).
    fn windowed(&self) -> Option<(u64, Duration)> {
        match *self {
            QuotaModel::Stated {
                quota: Some(quota),
                window: Some(window),
            }
            | QuotaModel::Inferred {
                quota,
                window: Some(window),
                ..
            } => Some((quota, window)),
            _ => None,
        }
    }
}

/// What the pacer holds for one key at one instant, from [`Pacer::snapshot`].
///
/// For a pacer with a shared bucket (feature `redis`), this is this process's view: what it
/// learned from its own answers and from the gates other processes closed, not the shared
/// bucket's tokens (reading those would cost a round trip to Redis).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct KeySnapshot {
    /// The key's digest (12 hex digits of its SHA-256): the form every log line and event
    /// carries, never the key itself.
    pub key: String,
    /// The quota the key is paced to: what the server stated or what its 429s showed, else
    /// the configured rate, else nothing.
    pub model: QuotaModel,
    /// The configured rate that applies on top of the model, if any.
    pub configured: Option<Rate>,
    /// Whether a request is out alone to find something out (after a pause, before a
    /// rounded-up reset, on a key with no news yet), or the next one will be.
    pub probing: bool,
    /// What is left of the current window, net of the requests in flight, when the server
    /// stated it.
    pub remaining: Option<u64>,
    /// When the server's current window ends, as it stated it.
    pub reset_in: Option<Duration>,
    /// How long the key stays closed (a pause after a 429, a spent quota); `None`: open now.
    pub opens_in: Option<Duration>,
    /// Requests waiting for a permit on this key (the head of the queue included).
    pub queued: u64,
    /// Requests sent and not yet answered.
    pub in_flight: u64,
    /// Refusals seen on this key: 429s, and 503s (which the pacer treats alike).
    pub throttled: u64,
    /// Requests sent alone to find something out (see `probing`).
    pub probes: u64,
}

impl KeySnapshot {
    /// How long `requests` more requests on this key should take at the model's pace: the
    /// time until the key opens, then what is left of this window, then whole windows (or the
    /// configured rate). `None` when neither the model nor a configured rate gives a pace.
    pub fn eta(&self, requests: u64) -> Option<Duration> {
        let opens = self.opens_in.unwrap_or(Duration::ZERO);
        let windowed = self.model.windowed().filter(|(quota, _)| *quota > 0);
        if let Some((quota, window)) = windowed {
            let left = if self.opens_in.is_some() {
                0
            } else {
                self.remaining.unwrap_or(0)
            };
            if requests <= left {
                return Some(opens);
            }
            let beyond = requests - left;
            // The first window after this one begins at the reset (or when the key opens).
            let next = if left > 0 || self.opens_in.is_none() {
                self.reset_in.unwrap_or(window).max(opens)
            } else {
                opens
            };
            let windows = beyond.div_ceil(quota) - 1;
            let windows = u32::try_from(windows).unwrap_or(u32::MAX);
            return Some(next.saturating_add(window.saturating_mul(windows)));
        }
        let per_second = self
            .configured
            .map(|rate| rate.units_per_second())
            .or_else(|| self.model.per_second())?;
        (per_second > 0.0).then(|| opens + Duration::from_secs_f64(requests as f64 / per_second))
    }
}

impl Pacer {
    /// What the pacer holds for `key` now, or `None` if it holds nothing for it (never used,
    /// or dropped after a minute idle).
    ///
    /// Cheap enough to call every second from a progress bar: one lock of the key table, no
    /// allocation beyond the result, no call to a shared store.
    ///
    /// ```
    /// use reqwest_polite::pacing::{Pacer, QuotaModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pacer = Pacer::builder().build();
    /// assert!(pacer.snapshot("api.example.com:443").is_none());
    /// let permit = pacer.acquire("api.example.com:443", 1).await.unwrap();
    /// let snapshot = pacer.snapshot("api.example.com:443").unwrap();
    /// assert_eq!(snapshot.model, QuotaModel::Unknown);
    /// assert_eq!(snapshot.in_flight, 1);
    /// drop(permit);
    /// # }
    /// ```
    pub fn snapshot(&self, key: &str) -> Option<KeySnapshot> {
        let inner = self.inner();
        let now = inner.clock.now();
        let configured = inner.rate;
        inner.keys.with_existing(key, |state| {
            snapshot_of(key_digest(key), state, now, configured)
        })
    }

    /// Snapshots of at most `limit` keys the pacer holds (in no particular order), for a job
    /// that spreads over many keys. One lock of the key table for all of them, held while they
    /// are made (about a microsecond each): keep `limit` to what a screen shows.
    pub fn snapshots(&self, limit: usize) -> Vec<KeySnapshot> {
        let inner = self.inner();
        let now = inner.clock.now();
        let configured = inner.rate;
        inner.keys.each(limit, |key, state| {
            snapshot_of(key_digest(key), state, now, configured)
        })
    }
}

fn snapshot_of(key: String, state: &KeyState, now: Duration, rate: Option<Rate>) -> KeySnapshot {
    let learned = state.quota.snapshot(now);
    let model = match (learned.model, rate) {
        (super::snapshot::QuotaModel::Unknown, Some(rate)) => QuotaModel::Configured { rate },
        (model, _) => model,
    };
    KeySnapshot {
        key,
        model,
        configured: rate,
        probing: learned.probing,
        remaining: learned.remaining,
        reset_in: learned.reset_in,
        opens_in: learned.opens_in,
        queued: state.queued(),
        in_flight: learned.in_flight,
        throttled: state.throttled,
        probes: state.probes,
    }
}
