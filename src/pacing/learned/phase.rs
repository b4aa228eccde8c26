//! Where a quota really frees up, when the server states its reset in whole seconds.
//!
//! A reset sent as a Unix time, an HTTP-date `Retry-After` or a `t` in seconds is rounded up:
//! the quota frees somewhere in the second before the stated instant, up to a second early.
//! Against a 2 s window, waiting for the stated instant every time costs up to half the quota.
//!
//! So one request probes before the stated instant, alone, while the others wait for its
//! answer: admitted, the quota has freed (everyone goes); refused, it has not (a 429, and the
//! next probe goes later). Each answer narrows the *phase*: how far into that last second the
//! quota frees. Servers keep windows of whole seconds (1 s, 1 min, 1 h), so the phase carries
//! over from one window to the next, and once it is narrow a probe goes at its safe end. The
//! first probe goes an eighth of a second early (many windows end exactly on the second: one
//! 429 tells so); from there, each refusal halves what is left, to an eighth. A phase that
//! moves (a window that is not whole seconds) is noticed when the probe at its safe end is
//! refused, and learned again.

use std::time::Duration;

/// How coarse a stated reset is: servers round up to the whole second.
pub(super) const GRAIN: Duration = Duration::from_secs(1);
/// Narrow enough: the probe goes at the phase's safe end, at most this late.
pub(super) const NARROW: Duration = Duration::from_millis(125);

/// How far into the second before a stated reset the quota frees: after `after`, by `by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ResetPhase {
    /// A request sent this far into that second was still refused (or counted in the old
    /// window): the quota frees later.
    after: Duration,
    /// A request answered this far into it found the quota freed.
    by: Duration,
}

impl Default for ResetPhase {
    /// Nothing learned: anywhere in the second, the stated instant being safe.
    fn default() -> Self {
        ResetPhase {
            after: Duration::ZERO,
            by: GRAIN,
        }
    }
}

impl ResetPhase {
    /// When to probe a quota stated to free by `latest`: the midpoint of what is still
    /// possible while it is wide, its safe end once narrow.
    pub(super) fn probe_at(&self, latest: Duration) -> Duration {
        let gap = self.by.saturating_sub(self.after);
        let into = if *self == ResetPhase::default() {
            // Nothing learned yet. Many windows end on the whole second, exactly as stated:
            // a first probe an eighth before tells so at the price of one 429 (a search from
            // the middle would pay three), and a moving window has most often freed by then.
            GRAIN - NARROW
        } else if gap > NARROW {
            self.after + gap / 2
        } else {
            self.by
        };
        latest.saturating_sub(GRAIN - into)
    }

    /// A probe sent at `sent` for a quota stated to free by `latest` was refused.
    pub(super) fn refused(&mut self, latest: Duration, sent: Duration) {
        let into = into_second(latest, sent);
        if into >= self.by {
            // Refused at a point learned safe: the phase has moved. Start again from the
            // stated instant, the one bound that always holds.
            self.by = GRAIN;
        }
        self.after = self.after.max(into).min(self.by);
    }

    /// A probe sent at `sent` for a quota stated to free by `latest` was admitted; its answer
    /// came at `answered`.
    pub(super) fn freed(&mut self, latest: Duration, sent: Duration, answered: Duration) {
        let into = into_second(latest, answered);
        if into <= self.after {
            // Admitted before a point learned too early: the phase has moved.
            self.after = Duration::ZERO;
        }
        self.by = if into_second(latest, sent) >= self.by {
            // Sent at the safe end (or later, woken late): the phase is here now. A moving
            // window frees as its first request ages out, so its phase follows that request
            // and may move later by as much as it went late.
            into
        } else {
            self.by.min(into)
        }
        .max(self.after);
    }
}

/// How far `at` is into the second before `latest` (clamped to that second; a `latest` less
/// than a second after the clock's origin still has its whole second before it).
fn into_second(latest: Duration, at: Duration) -> Duration {
    GRAIN.saturating_sub(latest.saturating_sub(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn an_exact_reset_costs_one_refused_probe_then_none() {
        let mut phase = ResetPhase::default();
        let latest = Duration::from_secs(10);
        // Nothing learned: the first probe goes an eighth of a second before the stated
        // instant.
        assert_eq!(phase.probe_at(latest), Duration::from_millis(9875));
        // The quota frees exactly at the stated instant (an exact reset): that probe is
        // refused, and an eighth is narrow enough.
        let mut refused = 0;
        loop {
            let at = phase.probe_at(latest);
            if at >= latest {
                break;
            }
            phase.refused(latest, at);
            refused += 1;
        }
        assert_eq!(refused, 1);
        assert_eq!(phase.probe_at(latest), latest);
        phase.freed(latest, latest, latest + MS);
        // The next window's probe goes at its stated instant: no 429 there.
        assert_eq!(
            phase.probe_at(Duration::from_secs(12)),
            Duration::from_secs(12)
        );
    }

    #[test]
    fn an_answer_inside_the_second_bounds_the_phase_for_the_next_windows() {
        let mut phase = ResetPhase::default();
        let latest = Duration::from_secs(4);
        // A probe at 3.5 s (a search under way), admitted, answered at 3.502 s: the quota
        // frees by 0.502 s in.
        phase.freed(
            latest,
            Duration::from_millis(3500),
            Duration::from_millis(3502),
        );
        // Still wide (0 to 0.502): the next probe halves it.
        assert_eq!(
            phase.probe_at(Duration::from_secs(6)),
            Duration::from_millis(5251)
        );
        phase.refused(Duration::from_secs(6), Duration::from_millis(5251));
        phase.refused(Duration::from_secs(8), Duration::from_millis(7377));
        // 0.377 to 0.502: narrow; the probe goes at the safe end, 498 ms before the stated
        // instant.
        assert_eq!(
            phase.probe_at(Duration::from_secs(10)),
            Duration::from_millis(9502)
        );
    }

    #[test]
    fn from_the_middle_each_refusal_halves_what_is_left() {
        let mut phase = ResetPhase::default();
        let latest = Duration::from_secs(10);
        phase.refused(latest, Duration::from_millis(9500));
        let mut probes = Vec::new();
        loop {
            let at = phase.probe_at(latest);
            probes.push(at);
            if at >= latest {
                break;
            }
            phase.refused(latest, at);
        }
        assert_eq!(probes, [9750, 9875, 10_000].map(Duration::from_millis));
    }

    #[test]
    fn a_phase_that_moves_is_learned_again() {
        let mut phase = ResetPhase::default();
        let latest = Duration::from_secs(2);
        phase.freed(
            latest,
            Duration::from_millis(1099),
            Duration::from_millis(1100),
        );
        phase.refused(latest, Duration::from_millis(1050));
        assert_eq!(
            phase.probe_at(Duration::from_secs(4)),
            Duration::from_millis(3100)
        );
        // Refused at the safe end: the stated instant is the only bound left.
        phase.refused(Duration::from_secs(4), Duration::from_millis(3100));
        assert_eq!(
            phase.probe_at(Duration::from_secs(6)),
            Duration::from_millis(5550)
        );
        // Admitted before a point once refused: forget that refusal.
        phase.freed(
            Duration::from_secs(6),
            Duration::from_millis(5049),
            Duration::from_millis(5050),
        );
        assert_eq!(
            phase,
            ResetPhase {
                after: Duration::ZERO,
                by: Duration::from_millis(50)
            }
        );
    }
}
