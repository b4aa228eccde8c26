//! Every quota a server states at once, beside the governing one.
//!
//! A response may state several quotas (`"burst";q=100;w=60, "daily";q=1000;w=86400`), in
//! several units: requests per window, content bytes per window, requests in flight. The
//! governing quota (the one with the fewest requests left) gets the full treatment of the
//! parent module: its budget, its gate, the early probe of a whole-second reset. Each of the
//! others is held here, in its own unit and window, so that none of them is overrun while
//! another governs:
//!
//! - a quota of **requests** keeps its own count of what is left until its own reset, taken
//!   down by each request we send;
//! - a quota of **content bytes** counts down by the bytes each request declares (its
//!   `Content-Length`, or its body's length when the body is in memory); a request that
//!   declares none costs none;
//! - a quota of **tokens** or of a unit we cannot count holds only when the server says it is
//!   spent (nothing left): then nothing goes before its reset;
//! - a **concurrency** quota (`concurrent-requests`) caps our requests in flight at its size.
//!
//! When a quota's reset passes, its count is whole again if its size is known, and its next
//! reset is one window later if its window is known; otherwise it holds nothing until the
//! server states it again. A request larger than a quota's whole size would wait forever: it
//! goes when that quota is whole, and the server decides.
//!
//! Pure arithmetic over an injected `now`, as the parent module.

use std::collections::VecDeque;
use std::time::Duration;

use super::window::{end_of_window_holding, tightest_reset};
use crate::headers::{QuotaPolicy, QuotaUnit, RateLimitInfo};

/// What one request asks of the quotas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Demand {
    /// Units of a quota of requests (1 for a plain request).
    pub(crate) requests: u64,
    /// Content bytes the request declares (0 when it declares none).
    pub(crate) bytes: u64,
    /// Requests waiting behind this one in the key's queue.
    pub(crate) behind: u64,
}

impl Demand {
    /// One plain request of `requests` units and no declared body.
    #[cfg(test)]
    pub(crate) fn requests(requests: u64) -> Demand {
        Demand {
            requests,
            bytes: 0,
            behind: 0,
        }
    }
}

/// A server stating more quotas than this in one response is unusual; the rest are not held.
const MOST_HELD: usize = 8;

/// How much sooner than stated a reset may fall: servers round resets up to whole seconds.
const ROUNDING: Duration = Duration::from_secs(1);

/// Takes remembered per quota for [`ROUNDING`]; past this many, the oldest are merged.
const RECENT_KEPT: usize = 32;

/// The longest a request waits for a slot under a concurrency cap before looking again: a
/// slot freed by a request of ours wakes it at once; this is for slots the server frees for
/// reasons of its own.
pub(crate) const CONCURRENCY_RECHECK: Duration = Duration::from_millis(250);

/// One quota held beside the governing one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    name: Option<String>,
    unit: QuotaUnit,
    partition_key: Option<Vec<u8>>,
    size: Option<u64>,
    window: Option<Duration>,
    /// Units left until `reset_at`, our reservations since the news taken off.
    left: Option<u64>,
    reset_at: Option<Duration>,
    /// What we took within the last [`ROUNDING`], and when: at a reset stated in whole seconds
    /// (rounded up), the new window may have begun that long before, so these count in it.
    recent: VecDeque<(Duration, u64)>,
    /// The server has stated what is left since the last reset we rolled: until it does, the
    /// count is our conservative guess, and the first statement replaces it (up or down).
    confirmed: bool,
}

impl Held {
    fn of(policy: &QuotaPolicy) -> Held {
        Held {
            name: policy.name.clone(),
            unit: policy.quota_unit.clone(),
            partition_key: policy.partition_key.clone(),
            size: None,
            window: None,
            left: None,
            reset_at: None,
            recent: VecDeque::new(),
            confirmed: false,
        }
    }

    fn is(&self, policy: &QuotaPolicy) -> bool {
        self.name == policy.name
            && self.unit == policy.quota_unit
            && self.partition_key == policy.partition_key
    }

    /// What `demand` takes from this quota.
    fn need(&self, demand: Demand) -> u64 {
        match self.unit {
            QuotaUnit::Requests => demand.requests,
            QuotaUnit::ContentBytes => demand.bytes,
            _ => 0,
        }
    }

    /// The reset has passed: whole again, for one more window, or nothing known.
    fn roll(&mut self, now: Duration) {
        let Some(reset_at) = self.reset_at.filter(|at| *at <= now) else {
            return;
        };
        // What went in the second before the reset may be the new window's already.
        self.forget_before(reset_at.saturating_sub(ROUNDING));
        let recent: u64 = self.recent.iter().map(|(_, n)| n).sum();
        self.left = self.size.map(|size| size.saturating_sub(recent));
        self.confirmed = false;
        // Windows missed while no request went are skipped.
        self.reset_at = self
            .window
            .filter(|w| !w.is_zero())
            .map(|window| end_of_window_holding(now, reset_at, reset_at, window));
        if self.reset_at.is_none() {
            self.left = None;
        }
    }

    /// Forgets the takes before `since`.
    fn forget_before(&mut self, since: Duration) {
        while self.recent.front().is_some_and(|(at, _)| *at <= since) {
            self.recent.pop_front();
        }
    }

    /// Until when `demand` must wait for this quota, if it must.
    fn blocks(&self, now: Duration, demand: Demand) -> Option<Duration> {
        let (left, reset_at) = (self.left?, self.reset_at.filter(|at| *at > now)?);
        let need = self.need(demand);
        let spent = match self.unit {
            QuotaUnit::Requests | QuotaUnit::ContentBytes => {
                // A demand over the whole size goes when the quota is whole.
                left < need && Some(left) != self.size
            }
            _ => left == 0,
        };
        spent.then_some(reset_at)
    }
}

/// The quotas held beside the governing one, and the concurrency cap.
#[derive(Debug, Default, Clone)]
pub(crate) struct SideQuotas {
    held: Vec<Held>,
    /// Our requests in flight may not exceed this.
    concurrency: Option<u64>,
}

impl SideQuotas {
    /// [`observe_beside`](Self::observe_beside) the policy that governs `info`.
    #[cfg(test)]
    pub(crate) fn observe(&mut self, now: Duration, info: &RateLimitInfo, in_flight: u64) {
        self.observe_beside(now, info, info.governing_policy(), in_flight);
    }

    /// Takes in what a response stated beside the quota that `governs` it (the parent's),
    /// received at `now`, with `in_flight` of our requests still out (they may not be counted
    /// in it yet).
    pub(crate) fn observe_beside(
        &mut self,
        now: Duration,
        info: &RateLimitInfo,
        governs: Option<&QuotaPolicy>,
        in_flight: u64,
    ) {
        let caps = info
            .policies
            .iter()
            .filter(|p| p.quota_unit == QuotaUnit::ConcurrentRequests)
            .filter_map(|p| p.quota);
        if let Some(cap) = caps.min() {
            self.concurrency = Some(cap.max(1));
        }
        let others = info.policies.iter().filter(|p| {
            p.quota_unit != QuotaUnit::ConcurrentRequests
                && !governs.is_some_and(|g| std::ptr::eq(g, *p))
        });
        for policy in others {
            let index = match self.held.iter().position(|h| h.is(policy)) {
                Some(index) => index,
                None if self.held.len() < MOST_HELD => {
                    self.held.push(Held::of(policy));
                    self.held.len() - 1
                }
                None => continue,
            };
            let held = &mut self.held[index];
            held.roll(now);
            held.size = policy.quota.or(held.size);
            held.window = policy.window.or(held.window);
            if let Some(reset) = policy.reset {
                let stated = now.saturating_add(reset);
                held.reset_at = Some(tightest_reset(held.reset_at, stated, now));
            }
            if let Some(remaining) = policy.remaining {
                let counted_in_flight = match policy.quota_unit {
                    QuotaUnit::Requests => in_flight,
                    _ => 0,
                };
                held.left = Some(match held.left {
                    Some(left) if held.confirmed => left.min(remaining),
                    // First news of this window: the requests in flight may not be counted.
                    _ => remaining.saturating_sub(counted_in_flight),
                });
                held.confirmed = true;
            }
        }
    }

    /// Until when a request of `demand` must wait, with `in_flight` of ours out; `None`: it
    /// may go now (then [`take`](Self::take) it).
    pub(crate) fn wait_until(
        &mut self,
        now: Duration,
        demand: Demand,
        in_flight: u64,
    ) -> Option<Duration> {
        if self.concurrency.is_some_and(|cap| in_flight >= cap) {
            return Some(now.saturating_add(CONCURRENCY_RECHECK));
        }
        let mut until = None;
        for held in &mut self.held {
            held.roll(now);
            if let Some(reset_at) = held.blocks(now, demand) {
                // Every spent quota must have freed.
                until = Some(until.map_or(reset_at, |u: Duration| u.max(reset_at)));
            }
        }
        until
    }

    /// Takes `demand`, at `now`, off every quota it counts against.
    pub(crate) fn take(&mut self, now: Duration, demand: Demand) {
        for held in &mut self.held {
            let need = held.need(demand);
            if need == 0 {
                continue;
            }
            if let Some(left) = &mut held.left {
                *left = left.saturating_sub(need);
            }
            held.forget_before(now.saturating_sub(ROUNDING));
            if held.recent.len() == RECENT_KEPT {
                // Merged into the next: counted a little longer, never less.
                let (_, n) = held.recent.pop_front().expect("full");
                if let Some(next) = held.recent.front_mut() {
                    next.1 = next.1.saturating_add(n);
                }
            }
            held.recent.push_back((now, need));
        }
    }

    /// Gives `demand` back: its request was never sent.
    pub(crate) fn give_back(&mut self, demand: Demand) {
        for held in &mut self.held {
            let need = held.need(demand);
            if let Some(left) = &mut held.left {
                let back = left.saturating_add(need);
                *left = held.size.map_or(back, |size| back.min(size));
            }
        }
    }

    /// The concurrency cap stated, if any.
    #[cfg(test)]
    pub(crate) fn concurrency(&self) -> Option<u64> {
        self.concurrency
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn info(policy: &str, state: &str) -> RateLimitInfo {
        let mut headers = http::HeaderMap::new();
        headers.insert("ratelimit-policy", policy.parse().unwrap());
        headers.insert("ratelimit", state.parse().unwrap());
        RateLimitInfo::from_headers(&headers)
    }

    const BURST_AND_DAILY: &str = r#""burst";q=100;w=60, "daily";q=1000;w=86400"#;

    #[test]
    fn the_quota_that_does_not_govern_is_held_in_its_own_window() {
        let mut side = SideQuotas::default();
        // 3 left of the day, 50 of the minute: the day governs (and is the parent's); the
        // minute is held here.
        side.observe(
            secs(0),
            &info(BURST_AND_DAILY, r#""burst";r=50;t=40, "daily";r=3;t=7200"#),
            0,
        );
        assert_eq!(side.held.len(), 1);
        assert_eq!(side.held[0].name.as_deref(), Some("burst"));
        for _ in 0..50 {
            assert_eq!(side.wait_until(secs(1), Demand::requests(1), 0), None);
            side.take(secs(1), Demand::requests(1));
        }
        // The minute's 50 are spent: the 51st waits for its reset, 40 s after the news.
        assert_eq!(
            side.wait_until(secs(1), Demand::requests(1), 0),
            Some(secs(40))
        );
        // Then it is whole, for one more window of 60 s.
        assert_eq!(side.wait_until(secs(40), Demand::requests(1), 0), None);
        assert_eq!(side.held[0].left, Some(100));
        assert_eq!(side.held[0].reset_at, Some(secs(100)));
    }

    #[test]
    fn news_never_raises_what_is_left_within_a_window() {
        let mut side = SideQuotas::default();
        let state = |burst: u64| format!(r#""burst";r={burst};t=40, "daily";r=3;t=7200"#);
        // First news: 2 of ours are in flight and not counted yet.
        side.observe(secs(0), &info(BURST_AND_DAILY, &state(10)), 2);
        assert_eq!(side.held[0].left, Some(8));
        side.observe(secs(1), &info(BURST_AND_DAILY, &state(9)), 0);
        assert_eq!(side.held[0].left, Some(8));
        side.observe(secs(2), &info(BURST_AND_DAILY, &state(5)), 0);
        assert_eq!(side.held[0].left, Some(5));
    }

    #[test]
    fn content_bytes_count_down_by_the_declared_length() {
        let mut side = SideQuotas::default();
        side.observe(
            secs(0),
            &info(
                r#""upload";q=1000;qu="content-bytes";w=10, "req";q=100;w=10"#,
                r#""upload";r=700;t=10, "req";r=90;t=10"#,
            ),
            0,
        );
        let upload = |bytes| Demand {
            requests: 1,
            bytes,
            behind: 0,
        };
        assert_eq!(side.wait_until(secs(1), upload(600), 0), None);
        side.take(secs(1), upload(600));
        // 100 bytes left: a 200-byte body waits for the window; a GET (no body) does not.
        assert_eq!(side.wait_until(secs(2), upload(200), 0), Some(secs(10)));
        assert_eq!(side.wait_until(secs(2), upload(0), 0), None);
        // A body larger than the whole quota goes when the quota is whole, not never.
        assert_eq!(side.wait_until(secs(2), upload(5000), 0), Some(secs(10)));
        assert_eq!(side.wait_until(secs(10), upload(5000), 0), None);
        // A request given back (never sent) returns its bytes, never above the size.
        side.take(secs(11), upload(300));
        side.give_back(upload(300));
        assert_eq!(side.held[0].left, Some(1000));
    }

    #[test]
    fn a_quota_of_tokens_holds_only_when_spent() {
        let mut side = SideQuotas::default();
        let policy = r#""tok";q=40000;qu="tokens";w=60, "req";q=100;w=60"#;
        side.observe(
            secs(0),
            &info(policy, r#""tok";r=1200;t=30, "req";r=80;t=30"#),
            0,
        );
        // Tokens left: a request (which declares no tokens) goes, and takes none.
        assert_eq!(side.wait_until(secs(1), Demand::requests(1), 0), None);
        side.take(secs(1), Demand::requests(1));
        assert_eq!(side.held[0].left, Some(1200));
        // Spent, while the request quota (spent too, later) governs: nothing goes before the
        // tokens' own reset, 20 s after this news.
        side.observe(
            secs(2),
            &info(policy, r#""tok";r=0;t=20, "req";r=0;t=28"#),
            0,
        );
        assert_eq!(
            side.wait_until(secs(3), Demand::requests(1), 0),
            Some(secs(22))
        );
    }

    #[test]
    fn a_concurrency_quota_caps_requests_in_flight() {
        let mut side = SideQuotas::default();
        side.observe(
            secs(0),
            &info(
                r#""conc";q=3;qu="concurrent-requests", "req";q=100;w=60"#,
                r#""conc";r=1, "req";r=80;t=30"#,
            ),
            2,
        );
        assert_eq!(side.concurrency(), Some(3));
        assert_eq!(side.wait_until(secs(1), Demand::requests(1), 2), None);
        assert_eq!(
            side.wait_until(secs(1), Demand::requests(1), 3),
            Some(secs(1) + CONCURRENCY_RECHECK)
        );
    }

    #[test]
    fn a_quota_whose_reset_passed_with_no_window_holds_nothing() {
        let mut side = SideQuotas::default();
        // "a" governs (1 left); "c" states no window.
        side.observe(
            secs(1),
            &info(r#""a";q=10;w=1, "c";q=100"#, r#""a";r=1;t=1, "c";r=2;t=4"#),
            0,
        );
        assert_eq!(side.held[0].name.as_deref(), Some("c"));
        side.take(secs(1), Demand::requests(2));
        assert_eq!(
            side.wait_until(secs(2), Demand::requests(1), 0),
            Some(secs(5))
        );
        // Its reset passed: nothing is known of its next window, so it holds nothing.
        assert_eq!(side.wait_until(secs(5), Demand::requests(1), 0), None);
        assert_eq!((side.held[0].left, side.held[0].reset_at), (None, None));
    }

    #[test]
    fn what_went_in_the_second_before_a_rounded_reset_counts_in_the_new_window() {
        let mut side = SideQuotas::default();
        // "burst" is held: 10 per 1 s, stated to reset in 1 s (rounded up: maybe sooner).
        side.observe(
            secs(0),
            &info(
                r#""burst";q=10;w=1, "daily";q=1000;w=86400"#,
                r#""burst";r=10;t=1, "daily";r=3;t=7200"#,
            ),
            0,
        );
        // Seven go at 0.2 s and 0.9 s: inside the stated window, but all may already be in
        // the next one (its window is a second, as the rounding is).
        let ms = Duration::from_millis;
        for _ in 0..4 {
            side.take(ms(200), Demand::requests(1));
        }
        for _ in 0..3 {
            side.take(ms(900), Demand::requests(1));
        }
        assert_eq!(side.wait_until(secs(1), Demand::requests(1), 0), None);
        assert_eq!(side.held[0].left, Some(3));
        // The server's next statement is the truth for the new window, higher or lower.
        side.observe(
            Duration::from_millis(1050),
            &info(
                r#""burst";q=10;w=1, "daily";q=1000;w=86400"#,
                r#""burst";r=8;t=1, "daily";r=3;t=7200"#,
            ),
            1,
        );
        assert_eq!(side.held[0].left, Some(7));
    }

    #[test]
    fn windows_missed_while_idle_are_skipped() {
        let mut side = SideQuotas::default();
        side.observe(
            secs(0),
            &info(BURST_AND_DAILY, r#""burst";r=0;t=40, "daily";r=0;t=7200"#),
            0,
        );
        // Both spent: "daily" governs (it frees last); "burst" is held.
        assert_eq!(side.held[0].name.as_deref(), Some("burst"));
        side.wait_until(secs(1000), Demand::requests(1), 0);
        // 40 s, then windows of 60 s: the one holding at 1000 s ends at 1060 s.
        assert_eq!(side.held[0].reset_at, Some(secs(1060)));
        assert_eq!(side.held[0].left, Some(100));
    }
}
