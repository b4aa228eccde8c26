//! When the silent window model hands a key over to another model, and back. A window that sustains
//! at most half what the first admitted is a bucket's, whose first window was its burst: the key is
//! handed over to the `silent_rate` model (see [`Silence::hand_over`]), which paces at the rate the
//! refusals bound, and handed back if a refusal refutes it. Until then, a window of a server that
//! may be a bucket, and admits two fewer than its first or less, goes no faster than the fastest
//! rate the refusals bound, once those bounds agree, and at that rate once the window's search has
//! settled (see [`Silence::held_to_rate`]): a pause the server asks can refill more than half the
//! burst, and windows measured over it overdraw the rate. Windows refused inside at clearly less
//! than the first admitted, whose refusals bound no one rate, are a sliding window counter's, which
//! charges each burst on into the next window: the key is handed over to the `silent_pace` model
//! (see [`Silence::pace_evenly`]), which sends evenly at the fastest interval it proves. So is a
//! shortened window (sent at a midpoint) that admits part of a burst, two fewer than the first or
//! less, once the refusals have refuted a bucket by far (see [`Silence::trial_refused`]): a counter
//! that frees a burst gradually, where a fixed window not yet over frees none. HAProxy's stick
//! table, whose windows begin with the key's first request and begin afresh after two idle, admits
//! a whole burst to windows sent two of its windows apart and part of one to those sent sooner, so
//! the window model's windows against it alternate and its refusals inside come rarely.

use std::time::Duration;

use super::super::Ticket;
use super::super::silent_pace::SilentPace;
use super::super::silent_rate::{LEAST_SPAN, SilentRate, span_bounds};
use super::{Bucket, Silence};

/// The bounds on a bucket's rate agree: the upper at most this much above the lower (see
/// [`Silence::held_to_rate`]).
const RATE_AGREED: f64 = 1.2;

/// The refusals bound a bucket's rate from below at this many times their bound from above,
/// or more: no bucket, by far (see [`Silence::trial_refused`]).
pub(super) const REFUTED_BY_FAR: f64 = 2.0;

impl Silence {
    /// How far into a window its successor goes (`next_try` as the search has it) while the
    /// server may still be a bucket whose later windows admit clearly less than its first (its
    /// burst), once the bounds its refusals set on its rate agree: at a window's quota at the
    /// fastest rate they allow (`quota / hi`), no sooner. A window's quota sent faster than
    /// that overdraws the bucket, whatever the window measured, and the 429s come back every
    /// few windows (real nginx, 3 r/s with a burst of 10 behind `Retry-After: 2`: windows of
    /// 6 every 1.85 s, a 429 every third, until the bounds crossed by a hair at 35 s). Once
    /// the search sends at the window (it has settled, or a midpoint was just refused, which
    /// raised the lower bound to it), at that rate's window, too, when it falls between the
    /// window's bounds: the search stops a sixteenth from the edge, up to 6 % slow (the same nginx
    /// held windows of 6 to 2.03-2.06 s), where the bound on the rate comes within a request
    /// over the span since the first refusal, and a refusal it draws lowers it. `next_try`
    /// otherwise: a window limiter admits its whole quota each window, and its refusals soon
    /// bound no one rate.
    pub(super) fn held_to_rate(
        &self,
        now: Duration,
        window: Duration,
        next_try: Duration,
    ) -> Duration {
        let drawn_less = self
            .ceiling
            .is_some_and(|ceiling| ceiling.saturating_add(2) <= self.first_measured);
        let agree = self.bucket_hi <= self.bucket_lo * RATE_AGREED;
        if self.bucket != Bucket::Possible || !drawn_less || !agree {
            return next_try;
        }
        let quota = self.quota(now) as f64;
        let Ok(at_rate) = Duration::try_from_secs_f64(quota / self.bucket_hi.max(1e-3)) else {
            return next_try;
        };
        if next_try == window && at_rate > self.too_short {
            at_rate
        } else {
            next_try.max(at_rate)
        }
    }

    /// The bounds the refusals set on a bucket's rate, requests a second.
    #[cfg(test)]
    pub(in super::super) fn bucket_bounds(&self) -> (f64, f64) {
        (self.bucket_lo, self.bucket_hi)
    }

    /// The quota a window sustains (at most what a whole window admitted before a refusal, and
    /// the estimate's) is at most half what the first window admitted, that was a burst of
    /// three or more, and the refusals since the first bound one rate: the first was a
    /// bucket's burst, and what comes back comes at a rate. (A sliding counter on the clock,
    /// whose later windows admit less than its first too, refuses in spans that bound no one
    /// rate.) The key is handed over to the `silent_rate` model, which paces at that rate;
    /// returns the pause it asks. (A bucket that holds one or two requests is left to the
    /// windows of one request: the settling below its rate fills it at once, and wastes what
    /// would tell the rate.)
    pub(super) fn hand_over(
        &mut self,
        now: Duration,
        ticket: Ticket,
        still_out: u64,
    ) -> Option<Duration> {
        if self.bucket != Bucket::Possible || self.first_measured < 3 || self.window.is_none() {
            return None;
        }
        let sustained = self.ceiling.unwrap_or(u64::MAX).min(self.quota(now));
        if sustained.saturating_mul(2) > self.first_measured {
            return None;
        }
        let rate = SilentRate::new(self.anchor?, self.since_anchor, still_out, ticket.sent, now)?;
        let pause = ticket
            .sent
            .saturating_add(rate.per_request())
            .saturating_sub(now)
            .max(Duration::from_millis(1));
        tracing::debug!(
            at_ms = now.as_millis() as u64,
            first = self.first_measured,
            sustained,
            per_request_ms = rate.per_request().as_secs_f64() * 1e3,
            "pacing: a silent server's burst is spent, paced at its rate"
        );
        self.unproven = false;
        self.probing = None;
        self.rate = Some(Box::new(rate));
        Some(pause)
    }

    /// Windows sustain clearly less than the first one admitted (two fewer at least, and at
    /// most nine tenths of it), and the refusals bound no one rate: no bucket, but a limiter
    /// that charges a burst on into the next window (a sliding window counter, whose later
    /// bursts the paused-clock sweeps saw refused at 55-90% of its first). A fixed window or
    /// a sliding log refused inside a window is refused at its whole quota. The key is handed
    /// over to the `silent_pace` model for good, starting at the first window measured over
    /// what it admitted: slower than the edge when this window admitted a quarter of the first
    /// burst or more, and tried shorter at once; perhaps faster otherwise, and proven first
    /// (see the `silent_pace` module), its first trial aimed at the first refused probe's
    /// bound when there was one. Returns the pause it asks.
    pub(super) fn pace_evenly(&mut self, now: Duration) -> Option<Duration> {
        let sustained = self.ceiling.unwrap_or(u64::MAX).min(self.quota(now));
        self.pace_at(now, sustained)
    }

    /// [`Silence::pace_evenly`] for windows that sustain `sustained` requests.
    pub(super) fn pace_at(&mut self, now: Duration, sustained: u64) -> Option<Duration> {
        if self.bucket != Bucket::NoOneRate
            || self.first_measured < 3
            || sustained.saturating_mul(10) > self.first_measured.saturating_mul(9)
            || sustained.saturating_add(2) > self.first_measured
        {
            return None;
        }
        let window = self.first_window?;
        let interval = window / u32::try_from(self.first_measured).unwrap_or(u32::MAX);
        tracing::debug!(
            at_ms = now.as_millis() as u64,
            first = self.first_measured,
            sustained,
            interval_ms = interval.as_secs_f64() * 1e3,
            "pacing: a silent server charges bursts on (no bucket, no window): paced evenly"
        );
        // A probe refused before the first one admitted bounds the first window from below:
        // for a counter whose windows begin with our first request, the edge's interval is no
        // shorter than that over the first burst, and the first trial aims there.
        let aim = self
            .first_refused_probe
            .map(|refused| refused / u32::try_from(self.first_measured).unwrap_or(u32::MAX));
        let mut pace = SilentPace::new(interval, self.first_measured, now).aiming_at(aim);
        // A quarter of the first burst or more admitted again one first window after the
        // last: the limiter had freed that much of it by then, so the first window was no
        // shorter than the pace it gives (a counter that frees a burst gradually admits a
        // tenth of one there: its first window can be shorter than that pace, which is then
        // proven first). Not half: HAProxy's counter also counts the first window's refused
        // probes, and the window begun by a probe just after a round offset admitted 6-8 of
        // 20 there, so the pace of a first window half again its edge was proven for 4.5 s
        // before any trial (the grid's silent 20 per 2 s: 1.11-1.12 × the minimum, 1.08-1.09
        // × tried at once).
        if sustained.saturating_mul(4) >= self.first_measured {
            pace = pace.slower_than_the_edge();
        }
        let pause = pace.pause(now);
        self.unproven = false;
        self.probing = None;
        self.pace = Some(Box::new(pace));
        Some(pause)
    }

    /// The rate model was refuted (refused twice in a row, a refill apart: a limiter that
    /// counts refused requests too, or others spending the same quota). The window model
    /// resumes with what it knew at the hand-over (the rate model left it as it was), its
    /// window begun at this refusal and spent, and the key is not handed over again. Returns
    /// the pause.
    pub(super) fn hand_back(&mut self, now: Duration, ticket: Ticket) -> Duration {
        tracing::debug!(
            serial = ticket.serial,
            "pacing: refused twice in a row a refill apart: not a bucket; the window model resumes"
        );
        self.rate = None;
        self.bucket = Bucket::HandedBack;
        self.rested = false;
        self.window_start = ticket.sent;
        self.previous_start = ticket.sent;
        self.admitted = 0;
        self.previous_admitted = 0;
        self.used = u64::MAX;
        self.refused_in_window = true;
        self.unproven = true;
        self.sends.clear();
        self.previous_sends.clear();
        let window = self.window.unwrap_or(Duration::from_secs(1));
        ticket
            .sent
            .saturating_add(window)
            .saturating_sub(now)
            .max(Duration::from_millis(1))
    }

    /// A refusal of a request sent at `sent`, answered at `now`, with `still_out` of ours sent
    /// between the anchor and it unanswered: the span since the first refusal (sent at
    /// `anchor`) bounds the rate a bucket would refill at. Bounds that no longer meet refute
    /// the bucket.
    pub(super) fn bound_bucket(
        &mut self,
        now: Duration,
        sent: Duration,
        anchor: Duration,
        still_out: u64,
    ) {
        let span = sent.saturating_sub(anchor);
        if span < LEAST_SPAN || self.bucket != Bucket::Possible {
            return;
        }
        let (lo, hi) = span_bounds(
            self.since_anchor,
            still_out,
            span,
            now.saturating_sub(anchor),
        );
        self.bucket_lo = self.bucket_lo.max(lo);
        self.bucket_hi = self.bucket_hi.min(hi);
        if self.bucket_lo > self.bucket_hi {
            tracing::debug!(
                lo = self.bucket_lo,
                hi = self.bucket_hi,
                "pacing: a silent server's refusals bound no one rate: not a bucket"
            );
            self.bucket = Bucket::NoOneRate;
        }
    }
}
