//! What the server told us about each key's quota: the "quota spent until T" gate, the quota
//! it states (adopted as a per-window budget), and the requests in flight against it.
//!
//! Pure arithmetic over an injected `now`; the pacer holds the lock and does the sleeping.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::headers::RateLimitInfo;

/// The verdict of the learned quota on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Reserved against the budget of window `epoch`.
    Reserved { epoch: u64 },
    /// The quota is spent until this time (on the pacer's clock).
    WaitUntil(Duration),
}

/// One key's learned quota.
#[derive(Debug, Default, Clone)]
pub(crate) struct KeyQuota {
    /// Nothing goes before this time: the server said the quota is spent (429, remaining 0).
    gate_until: Duration,
    limit: Option<u64>,
    window: Option<Duration>,
    /// Our estimate of what is left in the current window, net of our own reservations.
    budget: Option<u64>,
    reset_at: Option<Duration>,
    /// Bumped when a window ends: responses to requests of older windows are stale.
    epoch: u64,
    in_flight: u64,
    last_seen: Duration,
    /// Whether a key with no news yet sends one request alone first (see `PROBE_FOR`).
    probe: bool,
    /// Whether any response has been seen for this key.
    observed: bool,
    /// When the lone first request of a key with no news went out.
    probe_sent_at: Option<Duration>,
}

/// How long, at most, the other requests of a key with no news wait for its first response.
/// Until a response says what the quota is, a burst of concurrent tasks could only spend it
/// blindly (fifty workers, fifty requests, thirty 429s); one round trip of patience avoids that.
const PROBE_FOR: Duration = Duration::from_secs(2);
/// How often the waiting requests look again while the first one is out.
const PROBE_POLL: Duration = Duration::from_millis(5);

impl KeyQuota {
    /// Reserves `cost` against the budget, or says until when the quota is spent.
    pub(crate) fn try_reserve(&mut self, now: Duration, cost: u64) -> Admission {
        self.last_seen = now;
        if self.gate_until > now {
            return Admission::WaitUntil(self.gate_until);
        }
        self.roll(now);
        if self.probe && !self.observed && self.in_flight > 0 {
            let until = self.probe_sent_at.unwrap_or(now).saturating_add(PROBE_FOR);
            if now < until {
                return Admission::WaitUntil(now.saturating_add(PROBE_POLL).min(until));
            }
        }
        if !self.observed && self.in_flight == 0 {
            self.probe_sent_at = Some(now);
        }
        if let Some(budget) = self.budget {
            if budget >= cost {
                self.budget = Some(budget - cost);
            } else if let Some(reset_at) = self.reset_at.filter(|t| *t > now) {
                return Admission::WaitUntil(reset_at);
            }
            // A spent budget with no known reset: let it through, the server's answer
            // (a 429 with Retry-After, or fresh headers) will tell us more.
        }
        self.in_flight = self.in_flight.saturating_add(1);
        Admission::Reserved { epoch: self.epoch }
    }

    /// Gives back a reservation whose request was never sent.
    pub(crate) fn cancel(&mut self, epoch: u64, cost: u64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if epoch == self.epoch
            && let Some(budget) = self.budget
        {
            let refunded = budget.saturating_add(cost);
            self.budget = Some(self.limit.map_or(refunded, |l| refunded.min(l)));
        }
    }

    /// Ends a reservation whose request was sent but got no response (an error).
    pub(crate) fn abandon(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Learns from the response to a request reserved in window `epoch`. Returns the pause
    /// it put on the key, if any (to be shared with other processes).
    pub(crate) fn observe(
        &mut self,
        now: Duration,
        epoch: u64,
        too_many_requests: bool,
        info: &RateLimitInfo,
    ) -> Option<Duration> {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.last_seen = now;
        self.observed = true;
        if let Some(limit) = info.limit {
            self.limit = Some(limit);
        }
        if info.window.is_some() {
            self.window = info.window;
        }
        let mut pause = None;
        if too_many_requests {
            pause = info.server_wait().or(info.reset);
        }
        // A response from a window that has ended speaks of a quota that is gone.
        if epoch == self.epoch {
            if let Some(reset) = info.reset {
                // Servers round resets up to whole seconds, so each response bounds the true
                // reset from above: the earliest bound of the window is the tightest.
                let stated = now.saturating_add(reset);
                self.reset_at = Some(match self.reset_at {
                    Some(known) if known > now => known.min(stated),
                    _ => stated,
                });
            }
            if info.remaining == Some(0) && pause.is_none() {
                pause = self.reset_at.map(|at| at.saturating_sub(now));
            }
            if let Some(remaining) = info.remaining {
                self.budget = Some(match self.budget {
                    // Our own reservations are already taken off; others may have spent more.
                    Some(budget) => budget.min(remaining),
                    // First news: the requests still in flight may not be counted yet.
                    None => remaining.saturating_sub(self.in_flight),
                });
            }
        }
        let pause = pause.filter(|wait| !wait.is_zero());
        if let Some(wait) = pause {
            self.close_gate(now, wait);
        }
        pause
    }

    /// Pauses the key until `now + wait` (a later gate wins).
    pub(crate) fn close_gate(&mut self, now: Duration, wait: Duration) {
        self.gate_until = self.gate_until.max(now.saturating_add(wait));
    }

    /// When the known window has ended, starts the next one with the full stated quota.
    fn roll(&mut self, now: Duration) {
        let Some(reset_at) = self.reset_at else {
            return;
        };
        if reset_at > now {
            return;
        }
        self.epoch = self.epoch.wrapping_add(1);
        self.budget = self.limit;
        self.reset_at = match (self.limit, self.window) {
            (Some(_), Some(window)) if !window.is_zero() => {
                // Skip whole windows that passed while nobody asked.
                let behind = now.saturating_sub(reset_at).as_nanos() / window.as_nanos();
                let windows = u32::try_from(behind.saturating_add(1)).unwrap_or(u32::MAX);
                Some(reset_at.saturating_add(window.saturating_mul(windows)))
            }
            _ => None,
        };
    }

    /// True when the entry holds nothing worth keeping (memory stays bounded).
    fn is_idle(&self, now: Duration, idle_after: Duration) -> bool {
        self.in_flight == 0
            && self.gate_until <= now
            && self.reset_at.is_none_or(|t| t <= now)
            && now.saturating_sub(self.last_seen) >= idle_after
    }

    #[cfg(test)]
    fn budget(&self) -> Option<u64> {
        self.budget
    }
}

/// The learned quotas of every key, behind one lock (never held across an await).
#[derive(Debug, Default)]
pub(crate) struct LearnedQuotas {
    keys: Mutex<HashMap<String, KeyQuota>>,
    /// Whether new keys send one request alone before the others (only when learning).
    probe_new_keys: bool,
}

/// How long an entry without live facts is kept after its last use.
const IDLE_AFTER: Duration = Duration::from_secs(60);

impl LearnedQuotas {
    /// Quotas whose new keys probe first when `probe_new_keys` (the pacer learns from the
    /// server: without that, no response would ever end the probe).
    pub(crate) fn new(probe_new_keys: bool) -> Self {
        LearnedQuotas {
            keys: Mutex::default(),
            probe_new_keys,
        }
    }

    pub(crate) fn try_reserve(&self, key: &str, now: Duration, cost: u64) -> Admission {
        self.with(key, |q| q.try_reserve(now, cost))
    }

    pub(crate) fn cancel(&self, key: &str, epoch: u64, cost: u64) {
        self.with(key, |q| q.cancel(epoch, cost));
    }

    pub(crate) fn abandon(&self, key: &str) {
        self.with(key, KeyQuota::abandon);
    }

    pub(crate) fn observe(
        &self,
        key: &str,
        now: Duration,
        epoch: u64,
        too_many_requests: bool,
        info: &RateLimitInfo,
    ) -> Option<Duration> {
        self.with(key, |q| q.observe(now, epoch, too_many_requests, info))
    }

    pub(crate) fn close_gate(&self, key: &str, now: Duration, wait: Duration) {
        self.with(key, |q| q.close_gate(now, wait));
    }

    /// Drops entries that hold nothing live.
    pub(crate) fn prune(&self, now: Duration) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.retain(|_, q| !q.is_idle(now, IDLE_AFTER));
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn with<T>(&self, key: &str, f: impl FnOnce(&mut KeyQuota) -> T) -> T {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(quota) = keys.get_mut(key) {
            return f(quota);
        }
        let probe = self.probe_new_keys;
        f(keys.entry(key.to_owned()).or_insert_with(|| KeyQuota {
            probe,
            ..KeyQuota::default()
        }))
    }
}

#[cfg(test)]
mod tests;
