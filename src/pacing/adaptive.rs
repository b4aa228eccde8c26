//! The adaptive quota for servers that state nothing: AWS's adaptive-retry CUBIC curve.
//!
//! The model is the one AWS SDKs publish for their adaptive retry mode (smithy-rs,
//! `client_rate_limiter.rs`), itself TCP CUBIC (RFC 9438): on a throttle the rate is cut to
//! `β × measured` (β = 0.7); afterwards it grows back as `C·(t − K)³ + max`, where `max` is the
//! measured rate at the throttle, `C = 0.4`, and `K = ∛(max·(1 − β)/C)` is the time at which
//! the curve is back at `max`. Growth is slow near `max` (the last known good rate) and speeds
//! up beyond it, probing for more.
//!
//! AWS measures time in seconds and the rate in requests per second. A silent server limits
//! requests per *window* (fixed or sliding), so here the unit of time is one (estimated)
//! window and the rate is the quota per window: the curve then has the same shape whatever
//! the window's length, where seconds would make it far too eager for a minute-long window.

/// The cut on a throttle.
pub(crate) const BETA: f64 = 0.7;
/// How fast the curve grows away from the last good quota (quota units per window³).
pub(crate) const SCALE: f64 = 0.4;
/// The quota never drops below one request per window.
const MIN_QUOTA: f64 = 1.0;

/// One key's adaptive quota per window. Time is counted in windows (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Cubic {
    /// The measured quota at the last throttle (`max` in the formula).
    last_max: f64,
    /// When the curve's clock started (the last throttle), in windows.
    origin: f64,
    /// `K`: windows after `origin` at which the curve is back at `last_max`.
    k: f64,
}

impl Cubic {
    /// A curve at rest at `measured`: the quota just measured is the last good one, so the
    /// curve starts on its plateau (no cut: nothing was exceeded).
    pub(crate) fn settled(measured: f64, now_windows: f64) -> Cubic {
        let last_max = measured.max(MIN_QUOTA);
        let k = Self::k_for(last_max);
        Cubic {
            last_max,
            origin: now_windows - k,
            k,
        }
    }

    /// A throttle at `now_windows` after `measured` requests went through in the window:
    /// the quota is cut to `β × measured` and will grow back from there.
    pub(crate) fn throttled(&mut self, measured: f64, now_windows: f64) {
        self.last_max = measured.max(MIN_QUOTA);
        self.k = Self::k_for(self.last_max);
        self.origin = now_windows;
    }

    /// The quota per window at `now_windows`.
    pub(crate) fn quota(&self, now_windows: f64) -> f64 {
        let t = (now_windows - self.origin).max(0.0);
        (SCALE * (t - self.k).powi(3) + self.last_max).max(MIN_QUOTA)
    }

    /// The quota per window at `now_windows`, as a whole number of requests.
    pub(crate) fn whole_quota(&self, now_windows: f64) -> u64 {
        let quota = self.quota(now_windows);
        if quota >= u64::MAX as f64 {
            u64::MAX
        } else {
            quota.floor() as u64
        }
    }

    fn k_for(last_max: f64) -> f64 {
        (last_max * (1.0 - BETA) / SCALE).cbrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_throttle_cuts_to_seventy_percent_and_the_curve_is_back_at_max_after_k() {
        let mut curve = Cubic::settled(20.0, 0.0);
        curve.throttled(20.0, 10.0);
        assert!(close(curve.quota(10.0), 14.0), "{}", curve.quota(10.0));
        // K = ∛(20 × 0.3 / 0.4) = ∛15
        let k = 15f64.cbrt();
        assert!(close(curve.quota(10.0 + k), 20.0));
        // Concave below max, convex above: half-way it has recovered more than half.
        assert!(curve.quota(10.0 + k / 2.0) > 17.0);
        // Then it probes beyond: one window past K adds C × 1³.
        assert!(close(curve.quota(10.0 + k + 1.0), 20.4));
        assert!(close(curve.quota(10.0 + k + 3.0), 20.0 + 0.4 * 27.0));
        assert_eq!(curve.whole_quota(10.0 + k + 3.0), 30);
    }

    #[test]
    fn a_settled_curve_starts_on_its_plateau() {
        let curve = Cubic::settled(100.0, 5.0);
        assert!(close(curve.quota(5.0), 100.0));
        assert_eq!(curve.whole_quota(5.5), 100);
        assert!(close(curve.quota(7.0), 100.0 + 0.4 * 8.0));
    }

    #[test]
    fn the_quota_never_falls_below_one_request_per_window() {
        let mut curve = Cubic::settled(1.0, 0.0);
        curve.throttled(0.0, 1.0);
        assert_eq!(curve.whole_quota(1.0), 1);
        assert_eq!(curve.whole_quota(-100.0), 1);
    }
}
