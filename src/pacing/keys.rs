//! The pacer's one table of per-key state: each key's queue (whose turn it is), its learned
//! quota, and its configured-rate bucket, under one lock with one eviction rule.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};

use super::learned::KeyQuota;
use super::local::LocalBucket;
use super::scope::ScopeTable;
use crate::observe::KeyLabel;
use crate::time::Clock;
use crate::time::Rate;

/// How long an entry without live state is kept after its last use.
pub(crate) const IDLE_AFTER: Duration = Duration::from_secs(60);
/// The most keys held. Past it, every entry without live state is dropped at once, however
/// recently used (what is lost is learned facts that the next responses restate).
pub(crate) const MAX_KEYS: usize = 1_000_000;

/// One key's queue: first come, first served.
///
/// The turn is a one-permit semaphore (tokio's is fair and cancellation-safe): a request takes
/// the turn, acts on the key's buckets until it may go, then passes the turn on. Only the head
/// of the queue looks at the buckets; the others wait to be woken, in arrival order. A waiter
/// dropped in the queue leaves it whole; a head dropped while it holds the turn passes it on.
#[derive(Debug)]
pub(crate) struct Queue {
    pub(crate) turn: Semaphore,
    /// News about the key (a response came back): the head looks again at once.
    pub(crate) news: Notify,
}

/// Everything the pacer holds for one key.
pub(crate) struct KeyState {
    pub(crate) queue: Arc<Queue>,
    pub(crate) quota: KeyQuota,
    /// The configured rate's bucket, when it is per key.
    pub(crate) local: Option<LocalBucket>,
    /// Refusals (429, 503) seen, and requests sent alone to find something out.
    pub(crate) throttled: u64,
    pub(crate) probes: u64,
    /// A pause was told to the event hook: its end is told with the next admission.
    pub(crate) pause_told: bool,
    /// Requests reserved here whose take from a shared learned count is on its way: what a
    /// note tells the other processes is left counts them back in, or they would be taken
    /// twice from the count (once by the note, once by their take).
    pub(crate) taking: u64,
    /// The key's label on the queue gauge (feature `metrics`).
    pub(crate) label: KeyLabel,
}

impl KeyState {
    /// Requests waiting for a permit (the head included): each holds the queue while it waits.
    pub(crate) fn queued(&self) -> u64 {
        Arc::strong_count(&self.queue).saturating_sub(1) as u64
    }

    /// Whether the entry holds nothing worth keeping at `now`.
    fn is_idle(&self, now: Duration, idle_after: Duration) -> bool {
        // Nobody waits or holds the turn: the table's own reference is the only one.
        Arc::strong_count(&self.queue) == 1
            && self.quota.is_idle(now, idle_after)
            && self.local.as_ref().is_none_or(|b| b.is_full(now))
    }
}

/// Every key's state.
pub(crate) struct KeyTable {
    keys: Mutex<HashMap<Box<str>, KeyState>>,
    clock: Arc<dyn Clock>,
    /// The configured rate, when each key has its own bucket.
    per_key_rate: Option<Rate>,
    /// Whether a new key's first request goes alone.
    probe_new: bool,
    /// Whether other processes spend each key's quota too (see
    /// [`KeyQuota::counted_with_others`]).
    counted_with_others: bool,
    /// Which partitions share one quota entry (see the `scope` module).
    pub(crate) scopes: Arc<ScopeTable>,
}

impl KeyTable {
    pub(crate) fn new(
        clock: Arc<dyn Clock>,
        per_key_rate: Option<Rate>,
        probe_new: bool,
    ) -> KeyTable {
        KeyTable {
            keys: Mutex::default(),
            clock,
            per_key_rate,
            probe_new,
            counted_with_others: false,
            scopes: Arc::default(),
        }
    }

    /// Every key's quota is spent by other processes too: they share what they learn through
    /// a store (see [`KeyQuota::counted_with_others`]).
    pub(crate) fn counted_with_others(self, shared: bool) -> KeyTable {
        KeyTable {
            counted_with_others: shared,
            ..self
        }
    }

    /// The key of the quota entry `partition` draws on: its own, unless it shares a quota.
    pub(crate) fn quota_key(&self, partition: &str) -> Option<Arc<str>> {
        self.scopes.quota_key(partition)
    }

    /// Whether `partition` no longer draws on `key` (it joined or left a shared quota).
    pub(crate) fn moved(&self, partition: &str, key: &str) -> bool {
        self.scopes.moved(partition, key)
    }

    /// The queue of `key` (the entry is made when new).
    #[cfg(test)]
    pub(crate) fn queue(&self, key: &str) -> Arc<Queue> {
        self.with(key, |state| state.queue.clone())
    }

    /// Runs `f` on `key`'s state, made when new, under the table's lock (never held across an
    /// await).
    pub(crate) fn with<T>(&self, key: &str, f: impl FnOnce(&mut KeyState) -> T) -> T {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = keys.get_mut(key) {
            return f(state);
        }
        if keys.len() >= MAX_KEYS {
            let now = self.clock.now();
            keys.retain(|_, state| !state.is_idle(now, Duration::ZERO));
        }
        let mut quota = KeyQuota::new(self.probe_new);
        quota.counted_with_others(self.counted_with_others);
        let state = KeyState {
            queue: Arc::new(Queue {
                turn: Semaphore::new(1),
                news: Notify::new(),
            }),
            quota,
            local: self
                .per_key_rate
                .map(|rate| LocalBucket::new(rate, self.clock.clone())),
            throttled: 0,
            probes: 0,
            pause_told: false,
            taking: 0,
            label: KeyLabel::default(),
        };
        f(keys.entry(key.into()).or_insert(state))
    }

    /// Runs `f` on `key`'s state if there is one.
    pub(crate) fn with_existing<T>(
        &self,
        key: &str,
        f: impl FnOnce(&mut KeyState) -> T,
    ) -> Option<T> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.get_mut(key).map(f)
    }

    /// `f` over at most `limit` keys' states, under one lock.
    pub(crate) fn each<T>(&self, limit: usize, mut f: impl FnMut(&str, &KeyState) -> T) -> Vec<T> {
        let keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::with_capacity(limit.min(keys.len()));
        out.extend(keys.iter().take(limit).map(|(key, state)| f(key, state)));
        out
    }

    /// Drops entries idle for [`IDLE_AFTER`].
    pub(crate) fn prune(&self, now: Duration) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.retain(|_, state| !state.is_idle(now, IDLE_AFTER));
        self.scopes.prune(now, IDLE_AFTER);
        if keys.capacity() > 2 * keys.len().max(1024) {
            keys.shrink_to_fit();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pacing::learned::Admission;
    use crate::time::ManualClock;
    use crate::time::nz;

    fn table(rate: Option<Rate>) -> (KeyTable, ManualClock) {
        let clock = ManualClock::new();
        (KeyTable::new(Arc::new(clock.clone()), rate, false), clock)
    }

    fn reserve(table: &KeyTable, key: &str, now: Duration) {
        let admission = table.with(key, |s| s.quota.try_reserve(now, 1));
        let Admission::Reserved(ticket) = admission else {
            panic!("{key} was not admitted: {admission:?}");
        };
        table.with(key, |s| s.quota.abandon(ticket));
    }

    #[test]
    fn prune_keeps_live_entries_and_drops_idle_ones() {
        let (table, _) = table(None);
        reserve(&table, "idle", Duration::ZERO);
        reserve(&table, "gated", Duration::ZERO);
        table.with("gated", |s| {
            s.quota
                .close_gate(Duration::ZERO, Duration::from_secs(1000))
        });
        let queued = table.queue("queued");
        table.prune(Duration::from_secs(61));
        assert_eq!(table.len(), 2);
        assert!(table.with_existing("idle", |_| ()).is_none());
        drop(queued);
        table.prune(Duration::from_secs(61));
        assert_eq!(table.len(), 1);
        assert!(matches!(
            table.with("gated", |s| s.quota.try_reserve(Duration::from_secs(61), 1)),
            Admission::WaitUntil(_)
        ));
    }

    #[test]
    fn a_key_whose_bucket_is_still_refilling_is_kept() {
        let (table, clock) = table(Some(Rate::new(nz(1), Duration::from_secs(120)).unwrap()));
        table.with("k", |s| s.local.as_mut().unwrap().try_take(1));
        clock.advance(Duration::from_secs(61));
        table.prune(clock.now());
        assert_eq!(table.len(), 1);
        clock.advance(Duration::from_secs(60));
        table.prune(clock.now());
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn the_table_never_holds_more_than_a_million_idle_keys() {
        let (table, _clock) = table(None);
        for i in 0..MAX_KEYS + 1000 {
            table.queue(&format!("tenant-{i}"));
        }
        // Past the bound, idle entries make room however recent: the table stays bounded.
        assert!(table.len() <= MAX_KEYS, "{}", table.len());
        // A live key survives the purge.
        let live = table.queue("live");
        for i in 0..MAX_KEYS {
            table.queue(&format!("other-{i}"));
        }
        assert!(table.len() <= MAX_KEYS);
        assert!(table.with_existing("live", |_| ()).is_some());
        drop(live);
    }
}
