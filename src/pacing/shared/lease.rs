//! Tokens held in this process: taken from the store ahead of use and spent here, with what the
//! process learned about when asking again is worth a round trip.
//!
//! Two kinds of holding share one table. A *lease* (`SharedBucket::lease(K)`) is K tokens per
//! round trip, kept for later requests. A *batch* (a token bucket without a lease) is what the
//! head of a key's queue took for the requests queued behind it: each of them spends one as its turn comes, in
//! arrival order, and what is not spent within a short hold goes back to the store with the
//! next take ([`GiveBack`]), so a request dropped in the queue takes nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How long unused leased tokens are kept. Only so idle keys are forgotten: whenever they are
/// spent, a process never holds more than one lease, which is what bounds the overshoot.
pub(super) const LEASE_LIFETIME: Duration = Duration::from_secs(10);
/// The shortest hold of a batch's tokens: long enough for the queue to hand them out on a
/// loaded machine.
const BATCH_HOLD_MIN: Duration = Duration::from_millis(10);
/// The longest hold of a batch's tokens.
const BATCH_HOLD_MAX: Duration = Duration::from_millis(100);
/// Past this many keys, entries with nothing live are dropped.
const PRUNE_ABOVE: usize = 1024;

/// What the store had left after a take: tokens (fractional; infinite when it knows no
/// bound) at a time of its own clock (µs; 0 when it gives none, and then nothing goes back).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Left {
    pub(crate) tokens: f64,
    pub(crate) at_micros: u64,
}

impl Left {
    /// A store that knows no bound (the learned count before anything is known).
    pub(crate) const UNBOUNDED: Left = Left {
        tokens: f64::INFINITY,
        at_micros: 0,
    };
}

/// Tokens taken and not used, to put back in the store with the next take: how many, and what
/// the bucket held just after they were taken. The store puts back only what the bucket could
/// not have refilled since (see `bucket_take.lua`), so a late give-back never lets more
/// through than the bucket would have.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct GiveBack {
    pub(crate) tokens: u64,
    pub(crate) after: Left,
}

#[derive(Debug, Default, Clone, Copy)]
struct Held {
    tokens: u64,
    /// The held tokens go back to the store from then on.
    lapses_at: Duration,
    /// What the store had left when they were taken.
    after: Option<Left>,
    /// Asking the store before this time would most likely be refused, so the wait is taken
    /// here instead of a refused round trip.
    ask_again_at: Duration,
    /// Recent refusals (halved at each lease): how many other processes take turns with us.
    refusals: u32,
    /// The shared gate was closed until then when last heard of.
    gated_until: Duration,
    /// Tokens that lapsed, waiting for the next take to carry them back.
    give_back: Option<GiveBack>,
}

impl Held {
    fn is_live(&self, now: Duration) -> bool {
        self.tokens > 0
            || self.give_back.is_some()
            || self.ask_again_at > now
            || self.gated_until > now
    }

    /// Moves the held tokens to the next give-back (nothing goes back without a time).
    fn release(&mut self) {
        let tokens = std::mem::take(&mut self.tokens);
        if tokens == 0 {
            return;
        }
        if let Some(after) = self.after.filter(|after| after.at_micros > 0) {
            self.keep(GiveBack { tokens, after });
        }
    }

    /// Keeps `back` for the next take. Two give-backs of one take add up; of two takes (which
    /// the order of takes and releases rules out), the later is kept: what one describes is
    /// not what the other's tokens could go back as, and a give-back lost is only quota unused.
    fn keep(&mut self, back: GiveBack) {
        self.give_back = Some(match self.give_back {
            Some(earlier) if earlier.after == back.after => GiveBack {
                tokens: earlier.tokens + back.tokens,
                ..back
            },
            _ => back,
        });
    }
}

/// What the held tokens can do for one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Spend {
    Spent,
    Gated(Duration),
    AskLater(Duration),
    /// Ask the store, carrying this give-back.
    AskStore(Option<GiveBack>),
}

/// The held tokens of every key of one shared bucket.
#[derive(Debug)]
pub(super) struct Leases {
    /// The bucket's time per token (zero without a rate).
    period: Duration,
    /// The configured lease (1: none, takes are batched for the queue instead).
    lease: u64,
    keys: Mutex<HashMap<String, Held>>,
}

impl Leases {
    pub(super) fn new(period: Duration, lease: u32) -> Leases {
        Leases {
            period,
            lease: u64::from(lease.max(1)),
            keys: Mutex::default(),
        }
    }

    /// Whether a lease is configured (otherwise takes are batched for the queue).
    pub(super) fn leases(&self) -> bool {
        self.lease > 1
    }

    /// How long held tokens stay usable: a lease's lifetime, or a batch's hold, one token's
    /// refill time within 10–100 ms (spent within one token's time of their take, a batch
    /// lets the processes run ahead of the bucket by at most one token each).
    fn lifetime(&self) -> Duration {
        if self.leases() {
            LEASE_LIFETIME
        } else {
            self.period.clamp(BATCH_HOLD_MIN, BATCH_HOLD_MAX)
        }
    }

    /// Spends `cost` from `key`'s held tokens, or says why not.
    pub(super) fn spend(&self, key: &str, cost: u64, now: Duration) -> Spend {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let Some(held) = keys.get_mut(key) else {
            return Spend::AskStore(None);
        };
        if held.gated_until > now {
            return Spend::Gated(held.gated_until - now);
        }
        if held.lapses_at <= now {
            held.release();
        }
        if held.tokens >= cost {
            held.tokens -= cost;
            Spend::Spent
        } else if held.ask_again_at > now {
            Spend::AskLater(held.ask_again_at - now)
        } else {
            // The next take replaces what is held: too few for this request, they go back.
            held.release();
            Spend::AskStore(held.give_back.take())
        }
    }

    /// Puts back a give-back whose take never happened (the store was set aside).
    pub(super) fn keep_give_back(&self, key: &str, back: GiveBack) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.entry(key.to_owned()).or_default().keep(back);
    }

    /// Keeps `granted` tokens less this request's `cost`. The next take is not asked for
    /// before the store (left with `left`) holds what it will ask for: a lease, or the next
    /// request's token.
    pub(super) fn fill(&self, key: &str, granted: u64, cost: u64, left: Left, now: Duration) {
        let next = self.lease as f64;
        let missing = (next - left.tokens).max(0.0);
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if keys.len() >= PRUNE_ABOVE {
            keys.retain(|_, held| held.is_live(now));
        }
        let held = keys.entry(key.to_owned()).or_default();
        held.tokens = granted.saturating_sub(cost);
        held.lapses_at = now.saturating_add(self.lifetime());
        held.after = Some(left);
        // Having just had a lease, this process yields: it asks again up to one lease's refill
        // after the store could serve it, so a process that was refused gets the next one.
        // Batches do not yield: their tokens are for requests already waiting.
        let yielding = if self.leases() && missing > 0.0 {
            self.refill(next)
                .mul_f64(rand::RngExt::random_range(&mut rand::rng(), 0.0..=1.0))
        } else {
            Duration::ZERO
        };
        held.ask_again_at = now
            .saturating_add(self.refill(missing))
            .saturating_add(yielding);
        held.refusals = 0;
    }

    /// Holds `key`'s tokens back until `until`: the shared gate is closed.
    pub(super) fn hold(&self, key: &str, until: Duration) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let held = keys.entry(key.to_owned()).or_default();
        held.gated_until = held.gated_until.max(until);
    }

    /// Processes refused a lease are all told the same wait and would collide again: each
    /// adds a random delay of up to one lease's refill, divided by its refusals in a row (at
    /// most 8), so the process refused longest asks soonest and processes take turns; the
    /// process that won the last lease yields (see [`fill`](Self::fill)). Without a lease
    /// the store's wait is kept.
    ///
    /// The bound: a process refused n times in a row waits at most the store's wait plus
    /// `refill / n` per ask, and the winners of the leases in between yield up to a refill
    /// each, so a waiting process is served after at most a few leases' refill time.
    pub(super) fn spread_refused(&self, key: &str, wait: Duration) -> Duration {
        if !self.leases() {
            return wait;
        }
        let refusals = {
            let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
            let held = keys.entry(key.to_owned()).or_default();
            held.refusals = held.refusals.saturating_add(1).min(8);
            held.refusals
        };
        let reach = self.refill(self.lease as f64) / refusals;
        let share = rand::RngExt::random_range(&mut rand::rng(), 0.0..=1.0);
        wait.saturating_add(reach.mul_f64(share))
    }

    /// The time the bucket takes to refill `tokens`.
    fn refill(&self, tokens: f64) -> Duration {
        if tokens.is_finite() {
            self.period.mul_f64(tokens.clamp(0.0, f64::from(u32::MAX)))
        } else {
            Duration::ZERO
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn left(tokens: f64) -> Left {
        Left {
            tokens,
            at_micros: 1_000,
        }
    }

    #[test]
    fn a_lease_is_spent_then_asks_again_once_the_store_has_refilled_it() {
        let leases = Leases::new(MS * 10, 5);
        assert_eq!(leases.spend("k", 1, Duration::ZERO), Spend::AskStore(None));
        // A lease of 5 for a request of 1; the store has 2 left, so 3 more take 30 ms, and this
        // process yields up to a lease's refill (50 ms) more.
        leases.fill("k", 5, 1, left(2.0), Duration::ZERO);
        for _ in 0..4 {
            assert_eq!(leases.spend("k", 1, MS), Spend::Spent);
        }
        let Spend::AskLater(wait) = leases.spend("k", 1, MS) else {
            panic!("the spent lease should ask later");
        };
        assert!(wait >= MS * 29 && wait <= MS * 79, "{wait:?}");
        assert_eq!(leases.spend("k", 1, MS * 80), Spend::AskStore(None));
    }

    #[test]
    fn a_held_lease_waits_for_the_gate_and_an_old_one_goes_back() {
        let leases = Leases::new(MS * 10, 5);
        leases.fill("k", 5, 0, left(5.0), Duration::ZERO);
        leases.hold("k", MS * 500);
        assert_eq!(leases.spend("k", 1, MS * 100), Spend::Gated(MS * 400));
        assert_eq!(leases.spend("k", 1, MS * 500), Spend::Spent);
        // The 4 left lapse; the next take carries them back.
        assert_eq!(
            leases.spend("k", 1, LEASE_LIFETIME),
            Spend::AskStore(Some(GiveBack {
                tokens: 4,
                after: left(5.0)
            }))
        );
        assert_eq!(leases.spend("k", 1, LEASE_LIFETIME), Spend::AskStore(None));
    }

    #[test]
    fn a_batch_is_spent_by_the_queue_and_what_is_left_goes_back_after_its_hold() {
        // 10 ms per token: a batch is held 10 ms.
        let leases = Leases::new(MS * 10, 1);
        assert!(!leases.leases());
        // The head took 4 (itself and 3 queued), and the store had 0.25 left: the next token
        // is due in 7.5 ms, with no yielding.
        leases.fill("k", 4, 1, left(0.25), Duration::ZERO);
        assert_eq!(leases.spend("k", 1, MS), Spend::Spent);
        assert_eq!(leases.spend("k", 1, MS * 2), Spend::Spent);
        // One queued request was dropped: its token lapses with the hold and goes back.
        assert_eq!(
            leases.spend("k", 1, MS * 10),
            Spend::AskStore(Some(GiveBack {
                tokens: 1,
                after: left(0.25)
            }))
        );
        leases.fill("k", 1, 1, left(0.5), MS * 10);
        assert_eq!(leases.spend("k", 1, MS * 11), Spend::AskLater(MS * 4));
    }

    #[test]
    fn a_batch_from_a_store_without_a_clock_lapses_without_a_give_back() {
        let leases = Leases::new(Duration::ZERO, 1);
        leases.fill("k", 3, 1, Left::UNBOUNDED, Duration::ZERO);
        assert_eq!(leases.spend("k", 1, BATCH_HOLD_MIN), Spend::AskStore(None));
    }

    #[test]
    fn too_few_held_tokens_for_a_costly_request_go_back_with_its_take() {
        let leases = Leases::new(MS * 10, 1);
        leases.fill("k", 3, 1, left(0.0), Duration::ZERO);
        assert_eq!(
            leases.spend("k", 3, MS * 10),
            Spend::AskStore(Some(GiveBack {
                tokens: 2,
                after: left(0.0)
            }))
        );
    }

    #[test]
    fn the_process_refused_longest_asks_soonest() {
        let wait = MS * 50;
        assert_eq!(Leases::new(MS * 10, 1).spread_refused("k", wait), wait);
        let leases = Leases::new(MS * 10, 5);
        for refusal in 1..=10u32 {
            let spread = leases.spread_refused("k", wait);
            let reach = MS * 50 / refusal.min(8);
            assert!(spread >= wait && spread <= wait + reach, "{spread:?}");
        }
        // A lease resets the count: the next refusal spreads over a whole refill again.
        let spreads: Vec<Duration> = (0..200)
            .map(|_| {
                leases.fill("k", 5, 1, left(5.0), Duration::ZERO);
                leases.spread_refused("k", wait)
            })
            .collect();
        assert!(spreads.iter().any(|s| *s > wait + MS * 25), "{spreads:?}");
    }

    #[test]
    fn a_process_that_just_had_a_lease_yields_up_to_one_refill() {
        let leases = Leases::new(MS * 10, 5);
        // The store had 2 left of the 5 asked for: 3 missing take 30 ms, then up to 50 ms more.
        let asks: Vec<Duration> = (0..200)
            .map(|_| {
                leases.fill("k", 5, 5, left(2.0), Duration::ZERO);
                match leases.spend("k", 1, MS) {
                    Spend::AskLater(wait) => wait + MS,
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
