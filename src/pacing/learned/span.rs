//! How long a stated window lasts after its first request, when the server rounds both the
//! window it states and its resets up to whole seconds: express-rate-limit's draft-8 headers
//! state a window of 1.5 s as `w=2`, each reset as `t` in whole seconds, and a client that
//! keeps to the stated window takes 2 s for every 1.5 (1.35 × the quota's minimum).
//!
//! Each admitted answer bounds the end of the window that holds it: the server stated its
//! reset `t` at some instant between the request's send and its answer, rounded up, so the
//! window ends after that send plus `t` less a grain and by that answer plus `t`. Measured
//! from the send of the window's first request, the bounds hold for every window that begins
//! with our first request (its length, plus that request's way to the server), so they are
//! kept from one window to the next.
//!
//! Answers early in a window all state the rounded-up reset; an answer says more only when it
//! is stated less than a grain before the end. So while the bounds are far apart, the
//! window's last unit of budget waits until a grain before the bounds' midpoint, and its
//! answer halves them: no 429 (the unit is the window's own, and it goes before the window's
//! least possible end) and no time (the window's other requests wait for its end anyway). A
//! last unit with nothing queued behind it and nothing on its way (a job's last request, a
//! lone call) would wait for the lesson alone: it is not held.
//! Once the bounds are within a 256th of the window (or two round trips, on a far
//! network) the last unit goes with the others.
//!
//! A window on the clock looks the same from inside: it began before our first request, by
//! as much as our roll came late, and measured from that request it seems that much shorter.
//! So bounds shorter than the stated window are tested once before any window is rolled by
//! them (the held units go on halving them after). The test window's first request goes
//! later than the last window's end by the stated window less a point the windows are known
//! to outlast after their first request (the lower bound, or a grain once a window's first
//! answer stated more), and the request sent a grain before that point (the first itself,
//! at a grain) reads the reset. A window that begins with its first request has more than a
//! grain left then (the reset stated is two grains or more); a window on the clock, which
//! began by the last one's end and lasts at most the stated window, has a grain or less, and
//! the bounds are refuted, final. (A roll's lateness, which makes a window on
//! the clock seem shorter after its first request by anything up to a grain, does not enter:
//! the test is reckoned from the end our roll took, which the window on the clock began by.)
//! Confirmed, each later window ends by its first answer plus the upper bound, with no
//! spread drawn past it (it is late by a round trip already); should such a window's first
//! request be refused all the same, the bounds are refuted too.

use std::time::Duration;

use super::phase::GRAIN;
use super::window::Refill;
use super::{KeyQuota, Ticket};
use crate::headers::RateLimitInfo;

/// How much later than it must the test window's first request goes: a timer's tick, and
/// the rounding of the instants the test is reckoned from.
const TEST_MARGIN: Duration = Duration::from_millis(5);

/// What the answers have shown of where the windows begin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Shown {
    /// Nothing yet: the bounds are for holding the last unit only.
    #[default]
    Nothing,
    /// This window is a test: its request sent `after` its first (the first itself when
    /// zero) says where the windows begin.
    Testing { after: Duration },
    /// The windows begin with their first request: the upper bound ends each.
    FollowFirst,
    /// The windows do not begin with their first request (the bounds crossed, the test
    /// window ended a grain or less after its last unit, or a window rolled by the bounds
    /// refused its first request). Final.
    Refuted,
}

/// The bounds on how long a window lasts after its first request went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct RoundedSpan {
    /// It lasts longer than this.
    lo: Duration,
    /// It lasts at most this long.
    hi: Option<Duration>,
    shown: Shown,
    /// A window's first request was answered with more than a grain left: the windows last
    /// longer than a grain from the instant their first request reaches the server.
    past_grain: bool,
}

impl RoundedSpan {
    /// An admitted request of a window whose first request (and first counted) went at
    /// `first`: sent at `sent`, answered at `now`, stating that the window resets in `reset`,
    /// rounded up to `grain`.
    pub(super) fn admitted(
        &mut self,
        first: Duration,
        sent: Duration,
        now: Duration,
        reset: Duration,
        grain: Duration,
    ) {
        if self.shown == Shown::Refuted {
            return;
        }
        if let Shown::Testing { after } = self.shown
            && sent >= first.saturating_add(after)
        {
            if reset > grain {
                tracing::debug!(
                    span_ms = self.hi.map(|hi| hi.as_millis() as u64),
                    "pacing: a stated window begins with its first request"
                );
                self.shown = Shown::FollowFirst;
            } else {
                self.refute("the test window ended within a grain of its test request");
                return;
            }
        }
        if sent == first && reset > grain {
            self.past_grain = true;
        }
        let hi = now.saturating_add(reset).saturating_sub(first);
        let lo = sent
            .saturating_add(reset)
            .saturating_sub(grain)
            .saturating_sub(first);
        self.hi = Some(self.hi.map_or(hi, |known| known.min(hi)));
        self.lo = self.lo.max(lo);
        if self.hi.is_some_and(|hi| hi < self.lo) {
            self.refute("the bounds on the window's length crossed");
        }
        tracing::trace!(
            lo_ms = self.lo.as_millis() as u64,
            hi_ms = hi.as_millis() as u64,
            "pacing: a stated window's length bounded"
        );
    }

    /// The longest the window may last after its first request, once bounded.
    fn upper(&self) -> Option<Duration> {
        self.hi.filter(|_| self.shown != Shown::Refuted)
    }

    /// By when a window ends whose first admitted answer came at `answered`, once the
    /// windows are shown to begin with their first request.
    pub(super) fn end_by(&self, answered: Duration) -> Option<Duration> {
        let hi = self.upper().filter(|_| self.shown == Shown::FollowFirst)?;
        Some(answered.saturating_add(hi))
    }

    /// The windows were shown not to begin with their first request (`why`).
    pub(super) fn refute(&mut self, why: &str) {
        if self.shown != Shown::Refuted {
            tracing::debug!(
                why,
                "pacing: a stated window's length is not bounded by its first request"
            );
        }
        self.shown = Shown::Refuted;
    }

    /// Whether the bounds are within a 256th of the window or two round trips (`trip`,
    /// the longest lately) of each other: no held unit can tell more.
    fn settled(&self, trip: Duration) -> bool {
        self.upper()
            .is_some_and(|hi| hi.saturating_sub(self.lo) <= (hi / 256).max(trip.saturating_mul(2)))
    }

    /// A window begins at our roll: a test that did not end in the last one is void. When
    /// the upper bound is shorter than the stated `window` by more than a thirty-second of
    /// it, and nothing has shown where the windows begin, this window is the test: returns
    /// how long after the last window's end (as our roll took it) its first request waits.
    ///
    /// A window on the clock began by that end and lasts at most the stated window, so it
    /// ends by that end plus the window. One that begins with its first request lasts longer
    /// than the lower bound after that request's send, and longer than a grain after its
    /// arrival once a window's first answer stated more than a grain. The test goes at the
    /// later of the two points (`point`), or not at all while neither holds: the window's
    /// first request waits the stated window less the point (and a round trip), and its
    /// request sent the point less a grain and a round trip after the first (the first
    /// itself at a grain) finds a window on the clock with a grain or less left, and one
    /// that followed its first request with more. It costs that wait once.
    pub(super) fn window_begins(
        &mut self,
        window: Duration,
        grain: Duration,
        trip: Duration,
    ) -> Option<Duration> {
        if matches!(self.shown, Shown::Testing { .. }) {
            self.shown = Shown::Nothing;
        }
        let hi = self.upper()?;
        if self.shown != Shown::Nothing || hi.saturating_add(window / 32) >= window {
            return None;
        }
        let at_grain = grain.saturating_add(trip);
        let point = if self.lo > at_grain {
            self.lo
        } else if self.past_grain {
            at_grain
        } else {
            return None;
        };
        let after = point.saturating_sub(at_grain);
        self.shown = Shown::Testing { after };
        let delay = window
            .saturating_sub(point)
            .saturating_add(trip)
            .saturating_add(TEST_MARGIN);
        tracing::debug!(
            lo_ms = self.lo.as_millis() as u64,
            hi_ms = hi.as_millis() as u64,
            delay_ms = delay.as_millis() as u64,
            after_ms = after.as_millis() as u64,
            "pacing: this window tests whether the stated windows begin with their first request"
        );
        Some(delay)
    }

    /// Until when the last unit of a window whose first request went at `first` waits: in
    /// the test window, until the test's instant; otherwise, while the bounds have not
    /// settled (before the test and after it), a `grain` before their midpoint, so that its
    /// answer halves them. None while the midpoint is within a grain of the window's start
    /// (no answer in the window can tell more than its first did).
    pub(super) fn hold_until(
        &self,
        first: Duration,
        grain: Duration,
        trip: Duration,
    ) -> Option<Duration> {
        let hi = self.upper()?;
        match self.shown {
            Shown::Testing { after, .. } => return Some(first.saturating_add(after)),
            Shown::Nothing | Shown::FollowFirst => {}
            Shown::Refuted => return None,
        }
        if self.settled(trip) {
            return None;
        }
        let apart = hi.saturating_sub(self.lo);
        let mid = self.lo.saturating_add(apart / 2);
        let after = mid.checked_sub(grain).filter(|after| !after.is_zero())?;
        Some(first.saturating_add(after))
    }
}

/// One key's [`RoundedSpan`], and what the current window holds of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct SpanWatch {
    bounds: RoundedSpan,
    /// This window began with our request, sent then: its answers bound the window's length.
    from: Option<Duration>,
    /// This window is a test: its first request waits until then.
    wait_until: Option<Duration>,
    /// This window's end came from the bounds.
    capped: bool,
    /// The window before this one ended by the bounds: if our roll began this one, its
    /// first answer tests them.
    after_capped: bool,
}

impl SpanWatch {
    /// The window ended (rolled by us or by the server): what it held is the last one's.
    pub(super) fn window_ended(&mut self) {
        self.from = None;
        self.wait_until = None;
        self.after_capped = std::mem::take(&mut self.capped);
    }
}

impl KeyQuota {
    /// Whether this key's windows are learned by [`RoundedSpan`]: a stated window, its resets
    /// rounded to whole seconds, that comes back whole (a fixed window) and keeps no clock of
    /// its own (one that begins with its first request).
    fn spans_rounded(&self) -> bool {
        self.coarse
            && self.window.is_some()
            && self.refill == Refill::Whole
            && !self.moving
            && !self.clock.keeps()
    }

    /// The end of the window whose first admitted answer came at `answered`, bound by
    /// `stated` so far: sooner, once the windows are shown to begin with their first request
    /// (see [`RoundedSpan::end_by`]).
    pub(super) fn span_end(&mut self, answered: Duration, stated: Duration) -> Duration {
        match self.span.bounds.end_by(answered) {
            Some(end) if end < stated && self.spans_rounded() => {
                self.span.capped = true;
                end
            }
            _ => stated,
        }
    }

    /// Our roll began a window that follows one ended at `ended`: whether it is a test of
    /// the bounds, and if so until when its first request waits (see
    /// [`RoundedSpan::window_begins`]).
    pub(super) fn span_roll(&mut self, ended: Duration) {
        self.span.wait_until = match self.window.filter(|_| self.spans_rounded()) {
            Some(window) => self
                .span
                .bounds
                .window_begins(window, GRAIN, self.longest_trip)
                .map(|delay| ended.saturating_add(delay)),
            None => None,
        };
    }

    /// Whether the current window's end came from the bounds: an upper bound of the window's
    /// length after its first answer, so a pause until it needs no spread past it.
    pub(crate) fn ends_by_span(&self) -> bool {
        self.span.capped
    }

    /// Until when the first request of a window that tests the bounds waits.
    pub(super) fn span_wait(&self, now: Duration) -> Option<Duration> {
        self.span.wait_until.filter(|until| *until > now)
    }

    /// The first answer of a window our roll began: refused, when the window before ended by
    /// the bounds, they are refuted (that window had not ended).
    pub(super) fn span_first_answer(&mut self, refused: bool) {
        if std::mem::take(&mut self.span.after_capped) && refused {
            self.span
                .bounds
                .refute("a window begun at the end they bounded refused its first request");
        }
    }

    /// An admitted answer of the current window, the first of a window our roll began when
    /// `first`: the window began with our request when that answers the window's first send
    /// and states all the quota but one left; what every answer of such a window states of its
    /// reset bounds its length. (A window our roll did not begin, the job's first, may have
    /// begun long before our first request, on the clock.)
    pub(super) fn span_saw(
        &mut self,
        now: Duration,
        ticket: Ticket,
        info: &RateLimitInfo,
        first: bool,
    ) {
        if first {
            let limit = info.limit.or(self.limit);
            self.span.from = match (self.sends.first(), info.remaining, limit) {
                (Some(sent), Some(left), Some(limit))
                    if sent.serial == ticket.serial && left.saturating_add(1) == limit =>
                {
                    Some(sent.at)
                }
                _ => None,
            };
        }
        if let (Some(from), Some(reset), Some(grain)) =
            (self.span.from, info.reset, info.reset_grain)
            && self.spans_rounded()
        {
            self.span
                .bounds
                .admitted(from, ticket.sent, now, reset, grain);
        }
    }

    /// Until when a window's last unit waits for its answer to bound the window's length: in
    /// the test window, until the test's instant (see [`RoundedSpan::hold_until`]).
    pub(super) fn span_hold(&self, now: Duration) -> Option<Duration> {
        let from = self.span.from.filter(|_| self.spans_rounded())?;
        let at = self
            .span
            .bounds
            .hold_until(from, GRAIN, self.longest_trip)?;
        (at > now && self.reset_at.is_none_or(|reset| at < reset)).then_some(at)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{RoundedSpan, Shown};

    const MS: Duration = Duration::from_millis(1);
    const SECOND: Duration = Duration::from_secs(1);
    const TRIP: Duration = Duration::from_millis(2);
    const STATED: Duration = Duration::from_secs(2);

    /// What a server states at `at` of a window that ends at `end`: the reset, rounded up to
    /// whole seconds.
    fn stated(end: Duration, at: Duration) -> Duration {
        SECOND * (end - at).as_secs_f64().ceil() as u32
    }

    /// Where the server's windows begin.
    #[derive(Clone, Copy)]
    enum Server {
        /// With each window's first request, and last this long.
        FollowFirst(Duration),
        /// On the clock, every 2 s; our roll sends each window's first request this late
        /// (unless the window is a test).
        Clock(Duration),
    }

    /// `windows` windows our roll begins, stated as 2 s: each window's first request (its
    /// answer bounds the window), then the last unit when it is held (asserted to go before
    /// the window's end). Returns the bounds, and the window that ended first by them.
    fn windows(server: Server, windows: u32) -> (RoundedSpan, Option<u32>) {
        let mut bounds = RoundedSpan::default();
        let mut ended = Duration::ZERO;
        let mut capped = None;
        for k in 0..windows {
            let delay = bounds.window_begins(STATED, SECOND, TRIP);
            let (first, end) = match server {
                Server::FollowFirst(span) => {
                    let first = ended + delay.unwrap_or(MS * 10);
                    (first, first + MS + span)
                }
                Server::Clock(late) => (ended + delay.unwrap_or(late), ended + STATED),
            };
            bounds.admitted(first, first, first + TRIP, stated(end, first + MS), SECOND);
            if let Some(at) = bounds.hold_until(first, SECOND, TRIP) {
                assert!(at < end, "window {k}: held past the window's end");
                bounds.admitted(first, at, at + TRIP, stated(end, at + MS), SECOND);
            }
            if capped.is_none() && bounds.end_by(first + TRIP).is_some() {
                capped = Some(k);
            }
            ended = end;
        }
        (bounds, capped)
    }

    /// A window of 1.5 s stated as 2 s: the first answer bounds it within a second, the held
    /// last units halve the bounds, a test at a grain shows the windows follow their first
    /// request, and the bounds settle within a 256th of the window.
    #[test]
    fn a_window_rounded_up_is_bisected_and_passes_the_test() {
        let span = MS * 1_500;
        let (bounds, capped) = windows(Server::FollowFirst(span), 12);
        assert_eq!(bounds.shown, Shown::FollowFirst);
        assert!(capped.is_some_and(|k| k <= 3), "{capped:?}");
        let hi = bounds.upper().expect("bounded");
        assert!(hi >= span && hi <= span + span / 256 + TRIP, "{hi:?}");
        assert_eq!(bounds.end_by(SECOND), Some(SECOND + hi));
        assert!(bounds.settled(TRIP));
    }

    /// A window of 1.2 s stated as 2 s: its bounds are far from settled when the second
    /// window tests them (its first request, a grain before a window on the clock would end),
    /// and the test passes; the third window ends by the bounds.
    #[test]
    fn a_short_window_passes_the_test_before_its_bounds_settle() {
        let (bounds, capped) = windows(Server::FollowFirst(MS * 1_200), 3);
        assert_eq!(bounds.shown, Shown::FollowFirst);
        assert_eq!(capped, Some(1));
        assert!(!bounds.settled(TRIP));
        let (bounds, capped) = windows(Server::FollowFirst(MS * 1_200), 16);
        assert_eq!(bounds.shown, Shown::FollowFirst);
        assert!(capped.is_some(), "never confirmed");
        assert!(
            bounds
                .upper()
                .is_some_and(|hi| hi >= MS * 1_200 && hi < MS * 1_250)
        );
    }

    /// Windows on the clock of 2 s, each first request sent 400 ms late (a loose bound on
    /// the last window's end): from those requests the windows seem 1.6 s long. The test
    /// fails (it is reckoned from the end our roll took, which the windows began by) and
    /// refutes the bounds: they end no window, hold no unit, test nothing more.
    #[test]
    fn a_window_on_the_clock_fails_the_tests() {
        let (mut bounds, capped) = windows(Server::Clock(MS * 400), 30);
        assert_eq!(capped, None);
        assert_eq!(bounds.shown, Shown::Refuted);
        assert_eq!(bounds.hold_until(SECOND * 60, SECOND, TRIP), None);
        assert_eq!(bounds.window_begins(STATED, SECOND, TRIP), None);
    }

    /// The same windows on the clock, first requests sent 20 ms late: they seem as long as
    /// stated, and nothing is tested (nor held once the bounds settle).
    #[test]
    fn a_window_on_the_clock_sent_promptly_is_not_tested() {
        let (bounds, capped) = windows(Server::Clock(MS * 20), 30);
        assert_eq!(capped, None);
        assert_eq!(bounds.shown, Shown::Nothing);
        assert_eq!(bounds.hold_until(SECOND * 60, SECOND, TRIP), None);
    }

    /// A window stated as it is (a whole second): every answer states the same reset, so no
    /// held unit could tell more, none is held, and nothing is tested.
    #[test]
    fn a_whole_second_window_holds_nothing() {
        let mut bounds = RoundedSpan::default();
        bounds.admitted(Duration::ZERO, Duration::ZERO, MS * 2, SECOND, SECOND);
        bounds.admitted(Duration::ZERO, MS * 3, MS * 5, SECOND, SECOND);
        assert_eq!(bounds.hold_until(Duration::ZERO, SECOND, TRIP), None);
        assert_eq!(bounds.window_begins(SECOND, SECOND, TRIP), None);
        assert_eq!(bounds.upper(), Some(MS * 1_002));
    }

    /// Nothing is held, tested or ended before anything bounds the window.
    #[test]
    fn nothing_held_unbounded() {
        let mut bounds = RoundedSpan::default();
        assert_eq!(bounds.hold_until(MS, SECOND, MS), None);
        assert_eq!(bounds.window_begins(STATED, SECOND, MS), None);
        assert_eq!(bounds.end_by(MS), None);
    }
}
