//! A silent server whose quota comes back at a rate (a token bucket, nginx's `limit_req`, a
//! leaky bucket), paced at that rate as its refusals bound it.
//!
//! A bucket that refuses a request holds less than one request's worth at that instant. From
//! then on it cannot admit more than it refills plus that fraction: the requests of ours it
//! admitted since a refusal, less one, over the time since, are a lower bound on its rate,
//! true at every answer, not only at the next refusal (and tight at a refusal, when nothing
//! banked is left). The next refusal says it is empty again, so what it admitted between the
//! two refusals, plus one, over the time between them, is an upper bound, as long as it never
//! filled up meanwhile (a full bucket wastes what it would refill). Both are measured from the
//! refusal that handed the key over (the pauses before it may have let the bucket fill), so
//! they close in on the rate as the job goes on: a unit of rounding over a span that keeps
//! growing. The upper bound is the latest span's, so a bound made low by a bucket that filled
//! is outgrown, and one that spending at it disproves (no refusal for as long as the settling
//! banked, 2 s at most) is raised, by 5% and then by a step that doubles each time.
//!
//! The pace: at the lower bound after each refusal (the bucket, empty, banks what the pace
//! leaves), for half the time since the hand-over; then at the upper bound, which spends the
//! bank and, with it, draws the next refusal that narrows both bounds.
//! Once the bounds are within [`KNOWN_WITHIN`] of each other the edge is known and the pace
//! stays at the lower bound: a 429 is a learning cost, and there is nothing left to learn that
//! is worth one.
//!
//! The window model in the `silent` module hands a key over to this one when its windows
//! sustain at most half what the first admitted (a bucket's burst, not a window's quota) and
//! the spans from its first refusal to each later one bound one rate; it takes the key back
//! when a refusal refutes the rate (nothing admitted since the last refusal, a whole refill at
//! the lower bound after it: a limiter that counts refused requests, or others spending).

use std::time::Duration;

/// The bounds on the rate are this close (as a share of the lower): no more refusals are drawn.
pub(super) const KNOWN_WITHIN: f64 = 0.02;
/// How much the upper bound is first raised when spending at it draws no refusal (each raise
/// after that without a refusal doubles the step, to twice the bound at most).
const RAISE: f64 = 0.05;
/// The longest spell at the upper bound without a refusal before it is raised.
const LONGEST_DRAIN: Duration = Duration::from_secs(2);
/// The shortest settling after a refusal.
const LEAST_SETTLE: Duration = Duration::from_millis(500);
/// The shortest span a bound is taken from: shorter, the latency is a large share of it.
pub(super) const LEAST_SPAN: Duration = Duration::from_millis(200);

/// A silent bucket's rate, bounded by the refusals.
#[derive(Debug, Clone)]
pub(super) struct SilentRate {
    /// When the request of the refusal that handed the key over went: the bucket held less
    /// than one request.
    anchor: Duration,
    /// Our requests sent after the anchor that were admitted.
    admitted: u64,
    /// Requests a second the bucket refills at least.
    lo: f64,
    /// Requests a second it refills at most, if it never filled since the anchor.
    hi: f64,
    /// Until when the pace stays at the lower bound, and for how long it did.
    settle_until: Duration,
    settled_for: Duration,
    /// The next raise of the upper bound, as a share of it.
    raise: f64,
    /// When our last request went.
    last_sent: Option<Duration>,
    /// When the request of the last refusal went, and what had been admitted by then.
    refused_at: Duration,
    admitted_at_refusal: u64,
}

/// A rate from `count` requests over `span`, per second.
fn per_second(count: f64, span: Duration) -> f64 {
    count / span.as_secs_f64().max(1e-3)
}

/// The rate, requests a second, a bucket refills at least, if it was empty at an anchor (a
/// refusal's request went then) and has since let in `admitted` of ours sent after it, the
/// last answer `answered` after the anchor: what it let in, less the fraction it held.
fn lower_bound(admitted: u64, answered: Duration) -> f64 {
    per_second(admitted.saturating_sub(1) as f64, answered)
}

/// The bounds a span from one refusal to another tells of a bucket's rate, requests a second:
/// `admitted` of ours let in between, the later refusal's request sent `sent` after the
/// anchor and answered `answered` after it, and `still_out` more sent between the two still
/// unanswered. The upper bound holds only if the bucket never filled meanwhile, and counts
/// every request that may have been let in: those still out may be (answers come out of
/// order: real nginx, 3 r/s with a burst of 10, refused the sixth of a window of six before
/// it answered two sent before it, and a bound that left them out read 2.91 a second).
pub(super) fn span_bounds(
    admitted: u64,
    still_out: u64,
    sent: Duration,
    answered: Duration,
) -> (f64, f64) {
    (
        lower_bound(admitted, answered),
        per_second((admitted + still_out + 1) as f64, sent),
    )
}

impl SilentRate {
    /// Hands a key over: the first refusal's request went at `anchor`, `admitted` of ours sent
    /// after it were admitted (and `still_out` sent after it, no later than the refused one,
    /// are not answered yet), and the one sent at `refused` (answered `now`) was refused.
    /// `None` while the span is too short to bound anything.
    pub(super) fn new(
        anchor: Duration,
        admitted: u64,
        still_out: u64,
        refused: Duration,
        now: Duration,
    ) -> Option<SilentRate> {
        let span = refused.saturating_sub(anchor);
        if admitted < 3 || span < LEAST_SPAN {
            return None;
        }
        let (lo, hi) = span_bounds(admitted, still_out, span, now.saturating_sub(anchor));
        let hi = hi.max(lo);
        // The spans from here on start at this refusal: the one before it may have paused
        // long enough for the bucket to fill (which keeps the lower bound true but makes the
        // upper one low).
        let mut rate = SilentRate {
            anchor: refused,
            admitted: 0,
            lo,
            hi,
            settle_until: now,
            settled_for: Duration::ZERO,
            raise: RAISE,
            last_sent: Some(refused),
            refused_at: refused,
            admitted_at_refusal: 0,
        };
        rate.settle(now);
        Some(rate)
    }

    /// The time one request takes to refill at the lower bound.
    pub(super) fn per_request(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.lo)
    }

    /// The lower and upper bounds, requests a second.
    #[cfg(test)]
    pub(super) fn bounds(&self) -> (f64, f64) {
        (self.lo, self.hi)
    }

    /// Whether the edge is known: the bounds are close enough that no refusal is worth drawing.
    pub(super) fn known(&self) -> bool {
        self.hi <= self.lo * (1.0 + KNOWN_WITHIN)
    }

    /// The pace at `now`, requests a second.
    fn pace(&self, now: Duration) -> f64 {
        if now < self.settle_until || self.known() {
            self.lo
        } else {
            self.hi
        }
    }

    /// When the next request may go: `None` now (it is counted as sent), or the instant.
    pub(super) fn admit(&mut self, now: Duration) -> Option<Duration> {
        let drain_for = self.settled_for.min(LONGEST_DRAIN);
        if !self.known() && now >= self.settle_until.saturating_add(drain_for) {
            // Spending at the upper bound for as long as the settling banked (2 s at most),
            // with no refusal: the bound is low, because the bucket filled at some point (a
            // pause, a pace below the rate) or because the server is no bucket (a counter on
            // the clock, which freed nothing until its window ended). Faster, by a step that
            // doubles each time, until a refusal says where the edge is.
            self.hi *= 1.0 + self.raise;
            self.raise = (self.raise * 2.0).min(1.0);
            self.settle_until = now;
            self.settled_for = drain_for;
        }
        if let Some(last) = self.last_sent {
            let at = last.saturating_add(Duration::from_secs_f64(1.0 / self.pace(now)));
            if at > now {
                return Some(at);
            }
        }
        self.last_sent = Some(now);
        None
    }

    /// A request sent at `sent` was admitted, answered at `now`.
    pub(super) fn admitted(&mut self, sent: Duration, now: Duration) {
        if sent <= self.anchor {
            return;
        }
        self.admitted = self.admitted.saturating_add(1);
        let span = now.saturating_sub(self.anchor);
        if span >= LEAST_SPAN {
            self.lo = self.lo.max(lower_bound(self.admitted, span));
            self.hi = self.hi.max(self.lo);
        }
    }

    /// A request sent at `sent` was refused, answered at `now`: the bucket was empty. Returns
    /// the pause before the next request, or `None` if the refusal refutes the model: nothing
    /// was admitted since the last refusal, and this request went a whole refill at the lower
    /// bound after it, so a bucket refilling at that rate would have let it in. `still_out`
    /// says how many of ours sent after an instant (and no later than this one) are
    /// unanswered.
    pub(super) fn refused(
        &mut self,
        sent: Duration,
        now: Duration,
        still_out: &dyn Fn(Duration) -> u64,
    ) -> Option<Duration> {
        if self.admitted == self.admitted_at_refusal
            && sent >= self.refused_at.saturating_add(self.per_request())
        {
            return None;
        }
        let span = sent.saturating_sub(self.anchor);
        if span >= LEAST_SPAN {
            // Empty now: nothing banked is left to make the lower bound loose.
            let (lo, hi) = span_bounds(
                self.admitted,
                still_out(self.anchor),
                span,
                now.saturating_sub(self.anchor),
            );
            self.lo = self.lo.max(lo);
            self.hi = hi.max(self.lo);
        }
        self.settle(now);
        self.raise = RAISE;
        self.refused_at = sent;
        self.admitted_at_refusal = self.admitted;
        // Empty when it went: the next request waits a whole refill at the lower bound.
        let next = sent.saturating_add(self.per_request());
        self.last_sent = Some(sent);
        Some(next.saturating_sub(now).max(Duration::from_millis(1)))
    }

    /// After a refusal at `now`: the pace stays at the lower bound for half the time since the
    /// anchor (so the refusals that narrow the bounds come further apart as they narrow).
    fn settle(&mut self, now: Duration) {
        let settle = (now.saturating_sub(self.anchor) / 2).max(LEAST_SETTLE);
        self.settle_until = now.saturating_add(settle);
        self.settled_for = settle;
    }
}

/// A limiter for the silent models' tests, on a manual clock: a token bucket (`rate` a
/// second, `capacity` at most, full at the start), or one that takes a token for a refused
/// request too (its count goes below zero), as a limiter that counts every request it sees
/// does.
#[cfg(test)]
pub(super) struct TestBucket {
    rate: f64,
    capacity: f64,
    tokens: f64,
    pub(super) at: Duration,
    counts_refused: bool,
}

#[cfg(test)]
impl TestBucket {
    pub(super) fn new(rate: f64, capacity: f64) -> TestBucket {
        TestBucket {
            rate,
            capacity,
            tokens: capacity,
            at: Duration::ZERO,
            counts_refused: false,
        }
    }

    pub(super) fn counting_refused(self) -> TestBucket {
        TestBucket {
            counts_refused: true,
            ..self
        }
    }

    /// A request at `now`: admitted or not.
    pub(super) fn take(&mut self, now: Duration) -> bool {
        let elapsed = now.saturating_sub(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return true;
        }
        if self.counts_refused {
            self.tokens -= 1.0;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Drives `rate` against `bucket` for `length`, one request at a time answered 2 ms after
    /// it went; returns the refusals and the requests admitted.
    fn drive(
        rate: &mut SilentRate,
        bucket: &mut TestBucket,
        from: Duration,
        length: Duration,
    ) -> (u64, u64) {
        let (mut refused, mut admitted) = (0, 0);
        let mut now = from;
        while now < from + length {
            match rate.admit(now) {
                Some(at) => now = at,
                None => {
                    let sent = now;
                    let ok = bucket.take(sent);
                    now += 2 * MS;
                    if ok {
                        admitted += 1;
                        rate.admitted(sent, now);
                    } else {
                        refused += 1;
                        now += rate
                            .refused(sent, now, &|_| 0)
                            .expect("a bucket never refutes the model");
                    }
                }
            }
        }
        (refused, admitted)
    }

    /// A bucket spent at once and refused at 0, then after a pause of 250 ms paced at `pace`
    /// a second until refused, or for at most 2 s and then spent 5 ms apart until refused (as
    /// the window model hands a key over).
    fn handed_over(bucket: &mut TestBucket, pace: f64) -> SilentRate {
        let mut sent = Duration::ZERO;
        while bucket.take(sent) {}
        let anchor = sent;
        let mut admitted = 0;
        sent += 250 * MS;
        while bucket.take(sent) {
            admitted += 1;
        }
        loop {
            if sent > Duration::from_secs(2) {
                sent += 5 * MS;
                if !bucket.take(sent) {
                    break;
                }
                admitted += 1;
                continue;
            }
            sent += Duration::from_secs_f64(1.0 / pace);
            if !bucket.take(sent) {
                break;
            }
            admitted += 1;
        }
        SilentRate::new(anchor, admitted, 0, sent, sent + 2 * MS).expect("a span long enough")
    }

    #[test]
    fn the_bounds_hold_the_rate_of_a_bucket_it_drains() {
        let mut bucket = TestBucket::new(13.0, 6.0);
        let rate = handed_over(&mut bucket, 14.0);
        let (lo, hi) = rate.bounds();
        assert!(lo <= 13.0 && 13.0 <= hi, "{lo} .. {hi}");
    }

    #[test]
    fn refusals_stop_once_the_edge_is_known_and_the_pace_stays_close_to_the_rate() {
        let mut bucket = TestBucket::new(13.0, 6.0);
        let mut rate = handed_over(&mut bucket, 14.0);
        let start = bucket.at;
        let (early, _) = drive(&mut rate, &mut bucket, start, Duration::from_secs(30));
        assert!(rate.known(), "bounds {:?} after 30 s", rate.bounds());
        let (late, admitted) = drive(
            &mut rate,
            &mut bucket,
            start + Duration::from_secs(30),
            Duration::from_secs(60),
        );
        assert!(early <= 6, "{early} refusals in the first 30 s");
        assert_eq!(late, 0, "refusals once the edge is known");
        // 60 s at 13 a second is 780; the lower bound is within 2% of the rate, and below it.
        assert!(
            (760..=781).contains(&admitted),
            "{admitted} admitted in 60 s"
        );
    }

    #[test]
    fn a_bucket_that_filled_before_the_hand_over_is_paced_close_to_its_rate_all_the_same() {
        // Paced below the rate before the hand-over, the bucket filled and wasted what it
        // refilled: the upper bound from that span is below the rate.
        let mut bucket = TestBucket::new(10.0, 6.0);
        let mut rate = handed_over(&mut bucket, 6.0);
        assert!(rate.bounds().1 < 10.0, "bounds {:?}", rate.bounds());
        let start = bucket.at;
        let (early, _) = drive(&mut rate, &mut bucket, start, Duration::from_secs(30));
        let (late, admitted) = drive(
            &mut rate,
            &mut bucket,
            start + Duration::from_secs(30),
            Duration::from_secs(60),
        );
        assert!(early <= 8, "{early} refusals in the first 30 s");
        assert!(late <= 1, "{late} refusals in the next 60 s");
        assert!(
            admitted >= 580,
            "{admitted} admitted in 60 s at 10 a second"
        );
    }

    #[test]
    fn a_refusal_a_refill_after_a_refusal_with_nothing_admitted_between_refutes_the_model() {
        let mut bucket = TestBucket::new(13.0, 6.0);
        let mut rate = handed_over(&mut bucket, 14.0);
        // The hand-over's refusal went at the bucket's last instant; a bucket refilling at the
        // lower bound or faster would let a request in a whole refill later.
        let next = bucket.at + rate.per_request();
        assert_eq!(rate.admit(next), None);
        assert_eq!(rate.refused(next, next + 2 * MS, &|_| 0), None);
    }

    #[test]
    fn a_refusal_sooner_than_a_refill_or_after_an_admission_refutes_nothing() {
        let mut bucket = TestBucket::new(13.0, 6.0);
        let mut rate = handed_over(&mut bucket, 14.0);
        let refused = bucket.at;
        let soon = refused + rate.per_request() / 2;
        assert!(rate.refused(soon, soon + 2 * MS, &|_| 0).is_some());
        let later = soon + rate.per_request();
        rate.admitted(later, later + 2 * MS);
        let again = later + rate.per_request();
        assert!(rate.refused(again, again + 2 * MS, &|_| 0).is_some());
    }

    #[test]
    fn too_short_a_span_hands_nothing_over() {
        assert!(SilentRate::new(Duration::ZERO, 10, 0, 150 * MS, 152 * MS).is_none());
        assert!(SilentRate::new(Duration::ZERO, 2, 0, 900 * MS, 902 * MS).is_none());
    }
}
