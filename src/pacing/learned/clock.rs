//! Where the edges of a stated window fall, when the server keeps its windows on the clock.
//!
//! A server that states its window (`w=` in the IETF fields) and a reset in whole seconds says
//! when the window holding an answer ends only from above: the window began by the time its
//! first request was answered, so it ends by that answer plus the window, and the reset is
//! rounded up. Each window's bound is late by the first request's way back (at least), and the
//! next window's first request goes at that bound: taken afresh each window, the client's
//! windows fall later into the server's by about a round trip a window, until a burst crosses
//! the server's roll and the window after it is overspent (measured: 20 per 1 s, 0.2-50 ms
//! each way, 4-23 × 429 and 1.06-1.08 × the quota's minimum over 1,200 requests).
//!
//! Windows on the clock (the second, the minute) end a whole window apart, so a bound on one
//! window's end bounds every later one's: each window's end is the earlier of its own bound
//! and the last window's end carried a window forward, and the tightest bound any window gave
//! holds. Windows that follow the client do not keep that rhythm: one that begins with a
//! client's first request (express-rate-limit's) begins when our first request after the last
//! one's end reaches the server, and a sliding log frees each slot a window after our request
//! that spent it, both later than a bound carried forward. Sent at a carried end, such a
//! window's first request is refused, and the server's `Retry-After` (rounded up to a second)
//! is then the wait: tried on every stated window, that test cost express-rate-limit a 429
//! and 1.6-2.0 points of the quota's time (1.011 to 1.030 × for 20 per 2 s).
//!
//! So the ends carry only once a window is seen to keep a clock of its own: an answer found
//! the server had rolled while our window was open (a window that begins with our request,
//! or a log of our requests, never rolls under them). The drift then costs the one crossing
//! that shows it, and none after. The first request of a window begun at a carried end
//! earlier than its own is still a test: refused, the windows are not on the clock after all,
//! and each window's own bound rules again.

use std::time::Duration;

/// What the answers have shown of the server's windows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Shown {
    /// Nothing yet: each window keeps its own bound.
    #[default]
    Nothing,
    /// The windows keep a clock of their own: one rolled while ours was open.
    Kept,
    /// The windows do not keep to a clock: the first request of a window begun at a carried
    /// end was refused. Final.
    Refuted,
}

/// Whether the windows keep to the clock, as far as the answers have shown, and the end the
/// last window's carries to the one our roll began.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ClockEdges {
    shown: Shown,
    /// The end the last window's carries to the window our roll began.
    next: Option<Duration>,
    /// The current window's end is the carried one, earlier than the window's own.
    carried: bool,
    /// The current window began at a carried end: its first answer tests the clock.
    testing: bool,
}

/// How soon after a window's end a roll is prompt: a sixteenth of the window, at most 125 ms
/// (the gate opens at most 20 ms after the end, and a timer wakes a few late).
fn prompt(window: Duration) -> Duration {
    (window / 16).min(Duration::from_millis(125))
}

/// Earlier than its own bound by less than this, a carried bound is the same bound (a tick
/// of the timer): the window's first request is no test of the clock.
const SAME: Duration = Duration::from_millis(1);

impl ClockEdges {
    /// Our roll at `now` began a window, the last one having ended by `ended`; windows are
    /// `window` long. If the last one's end was carried, the new window's first answer tests
    /// the clock.
    ///
    /// Only a prompt roll carries the end. The last window ended somewhere before `ended`
    /// (as early as a window before, for all a bound says), and a roll later than `ended` by
    /// `δ` may be in the window after next if the last one's requests reached the server in
    /// its final `δ`; a window whose requests came that late crossed the server's roll
    /// already (an answer then begins the next window). Later rolls carry nothing: a bound of
    /// 1 s on a window that ended at 0.149 s, rolled at 1.193 s, is in the window that ends
    /// at 2.149 s, not by 2 s.
    pub(super) fn rolled(&mut self, ended: Duration, now: Duration, window: Option<Duration>) {
        self.testing = self.carried && self.shown == Shown::Kept;
        self.carried = false;
        self.next = window
            .filter(|window| now.saturating_sub(ended) <= prompt(*window))
            .map(|window| ended.saturating_add(window))
            .filter(|next| *next > now);
    }

    /// The end of the window our roll began, given its `own` bound (from its first answers),
    /// at `now`: while the windows keep to the clock and the window comes back `whole` (a
    /// fixed window), the earlier of that and the end carried from the last window; never
    /// before `now`.
    pub(super) fn end(&mut self, own: Duration, whole: bool, now: Duration) -> Duration {
        let end = match self.next {
            Some(carried) if whole && self.shown == Shown::Kept && carried < own => carried,
            _ => own,
        };
        self.carried = end.saturating_add(SAME) < own && end > now;
        end.max(now)
    }

    /// A window rolled while ours was open (an answer found the server had rolled): the
    /// server's windows keep a clock of their own, and their ends carry from now on (unless
    /// the windows were shown not to).
    pub(super) fn confirm(&mut self) {
        if self.shown == Shown::Nothing {
            tracing::debug!("pacing: the stated window keeps to a clock");
            self.shown = Shown::Kept;
        }
    }

    /// The current window's end came from its own answers.
    pub(super) fn own_end(&mut self) {
        self.carried = false;
    }

    /// A window began that our roll did not begin (an answer showed the server's roll): its
    /// end is its answers', and nothing tests the clock.
    pub(super) fn begun_elsewhere(&mut self) {
        self.carried = false;
        self.testing = false;
        self.next = None;
    }

    /// The first answer of a window begun at our own roll: refused, when that roll came at a
    /// carried end, the window before had not ended, so windows do not keep to the clock;
    /// each window's own bound rules from now on.
    pub(super) fn first_answer(&mut self, refused: bool) {
        if self.testing && refused {
            tracing::debug!("pacing: the stated window does not keep to the clock");
            self.shown = Shown::Refuted;
            self.carried = false;
        }
        self.testing = false;
    }

    /// Whether a window has been seen to keep a clock of its own.
    pub(super) fn keeps(&self) -> bool {
        self.shown == Shown::Kept
    }

    /// Whether the windows have been shown not to keep to the clock.
    #[cfg(test)]
    pub(super) fn is_refuted(&self) -> bool {
        self.shown == Shown::Refuted
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::ClockEdges;

    const MS: Duration = Duration::from_millis(1);
    const SECOND: Duration = Duration::from_secs(1);

    fn roll(clock: &mut ClockEdges, ended: Duration, now: Duration) {
        clock.rolled(ended, now, Some(SECOND));
    }

    /// Windows seen to keep a clock (one rolled under our requests).
    fn confirmed() -> ClockEdges {
        let mut clock = ClockEdges::default();
        clock.confirm();
        clock
    }

    /// Until a window rolls under our requests, each window's own bound rules: a window that
    /// begins with our first request (or a log of our requests) keeps no clock.
    #[test]
    fn nothing_carries_until_a_window_rolls_under_our_requests() {
        let mut clock = ClockEdges::default();
        roll(&mut clock, MS * 1_010, MS * 1_025);
        assert_eq!(clock.end(MS * 2_075, true, MS * 1_075), MS * 2_075);
        roll(&mut clock, MS * 2_075, MS * 2_090);
        clock.first_answer(true);
        assert!(!clock.is_refuted());
        clock.confirm();
        assert_eq!(clock.end(MS * 3_140, true, MS * 2_140), MS * 3_075);
    }

    /// Windows on the clock, each first answered a round trip after our roll, and each roll a
    /// little late (the gate's jitter, a timer): the first window's bound carries forward a
    /// window at a time, and neither the rolls' lateness nor the later windows' looser own
    /// bounds move it.
    #[test]
    fn the_tightest_bound_carries_forward() {
        let mut clock = confirmed();
        // The server's windows end at 1.000, 2.000, ... s; the first window was bound to end
        // by 1.010 s. Our roll came at 1.025 s and its first answer at 1.075 s (a far server):
        // that window's own bound, 2.075 s, is late by the roll and the round trip.
        roll(&mut clock, MS * 1_010, MS * 1_025);
        assert_eq!(clock.end(MS * 2_075, true, MS * 1_075), MS * 2_010);
        roll(&mut clock, MS * 2_010, MS * 2_030);
        clock.first_answer(false);
        assert_eq!(clock.end(MS * 3_080, true, MS * 2_080), MS * 3_010);
        // A window answered sooner after its edge tightens the edge for those after it.
        roll(&mut clock, MS * 3_010, MS * 3_012);
        clock.first_answer(false);
        assert_eq!(clock.end(MS * 4_004, true, MS * 3_014), MS * 4_004);
        roll(&mut clock, MS * 4_004, MS * 4_020);
        assert_eq!(clock.end(MS * 5_090, true, MS * 4_090), MS * 5_004);
        assert!(!clock.is_refuted());
    }

    /// A roll more than a sixteenth of a window after the end: the windows that passed may
    /// have ended anywhere up to the bound, and nothing is carried.
    #[test]
    fn a_late_roll_carries_nothing() {
        let mut clock = confirmed();
        // The bound says 1 s; the window ended at 0.149 s. The roll at 1.193 s is in the
        // window that ends at 2.149 s.
        roll(&mut clock, SECOND, MS * 1_193);
        assert_eq!(clock.end(MS * 2_193, true, MS * 1_193), MS * 2_193);
        // At 1.062 s, the sixteenth's end, it carries.
        roll(&mut clock, MS * 2_193, MS * 2_255);
        assert_eq!(clock.end(MS * 3_300, true, MS * 2_300), MS * 3_193);
        // Nor is anything carried when no window is stated.
        clock.rolled(MS * 3_193, MS * 3_200, None);
        assert_eq!(clock.end(MS * 4_250, true, MS * 3_250), MS * 4_250);
    }

    /// An answer that came after the carried edge: by the clock, its window has ended.
    #[test]
    fn a_carried_edge_already_past_ends_the_window_now() {
        let mut clock = confirmed();
        roll(&mut clock, MS * 1_010, MS * 1_015);
        assert_eq!(clock.end(MS * 3_020, true, MS * 2_020), MS * 2_020);
    }

    /// Nothing is carried to a window that does not come back whole (a moving window).
    #[test]
    fn only_a_whole_window_carries() {
        let mut clock = confirmed();
        roll(&mut clock, MS * 1_010, MS * 1_025);
        assert_eq!(clock.end(MS * 2_075, false, MS * 1_075), MS * 2_075);
    }

    /// A window begun at a carried end whose first request is refused refutes the clock: each
    /// window's own bound rules from then on.
    #[test]
    fn refused_at_a_carried_end_each_window_keeps_its_own() {
        let mut clock = confirmed();
        roll(&mut clock, MS * 1_010, MS * 1_025);
        clock.end(MS * 2_075, true, MS * 1_075);
        roll(&mut clock, MS * 2_010, MS * 2_012);
        clock.first_answer(true);
        assert!(clock.is_refuted());
        assert_eq!(clock.end(MS * 3_100, true, MS * 2_100), MS * 3_100);
    }

    /// A refusal tests nothing when the window began at its own bound: one whose end its own
    /// answers set, one a carried end no more than a millisecond earlier than its own, one an
    /// answer began; nor does any answer but the first.
    #[test]
    fn a_refusal_at_a_windows_own_bound_refutes_nothing() {
        let mut clock = confirmed();
        roll(&mut clock, MS * 1_010, MS * 1_025);
        clock.end(MS * 2_075, true, MS * 1_075);
        clock.own_end();
        roll(&mut clock, MS * 2_005, MS * 2_010);
        clock.first_answer(true);
        assert!(!clock.is_refuted());
        assert_eq!(clock.end(MS * 3_005, true, MS * 2_005), MS * 3_005);
        roll(&mut clock, MS * 3_005, MS * 3_010);
        clock.first_answer(true);
        assert!(!clock.is_refuted());
        clock.end(MS * 4_060, true, MS * 3_060);
        clock.begun_elsewhere();
        roll(&mut clock, MS * 4_070, MS * 4_080);
        clock.first_answer(true);
        assert!(!clock.is_refuted());
        clock.end(MS * 5_130, true, MS * 4_130);
        roll(&mut clock, MS * 5_070, MS * 5_080);
        clock.first_answer(false);
        clock.first_answer(true);
        assert!(!clock.is_refuted());
    }
}
