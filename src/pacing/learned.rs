//! What the server told us about one key's quota: the "quota spent until T" gate, the quota
//! it states (adopted as a per-window budget), the requests in flight against it, and, for a
//! server that states nothing, what its bare 429s let us infer.
//!
//! Pure arithmetic over an injected `now`; the pacer holds the lock and does the sleeping.
//!
//! # How a stated window frees its quota
//!
//! A fixed window frees its whole quota at its reset; a moving window (a sliding log) frees
//! one slot at a time, one window after the request that spent it, and its reset speaks of
//! the next slot only. So the first request after a roll goes alone, and its answer tells
//! which: the whole quota left (the others go), or more counted than went since (the last
//! window's requests still count). Then each request goes alone when the last window's
//! request of the same rank went, one window before (measured from answers to sends, so the
//! copy never runs ahead of the server). If a request sent at that pace is refused, the quota
//! frees some other way (a bucket refilling at its own rate), and the stated reset rules.
//!
//! # Resets stated in whole seconds
//!
//! A server that states its reset in whole seconds (a Unix time, an HTTP-date `Retry-After`)
//! and no window rounds it up: the quota frees up to a second sooner. While the key is
//! closed, one request probes before the stated instant, alone, and its success opens the
//! key for everyone; what each probe finds narrows the phase of the windows (see the `phase`
//! module). A probe admitted with fewer left than any answer of the window stated took a unit
//! the window still had (a budget net of the requests in flight falls short of the server's
//! when answers come out of order): for the phase, it is a refusal. When the window that
//! opened early frees one request at a time (a moving window), its requests go at the pace
//! the last window's went, each first alone.
//!
//! The phase assumes windows on the clock's seconds. A window that begins with its first
//! request does not keep one: begun just past a whole second, it is stated to end nearly two
//! seconds later. Each window found whole again (by an early probe, or by the first answer
//! after a roll) bounds the window's length by the time since the first send of the window
//! it tested (`lag_by`), and when that bound falls well before the phase's probe, the probe
//! goes at it. A bound under half the reset the new window's first answer states is not
//! taken: that is a window on the clock our first request met late in its course, and the
//! next one does not free that soon after its first request.
//!
//! A stated window may be rounded up too (express-rate-limit states a window of 1.5 s as
//! `w=2`). Measured from a window's first request, every answer bounds the window's length
//! (the reset it states, rounded up), and the window's last unit, held until a grain before
//! the bounds' midpoint, halves them at no cost. A window on the clock looks the same from
//! inside (it began before our first request, by as much as our roll came late), so the
//! bounds end no window until a test window, its first request sent late on purpose, shows
//! that the windows begin with their first request (the `span` module).
//!
//! A moving window is recognised inside a window an early probe opened: a later answer finds
//! more left than an earlier one, yet not the whole quota; or, with no more left than any
//! answer before it, states a reset that ends over half a grain later than the window's first
//! answer did, beyond the time between them (a fixed window's answers state one end). The
//! second sign is the only one a moving window whose windows go as bursts gives (each burst
//! takes the slots as the last one's age out, and its first answers state when the last
//! burst's oldest slot frees, a second before the window's), but a sliding window counter
//! gives it too, at its clock's edge: held by that sign alone, the key is taken back at its
//! next refusal, and the sign is not read again for it. A moving window's reset follows our own
//! sends (it is when the window's first request ages out, rounded up), so the phase of the
//! second says nothing; the probe goes instead at the window's *lag*, how long after the
//! window's first send the quota freed, bisected between probes refused and admitted to
//! 16 ms (`phase::WindowLag`). Its answers come out of order (a server's threads), so a
//! budget taken from one is net of the requests in flight and of those answered while it was
//! out; spent is spent until the lag has passed.
//!
//! # A quota that frees a unit at a time
//!
//! A quota stated with whole-second resets and no window whose copy of the last window was
//! refused frees otherwise: a sliding window counter (its last window fading), a bucket
//! refilling at its rate. Each answer's credit (what it states is left, plus ours it has
//! admitted) grows only as the quota frees, so answers to requests sent alone measure the
//! rate (the `rate` module). Once a span of them shows it, each request goes alone, a unit's
//! time after the last answer that found the quota spent, at a unit per window slower than
//! the measured average: a counter frees at the rate its last window was spent at, slower
//! than the average after a window spent a unit short. What the pace leaves, answers state
//! as left, and it is spent at once. A pace whose requests are refused (a log freeing in
//! bursts) is dropped, and tried again on fresh evidence at most twice.
//!
//! # Servers that say nothing
//!
//! A 429 (or 503) with no quota field still says "too fast"; the `silent` module infers the
//! quota per window and the window from the pattern of admissions and refusals, and one model
//! covers windows and rates alike: at most a quota per window, each window's requests no
//! sooner after its first than the last window's went. A `Retry-After` alone (proxies add a
//! static one to every 429) sets the pause and is otherwise such a refusal; once a server has
//! stated its quota, its refusals speak of that quota instead.
//!
//! Until something is known, a slow start caps the requests in flight: one at first, twice
//! as many every 100 ms. The first refusal finds the quota, and every request then on its way
//! is refused with it: under the cap, a burst of tasks pays one 429 for it, not one each. Each
//! window of an estimate not yet proven (no window has yet admitted its whole quota without a
//! refusal) starts slow the same way, so a bucket that had refilled only in part refuses one
//! request, not every one in flight. Evidence selects the parameters:
//!
//! - the first refusal: what was admitted since the first request is the quota; the probes
//!   that follow bound the window (refused: not over; admitted: over). Their pauses grow
//!   ×1.5 from 250 ms, but a probe whose pause would carry it past a round offset from the
//!   first request (1, 1.5, 2, 3, 5, 10, 15, 30 or 60 s) goes just after it instead (a 128th
//!   later, 5 ms at least, its pause not spread by jitter), since the windows people
//!   configure are round: a round window is then measured to within that margin;
//! - a probe admitted just after a round offset: the next window's first request tries a
//!   64th under it. Refused, the search is over at one 429; admitted, that round window is
//!   refuted, and the midpoints go on below it;
//! - a window of one request whose server asks a pause with its refusals (a `Retry-After`
//!   alone): the round interval nearest the midpoint is tried first, a 128th over it, then a
//!   128th under (one to ten requests a second, or one every 1.5, 2, 3 s ...);
//! - each window's first request goes alone, at the midpoint of the window known too short
//!   and the one known enough, until they are a sixteenth apart (a thirty-second for a window
//!   of one request whose first window admitted one: a rate with no burst, whose window is
//!   the job's pace): refused, the lower bound
//!   rises (and that window's successor goes at the bound known enough: one 429 a midpoint);
//!   admitted, the upper bound falls, unless the window then admits fewer than the last
//!   (a bucket that had refilled only in part), which undoes it;
//! - a refusal inside a whole window: the quota is at most what that window admitted, a
//!   ceiling the curve of [`super::adaptive`] never climbs above again; for a rate (a bucket
//!   frees fewer requests sooner) the lower bound on the window shrinks with the quota;
//! - a refusal inside a window that admitted at most half what the first one did: the first
//!   was a bucket's burst, and the quota comes back at a rate. The key is handed over to the
//!   `silent_rate` model, which bounds the rate by what was admitted between refusals (a
//!   bucket that refuses is empty) and paces at it, one request at a time, drawing a refusal
//!   now and then only while the bounds are more than 2% apart;
//! - a refusal inside a window that admitted two fewer than the first did, or fewer still,
//!   when the refusals bound no one rate: a sliding window counter, which charges a burst on
//!   into the next window (and may count refused requests too, as HAProxy's stick tables
//!   do). The key is handed over to the `silent_pace` model, which sends evenly, one request
//!   an interval, and searches the interval: each one proven by a quota and a half sent at it
//!   with no refusal, the next tried a fifth shorter, then bisected against the one refused
//!   until 6% apart; a proven interval refused later is the edge, and the pace settles 5%
//!   slower. It starts at the first window over its burst, tried shorter at once when the
//!   window that handed it over admitted a quarter of that burst or more (then it is slower
//!   than the edge);
//! - the first window's probe admitted at least 1.75 times as long after the last refusal as
//!   any refused probe went after the one before: each refusal may have begun the window
//!   again (`@fastify/rate-limit`'s `continueExceeding`), and the window be that gap. The
//!   next window with no refusal tries it, once: refused, the search goes on; admitted, the
//!   window is measured from the requests that begin it, each refusal holds the key a window,
//!   and the round lengths under the gap are tried, longest first, until one is refused.
//!
//! So windows (fixed, from a client's first request, moving) settle on their quota and
//! length, and rates (GCRA, leaky and token buckets) on a pace: with a burst, the rate the
//! refusals bound; with none (nothing to tell a burst by), a quota of one a window whose
//! length is the interval; sliding window counters on an even pace. The probes stop once the
//! bounds meet, and the 429s of a long job's second half are none or a few. A quota the
//! server states, in any response, replaces every estimate.
//!
//! # Where each part lives
//!
//! This file holds the key's state, the reservation (`reserve_governing`), the reading of
//! each answer (`observe`, which hands a stated quota to `observe_stated`) and the budget an
//! answer leaves (`take_remaining`); each shape's evidence has its own file:
//!
//! - `window`: a stated window's rolls (ours, and the server's found under our requests), how
//!   it refills (whole, or slot by slot: told by the first answer after our roll), and where
//!   the window holding an answer ends (`bound_end`);
//! - `clock`: whether a stated window keeps a clock of its own, and the end carried from one
//!   window to the next once it does;
//! - `span`: how long a stated window rounded up to whole seconds lasts after its first
//!   request, bisected by held units and tested once before it ends any window;
//! - `early` and `phase`: early probes of a reset stated in whole seconds, and where in that
//!   second the quota frees (or, for a moving window, how long after its first request);
//! - `rate`: how fast a stated quota frees when it comes back a little at a time;
//! - `side`: the quotas stated beside the governing one;
//! - `silent`, `silent_rate`, `silent_pace` and `fleet`: a server that states nothing, as
//!   windows, as a rate, as an even pace, and learned by many processes as one; under
//!   `silent/`, the probes after a refusal (`probes`), the round numbers tried first
//!   (`round`), a window that each refusal begins again (`restart`), a key that each
//!   refusal blocks for a while (`block`), and the hand-overs to the rate and the even pace
//!   (`handover`);
//! - `snapshot`: what the pacer shows of it all.
//!
//! The tests on a manual clock follow the same lines: `tests.rs` holds the helpers and a key
//! with no news, `tests/` one file for each of stated windows, moving windows, silent
//! windows, a window that refusals begin again (or block), and buckets and counters.

use std::time::Duration;

use self::clock::ClockEdges;
use self::early::EarlyProbe;
use self::phase::{ResetPhase, WindowLag};
pub(crate) use self::side::Demand;
use self::side::SideQuotas;
use self::silent::{Learned, Silence, SilentAdmission};
use self::span::SpanWatch;
use self::window::{Left, Refill};
use super::shared::SharedFacts;
use crate::headers::RateLimitInfo;

/// The verdict of the learned quota on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Reserved; hand the ticket back with the response.
    Reserved(Ticket),
    /// Not before this time (on the pacer's clock); news about the key may come sooner.
    WaitUntil(Duration),
}

/// A reservation against one key's learned quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    /// The stated window it was reserved in: responses to older windows are stale.
    pub(crate) epoch: u64,
    /// Its place among the key's reservations.
    pub(crate) serial: u64,
    /// When it was reserved (sent).
    pub(crate) sent: Duration,
    /// The fewest left an answer of its window had stated when it was reserved.
    seen: Option<Left>,
    /// Reserved against the estimated window that started at this time.
    window: Option<Duration>,
}

/// What a response says, beyond its headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Anything but a refusal.
    Answered,
    /// 429, or 503 (an overloaded server): slow down.
    Throttled,
}

/// How long, at most, the other requests of a key wait for a lone request's answer. Until a
/// response says what the quota is, a burst of concurrent tasks could only spend it blindly
/// (fifty workers, fifty requests, thirty 429s); one round trip of patience avoids that.
pub(crate) const PROBE_FOR: Duration = Duration::from_secs(2);
/// How many send times of a window are kept: the pace at which a moving window frees up is
/// mirrored for this many requests (past them, the phase probe takes over).
const SENDS_KEPT: usize = 64;
/// How often the slow start doubles its cap on the requests in flight. A quota the server has
/// not stated is found by its first refusal, and every request then on its way is refused with
/// it: starting with one in flight, a burst of concurrent tasks pays one 429 for it, not one
/// each. Fixed in time, not in round trips: on a fast network the quota is spent long before
/// the cap has grown, and on a slow one the cap grows as TCP's slow start does (full
/// concurrency within half a second for most jobs).
const RAMP_STEP: Duration = Duration::from_millis(100);

/// One key's learned quota.
#[derive(Debug, Default, Clone)]
pub(crate) struct KeyQuota {
    /// Nothing goes before this time: the server said the quota is spent (429, remaining 0).
    gate_until: Duration,
    /// The wait the server stated (before jitter) with the response that set `gate_until`.
    gate_stated: Option<Duration>,
    /// When that stated wait ends: `gate_until` less the jitter drawn on top of it.
    gate_required_until: Duration,
    limit: Option<u64>,
    window: Option<Duration>,
    /// Our estimate of what is left in the current window, net of our own reservations.
    budget: Option<u64>,
    reset_at: Option<Duration>,
    /// Bumped when a window ends: responses to requests of older windows are stale.
    epoch: u64,
    /// When the earliest answer admitting a request of this window came: the window began no
    /// later (by the time that request arrived), so it ends no later than that plus its
    /// length. Not the request's send time: it may have reached the server a round trip later.
    epoch_first_answer: Option<Duration>,
    /// The fewest left any answer of this window has stated. A request reserved after that
    /// answer, admitted with as many left or more, was counted in a later window: the server's
    /// rolled (or a moving one freed) in between.
    least_left: Option<Left>,
    /// A window an answer began (not our roll): the next request goes alone, and its answer
    /// counts what is left again (see [`rolled_under`](Self::rolled_under)).
    recount: bool,
    /// The budget was set by our own roll, not by an answer of the window.
    budget_guessed: bool,
    /// The requests taken off the budget at the roll: they went near the last window's end.
    straddled: u64,
    /// The window's shape, once the first answer after a roll has shown it (see `Refill`).
    refill: Refill,
    /// The requests in flight, oldest first: their serials and when they went (their count is
    /// the requests in flight).
    out: std::collections::VecDeque<(u64, Duration)>,
    /// The longest round trip lately (each answer's, or 7/8 of the one before).
    longest_trip: Duration,
    last_seen: Duration,
    /// Whether a key with no news yet sends one request alone first.
    probe_new: bool,
    /// Whether any response has been seen for this key.
    observed: bool,
    /// While nothing is known of the quota (no quota stated, no refusal measured): when the
    /// slow start began. Its cap on the requests in flight doubles every [`RAMP_STEP`].
    ramp_since: Option<Duration>,
    next_serial: u64,
    /// A request is out alone: its serial and when it went. The others wait for its answer.
    probe_out: Option<(u64, Duration)>,
    /// The next request goes alone: a pause ended with nothing known about the budget.
    probe_next: bool,
    /// Requests answered without a throttle and without a stated quota, and when the first of
    /// them went: a silent server's first window, measured.
    quiet_admitted: u64,
    quiet_since: Option<Duration>,
    /// What bare throttles taught us (boxed: most keys never meet a silent server).
    silence: Option<Box<Silence>>,
    /// The server states its resets in whole seconds (rounded up): early probes may pay.
    coarse: bool,
    /// Coarse only by its `Retry-After`: the reset itself came with a fraction of a second, so
    /// it is not rounded, and where the quota frees from it stays put (see `phase`).
    reset_fine: bool,
    /// The last response spoke of the current window (its budget is worth sharing).
    fresh: bool,
    /// The response being observed answers an early probe.
    answers_early: bool,
    /// The quotas stated beside the governing one, each in its unit and window (boxed: most
    /// servers state one quota).
    side: Option<Box<SideQuotas>>,
    /// Where, in the second before a stated (rounded-up) reset, the quota really frees.
    phase: ResetPhase,
    /// Whether a stated window keeps to the clock: its ends then carry from one window to
    /// the next.
    clock: ClockEdges,
    /// The window frees its slots one at a time, one window after each went (a moving
    /// window): within a window an early probe opened, a later answer found more left than
    /// an earlier one, yet not the whole quota. Its early probes then go by `lag`.
    moving: bool,
    /// The first reset this window's answers stated (see
    /// [`reset_moved`](Self::reset_moved)): a reset that moves on while nothing rose is a
    /// moving window's.
    first_reset: Option<window::FirstReset>,
    /// Whether `moving` rests on the reset's sign alone, which a sliding window counter can
    /// give too: a refusal takes it back, and the sign is not read again for the key.
    reset_sign: window::ResetSign,
    /// How long after a moving window's first send its quota frees again.
    lag: WindowLag,
    /// One request may pass the closed gate, alone, to see whether the quota has freed.
    early: Option<EarlyProbe>,
    /// That request, while it is out: its serial.
    early_out: Option<(u64, EarlyProbe)>,
    /// This window was opened by an early probe: the quota frees as the last window's
    /// requests age out, at the pace they went.
    opened_early: bool,
    /// An early probe of this window was refused: no more of them until the window rolls.
    early_refused: bool,
    /// A window freed at most this long after its first request went. A moving window frees
    /// as its requests age out, so this is its length; when the phase lags a whole second
    /// behind it (the stated reset rounded up past a second), this is the finer bound.
    lag_by: Option<Duration>,
    /// When this window's admitted requests went and were answered, and the last window's;
    /// the first [`SENDS_KEPT`] of each, while the server states a quota.
    sends: Vec<Sent>,
    previous_sends: Vec<Sent>,
    /// How fast the stated quota frees, measured (see the `rate` module; boxed: only keys
    /// whose server states a quota measure it).
    free_rate: Option<Box<rate::FreeRate>>,
    /// How long a stated window rounded up to whole seconds lasts after its first request,
    /// and what this window holds of it (see the `span` module).
    span: SpanWatch,
    /// A silent server, paced by the estimate the processes share (see the `fleet` module):
    /// this process's own silent model stands aside.
    fleet: bool,
    /// Other processes spend this key's quota too (they share what they learn through a
    /// store): a window's count holds their requests as well as ours.
    counted_with_others: bool,
}

/// One admitted request of a window: the server counted it between `at` and `answered`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sent {
    serial: u64,
    at: Duration,
    /// When it was due: `at`, or sooner for a request the copy of the last window timed
    /// and the timer woke late.
    due: Duration,
    /// When its answer came (`at` until then).
    answered: Duration,
    /// It went alone (a probe, a window's first, a trickle's next): nothing queued beside it
    /// at the server.
    alone: bool,
}

impl Sent {
    /// When the server had counted it, as the copy of a window reckons: a request sent
    /// alone, when it was due (its way to the server, and a timer's lateness, are the
    /// window's first's too, which the lag measured from that send already holds); one sent
    /// among others, when its answer came (the server's threads may have counted it late).
    /// Any more, and each window's copy would carry it into the next: against a sliding log,
    /// the n-th slot drifted later by a round trip and a timer's lateness a window (~4 ms),
    /// until the window split in two and its edges were refused.
    fn counted(&self) -> Duration {
        if self.alone { self.due } else { self.answered }
    }
}

impl KeyQuota {
    /// A quota whose first request goes alone when `probe_new`.
    pub(crate) fn new(probe_new: bool) -> KeyQuota {
        KeyQuota {
            probe_new,
            ..KeyQuota::default()
        }
    }

    /// Reserves a plain request of `cost` units (the tests' shorthand for [`reserve`]).
    ///
    /// [`reserve`]: Self::reserve
    #[cfg(test)]
    pub(crate) fn try_reserve(&mut self, now: Duration, cost: u64) -> Admission {
        self.reserve(now, Demand::requests(cost))
    }

    /// Reserves `demand` against every quota held, or says until when to wait: the quotas
    /// held beside the governing one first (see [`side`]), then the governing one's budget.
    pub(crate) fn reserve(&mut self, now: Duration, demand: Demand) -> Admission {
        let in_flight = self.in_flight();
        let side = self.side.as_deref_mut();
        if let Some(until) = side.and_then(|side| side.wait_until(now, demand, in_flight)) {
            self.last_seen = now;
            return Admission::WaitUntil(until);
        }
        let admission = self.reserve_governing(now, demand);
        if matches!(admission, Admission::Reserved(_))
            && let Some(side) = self.side.as_deref_mut()
        {
            side.take(now, demand);
        }
        admission
    }

    /// Reserves `demand` against the governing quota's budget, or says until when to wait.
    fn reserve_governing(&mut self, now: Duration, demand: Demand) -> Admission {
        let cost = demand.requests;
        self.last_seen = now;
        if self.gate_until > now {
            if !self.take_early(now) {
                return Admission::WaitUntil(self.gate_wake(now));
            }
            return Admission::Reserved(self.ticket(now, true, None));
        }
        self.roll(now);
        if let Some(until) = self.span_wait(now) {
            // This window tests where the windows begin (see the `span` module).
            return Admission::WaitUntil(until);
        }
        if let Some((_, sent)) = self.probe_out {
            let until = sent.saturating_add(PROBE_FOR);
            if now < until {
                return Admission::WaitUntil(until);
            }
            // No answer in time: the next request probes in its place.
            self.probe_out = None;
        }
        if let Some(until) = self.ramp_wait(now) {
            return Admission::WaitUntil(until);
        }
        let mut alone =
            self.probe_next || (self.probe_new && !self.observed && self.in_flight() == 0);
        let mut window = None;
        if let Some(silence) = self.silence.as_deref_mut().filter(|_| !self.fleet) {
            match silence.admit(now, cost) {
                SilentAdmission::Go { alone: lone } => {
                    alone |= lone;
                    window = Some(silence.window_start);
                }
                SilentAdmission::WaitUntil(until) => return Admission::WaitUntil(until),
            }
        } else if let Some(budget) = self.budget {
            if budget == cost
                && (demand.behind > 0 || self.in_flight() > 0)
                && let Some(at) = self.span_hold(now)
            {
                // The window's last unit waits until its answer can bound the window's
                // length (see the `span` module). That costs no time while other requests
                // wait for the window's end anyway (queued, or on their way and about to
                // queue); a request alone would wait for nothing but the lesson (the last of
                // a job, a lone call of an SDK), and goes.
                return Admission::WaitUntil(at);
            } else if budget >= cost {
                self.budget = Some(budget - cost);
            } else if let Some(per_unit) = self.paced_interval() {
                // A quota that frees a unit at a time: the next request goes alone once one
                // has freed, after the answers on their way have said what is left.
                if self.in_flight() > 0 {
                    return Admission::WaitUntil(now.saturating_add(PROBE_FOR));
                }
                let at = self.paced_after_spent(per_unit, now);
                if at > now {
                    return Admission::WaitUntil(at);
                }
                alone = true;
                self.sent_at_pace(self.next_serial);
            } else if self.refill == Refill::Trickle
                && !self.moving
                && let Some(at) = self.mirrored()
            {
                // A moving window frees the slot of the last window's n-th request one window
                // after it went: the n-th of this window goes then, alone.
                if at > now {
                    return Admission::WaitUntil(self.reset_at.map_or(at, |reset| reset.min(at)));
                }
                alone = true;
            } else if self.moving && self.in_flight() > 0 {
                // A moving window's budget is counted with care (answers come out of order):
                // the answers on their way say what has freed.
                return Admission::WaitUntil(now.saturating_add(PROBE_FOR));
            } else if self.moving {
                // Nothing on its way, and no answer said the window is spent (that closes the
                // gate): what is left is for one request to find out, alone.
                alone = true;
            } else if let Some(reset_at) = self.reset_at.filter(|t| *t > now) {
                // Spent until a stated reset: one request may find out sooner.
                if self.early.is_none() && self.early_out.is_none() {
                    self.arm_early(now, reset_at.saturating_sub(now));
                }
                if self.take_early(now) {
                    return Admission::Reserved(self.ticket(now, true, None));
                }
                return Admission::WaitUntil(match self.early {
                    Some(early) if early.at > now => early.at.min(reset_at),
                    _ => reset_at,
                });
            } else if self.in_flight() > 0 {
                // Spent, with no known reset yet: the answers on their way will tell when it
                // frees (each wakes the head). Sent now, the request would only be refused.
                return Admission::WaitUntil(now.saturating_add(PROBE_FOR));
            } else {
                // Spent, nothing on its way and no reset known: one request finds out, alone.
                alone = true;
            }
        }
        Admission::Reserved(self.ticket(now, alone, window))
    }

    /// The time one unit of the quota takes to free, when the model paces to it: a quota
    /// stated with whole-second resets (which round the next unit's time up to a second, or
    /// say when a window ends) and no window, not a moving window, whose mirror of the last
    /// window was refused, measured to free a little at a time (a sliding window counter, a
    /// bucket; see the `rate` module). A fixed window frees nothing between its resets; one
    /// shared with other clients can look as if it did (their spending and its resets), and a
    /// stated window keeps it to its edges.
    fn paced_interval(&self) -> Option<Duration> {
        if !self.coarse
            || self.moving
            || self.limit.is_none()
            || self.window.is_some()
            || self.refill != Refill::Stated
        {
            return None;
        }
        let per_unit = self.free_per_unit()?;
        // What is measured is the span's average; a counter frees at the rate its last window
        // was spent at, and a window that follows one spent a unit short (the pace leaves
        // the last unit to the next window about every other window) frees a unit's worth
        // slower. Paced at the average, its requests were refused in such windows (three
        // in a 600-request job); paced a unit per window slower, not, and what the slower
        // pace leaves is stated as left and spent at once.
        Some(match self.limit {
            Some(limit) if limit > 1 => per_unit.mul_f64(limit as f64 / (limit - 1) as f64),
            _ => per_unit,
        })
    }

    /// While the slow start holds (nothing known of the quota), until when a request must wait
    /// for a slot in flight: the cap's next doubling, or an answer, whichever comes first.
    fn ramp_wait(&self, now: Duration) -> Option<Duration> {
        if self.limit.is_some() || self.budget.is_some() || self.fleet {
            return None;
        }
        let since = match self.silence.as_deref() {
            // Each window of an unproven estimate starts slow, from its first request.
            Some(silence) if silence.unproven && self.probe_new => silence.window_start,
            Some(_) => return None,
            None => self.ramp_since?,
        };
        let steps = now.saturating_sub(since).as_nanos() / RAMP_STEP.as_nanos();
        let cap = 1u64 << steps.min(32);
        (self.in_flight() >= cap).then(|| {
            let next = u32::try_from(steps + 1).unwrap_or(u32::MAX);
            since.saturating_add(RAMP_STEP.saturating_mul(next))
        })
    }

    /// How many of our requests are in flight.
    pub(crate) fn in_flight(&self) -> u64 {
        self.out.len() as u64
    }

    /// How many of our requests still out were sent after `ticket`'s (serials wrap).
    fn out_after(&self, ticket: Ticket) -> u64 {
        self.out
            .iter()
            .filter(|&&(serial, _)| serial.wrapping_sub(ticket.serial) as i64 > 0)
            .count() as u64
    }

    /// A reservation sent at `now`, alone (the others wait for its answer) or not.
    fn ticket(&mut self, now: Duration, alone: bool, window: Option<Duration>) -> Ticket {
        let serial = self.next_serial;
        self.next_serial = self.next_serial.wrapping_add(1);
        if alone {
            self.probe_out = Some((serial, now));
            self.probe_next = false;
        }
        self.out.push_back((serial, now));
        // While a quota is stated, and a new key's first request (a window's first, maybe).
        let first_ever = !self.observed && self.next_serial == 1;
        if (self.limit.is_some() || first_ever) && self.sends.len() < SENDS_KEPT {
            // A request the copy of the last window timed was due when the copy said, however
            // late the timer woke.
            let due = match self.early_out {
                Some((probe, early)) if probe == serial && early.trickle => early.at.min(now),
                _ => now,
            };
            self.sends.push(Sent {
                serial,
                at: now,
                due,
                answered: now,
                alone,
            });
        }
        Ticket {
            epoch: self.epoch,
            serial,
            sent: now,
            seen: self.least_left,
            window,
        }
    }

    /// Gives back a plain request of `cost` units (the tests' shorthand for [`give_back`]).
    ///
    /// [`give_back`]: Self::give_back
    #[cfg(test)]
    pub(crate) fn cancel(&mut self, ticket: Ticket, cost: u64) {
        self.give_back(ticket, Demand::requests(cost));
    }

    /// Gives back a reservation whose request was never sent.
    pub(crate) fn give_back(&mut self, ticket: Ticket, demand: Demand) {
        if let Some(side) = self.side.as_deref_mut() {
            side.give_back(demand);
        }
        let cost = demand.requests;
        self.end(ticket);
        if let (Some(silence), Some(start)) = (self.silence.as_deref_mut(), ticket.window)
            && start == silence.window_start
        {
            silence.used = silence.used.saturating_sub(cost);
        }
        if ticket.epoch == self.epoch
            && let Some(budget) = self.budget
        {
            let refunded = budget.saturating_add(cost);
            self.budget = Some(self.limit.map_or(refunded, |l| refunded.min(l)));
        }
    }

    /// Ends a reservation whose request was sent but got no response (an error).
    pub(crate) fn abandon(&mut self, ticket: Ticket) {
        self.end(ticket);
    }

    fn end(&mut self, ticket: Ticket) {
        if let Some(at) = self
            .out
            .iter()
            .position(|(serial, _)| *serial == ticket.serial)
        {
            self.out.remove(at);
        }
        if self
            .early_out
            .is_some_and(|(serial, _)| serial == ticket.serial)
        {
            self.early_out = None;
        }
        if self
            .probe_out
            .is_some_and(|(serial, _)| serial == ticket.serial)
        {
            self.probe_out = None;
        }
    }

    /// Learns from the response to `ticket`. Returns the pause the key needs, if any: the
    /// caller spreads it with jitter and closes the gate ([`close_gate`](Self::close_gate)),
    /// here and in other processes.
    pub(crate) fn observe(
        &mut self,
        now: Duration,
        ticket: Ticket,
        outcome: Outcome,
        info: &RateLimitInfo,
    ) -> Option<Duration> {
        let was_probe = self
            .probe_out
            .is_some_and(|(serial, _)| serial == ticket.serial);
        let early = self
            .early_out
            .filter(|(serial, _)| *serial == ticket.serial)
            .map(|(_, early)| early);
        self.end(ticket);
        self.last_seen = now;
        if !self.observed && self.probe_new {
            self.ramp_since = Some(now);
        }
        self.observed = true;
        let trip = now.saturating_sub(ticket.sent);
        self.longest_trip = trip.max(self.longest_trip.mul_f64(0.875));
        // Most servers state one quota: the governing one, with nothing beside it to hold.
        let governs = info.governing_policy();
        let beside = info.policies.len() > usize::from(governs.is_some());
        if beside || self.side.is_some() {
            let in_flight = self.in_flight();
            let side = self.side.get_or_insert_with(Box::default);
            side.observe_beside(now, info, governs, in_flight);
        }
        let states_quota = info.limit.is_some() || info.remaining.is_some() || info.reset.is_some();
        // A wait alone (a `Retry-After` that proxies add to every 429) says nothing of the
        // quota, unless the server has stated one before: its refusals then speak of it.
        let quota_known = self.limit.is_some() || self.budget.is_some();
        let speaks_of_quota = states_quota || (quota_known && info.retry_after.is_some());
        if !speaks_of_quota && self.fleet_learns(info) {
            return None;
        }
        if !speaks_of_quota {
            // The refusal teaches what a bare one does; the wait it asks is the pause.
            let silent = self.observe_silence(now, ticket, was_probe, outcome);
            let asked = info.retry_after.filter(|_| outcome == Outcome::Throttled);
            if let (Some(asked), Some(silence)) = (asked, self.silence.as_deref_mut()) {
                // Longer than the model's own pause: the server rests (a bucket refills).
                silence.rested = asked > silent.unwrap_or(Duration::ZERO);
                silence.server_pauses = true;
            }
            return asked.or(silent);
        }
        // A stated quota replaces every estimate.
        self.silence = None;
        self.quiet_admitted = 0;
        self.quiet_since = None;
        let mut ticket = ticket;
        if outcome == Outcome::Throttled {
            // Refused: it took nothing from the window.
            self.sends.retain(|sent| sent.serial != ticket.serial);
            self.previous_sends
                .retain(|sent| sent.serial != ticket.serial);
        } else if let Some(sent) = self
            .sends
            .iter_mut()
            .chain(self.previous_sends.iter_mut())
            .find(|sent| sent.serial == ticket.serial)
        {
            sent.answered = now;
        }
        self.free_rate_saw(now, ticket, outcome, info);
        if let Some(early) = early {
            self.early_seen(now, &mut ticket, early, outcome, info);
        } else {
            self.rolled_under(now, &mut ticket, outcome, info);
        }
        self.answers_early = early.is_some();
        self.observe_stated(now, ticket, outcome, info)
    }

    fn observe_stated(
        &mut self,
        now: Duration,
        ticket: Ticket,
        outcome: Outcome,
        info: &RateLimitInfo,
    ) -> Option<Duration> {
        let epoch = ticket.epoch;
        if info.reset.is_some() || info.retry_after.is_some() {
            // The windows end at the stated reset: rounded up, whatever `Retry-After` beside it.
            self.coarse = info.grain.is_some() || info.reset_grain.is_some();
            self.reset_fine = info.reset_fine;
        }
        if let Some(limit) = info.limit {
            self.limit = Some(limit);
        }
        if info.window.is_some() {
            self.window = info.window;
        }
        let mut pause = None;
        if outcome == Outcome::Throttled {
            pause = self.refused_stated(info);
        }
        // A response from a window that has ended speaks of a quota that is gone.
        self.fresh = epoch == self.epoch;
        if epoch == self.epoch {
            let first_admitted = outcome == Outcome::Answered && self.epoch_first_answer.is_none();
            if outcome == Outcome::Answered {
                let first = self.epoch_first_answer.get_or_insert(now);
                *first = (*first).min(now);
            }
            if let Some(left) = Left::stated(info) {
                self.least_left = Some(match self.least_left {
                    Some(least) if least.same_quota(&left) && least.remaining <= left.remaining => {
                        least
                    }
                    _ => left,
                });
            }
            if self.budget_guessed {
                self.clock.first_answer(outcome == Outcome::Throttled);
                self.span_first_answer(outcome == Outcome::Throttled);
            }
            if self.budget_guessed && outcome == Outcome::Answered {
                self.first_answer_of_roll(now, info);
            }
            if outcome == Outcome::Answered {
                let rolled = self.budget_guessed;
                self.span_saw(now, ticket, info, first_admitted && rolled);
            }
            if outcome == Outcome::Answered {
                self.reset_moved(now, &ticket, info);
            }
            self.bound_end(now, info);
            // (A moving window's budget is its answers' own: spent is spent.)
            let trickles =
                self.refill == Refill::Trickle && !self.moving && self.mirrored().is_some();
            // A paced quota is spent until its next unit frees, not until the stated reset.
            let paced = self.paced_interval().is_some();
            if info.remaining == Some(0) && pause.is_none() && !trickles && !paced {
                pause = self.reset_at.map(|at| at.saturating_sub(now));
            }
            if let Some(remaining) = info.remaining {
                self.take_remaining(ticket, remaining, paced);
            }
        }
        let pause = pause.filter(|wait| !wait.is_zero());
        // A 429's `Retry-After` is obeyed; only our own early probe, refused, probes again
        // before it (the search for the phase goes on, one request at a time).
        if let Some(wait) = pause
            && (outcome == Outcome::Answered || self.answers_early)
        {
            self.arm_early(now, wait);
        } else if outcome == Outcome::Throttled {
            self.early = None;
        }
        pause
    }

    /// A refusal that states the quota: the pause it asks (its `Retry-After`, or its reset).
    /// A sliding log that refuses a request sent at the pace of the last window frees some
    /// other way, and its stated reset rules from then on.
    fn refused_stated(&mut self, info: &RateLimitInfo) -> Option<Duration> {
        self.reset_sign_refused();
        if self.refill == Refill::Trickle {
            self.refill = Refill::Stated;
        }
        let mut pause = info.server_wait().or(info.reset);
        if self.answers_early
            && let (Some(wait), Some(reset)) = (pause, info.reset)
        {
            // Our own probe of the reset, refused: the reset it states is when the quota
            // frees, and a `Retry-After` beside it is that reset rounded up (never 0).
            pause = Some(wait.min(reset));
        }
        // What is left after the pause is not known unless stated: one request finds out
        // before the others go.
        self.probe_next = info.remaining.is_none() && info.limit.is_none();
        pause
    }

    /// What an answer states is left, less our requests still out (some of which it may
    /// already count).
    fn net_of_out(&self, remaining: u64) -> u64 {
        remaining.saturating_sub(self.in_flight())
    }

    /// What an answer of the current window states is left becomes the budget: net of the
    /// requests still on their way, and never above what the budget already holds when that
    /// was taken from an answer.
    fn take_remaining(&mut self, ticket: Ticket, remaining: u64, paced: bool) {
        let net = self.net_of_out(remaining);
        self.budget = Some(match self.budget {
            // A trickling window frees slots between answers: each says what is left
            // (and a paced quota's units); answers come out of order. Less those answered
            // while it was out: counted after it, they may not be in what it states (a
            // log's slot still held by a request sent late in the last window, once taken
            // for free, was refused).
            _ if self.moving || paced || self.refill == Refill::Trickle => {
                net.saturating_sub(self.answered_while_out(ticket))
            }
            // The request that went alone after a window an answer began: what it
            // states counts every request of the window that reached the server before
            // it, less those still out.
            Some(budget) if self.recount => {
                self.recount = false;
                budget.min(net)
            }
            // Our own reservations are already taken off; others may have spent more. Where
            // other processes spend too, ours sent after it and still out are taken off what
            // it states as well: the budget is shared, and theirs leave it no slack.
            Some(budget) if !self.budget_guessed => {
                let ours_after = if self.counted_with_others {
                    self.out_after(ticket)
                } else {
                    0
                };
                budget.min(remaining.saturating_sub(ours_after))
            }
            // First news of a window we rolled: the requests still in flight may not
            // be counted yet. Nor may it raise what the roll left: the requests that
            // went near the last window's end and were answered before this one may
            // have been counted in this window after it (the server answers out of
            // order), and the roll took them off.
            Some(guessed) => guessed.min(net),
            // First news of the window (one begun by an answer): the requests still in
            // flight may not be counted yet.
            None => net,
        });
        self.budget_guessed = false;
    }

    /// A response that stated nothing: a bare throttle pauses the key and starts probing; an
    /// admission counts towards the window's measured quota.
    fn observe_silence(
        &mut self,
        now: Duration,
        ticket: Ticket,
        was_probe: bool,
        outcome: Outcome,
    ) -> Option<Duration> {
        if outcome == Outcome::Answered {
            match self.silence.as_deref_mut() {
                Some(silence) => {
                    if silence.admitted(now, ticket, was_probe) == Learned::Nothing {
                        // Refused before anything was admitted, then admitted again: no quota
                        // was measured (the refusal was another client's spending, or a pause
                        // the server asked). Nothing is known; a slow start begins again.
                        self.silence = None;
                        self.quiet_admitted = 1;
                        self.quiet_since = Some(ticket.sent);
                        self.ramp_since = self.probe_new.then_some(now);
                    }
                }
                None => {
                    self.quiet_admitted = self.quiet_admitted.saturating_add(1);
                    let since = self.quiet_since.get_or_insert(ticket.sent);
                    *since = (*since).min(ticket.sent);
                }
            }
            return None;
        }
        let next_serial = self.next_serial;
        let silence = match self.silence.as_deref_mut() {
            Some(silence) => {
                if ticket.serial < silence.wave_end && !was_probe {
                    // Sent before the pause began: the same news again.
                    return None;
                }
                silence
            }
            None => {
                let from = self.quiet_since.unwrap_or(ticket.sent);
                let measured = self.quiet_admitted;
                self.silence = Some(Box::new(Silence::first(from, measured)));
                self.silence.as_deref_mut().expect("just set")
            }
        };
        silence.wave_end = next_serial;
        // Those sent with the refused request, or before it, may have reached the server first.
        let out = &self.out;
        let still_out = |after: Duration| {
            let between = |(_, sent): &&(u64, Duration)| *sent > after && *sent <= ticket.sent;
            out.iter().filter(between).count() as u64
        };
        let pause = silence.throttled(now, ticket, was_probe, &still_out);
        tracing::trace!(
            serial = ticket.serial,
            quota = silence.quota(now),
            window_ms = silence.estimated_window().map(|w| w.as_millis() as u64),
            too_short_ms = silence.too_short.as_millis() as u64,
            pause_ms = pause.as_millis() as u64,
            "pacing: silent model refused"
        );
        Some(pause)
    }

    /// Whether the last pause a silent server's model asked aims a round probe (see the
    /// `silent` module): kept as it is, not spread.
    pub(crate) fn silent_probe_aimed(&self) -> bool {
        self.silence.as_deref().is_some_and(Silence::probe_aimed)
    }

    /// Pauses the key until `now + wait` (a later gate wins).
    pub(crate) fn close_gate(&mut self, now: Duration, wait: Duration) {
        self.close_gate_stated(now, wait, None);
    }

    /// [`close_gate`](Self::close_gate) for a pause the server asked for: `stated` is its
    /// wait before jitter, told to the requests the gate refuses.
    pub(crate) fn close_gate_stated(
        &mut self,
        now: Duration,
        wait: Duration,
        stated: Option<Duration>,
    ) {
        let until = now.saturating_add(wait);
        if until > self.gate_until {
            self.gate_until = until;
            self.gate_stated = stated;
            self.gate_required_until = stated.map_or(until, |s| now.saturating_add(s).min(until));
        }
    }

    /// The jitter drawn on top of the server's stated wait that still holds the gate at `now`:
    /// it spreads clients told the same instant, and is not part of the wait the server asks.
    pub(crate) fn gate_jitter_left(&self, now: Duration) -> Duration {
        if self.gate_until <= now {
            return Duration::ZERO;
        }
        self.gate_until
            .saturating_sub(self.gate_required_until.max(now))
    }

    /// The server's stated wait behind the gate, while the gate is closed.
    pub(crate) fn gate_stated(&self, now: Duration) -> Option<Duration> {
        self.gate_stated.filter(|_| self.gate_until > now)
    }

    /// How long the key stays closed from `now` (zero when open).
    pub(crate) fn gate_after(&self, now: Duration) -> Duration {
        self.gate_until.saturating_sub(now)
    }

    /// What this key's quota is known to be at `now`, for the other processes: what is left
    /// of the current window (net of our own requests) until its end, and the quota per
    /// window the server states. `stated` is what the answer to `answered` states is left:
    /// less our requests still out that were sent after it, it is shared when the budget
    /// holds less. Those sent before it reached the server first, as a rule, and are counted
    /// in it; taken off as well, they lowered the store's count below the server's whenever
    /// answers came in while other requests of the process were out (the heads of several
    /// processes taking turns in one window: one slot of 12 idled in a window of 30). The
    /// budget takes off, for a window that frees slot by slot, also the requests answered
    /// while each one was out (the server may have counted them after it), and every process
    /// takes a window for such a one when other processes' requests count in it (more counted
    /// than it sent into it). Shared, where the store keeps a window's least count, those
    /// requests idled their slots: four processes on rate-limiter-flexible's 12 per 2 s shared
    /// 1 and then 0 after answers stating 3 and 2 left, and windows near the job's end let 10
    /// or 11 of 12 through. The store's count, which every take lowers, already leaves out
    /// every request taken and not yet counted, so what is shared may be more than the budget.
    ///
    /// Not a silent server's estimate: it measures what this process was admitted, its share
    /// and not the server's quota (shared as the quota of all, it held four processes to one
    /// process's share: measured 2.4 × the quota's time instead of 1.4–1.6 × alone). Bare
    /// 429s are still shared, as the gate.
    pub(crate) fn shared_facts(
        &self,
        now: Duration,
        stated: Option<u64>,
        answered: Ticket,
    ) -> SharedFacts {
        let left = match (self.fresh, self.budget, self.reset_at) {
            (true, Some(budget), Some(reset_at)) if reset_at > now => {
                let told = stated.map_or(0, |left| left.saturating_sub(self.out_after(answered)));
                Some((budget.max(told), reset_at - now))
            }
            _ => None,
        };
        let quota = self.limit.zip(self.window);
        SharedFacts {
            left,
            quota,
            silent: false,
        }
    }

    /// Folds in what another key's answer showed of this quota's one counter (a partition that
    /// joins this quota entry, see the `scope` module): the server stated `remaining` left in
    /// the window holding `now`, and `uncounted` requests on their way, ours and those
    /// reserved on other keys, were not counted in it yet. The budget is at most what that
    /// leaves; before any answer of our own, that is the budget.
    pub(crate) fn counted_elsewhere(&mut self, now: Duration, remaining: u64, uncounted: u64) {
        // A window that has ended is rolled first: the answer speaks of the one holding `now`.
        self.roll(now);
        let left = remaining.saturating_sub(uncounted);
        self.budget = Some(self.budget.map_or(left, |budget| budget.min(left)));
    }

    /// True when the entry holds nothing worth keeping (memory stays bounded).
    pub(crate) fn is_idle(&self, now: Duration, idle_after: Duration) -> bool {
        self.in_flight() == 0
            && self.gate_until <= now
            && self.reset_at.is_none_or(|t| t <= now)
            && now.saturating_sub(self.last_seen) >= idle_after
    }

    /// What is left of the current window, net of our own requests, when an answer has said.
    pub(crate) fn budget(&self) -> Option<u64> {
        self.budget
    }

    /// The estimated quota per window and window of a silent server, if any.
    #[cfg(test)]
    pub(crate) fn estimate(&self, now: Duration) -> Option<(u64, Duration)> {
        let silence = self.silence.as_deref()?;
        Some((silence.quota(now), silence.estimated_window()?))
    }
}

mod clock;
mod early;
mod fleet;
mod phase;
mod rate;
mod side;
mod silent;
mod silent_pace;
mod silent_rate;
mod snapshot;
mod span;
#[cfg(test)]
mod tests;
mod window;
