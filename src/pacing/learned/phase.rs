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
//! 429 tells so). Admitted, the search goes down from there, each window's probe an eighth
//! earlier than the last admitted one, then a quarter, a half (a window that starts at a
//! client's first request starts again at the probe that opened it, so its phase is where
//! that probe went, and the first step down tells so at the price of one 429, where halving
//! from the middle paid three); once one is refused, each refusal halves what is left, to an
//! eighth. A phase that moves (a window that is not whole seconds) is noticed when the probe
//! at its safe end is refused, and learned again.
//!
//! A reset stated with a fraction of a second beside a `Retry-After` in whole seconds is not
//! rounded: admitted an eighth before it, it is late by more than rounding, most likely by a
//! whole second (slowapi adds one to its window's end), so the next probe goes a second
//! before it. And since it follows the instant the server counted the window from, not the
//! clock's seconds, the phase found stays where it is: it does not move later with the
//! answers' lateness (which, added up window after window, made each window a few
//! milliseconds longer than the last).

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
    /// While nothing was refused (`after` is zero) and something admitted: how far below
    /// `by` the next probe goes. Doubles with each probe admitted there.
    step: Duration,
}

impl Default for ResetPhase {
    /// Nothing learned: anywhere in the second, the stated instant being safe.
    fn default() -> Self {
        ResetPhase {
            after: Duration::ZERO,
            by: GRAIN,
            step: NARROW,
        }
    }
}

impl ResetPhase {
    /// When to probe a quota stated to free by `latest`: a step below the earliest admission
    /// while nothing was refused, the midpoint of what is still possible once something was
    /// (while it is wide), its safe end once narrow.
    pub(super) fn probe_at(&self, latest: Duration) -> Duration {
        let gap = self.by.saturating_sub(self.after);
        let into = if *self == ResetPhase::default() {
            // Nothing learned yet. Many windows end on the whole second, exactly as stated:
            // a first probe an eighth before tells so at the price of one 429 (a search from
            // the middle would pay three), and a moving window has most often freed by then.
            GRAIN - NARROW
        } else if gap > NARROW && self.after.is_zero() {
            self.by.saturating_sub(self.step)
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
        // Refused: `after` is above zero from now on (zero means nothing was refused), even
        // for a probe sent at the very start of the second.
        self.after = self
            .after
            .max(into)
            .max(Duration::from_nanos(1))
            .min(self.by);
    }

    /// A probe sent at `sent` for a quota stated to free by `latest` was admitted; its answer
    /// came at `answered`. `fine`: `latest` came with a fraction of a second (not rounded).
    pub(super) fn freed(
        &mut self,
        latest: Duration,
        sent: Duration,
        answered: Duration,
        fine: bool,
    ) {
        let into = into_second(latest, answered);
        let first = *self == ResetPhase::default();
        if first && fine {
            // Not rounded, yet admitted an eighth early: late by a whole second most likely.
            self.step = GRAIN;
        }
        if into <= self.after {
            // Admitted before a point learned too early: the phase has moved.
            self.after = Duration::ZERO;
            self.step = NARROW;
        } else if !first && self.after.is_zero() && into_second(latest, sent) < self.by {
            // A step down admitted: the next goes twice as far.
            self.step = (self.step * 2).min(GRAIN);
        }
        self.by = if into_second(latest, sent) >= self.by && !fine {
            // Sent at the safe end (or later, woken late): the phase is here now. A moving
            // window (or one that starts at its first request) frees as that request ages
            // out, so its phase follows it and may move later by as much as it went late;
            // the refusal below it moves with it (else the drift of a few milliseconds a
            // window would widen the phase again, and each widening cost a 429).
            if !self.after.is_zero() && into > self.by {
                self.after = (self.after + (into - self.by)).min(into);
            }
            into
        } else {
            self.by.min(into)
        }
        .max(self.after);
    }
}

/// How long after a moving window's first request its quota frees again, as the client's own
/// sends measure it: a sliding log frees each slot one window after the request that spent
/// it, so the instant follows the client's sends, not the server's clock, and the phase of
/// a rounded-up reset drifts from one window to the next. Measured from the window's first
/// send to the probe's send, between a probe refused (`after`) and one admitted (`by`).
///
/// Windows are whole seconds, as their phases are: the first probe goes just past the whole
/// second the stated (rounded-up) instant allows, where a sliding log of whole seconds frees.
/// Refused there, one more goes a step later (the network held up a send by a few
/// milliseconds); refused again, the window is not whole seconds and the rest is bisected.
/// When the stated instant is a second and less than [`LAG_MARGIN`] past a whole second, the
/// window may be that whole second (a reset stated a whole second late, to the millisecond)
/// or the one above (rounded up from just past the window's end): the lower goes first, and
/// its two refusals (under one key in a hundred of a rounded reset) send the search to the
/// upper one. Once the bounds are [`LAG_NARROW`] apart, each probe goes at `by`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct WindowLag {
    after: Duration,
    by: Option<Duration>,
}

/// Narrow enough for a lag: the probe goes at its safe end, at most this late. Finer than
/// [`NARROW`]: a moving window pays it once per window, and nothing rounds it.
pub(super) const LAG_NARROW: Duration = Duration::from_millis(16);

/// How far past a whole second the first probe of a lag goes: the requests the server counts
/// reach it a little after they went, the first of a window as late as the probe or later.
const LAG_MARGIN: Duration = Duration::from_millis(8);

impl WindowLag {
    /// How long after the window's first send to probe, the server having stated that the
    /// quota frees by `stated` after it (rounded up: a grain sooner at the most).
    pub(super) fn probe_after(&self, stated: Duration) -> Duration {
        let floor = stated.saturating_sub(GRAIN);
        let after = self.after.max(floor);
        let by = self.by.unwrap_or(stated);
        let gap = by.saturating_sub(after);
        if gap <= LAG_NARROW {
            return by;
        }
        // The whole second in the stated grain, and just past it. A floor just past a whole
        // second (by less than the margin) is a reset stated a whole second late, or rounded
        // up from just past a whole second: that second is tried first (slowapi states
        // `X-RateLimit-Reset` a second after its window ends, to the millisecond; the second
        // above cost five windows of bisection there). Refused just past it, and a step on,
        // the one above.
        let above = whole_second_at_or_after(floor);
        let low = whole_second_at_or_after(floor.saturating_sub(LAG_MARGIN));
        let second = if low < above && self.after >= low + LAG_MARGIN + LAG_NARROW {
            above
        } else {
            low
        };
        if second.is_zero() {
            return after + gap / 2;
        }
        let just_past = second + LAG_MARGIN;
        if self.after < second && second <= by {
            // The whole second lies between the bounds: probe just past it, or at the safe
            // end when that is no further (admitted there, or a little later, woken late).
            if just_past + LAG_NARROW < by {
                just_past
            } else {
                by
            }
        } else if self.after >= second && self.after < just_past + LAG_NARROW {
            // Refused just past it (the probe went late by less than a step): one step on.
            (self.after + LAG_NARROW).min(by)
        } else {
            after + gap / 2
        }
    }

    /// A probe sent `lag` after the window's first send was refused.
    pub(super) fn refused(&mut self, lag: Duration) {
        self.after = self.after.max(lag);
        if let Some(by) = self.by
            && lag >= by
        {
            // Refused where one was admitted before: the network's jitter (or a window
            // that grew). The safe end moves past it by a step, not back to the stated
            // instant: a jitter of a few milliseconds costs a 429, once.
            self.by = Some(lag + LAG_NARROW);
        }
    }

    /// A probe sent `lag` after the window's first send was admitted.
    pub(super) fn freed(&mut self, lag: Duration) {
        self.by = Some(self.by.map_or(lag, |by| by.min(lag)));
        if lag <= self.after {
            // Admitted where one was refused: the window shrank, or that refusal was the
            // network's. Start the lower bound again.
            self.after = Duration::ZERO;
        }
    }
}

/// The whole second at `at` or the first after it.
fn whole_second_at_or_after(at: Duration) -> Duration {
    Duration::from_secs(at.as_secs() + u64::from(at.subsec_nanos() > 0))
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
        phase.freed(latest, latest, latest + MS, false);
        // The next window's probe goes at its stated instant: no 429 there.
        assert_eq!(
            phase.probe_at(Duration::from_secs(12)),
            Duration::from_secs(12)
        );
    }

    #[test]
    fn from_an_admission_inside_the_second_the_search_steps_down_doubling_then_halves() {
        let mut phase = ResetPhase::default();
        // A probe at 3.5 s, admitted, answered at 3.502 s: the quota frees by 0.502 s in.
        phase.freed(
            Duration::from_secs(4),
            Duration::from_millis(3500),
            Duration::from_millis(3502),
            false,
        );
        // Nothing refused yet: an eighth below it, then a quarter below the next admission.
        assert_eq!(
            phase.probe_at(Duration::from_secs(6)),
            Duration::from_millis(5377)
        );
        phase.freed(
            Duration::from_secs(6),
            Duration::from_millis(5377),
            Duration::from_millis(5379),
            false,
        );
        assert_eq!(
            phase.probe_at(Duration::from_secs(8)),
            Duration::from_millis(7129)
        );
        // Refused there: 0.129 to 0.379 is left, and each refusal halves it.
        phase.refused(Duration::from_secs(8), Duration::from_millis(7129));
        assert_eq!(
            phase.probe_at(Duration::from_secs(10)),
            Duration::from_millis(9254)
        );
        phase.refused(Duration::from_secs(10), Duration::from_millis(9254));
        // 0.254 to 0.379: narrow; the probe goes at the safe end, 621 ms before the stated
        // instant.
        assert_eq!(
            phase.probe_at(Duration::from_secs(12)),
            Duration::from_millis(11_379)
        );
    }

    /// Runs `windows` windows of a window that starts when its first request arrives (`MS`
    /// after it went) and lasts `window`, its reset stated `offset` after it ends to the
    /// nanosecond (`fine`, as slowapi states it) or rounded up to the second: the refusals,
    /// and how late after its window freed each probe went.
    fn search_late_reset(
        window: Duration,
        offset: Duration,
        fine: bool,
        windows: usize,
    ) -> (u32, Vec<Duration>) {
        let mut phase = ResetPhase::default();
        let mut start = Duration::from_millis(40);
        let (mut refused, mut lates) = (0, Vec::new());
        for _ in 0..windows {
            let frees = start + window;
            let mut latest = frees + offset;
            if !fine {
                latest = whole_second_at_or_after(latest);
            }
            loop {
                let at = phase.probe_at(latest).max(start);
                if at >= frees {
                    lates.push(at - frees);
                    phase.freed(latest, at, at + 2 * MS, fine);
                    start = at + MS;
                    break;
                }
                phase.refused(latest, at);
                refused += 1;
            }
        }
        (refused, lates)
    }

    #[test]
    fn a_fine_reset_stated_a_second_late_is_probed_a_second_early_and_stays_there() {
        let window = Duration::from_secs(2);
        let (refused, lates) = search_late_reset(window, GRAIN, true, 30);
        assert_eq!(refused, 0);
        // The first probe an eighth before the stated instant, the second a second before it.
        assert_eq!(lates[0], GRAIN - NARROW);
        assert!(lates[1..].iter().all(|late| *late <= 3 * MS), "{lates:?}");
        // Taken for a rounded reset, the same server: the search steps down over three
        // windows, and then each window starts later than the last by the answer's delay.
        let (_, rounded) = search_late_reset(window, GRAIN, false, 30);
        assert!(rounded[1] > 10 * NARROW / 16, "{rounded:?}");
        // A fine reset late by a fraction (300 ms): the probe a second early is refused, and
        // the rest is bisected; three refusals at most, then each probe within an eighth.
        let (refused, lates) = search_late_reset(window, Duration::from_millis(300), true, 30);
        assert!(refused <= 3, "{refused} refused");
        assert!(lates[10..].iter().all(|late| *late <= NARROW), "{lates:?}");
    }

    #[test]
    fn a_window_that_starts_at_its_first_request_costs_one_refused_step() {
        // The window starts when its first request comes (2 s long), and the stated reset is
        // that instant rounded up to the second: the quota frees where the probe that opened
        // the window went, 2 s later. The clock's second starts at 0.3 s.
        let second = Duration::from_millis(300);
        let window = Duration::from_secs(2);
        let stated = |start: Duration| {
            let end = start + window - second;
            second + whole_second_at_or_after(end)
        };
        let mut phase = ResetPhase::default();
        let mut start = Duration::from_millis(40);
        let mut refused = 0;
        let mut late = Duration::ZERO;
        for _ in 0..20 {
            let frees = start + window;
            let latest = stated(start);
            loop {
                let at = phase.probe_at(latest).max(frees - window);
                if at >= frees {
                    late += at - frees;
                    phase.freed(latest, at, at + MS, false);
                    start = at;
                    break;
                }
                phase.refused(latest, at);
                refused += 1;
            }
        }
        assert_eq!(refused, 1);
        // Each window's probe goes within an eighth of its freeing, most of them within
        // the answer's millisecond.
        assert!(late < Duration::from_millis(300), "{late:?} late in all");
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

    /// Runs `windows` windows of a moving window whose slots free `truth` after the window's
    /// first send, the stated instant rounded up to the server's next whole second (the
    /// window's first send lands `offsets[i]` into a second): the refusals, and where the
    /// last probe went.
    fn search_lag(truth: Duration, offsets: &[u64], windows: usize) -> (u32, Duration) {
        let mut lag = WindowLag::default();
        let mut refused = 0;
        let mut last = Duration::ZERO;
        for window in 0..windows {
            let offset = Duration::from_millis(offsets[window % offsets.len()]);
            // The reset as a Unix time, rounded up: stated after the first send.
            let freed = offset + truth;
            let stated = whole_second_at_or_after(freed) - offset;
            loop {
                let at = lag.probe_after(stated);
                last = at;
                if at >= truth {
                    lag.freed(at);
                    break;
                }
                lag.refused(at);
                refused += 1;
            }
        }
        (refused, last)
    }

    const OFFSETS: [u64; 7] = [900, 30, 470, 610, 5, 333, 780];

    #[test]
    fn a_moving_window_of_whole_seconds_is_probed_just_past_them_first() {
        let mut lag = WindowLag::default();
        // Stated 2.9 s after the window's first send: the window is 2 s, 1.9 s at the
        // shortest; the first probe goes just past 2 s.
        assert_eq!(
            lag.probe_after(Duration::from_millis(2900)),
            Duration::from_millis(2008)
        );
        lag.freed(Duration::from_millis(2009));
        // Admitted: the next windows' probes go there, whatever the stated instant.
        for stated in [2100, 2500, 2999] {
            assert_eq!(
                lag.probe_after(Duration::from_millis(stated)),
                Duration::from_millis(2009)
            );
        }
        // A window that frees 3 ms after its whole seconds (the network's delay): no probe
        // refused over 30 windows at any phase.
        let (refused, last) = search_lag(Duration::from_millis(2003), &OFFSETS, 30);
        assert_eq!(refused, 0);
        assert_eq!(last, Duration::from_millis(2008));
    }

    #[test]
    fn a_reset_stated_a_whole_second_late_is_probed_just_past_the_second_below_it() {
        // slowapi: a moving window of 3 s whose first request the server counted 2 ms after
        // it went, its reset stated a second after the window frees, to the millisecond.
        let truth = Duration::from_millis(3002);
        let stated = truth + GRAIN;
        let mut lag = WindowLag::default();
        assert_eq!(lag.probe_after(stated), Duration::from_millis(3008));
        lag.freed(Duration::from_millis(3008));
        assert_eq!(lag.probe_after(stated), Duration::from_millis(3008));
        // A reset rounded up from just past the window's end looks the same: the second
        // below is refused, and a step on; then the one above, at the stated instant (no
        // further than just past it), admitted.
        let truth = Duration::from_millis(2005);
        let stated = Duration::from_millis(2006);
        let mut lag = WindowLag::default();
        let mut refused = Vec::new();
        loop {
            let at = lag.probe_after(stated);
            if at >= truth {
                assert_eq!(at, stated);
                break;
            }
            refused.push(at.as_millis());
            lag.refused(at);
        }
        assert_eq!(refused, [1008, 1024]);
    }

    #[test]
    fn bounds_found_before_the_window_moved_are_not_bisected_past_their_whole_second() {
        // The phase's probes bound the lag before the window is known to move: one refused
        // 1.87 s after the window's first send, one admitted 2.003 s after it. A sliding log
        // of 2 s frees just past the whole second, so the probe goes at the safe end, not
        // at the midpoint (1.94 s, then 1.97 s and 1.99 s, each refused, as measured against
        // Flask-Limiter's moving window).
        let mut lag = WindowLag::default();
        lag.refused(Duration::from_millis(1870));
        lag.freed(Duration::from_millis(2003));
        let stated = Duration::from_millis(2120);
        assert_eq!(lag.probe_after(stated), Duration::from_millis(2003));
        // Admitted further past it: probed just past the whole second first.
        let mut lag = WindowLag::default();
        lag.refused(Duration::from_millis(1870));
        lag.freed(Duration::from_millis(2060));
        assert_eq!(lag.probe_after(stated), Duration::from_millis(2008));
        // Admitted below it: the window is not whole seconds, and the bounds are bisected.
        let mut lag = WindowLag::default();
        lag.refused(Duration::from_millis(1870));
        lag.freed(Duration::from_millis(1990));
        assert_eq!(lag.probe_after(stated), Duration::from_millis(1930));
    }

    #[test]
    fn a_lag_refused_just_past_the_whole_second_steps_once_then_bisects() {
        // Held up past the margin: one refusal, the next probe a step later is admitted.
        let (refused, last) = search_lag(Duration::from_millis(2012), &OFFSETS, 30);
        assert_eq!(refused, 1);
        assert_eq!(last, Duration::from_millis(2024));
        // A window that is not whole seconds (1.2 s): the search pays a few refusals once,
        // then every probe goes within a step of the truth.
        let truth = Duration::from_millis(1203);
        let (refused, last) = search_lag(truth, &OFFSETS, 40);
        assert!(refused <= 5, "{refused} refused");
        assert!(last >= truth && last <= truth + LAG_NARROW, "{last:?}");
        let (again, _) = search_lag(truth, &OFFSETS, 80);
        assert_eq!(again, refused, "refusals after the search");
        // One shorter than its whole second (1.9 s): found below it.
        let truth = Duration::from_millis(1900);
        let (refused, last) = search_lag(truth, &OFFSETS, 40);
        assert!(refused <= 6, "{refused} refused");
        assert!(last >= truth && last <= truth + LAG_NARROW, "{last:?}");
    }

    #[test]
    fn a_lag_refused_at_its_safe_end_moves_past_it_by_a_step() {
        let mut lag = WindowLag::default();
        lag.refused(Duration::from_millis(1990));
        lag.freed(Duration::from_millis(2000));
        assert_eq!(
            lag.probe_after(Duration::from_millis(2900)),
            Duration::from_millis(2000)
        );
        // The network held that probe up: refused at the safe end.
        lag.refused(Duration::from_millis(2000));
        assert_eq!(
            lag.probe_after(Duration::from_millis(2900)),
            Duration::from_millis(2000) + LAG_NARROW
        );
    }

    #[test]
    fn a_phase_that_moves_is_learned_again() {
        let mut phase = ResetPhase::default();
        let latest = Duration::from_secs(2);
        phase.freed(
            latest,
            Duration::from_millis(1099),
            Duration::from_millis(1100),
            false,
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
            false,
        );
        assert_eq!(
            phase,
            ResetPhase {
                after: Duration::ZERO,
                by: Duration::from_millis(50),
                step: NARROW,
            }
        );
    }
}
