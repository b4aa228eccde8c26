//! Leases: tokens taken from the store ahead of use and spent in this process, with what the
//! process learned about when asking again is worth a round trip.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How long unused leased tokens are kept. Only so idle keys are forgotten: whenever they are
/// spent, a process never holds more than one lease, which is what bounds the overshoot.
pub(super) const LEASE_LIFETIME: Duration = Duration::from_secs(10);
/// Past this many keys, entries with nothing live are dropped.
const PRUNE_ABOVE: usize = 1024;

#[derive(Debug, Default, Clone, Copy)]
struct Lease {
    tokens: u64,
    lapses_at: Duration,
    /// Asking the store before this time would most likely be refused, so the wait is taken
    /// here instead of a refused round trip.
    ask_again_at: Duration,
    /// Recent refusals (halved at each lease): how many other processes take turns with us.
    refusals: u32,
    /// The shared gate was closed until then when last read.
    gated_until: Duration,
}

impl Lease {
    fn is_live(&self, now: Duration) -> bool {
        self.lapses_at > now || self.ask_again_at > now || self.gated_until > now
    }
}

/// What the lease can do for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LeaseSpend {
    Spent,
    Gated(Duration),
    AskLater(Duration),
    AskStore,
}

/// The leases of every key of one shared bucket; `period` is the bucket's time per token.
#[derive(Debug)]
pub(super) struct Leases {
    period: Duration,
    keys: Mutex<HashMap<String, Lease>>,
}

impl Leases {
    pub(super) fn new(period: Duration) -> Leases {
        Leases {
            period,
            keys: Mutex::default(),
        }
    }

    /// Spends `cost` from `key`'s lease, or says why not.
    pub(super) fn spend(&self, key: &str, cost: u64, now: Duration) -> LeaseSpend {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let Some(lease) = keys.get_mut(key) else {
            return LeaseSpend::AskStore;
        };
        if lease.gated_until > now {
            return LeaseSpend::Gated(lease.gated_until - now);
        }
        if lease.lapses_at <= now {
            lease.tokens = 0;
        }
        if lease.tokens >= cost {
            lease.tokens -= cost;
            LeaseSpend::Spent
        } else if lease.ask_again_at > now {
            LeaseSpend::AskLater(lease.ask_again_at - now)
        } else {
            LeaseSpend::AskStore
        }
    }

    /// Keeps what is left of a lease of `want` after this request's `cost`; the next lease is
    /// not asked for before the store (left with `store_remaining`) has refilled one.
    pub(super) fn fill(
        &self,
        key: &str,
        want: u64,
        cost: u64,
        store_remaining: u64,
        now: Duration,
    ) {
        let missing = want.saturating_sub(store_remaining);
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if keys.len() >= PRUNE_ABOVE {
            keys.retain(|_, lease| lease.is_live(now));
        }
        let lease = keys.entry(key.to_owned()).or_default();
        lease.tokens = want.saturating_sub(cost);
        lease.lapses_at = now.saturating_add(LEASE_LIFETIME);
        // Having just had a lease, this process yields: it asks again up to one lease's refill
        // after the store could serve it, so a process that was refused gets the next one.
        let yielding = if missing > 0 {
            self.refill(want)
                .mul_f64(rand::RngExt::random_range(&mut rand::rng(), 0.0..=1.0))
        } else {
            Duration::ZERO
        };
        lease.ask_again_at = now
            .saturating_add(self.refill(missing))
            .saturating_add(yielding);
        lease.refusals = 0;
    }

    /// Holds `key`'s lease back until `until`: the shared gate is closed.
    pub(super) fn hold(&self, key: &str, until: Duration) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let lease = keys.entry(key.to_owned()).or_default();
        lease.gated_until = lease.gated_until.max(until);
    }

    /// Processes refused a lease are all told the same wait and would collide again: each
    /// adds a random delay of up to one lease's refill, divided by its refusals in a row (at
    /// most 8), so the process refused longest asks soonest and processes take turns; the
    /// process that won the last lease yields (see [`fill`](Self::fill)). Single requests (no
    /// lease) keep the store's wait.
    ///
    /// The bound: a process refused n times in a row waits at most the store's wait plus
    /// `refill / n` per ask, and the winners of the leases in between yield up to a refill
    /// each, so a waiting process is served after at most a few leases' refill time.
    pub(super) fn spread_refused(&self, key: &str, want: u64, wait: Duration) -> Duration {
        if want <= 1 {
            return wait;
        }
        let refusals = {
            let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
            let lease = keys.entry(key.to_owned()).or_default();
            lease.refusals = lease.refusals.saturating_add(1).min(8);
            lease.refusals
        };
        let reach = self.refill(want) / refusals;
        let share = rand::RngExt::random_range(&mut rand::rng(), 0.0..=1.0);
        wait.saturating_add(reach.mul_f64(share))
    }

    /// The time the bucket takes to refill `tokens`.
    fn refill(&self, tokens: u64) -> Duration {
        self.period
            .saturating_mul(u32::try_from(tokens).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_lease_is_spent_then_asks_again_once_the_store_has_refilled_it() {
        let leases = Leases::new(MS * 10);
        assert_eq!(leases.spend("k", 1, Duration::ZERO), LeaseSpend::AskStore);
        // A lease of 5 for a request of 1; the store has 2 left, so 3 more take 30 ms, and this
        // process yields up to a lease's refill (50 ms) more.
        leases.fill("k", 5, 1, 2, Duration::ZERO);
        for _ in 0..4 {
            assert_eq!(leases.spend("k", 1, MS), LeaseSpend::Spent);
        }
        let LeaseSpend::AskLater(wait) = leases.spend("k", 1, MS) else {
            panic!("the spent lease should ask later");
        };
        assert!(wait >= MS * 29 && wait <= MS * 79, "{wait:?}");
        assert_eq!(leases.spend("k", 1, MS * 80), LeaseSpend::AskStore);
    }

    #[test]
    fn a_held_lease_waits_for_the_gate_and_an_old_one_lapses() {
        let leases = Leases::new(MS * 10);
        leases.fill("k", 5, 0, 5, Duration::ZERO);
        leases.hold("k", MS * 500);
        assert_eq!(leases.spend("k", 1, MS * 100), LeaseSpend::Gated(MS * 400));
        assert_eq!(leases.spend("k", 1, MS * 500), LeaseSpend::Spent);
        assert_eq!(leases.spend("k", 1, LEASE_LIFETIME), LeaseSpend::AskStore);
    }

    #[test]
    fn the_process_refused_longest_asks_soonest() {
        let leases = Leases::new(MS * 10);
        let wait = MS * 50;
        assert_eq!(leases.spread_refused("k", 1, wait), wait);
        for refusal in 1..=10u32 {
            let spread = leases.spread_refused("k", 5, wait);
            let reach = MS * 50 / refusal.min(8);
            assert!(spread >= wait && spread <= wait + reach, "{spread:?}");
        }
        // A lease resets the count: the next refusal spreads over a whole refill again.
        leases.fill("k", 5, 1, 5, Duration::ZERO);
        let spreads: Vec<Duration> = (0..200)
            .map(|_| {
                leases.fill("k", 5, 1, 5, Duration::ZERO);
                leases.spread_refused("k", 5, wait)
            })
            .collect();
        assert!(spreads.iter().any(|s| *s > wait + MS * 25), "{spreads:?}");
    }

    #[test]
    fn a_process_that_just_had_a_lease_yields_up_to_one_refill() {
        let leases = Leases::new(MS * 10);
        // The store had 2 left of the 5 asked for: 3 missing take 30 ms, then up to 50 ms more.
        let asks: Vec<Duration> = (0..200)
            .map(|_| {
                leases.fill("k", 5, 5, 2, Duration::ZERO);
                match leases.spend("k", 1, MS) {
                    LeaseSpend::AskLater(wait) => wait + MS,
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        assert!(
            asks.iter().all(|a| *a >= MS * 30 && *a <= MS * 80),
            "{asks:?}"
        );
        assert!(asks.iter().any(|a| *a > MS * 55), "{asks:?}");
    }
}
