//! How fast a stated quota frees, measured from the answers: for a server whose quota comes
//! back a little at a time rather than whole at a reset (a sliding window counter, a bucket
//! refilling at its rate).
//!
//! A sliding window counter weighs the last window's count by how much of it still overlaps
//! the sliding window, so a window-long stretch frees its units one by one, evenly, at the
//! last window's count per window, whenever in that window they were spent. Its reset speaks
//! of the next unit only (rounded up to a whole second, it says "the next second"), and no
//! reset says when the quota is whole again. Spending what frees at once at each stated reset
//! draws a refusal at nearly every one; what fits is a pace: one request each time a unit
//! frees.
//!
//! The evidence is each answer's *credit*: what it states is left plus the requests of ours
//! the server had admitted by then. Spending moves both and leaves the credit as it was; only
//! what frees raises it. So the credit's growth between two answers, over the time between
//! them, is the rate the quota frees at. Only answers to a request alone on the wire are
//! taken (with others out, the server may have counted them before or after it), and the
//! estimate is a lower bound: a stated count is whole (up to one unit off the server's
//! weighted count), and the server counted each request somewhere between its send and its
//! answer. What a pace from it leaves behind, the next answer states as left, and that is
//! spent at once. It is a bound on the span's average: a counter's window that follows one
//! spent a unit short frees slower than that, and a request at the average is then refused
//! now and then (measured: one in 20-50 at 7 per 1.5 s). So the learner paces a unit per
//! window slower than the average (a quota of q: q / (q - 1) times the measured time per
//! unit). The counter then frees what the slower pace spent a window before, but what the
//! pace leaves is stated as left and spent at once, so a window still spends its quota and
//! the measure does not slide down with the pace.
//!
//! While the quota is (nearly) whole, nothing it frees shows, so a span of evidence starts
//! again at such an answer. The span keeps the latest answers that show 32 units freed. The
//! span that ended is kept as evidence, with the time it took to be whole again (at least
//! what freed by then; it may have been whole sooner): a bucket spent in a burst at each
//! reset, and stating when it is full again as its reset, shows its rate in no single span
//! of lone answers (each from the burst to a probe a few hundred ms later), but the time it
//! took to be full again does. A pace is taken from the span, and from as many of the spans
//! before it (the last eight kept) as it takes to be long enough, a unit of rounding off for
//! each.
//!
//! The learner (`paced_interval` in the parent module) paces to this only for a quota stated
//! with whole-second resets and no window, not a moving window, whose mirror of the last
//! window was refused, and while requests sent at the pace are admitted ([`FreeRate::steady`]);
//! a pace found unsteady is tried again, twice at most, once a span measured wholly after the
//! verdict says what the quota frees now (bursts spent before the pace leave a counter's next
//! window less to free, and refuse paced requests for a while).

use std::collections::VecDeque;
use std::time::Duration;

use super::{KeyQuota, Outcome, Ticket};
use crate::headers::RateLimitInfo;

/// An answer's credit, and when the server may have counted its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    /// When its request went.
    sent: Duration,
    /// When its answer came.
    answered: Duration,
    /// Stated left, plus our requests the server admitted by then.
    credit: u64,
}

/// The shortest span of evidence a pace is taken from: shorter, a unit of rounding is too
/// large a share of what freed.
const LEAST_SPAN: Duration = Duration::from_millis(1500);
/// The fewest units freed within the span: with fewer, the lower bound (one less) is too far
/// below the rate.
const LEAST_FREED: u64 = 4;
/// The span is kept to the latest answers that still show this many units freed: within a
/// thirty-second of the rate, and what the quota did long ago (before it began to free, or
/// at another pace) ages out.
const SPAN_FREED: u64 = 32;
/// At most this many answers are kept.
const SAMPLES_KEPT: usize = 64;

/// The rate at which one key's stated quota frees, as a lower bound from its answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct FreeRate {
    /// Our requests the server admitted, as answers said.
    admitted: u64,
    /// The span's answers, oldest first.
    span: VecDeque<Sample>,
    /// When the latest answer of any request came.
    last_answer: Option<Duration>,
    /// When the latest answer that found the quota spent (none left) came.
    spent_at: Option<Duration>,
    /// The request sent at the pace, while it is out: its serial.
    paced_out: Option<u64>,
    /// Requests sent at the pace of a span of [`SPAN_FREED`] units, and how many of them were
    /// refused (a pace from less evidence may be off, and says nothing of the shape).
    paced: u64,
    paced_refused: u64,
    /// The credit when the pace was last found unsteady: once the whole span is evidence from
    /// after it, the pace is tried again (at most [`TRIALS`] times).
    unsteady_at: Option<u64>,
    /// How many times the pace was found unsteady.
    trials: u32,
    /// Earlier spans, each ended by a quota found whole again (or by less credit): how long
    /// each was and how much freed in it, newest last. A bucket that refills between bursts
    /// shows its rate only in short spans, each from the burst that found it full to the
    /// next probe; together they are long enough to say.
    earlier: VecDeque<Freed>,
}

/// How much a span of evidence showed freed, and over how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Freed {
    span: Duration,
    units: u64,
}

/// At most this many earlier spans are kept.
const EARLIER_KEPT: usize = 8;

/// How many times a pace found unsteady is tried again on fresh evidence. Requests spent in
/// bursts before the pace (a window's whole quota at a reset) leave a counter's next window
/// less to free than the pace, and refuse paced requests for a while; so does a sliding log
/// that frees in bursts. A second trial, from a span measured after the first, tells them
/// apart; a log that keeps refusing costs at most two refusals a trial.
const TRIALS: u32 = 2;

impl FreeRate {
    /// Learns from an answer that came at `answered` to a request sent at `sent`: admitted or
    /// not, stating `remaining` left of a quota of `limit`. `alone`: no other request of ours
    /// was on its way meanwhile.
    pub(super) fn answered(
        &mut self,
        sent: Duration,
        answered: Duration,
        admitted: bool,
        remaining: u64,
        limit: u64,
        alone: bool,
    ) {
        if admitted {
            self.admitted = self.admitted.saturating_add(1);
        }
        if remaining == 0 {
            self.spent_at = Some(self.spent_at.map_or(answered, |t| t.max(answered)));
        }
        // Alone on the wire: nothing answered since it went, and nothing still out.
        let alone = alone && self.last_answer.is_none_or(|last| last <= sent);
        self.last_answer = Some(self.last_answer.map_or(answered, |t| t.max(answered)));
        if !alone {
            return;
        }
        let sample = Sample {
            sent,
            answered,
            credit: remaining.saturating_add(self.admitted),
        };
        // A quota (nearly) whole stops freeing, and less credit than before means someone
        // else spends it too, or it is counted another way: the evidence starts again.
        let whole = remaining.saturating_add(1) >= limit;
        let less = self
            .span
            .back()
            .is_some_and(|last| sample.credit < last.credit);
        if whole || less {
            // The span so far is evidence, and so is the time it took to be whole again: at
            // least that much freed by then (it may have been whole sooner: a lower bound on
            // the rate, as the span's own is).
            let freed = if whole && !less {
                self.freed_until(answered, sample.credit)
            } else {
                self.span_freed()
            };
            if let Some(freed) = freed.filter(|freed| freed.units > 0) {
                if self.earlier.len() == EARLIER_KEPT {
                    self.earlier.pop_front();
                }
                self.earlier.push_back(freed);
            }
            self.span.clear();
        }
        self.span.push_back(sample);
        self.retry_unsteady(sample.credit);
        while self.span.len() > SAMPLES_KEPT
            || self.span.get(1).is_some_and(|second| {
                sample.credit.saturating_sub(second.credit) >= SPAN_FREED
                    && answered.saturating_sub(second.sent) >= LEAST_SPAN
            })
        {
            self.span.pop_front();
        }
    }

    /// Whether the quota frees at a steady pace: requests sent at it are admitted. A sliding
    /// log whose requests went in bursts frees in bursts, one window after them, and refuses
    /// a request sent at its average rate after each: twice, and one in four or more, and
    /// the quota is not paced.
    fn steady(&self) -> bool {
        self.paced_refused < 2 || self.paced_refused.saturating_mul(4) <= self.paced
    }

    /// Once a pace found unsteady has a span measured wholly after that, it is tried again.
    fn retry_unsteady(&mut self, credit: u64) {
        if self.steady() || self.trials >= TRIALS {
            return;
        }
        match self.unsteady_at {
            None => {
                // Only evidence from after the verdict tries the pace again.
                self.unsteady_at = Some(credit);
                self.earlier.clear();
            }
            Some(at)
                if self.span.front().is_some_and(|first| first.credit >= at) && self.measured() =>
            {
                self.unsteady_at = None;
                self.trials += 1;
                self.paced = 0;
                self.paced_refused = 0;
            }
            Some(_) => {}
        }
    }

    /// The span holds [`SPAN_FREED`] units freed.
    fn measured(&self) -> bool {
        match (self.span.front(), self.span.back()) {
            (Some(first), Some(last)) => last.credit.saturating_sub(first.credit) >= SPAN_FREED,
            _ => false,
        }
    }

    /// What the current span shows freed.
    fn span_freed(&self) -> Option<Freed> {
        let last = self.span.back()?;
        self.freed_until(last.answered, last.credit)
    }

    /// What freed from the span's first sample to an answer at `answered` with `credit`.
    fn freed_until(&self, answered: Duration, credit: u64) -> Option<Freed> {
        let first = self.span.front()?;
        Some(Freed {
            span: answered.saturating_sub(first.sent),
            units: credit.saturating_sub(first.credit),
        })
    }

    /// The evidence a pace is taken from: the current span, and as many earlier spans as it
    /// takes (newest first) to be [`LEAST_SPAN`] long with [`LEAST_FREED`] units freed. Each
    /// span's growth may be a unit of rounding, so what surely freed is that many units fewer.
    fn evidence(&self) -> Option<(Duration, u64)> {
        let (mut span, mut freed, mut pieces) = (Duration::ZERO, 0u64, 0u64);
        let current = self.span_freed().filter(|_| self.span.len() > 1);
        for piece in current
            .into_iter()
            .chain(self.earlier.iter().rev().copied())
        {
            span = span.saturating_add(piece.span);
            freed = freed.saturating_add(piece.units);
            pieces += 1;
            if span >= LEAST_SPAN && freed >= LEAST_FREED.max(pieces + 1) {
                return Some((span, freed - pieces));
            }
        }
        None
    }

    /// The time one unit takes to free, at the least rate the evidence allows; None until the
    /// evidence is long enough to say, or when the quota does not free steadily.
    pub(super) fn per_unit(&self) -> Option<Duration> {
        if !self.steady() {
            return None;
        }
        let (span, surely) = self.evidence()?;
        Some(span / u32::try_from(surely).unwrap_or(u32::MAX))
    }
}

impl KeyQuota {
    /// Takes an answer that stated the governing quota as evidence of how fast it frees.
    pub(super) fn free_rate_saw(
        &mut self,
        now: Duration,
        ticket: Ticket,
        outcome: Outcome,
        info: &RateLimitInfo,
    ) {
        let (Some(remaining), Some(limit)) = (info.remaining, info.limit.or(self.limit)) else {
            return;
        };
        // Only a quota that may be paced is measured (see `paced_interval`): its resets are
        // stated in whole seconds and no window is. The others (an IETF server's, say) keep
        // no samples, and their keys no box.
        if info.reset_grain.is_none() || info.window.is_some() {
            return;
        }
        // Ended already, so no other request of ours is out when none is in flight.
        let alone = self.in_flight() == 0;
        let rate = self.free_rate.get_or_insert_with(Box::default);
        if rate.paced_out == Some(ticket.serial) {
            rate.paced_out = None;
            rate.paced = rate.paced.saturating_add(1);
            if outcome == Outcome::Throttled {
                rate.paced_refused = rate.paced_refused.saturating_add(1);
            }
        }
        rate.answered(
            ticket.sent,
            now,
            outcome == Outcome::Answered,
            remaining,
            limit,
            alone,
        );
    }

    /// When the next request may go, the quota spent, at the pace it frees `per_unit`: one
    /// unit's time after the last answer that found it spent (a unit has surely freed since
    /// that request was counted).
    pub(super) fn paced_after_spent(&self, per_unit: Duration, now: Duration) -> Duration {
        self.free_rate
            .as_deref()
            .and_then(|rate| rate.spent_at)
            .map_or(now, |spent| spent.saturating_add(per_unit))
    }

    /// The next request, `serial`, goes at the pace: its answer tells whether the pace fits,
    /// once the pace is measured over a whole span.
    pub(super) fn sent_at_pace(&mut self, serial: u64) {
        if let Some(rate) = self.free_rate.as_deref_mut() {
            rate.paced_out = rate.measured().then_some(serial);
        }
    }

    /// The time a unit of the quota takes to free, as measured so far.
    pub(super) fn free_per_unit(&self) -> Option<Duration> {
        self.free_rate.as_deref()?.per_unit()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Admission;
    use super::*;
    use crate::limiter::{RateLimiter, SlidingWindowCounter, TokenBucket};
    use crate::time::{ManualClock, Rate};

    fn nz(n: u32) -> std::num::NonZeroU32 {
        std::num::NonZeroU32::new(n).expect("not zero")
    }

    const MS: Duration = Duration::from_millis(1);

    /// A sliding window counter of `limit` per `window` whose last window spent it all: its
    /// weighted count `elapsed` into the current window, with `spent` of ours in it, as the
    /// server states it (floored).
    fn stated_left(limit: u64, window: Duration, elapsed: Duration, spent: u64) -> u64 {
        let fading = limit as f64 * (1.0 - elapsed.as_secs_f64() / window.as_secs_f64());
        limit.saturating_sub(fading.floor() as u64 + spent)
    }

    #[test]
    fn a_counter_paced_alone_measures_its_rate_from_below_and_closer_with_a_longer_span() {
        // 17 per 2 s: a unit frees every 117.6 ms once the last window spent it all.
        let (limit, window) = (17, Duration::from_secs(2));
        let mut rate = FreeRate::default();
        // A request every 125 ms, alone, each answered 3 ms after it went.
        let mut spans = Vec::new();
        for n in 0..16u32 {
            let sent = MS + MS * 125 * n;
            let answered = sent + MS * 3;
            let left = stated_left(limit, window, answered, u64::from(n) + 1);
            rate.answered(sent, answered, true, left, limit, true);
            spans.push(rate.per_unit());
        }
        // Under 1.5 s of evidence, no pace yet.
        assert_eq!(spans[10], None);
        let unit = spans[15].expect("a pace after 1.9 s");
        let exact = window / 17;
        assert!(unit >= exact, "{unit:?} is faster than the quota frees");
        assert!(
            unit < exact.mul_f64(1.2),
            "{unit:?} is far slower than {exact:?}"
        );
        // Into the next window, at the same pace: still a lower bound, and closer.
        let mut next = rate.clone();
        for n in 0..16u32 {
            let sent = window + MS * 60 + MS * 125 * n;
            let answered = sent + MS * 3;
            let left = stated_left(limit, window, answered - window, u64::from(n) + 1);
            // The credit counts every request of ours admitted so far: 16 in the last window
            // (a seventeenth left unspent and stated as left).
            next.answered(sent, answered, true, left, limit, true);
        }
        let closer = next.per_unit().expect("a pace");
        assert!(
            closer >= exact && closer <= unit,
            "{closer:?} after {unit:?}"
        );
    }

    #[test]
    fn answers_to_requests_out_together_are_not_evidence() {
        let mut rate = FreeRate::default();
        rate.answered(Duration::ZERO, MS * 5, true, 10, 17, true);
        // Sent before the last answer came: out beside it.
        rate.answered(MS * 2, MS * 2000, true, 16, 17, true);
        rate.answered(MS * 3, MS * 2001, true, 16, 17, false);
        assert_eq!(rate.per_unit(), None);
        assert_eq!(rate.span.len(), 1);
    }

    #[test]
    fn a_quota_found_whole_or_with_less_credit_starts_the_evidence_again() {
        let mut rate = FreeRate::default();
        rate.answered(Duration::ZERO, MS * 2, true, 0, 10, true);
        rate.answered(MS * 2000, MS * 2002, true, 9, 10, true);
        // Nearly whole (9 of 10 left after this one): the quota may have stopped freeing, so
        // the span starts again. The time it took to be whole is evidence all the same: ten
        // freed (nine surely) in 2,002 ms at least.
        assert_eq!(rate.span.front().map(|s| s.sent), Some(MS * 2000));
        assert_eq!(rate.per_unit(), Some((MS * 2002) / 9));
        rate.answered(MS * 4000, MS * 4002, true, 0, 10, true);
        // Less credit than the span's first (someone else spent): from here again. The
        // earlier evidence still counts (the span that ended showed nothing freed).
        assert_eq!(rate.span.front().map(|s| s.sent), Some(MS * 4000));
        assert_eq!(rate.per_unit(), Some((MS * 2002) / 9));
    }

    #[test]
    fn a_bucket_full_again_between_bursts_shows_its_rate_from_below() {
        // 25 per second into a bucket of 50: a burst spends it, a lone probe 300 ms later
        // finds some freed, the rest goes, a lone request is refused, and the next lone
        // answer, 3 s after the burst, finds it full. No span between two full answers is
        // 1.5 s long; the time each took to be full again is.
        let clock = ManualClock::new();
        let bucket =
            TokenBucket::new(Rate::per_second(nz(25)).with_burst(nz(50))).with_clock(clock.clone());
        let mut rate = FreeRate::default();
        let ask = |rate: &mut FreeRate, at: Duration, alone: bool| {
            clock.set(at);
            let decision = bucket.check("c", 1);
            rate.answered(at, at + MS, decision.allowed, decision.remaining, 50, alone);
            decision.remaining
        };
        let mut units = Vec::new();
        for cycle in 0..3u32 {
            let start = MS * 3000 * cycle;
            ask(&mut rate, start, true);
            for n in 1..50 {
                ask(&mut rate, start + MS * n / 5, false);
            }
            let mut left = ask(&mut rate, start + MS * 300, true);
            let mut at = start + MS * 301;
            while left > 0 {
                left = ask(&mut rate, at, false);
                at += MS / 10;
            }
            ask(&mut rate, start + MS * 320, true);
            units.push(rate.per_unit());
        }
        let exact = Duration::from_secs(1) / 25;
        let unit = units[2].expect("a pace");
        assert!(
            unit >= exact && unit <= exact.mul_f64(1.5),
            "{unit:?} for {exact:?} ({units:?})"
        );
    }

    #[test]
    fn a_refusal_is_evidence_of_no_unit_freed() {
        let mut rate = FreeRate::default();
        rate.answered(Duration::ZERO, MS * 2, true, 0, 20, true);
        // Refused 2 s later: nothing freed since.
        rate.answered(MS * 2000, MS * 2002, false, 0, 20, true);
        assert_eq!(rate.per_unit(), None);
        // Then 10 freed by 4 s: nine surely, over the 4,002 ms from the first send.
        rate.answered(MS * 4000, MS * 4002, true, 9, 20, true);
        assert_eq!(rate.per_unit(), Some((MS * 4002) / 9));
    }

    /// Lone answers every 100 ms from `from`, each finding one more unit freed than the last
    /// (a counter of 10 per second freeing evenly), `count` of them, all admitted.
    fn freeing(rate: &mut FreeRate, from: Duration, count: u32) {
        for n in 0..count {
            let sent = from + MS * 100 * n;
            rate.answered(sent, sent + MS * 2, true, 4, 20, true);
        }
    }

    #[test]
    fn a_pace_found_unsteady_is_tried_again_on_evidence_from_after_it_and_at_most_twice() {
        let mut rate = FreeRate::default();
        freeing(&mut rate, Duration::ZERO, 40);
        assert!(rate.per_unit().is_some(), "measured over 3.9 s");
        // Two of the first three requests at the pace refused (a burst spent before the pace
        // left the counter less to free): unsteady.
        (rate.paced, rate.paced_refused) = (3, 2);
        assert_eq!(rate.per_unit(), None);
        // Fresh evidence, until the whole span is from after the verdict: paced again.
        freeing(&mut rate, MS * 4000, 4);
        assert_eq!(
            rate.per_unit(),
            None,
            "the span still holds the old evidence"
        );
        freeing(&mut rate, MS * 4400, 36);
        let unit = rate.per_unit().expect("tried again");
        assert!(unit >= MS * 100 && unit <= MS * 104, "{unit:?}");
        // Unsteady again, and once more after that: the last trial.
        (rate.paced, rate.paced_refused) = (3, 2);
        freeing(&mut rate, MS * 8000, 40);
        assert!(rate.per_unit().is_some(), "the second trial");
        (rate.paced, rate.paced_refused) = (3, 2);
        freeing(&mut rate, MS * 12_000, 80);
        assert_eq!(rate.per_unit(), None, "no third trial");
    }

    /// What Flask-Limiter states for a decision of its sliding window counter at `now`:
    /// `X-RateLimit-*` with the reset as a whole Unix second (⌊now + reset⌋ + 1), and the same
    /// instant as an HTTP-date `Retry-After`, on every response.
    fn stated_like_flask(decision: &crate::limiter::Decision, now: Duration) -> RateLimitInfo {
        let at = now + decision.reset;
        let whole = Duration::from_secs(at.as_secs() + 1);
        RateLimitInfo {
            limit: Some(decision.limit),
            remaining: Some(decision.remaining),
            reset: Some(whole - now),
            retry_after: Some(whole - now),
            grain: Some(Duration::from_secs(1)),
            reset_grain: Some(Duration::from_secs(1)),
            ..RateLimitInfo::default()
        }
    }

    #[test]
    fn a_stated_sliding_counter_is_paced_as_it_frees_not_spent_at_each_reset() {
        // 17 per 2 s on windows aligned with the clock's even seconds, floored counts, the
        // next unit's reset (the `limits` library's), 0.3 s into a second.
        let clock = ManualClock::new();
        let counter = SlidingWindowCounter::new(17, Duration::from_secs(2))
            .expect("valid")
            .floored()
            .resetting_at_the_next_unit()
            .with_clock(clock.clone());
        let mut q = KeyQuota::new(true);
        let start = MS * 300;
        let mut now = start;
        let (mut admitted, mut refused, mut refused_late) = (0u64, 0u64, 0u64);
        const JOB: u64 = 600;
        while admitted < JOB {
            match q.try_reserve(now, 1) {
                Admission::WaitUntil(until) => {
                    assert!(until > now, "told to wait until {until:?} at {now:?}");
                    now = until;
                }
                Admission::Reserved(ticket) => {
                    // One task, 1 ms each way.
                    clock.set(now + MS);
                    let decision = counter.check("client", 1);
                    let info = stated_like_flask(&decision, now + MS);
                    now += MS * 2;
                    let outcome = if decision.allowed {
                        admitted += 1;
                        Outcome::Answered
                    } else {
                        refused += 1;
                        refused_late += u64::from(admitted >= JOB / 2);
                        Outcome::Throttled
                    };
                    if let Some(wait) = q.observe(now, ticket, outcome, &info) {
                        q.close_gate(now, wait);
                    }
                }
            }
        }
        // The quota's minimum: 35 windows after the first.
        let minimum = Duration::from_secs(2 * (JOB.div_ceil(17) - 1));
        let elapsed = now - start;
        assert!(
            elapsed <= minimum.mul_f64(1.05),
            "{elapsed:?} for {JOB}, the minimum {minimum:?}"
        );
        // No 429 a window once paced; the learning costs one (the copy of the first window,
        // refused). Paced at the measured average instead of a unit per window slower: three,
        // two of them late (paced requests in windows that follow one a unit short). With
        // the copy tried again after the roll: two.
        assert!(
            refused <= 1 && refused_late == 0,
            "{refused} × 429, {refused_late} late"
        );
        // The pace is the rate the counter frees at, from below, within a tenth.
        let unit = q.free_per_unit().expect("measured");
        let exact = Duration::from_secs(2) / 17;
        assert!(unit >= exact && unit <= exact.mul_f64(1.1), "{unit:?}");
    }
}
