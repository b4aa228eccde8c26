//! A retry budget: retries may be at most a fraction of recent requests, plus a small floor.
//!
//! A retry count alone lets an outage multiply traffic by `1 + max_retries`; a budget keeps
//! the extra load to `ratio` (20% by default) of what the client sends anyway, however many
//! requests fail at once, while the floor keeps a quiet client able to retry at all.
//!
//! Time is tokio's, as the retry loop's: under paused time both agree.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

const SLOTS: usize = 10;

/// A budget shared by every request of one client (clones of the middleware share it).
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use reqwest_polite::retry::RetryBudget;
///
/// // 10% of requests, no floor, over 10 s.
/// let budget = RetryBudget::new(Duration::from_secs(10), 0.1, 0);
/// let now = Instant::now();
/// for _ in 0..20 {
///     budget.deposit_at(now);
/// }
/// assert!(budget.try_withdraw_at(now));
/// assert!(budget.try_withdraw_at(now));
/// assert!(!budget.try_withdraw_at(now)); // 2 retries = 10% of 20
/// ```
#[derive(Debug)]
pub struct RetryBudget {
    window: Duration,
    ratio: f64,
    min_per_sec: u32,
    state: Mutex<Slots>,
}

#[derive(Debug)]
struct Slots {
    origin: Option<Instant>,
    /// (slot index since origin, requests, retries), one entry per slot of the ring.
    ring: [(u64, u64, u64); SLOTS],
}

impl Default for RetryBudget {
    /// 20% of the requests of the last 10 s, plus 10 retries per second.
    fn default() -> Self {
        RetryBudget::new(Duration::from_secs(10), 0.2, 10)
    }
}

impl RetryBudget {
    /// A budget allowing, over a sliding `window`, `ratio` × requests + `min_per_sec` × window
    /// retries. A zero window is taken as 1 s; the ratio is clamped to `[0, 1000]`.
    pub fn new(window: Duration, ratio: f64, min_per_sec: u32) -> Self {
        let window = if window.is_zero() {
            Duration::from_secs(1)
        } else {
            window
        };
        let ratio = if ratio.is_nan() {
            0.0
        } else {
            ratio.clamp(0.0, 1000.0)
        };
        RetryBudget {
            window,
            ratio,
            min_per_sec,
            state: Mutex::new(Slots {
                origin: None,
                ring: [(u64::MAX, 0, 0); SLOTS],
            }),
        }
    }

    /// Records one first attempt (not a retry) at `now`.
    pub fn deposit_at(&self, now: Instant) {
        let mut slots = self.lock();
        let slot = self.slot_of(&mut slots, now);
        let entry = slots.current(slot);
        entry.1 = entry.1.saturating_add(1);
    }

    /// Takes one retry from the budget at `now`, if it has one left.
    pub fn try_withdraw_at(&self, now: Instant) -> bool {
        let mut slots = self.lock();
        let slot = self.slot_of(&mut slots, now);
        let (requests, retries) = slots.totals(slot);
        let floor = self.min_per_sec as f64 * self.window.as_secs_f64();
        let allowed = floor + self.ratio * requests as f64;
        if (retries as f64) + 1.0 > allowed {
            return false;
        }
        let entry = slots.current(slot);
        entry.2 = entry.2.saturating_add(1);
        true
    }

    /// [`deposit_at`](Self::deposit_at) now.
    pub fn deposit(&self) {
        self.deposit_at(Instant::now());
    }

    /// [`try_withdraw_at`](Self::try_withdraw_at) now.
    pub fn try_withdraw(&self) -> bool {
        self.try_withdraw_at(Instant::now())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        // A panic elsewhere cannot leave the counters inconsistent: keep using them.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn slot_of(&self, slots: &mut Slots, now: Instant) -> u64 {
        let origin = *slots.origin.get_or_insert(now);
        let slot_len = self.window.as_nanos() / SLOTS as u128;
        let since = now.saturating_duration_since(origin).as_nanos();
        u64::try_from(since / slot_len.max(1)).unwrap_or(u64::MAX)
    }
}

impl Slots {
    fn current(&mut self, slot: u64) -> &mut (u64, u64, u64) {
        let entry = &mut self.ring[(slot % SLOTS as u64) as usize];
        if entry.0 != slot {
            *entry = (slot, 0, 0);
        }
        entry
    }

    /// Requests and retries in the `SLOTS` slots ending at `slot`.
    fn totals(&self, slot: u64) -> (u64, u64) {
        self.ring
            .iter()
            .filter(|(s, _, _)| *s != u64::MAX && *s <= slot && slot - *s < SLOTS as u64)
            .fold((0, 0), |(req, ret), (_, r, t)| {
                (req.saturating_add(*r), ret.saturating_add(*t))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_allows_retries_without_requests() {
        let budget = RetryBudget::new(Duration::from_secs(2), 0.0, 3);
        let now = Instant::now();
        let granted = (0..10).filter(|_| budget.try_withdraw_at(now)).count();
        assert_eq!(granted, 6, "3 per second over 2 s");
    }

    #[test]
    fn old_requests_leave_the_window() {
        let budget = RetryBudget::new(Duration::from_secs(10), 0.5, 0);
        let t0 = Instant::now();
        for _ in 0..10 {
            budget.deposit_at(t0);
        }
        assert!(budget.try_withdraw_at(t0));
        // 11 s later the deposits of t0 are out of the window.
        assert!(!budget.try_withdraw_at(t0 + Duration::from_secs(11)));
    }

    #[test]
    fn ratio_bounds_retries_under_an_outage() {
        let budget = RetryBudget::default();
        let t0 = Instant::now();
        let mut retries = 0;
        // 1,000 requests over 10 s, all failing, each wanting 3 retries.
        for i in 0..1000u64 {
            let now = t0 + Duration::from_millis(i * 10);
            budget.deposit_at(now);
            for _ in 0..3 {
                if budget.try_withdraw_at(now) {
                    retries += 1;
                }
            }
        }
        // 20% of ~1000 requests plus a floor of 10/s × 10 s.
        assert!(retries <= 300, "{retries} retries");
        assert!(retries >= 250, "{retries} retries");
    }
}
