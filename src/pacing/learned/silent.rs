//! A server that states nothing: what its bare 429s let us infer. The quota per window is what
//! a window admitted before a refusal; the window is bounded by the probes that follow the
//! refusal (refused: not over yet; admitted: over), and narrowed by sending each window's first
//! request, alone, at the midpoint of the two bounds. A probe of the first window whose pause
//! would pass a round offset from its first request goes just after it (see
//! [`round::ROUND_OFFSETS_MS`]), and a probe admitted there makes the first try a 64th under
//! that round window, not the midpoint: the windows people configure are round, and one 429
//! then ends the search. So does a window between the round offsets: the search tries the round
//! one people configure there first (2.5, 4, 6, 12, 20 s ..., see [`ROUND_WINDOWS_MS`]).
//!
//! A pause the server asks (a `Retry-After` alone) that is longer than the model's own lets a
//! bucket rest and bank a credit, on which shorter windows pass: the midpoints admitted while
//! it rests are undone together by the next refusal inside a window, wherever it falls. Where
//! the server asks a pause, each refusal costs it: a rate with no burst (a window of one
//! request) is tried first at the round interval nearest the midpoint (one to ten requests a
//! second, or one every 1.5, 2, 3 s ...; where none falls, a round count a minute), a 128th
//! over it, then a 128th under (see [`Silence::round_trial`]).
//!
//! A window that sustains clearly less than the first admitted says the server is no window
//! limiter: a bucket (its first window was its burst), or a sliding window counter (it charges
//! each burst on into the next window). The `handover` module tells them apart and hands the
//! key over to the `silent_rate` or the `silent_pace` model.
//!
//! A limiter that each refused request begins its window again reads to the probes as a far
//! longer window: the `restart` module tries the gap that let a probe through, and paces to
//! it once admitted. A limiter that blocks a key for a while from its first refusal refuses a
//! request as late into a window as a whole window was admitted at: the `block` module reads
//! that contradiction, and holds the key the block's length after each refusal, where the
//! probes would pay a 429 each through it. The probes after a refusal are the `probes`
//! module's, the round numbers the search tries first the `round` module's.

use std::time::Duration;

use super::super::adaptive::Cubic;
use super::Ticket;
use super::silent_pace::SilentPace;
use super::silent_rate::SilentRate;

mod block;
mod handover;
mod probes;
mod restart;
mod round;

use self::block::Blocking;
use self::handover::REFUTED_BY_FAR;
use self::probes::{FIRST_PAUSE, PAUSE_GROWTH, Probing, REMEASURE_SHARE};
use self::restart::Restart;
use self::round::{
    ROUND_WINDOWS_MS, just_over, rate_margin, round_intervals_by_the_minute,
    round_intervals_by_the_second, round_margin, round_tried, window_margin,
};

/// After this many windows, the window's search goes on to a thirty-second (see
/// [`Silence::next_try`]): a job this long has more windows to come for the time it saves.
const FINE_AFTER_WINDOWS: u64 = 10;
/// The window's search stops when its bounds are this share of the window apart...
const SEARCH_SHARE: u32 = 16;
/// ...or this share, for a window of one request and after [`FINE_AFTER_WINDOWS`].
const FINE_SHARE: u32 = 32;

/// A silent server's quota, inferred.
#[derive(Debug, Clone)]
pub(super) struct Silence {
    /// Responses to reservations below this serial were sent before the last throttle: their
    /// 429s are the same news again.
    pub(super) wave_end: u64,
    /// After a throttle: pausing and probing until the server admits a request again.
    probing: Option<Probing>,
    /// The estimated window, once a probe has bounded it: a window this long was enough.
    pub(super) window: Option<Duration>,
    /// A window this long was not enough (a request that late into one was refused). While
    /// the two bounds are far apart, each window's first request goes at their midpoint.
    pub(super) too_short: Duration,
    /// The quota per window that lower bound was found for: a bucket frees fewer requests
    /// sooner, so a smaller quota measured later lowers it in proportion.
    too_short_for: u64,
    /// When the current window began (its first request went), and the one before.
    pub(super) window_start: Duration,
    previous_start: Duration,
    /// Reservations and admissions in the current window.
    pub(super) used: u64,
    admitted: u64,
    /// Admissions in the previous window (what a failed first request of a window measures).
    previous_admitted: u64,
    /// The quota last measured in a window (what it admitted before a refusal), which the
    /// curve does not go below.
    floor: u64,
    /// The start of the window whose floor that is: its successes still coming back raise it.
    floor_window: Option<Duration>,
    /// The most a whole window admitted before a refusal inside it: the curve never probes
    /// above it again (a 429 paid once, not once per climb).
    pub(super) ceiling: Option<u64>,
    /// The window estimate before the current window's first request, sent at a midpoint and
    /// admitted, shortened it: restored if a refusal inside this window shows that request
    /// found only part of the quota free (a bucket refilling, not a window ending).
    before_trial: Option<Duration>,
    /// The server asked for the last pause, and it was longer than the model's own: a bucket
    /// rested meanwhile, and holds a credit that lets shorter windows through until it is
    /// spent. Set by the caller, cleared by the next refusal.
    pub(super) rested: bool,
    /// A refusal has asked for a pause (`Retry-After`): each refusal costs that pause, so the
    /// window's search does not go on to a thirty-second late in a job (see
    /// [`Silence::next_try`]).
    pub(super) server_pauses: bool,
    /// The window estimate before the first of the trials that shortened it while the server
    /// rested. A window that ends without a refusal confirms its trial only as far as the
    /// server had freed no more than the window; on a credit, the next refusal inside a
    /// window is the trials' doing, wherever it falls: the window goes back to this, and the
    /// bisection goes on above the window refused.
    before_trials: Option<Duration>,
    /// Whether the estimate is unproven: no whole window has yet admitted its quota at it
    /// without a refusal, or this window began early, at a midpoint tried. While it is, each
    /// window's requests go under the slow start's cap
    /// (a bucket that refilled only in part refuses one request, not every one in flight).
    pub(super) unproven: bool,
    /// A request of the current window was refused.
    refused_in_window: bool,
    /// The current window's successor tried its first request at a midpoint and was
    /// refused: it goes at the window known to be enough, and the next midpoint waits for the
    /// window after (each tried midpoint costs at most one 429).
    midpoint_refused: bool,
    /// When this window's requests went, and the last window's (the first [`SENDS_KEPT`]).
    sends: Vec<Duration>,
    previous_sends: Vec<Duration>,
    curve: Cubic,
    /// When the request of the first refusal went, and how many of ours sent after it were
    /// admitted: what a bucket's rate is bounded by (see the `silent_rate` module).
    anchor: Option<Duration>,
    since_anchor: u64,
    /// What the first window admitted before its refusal (a bucket's burst, or a window's
    /// quota).
    pub(super) first_measured: u64,
    /// The rate (requests a second) a bucket refusing as this server did would refill at, at
    /// least and at most, from what was admitted between the first refusal and each later
    /// one: a bucket that refuses is empty, so each such span bounds its rate (see the
    /// `silent_rate` module), and every span bounds the same rate. Bounds that do not meet
    /// say the server is no bucket (a sliding counter on the clock frees nothing until its
    /// window ends, then a window's worth), and the key is never handed over.
    bucket_lo: f64,
    bucket_hi: f64,
    /// Handed over: a later window admitted at most half of the first, so the server refills
    /// at a rate, and the pace is that rate's. The window model's own state stays as it was
    /// at the hand-over, for the hand-back.
    pub(super) rate: Option<Box<SilentRate>>,
    /// Handed over for good: a later window admitted clearly less than the first, and the
    /// refusals bound no one rate (a sliding window counter), so the pace is even, searched
    /// by the `silent_pace` model (see [`Silence::pace_evenly`]).
    pub(super) pace: Option<Box<SilentPace>>,
    /// The window the first probes measured (from the first request to the first probe
    /// admitted): an upper bound on the window.
    first_window: Option<Duration>,
    /// How long after the first request the last probe refused before that one went, if one
    /// was: a lower bound on the window for a limiter whose windows begin with our first
    /// request (see [`Silence::pace_evenly`]).
    first_refused_probe: Option<Duration>,
    /// Whether the server may still be a bucket.
    pub(super) bucket: Bucket,
    /// How many windows the model has begun (each window's first request sent alone).
    windows_begun: u64,
    /// The round offset just after which the first window's probe was admitted (see
    /// [`round::ROUND_OFFSETS_MS`]), or the round window or interval a trial just over was admitted
    /// at (see [`Silence::window_round`], [`Silence::round_trial`]): the window is likely that
    /// long, so the search's next trial goes just under it (see [`Silence::next_try`]).
    round_window: Option<Duration>,
    /// Whether the windows are ones that each refusal begins again (see the `restart` module).
    restart: Restart,
    /// Whether each refusal blocks the key for a while (see the `block` module).
    blocking: Blocking,
    /// The pause the last answer asked ends where the next window begins, one request alone,
    /// and is kept as it is (see [`Silence::probe_aimed`]).
    aimed_at_window: bool,
}

/// What is known of whether a silent server is a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bucket {
    /// Nothing says it is not.
    Possible,
    /// Its refusals bound no one rate: never handed over.
    NoOneRate,
    /// A refusal refuted the rate model, and the key was handed back: never handed over
    /// again.
    HandedBack,
}

/// How many send times of a window are kept: its successor's requests go no sooner than one
/// window after them, in order, for that many.
const SENDS_KEPT: usize = 256;

/// What an admission taught the silent model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Learned {
    /// It counts towards the model.
    Counted,
    /// A probe ended a pause that followed a refusal with nothing admitted before it: no
    /// quota was measured, so the model knows nothing.
    Nothing,
}

/// The silent model's verdict on one request.
pub(super) enum SilentAdmission {
    Go { alone: bool },
    WaitUntil(Duration),
}

impl Silence {
    /// The first bare throttle, at `now`: the server admitted `measured` since `from`.
    pub(super) fn first(from: Duration, measured: u64) -> Silence {
        Silence {
            wave_end: 0,
            probing: None,
            window: None,
            too_short: Duration::ZERO,
            too_short_for: 0,
            floor_window: None,
            window_start: from,
            previous_start: from,
            used: measured,
            admitted: measured,
            previous_admitted: 0,
            floor: 0,
            ceiling: None,
            before_trial: None,
            rested: false,
            server_pauses: false,
            before_trials: None,
            unproven: true,
            refused_in_window: false,
            midpoint_refused: false,
            sends: Vec::new(),
            previous_sends: Vec::new(),
            curve: Cubic::settled(measured as f64, 0.0),
            anchor: None,
            since_anchor: 0,
            first_measured: 0,
            bucket_lo: 0.0,
            bucket_hi: f64::INFINITY,
            rate: None,
            pace: None,
            first_window: None,
            first_refused_probe: None,
            bucket: Bucket::Possible,
            windows_begun: 0,
            round_window: None,
            restart: Restart::default(),
            blocking: Blocking::default(),
            aimed_at_window: false,
        }
    }

    /// The quota per window at `now`.
    pub(super) fn quota(&self, now: Duration) -> u64 {
        if self.rate.is_some() || self.pace.is_some() {
            return 1;
        }
        let windows = self.windows_at(now);
        let curve = self.curve.whole_quota(windows);
        self.ceiling
            .map_or(curve, |ceiling| curve.min(ceiling))
            .max(self.floor)
            .max(1)
    }

    /// Whether the estimate has settled: paced at a rate whose bounds have met, or a whole
    /// window has admitted its quota and the window's bounds met (the midpoint probes have
    /// stopped).
    pub(super) fn settled(&self) -> bool {
        if let Some(rate) = self.rate.as_deref() {
            return rate.known();
        }
        if let Some(pace) = self.pace.as_deref() {
            return pace.known();
        }
        // A rate with no burst behind a server's pause is searched to a sixteenth only (see
        // `next_try`): settled there.
        let share = if self.rate_behind_pause() {
            SEARCH_SHARE
        } else {
            FINE_SHARE
        };
        let bounded = self
            .window
            .is_some_and(|window| self.bounds_within(window, share));
        bounded && !self.unproven
    }

    /// Whether the window known too short is within `window / share` (and 2 ms) of `window`:
    /// the search stops there.
    fn bounds_within(&self, window: Duration, share: u32) -> bool {
        window.saturating_sub(self.too_short) <= (window / share).max(Duration::from_millis(2))
    }

    /// Whether the pause this model asked last is the aim of a round probe (see
    /// [`round::ROUND_OFFSETS_MS`]), to be kept as it is: a pause spread by the retry's jitter
    /// (±10 %) sends the probe before the round offset, or well after it. Only the first window's
    /// probes aim, one request at a time, so there is no herd to spread; a pause the server
    /// asks is never one. Nor is the pause after the refused trial of a window that refusals
    /// begin again (see [`Silence::restart_trial_refused`]): it ends where the next window
    /// begins, whose first request goes alone.
    pub(super) fn probe_aimed(&self) -> bool {
        !self.server_pauses
            && (self.aimed_at_window || self.probing.is_some_and(|probing| probing.round.is_some()))
    }

    /// The estimated window: for a key paced at a rate, the time one request takes to refill.
    pub(super) fn estimated_window(&self) -> Option<Duration> {
        match (self.rate.as_deref(), self.pace.as_deref()) {
            (Some(rate), _) => Some(rate.per_request()),
            (None, Some(pace)) => Some(pace.proven()),
            (None, None) => self.window,
        }
    }

    /// `at` in units of the estimated window (the curve's clock).
    fn windows_at(&self, at: Duration) -> f64 {
        let window = self.window.unwrap_or(Duration::from_secs(1));
        at.as_secs_f64() / window.as_secs_f64().max(1e-3)
    }

    pub(super) fn admit(&mut self, now: Duration, cost: u64) -> SilentAdmission {
        if let Some(rate) = self.rate.as_deref_mut() {
            return match rate.admit(now) {
                Some(at) => SilentAdmission::WaitUntil(at),
                None => SilentAdmission::Go { alone: false },
            };
        }
        if let Some(pace) = self.pace.as_deref_mut() {
            return match pace.admit(now) {
                Some(at) => SilentAdmission::WaitUntil(at),
                None => SilentAdmission::Go { alone: false },
            };
        }
        if self.probing.is_some() {
            // The pause is over (the gate let us in): this request probes alone.
            return SilentAdmission::Go { alone: true };
        }
        let Some(window) = self.window else {
            return SilentAdmission::Go { alone: false };
        };
        let searched = self.next_try(window);
        let next_try = self.held_to_rate(now, window, searched);
        let next_window = self.window_start.saturating_add(next_try);
        if now >= next_window {
            if next_try != searched {
                tracing::debug!(
                    at_ms = now.as_millis() as u64,
                    window_ms = searched.as_secs_f64() * 1e3,
                    at_rate_ms = next_try.as_secs_f64() * 1e3,
                    "pacing: a window held to the rate its refusals bound"
                );
            }
            // A new window: its first request goes alone, so a window estimated too short
            // costs one 429, not a burst.
            // A window begun early (a midpoint tried, or the rate's window) is unproven too:
            // a bucket that has refilled only in part refuses one request of it, not every
            // one in flight.
            let trial = next_try < window;
            self.restart.begin_window(next_try, trial);
            self.block_window_begins(self.window_start, now);
            self.previous_start = self.window_start;
            self.previous_admitted = self.admitted;
            self.unproven = self.refused_in_window || self.used < self.quota(now) || trial;
            self.refused_in_window = false;
            self.midpoint_refused = false;
            // The window just ended with no refusal: a shorter one tried is confirmed.
            self.before_trial = None;
            self.window_start = now;
            self.windows_begun = self.windows_begun.saturating_add(1);
            self.used = cost;
            self.admitted = 0;
            self.previous_sends = std::mem::take(&mut self.sends);
            self.sends.push(now);
            return SilentAdmission::Go { alone: true };
        }
        // Above what a window admitted (the floor, or the last window's count), one request
        // a window: the curve may climb two in one window, and both go before the first's
        // refusal is back (the grid's silent 25 per 2.5 s from the first request: 11 × 429
        // where one request at a time drew 10; no other case changed).
        let known = self.floor.max(self.previous_admitted).saturating_add(1);
        if self.used.saturating_add(cost) <= self.quota(now).min(known) {
            // The n-th request of a window goes no sooner after its first than the n-th of the
            // last window went after its first: a moving window frees each slot one window
            // after the request that spent it, and any window is safe at that pace.
            let nth = usize::try_from(self.used).unwrap_or(usize::MAX);
            if let Some(previous) = self.previous_sends.get(nth) {
                let shift = self.window_start.saturating_sub(self.previous_start);
                let at = previous.saturating_add(shift);
                if at > now {
                    return SilentAdmission::WaitUntil(at);
                }
            }
            self.used = self.used.saturating_add(cost);
            if self.sends.len() < SENDS_KEPT {
                self.sends.push(now);
            }
            SilentAdmission::Go { alone: false }
        } else {
            SilentAdmission::WaitUntil(next_window)
        }
    }

    /// How far into a window its successor's first request goes: the window, or the midpoint
    /// between the two bounds while they are more than a sixteenth (and 2 ms) apart. Each
    /// midpoint tried costs at most one 429 (four of them halve a gap of the whole window to a
    /// sixteenth); the window kept is then at most 6% too long. (A thirty-second was tried: one
    /// 429 more in most 120-request jobs against a silent fixed window, 15-16 where the sweep
    /// allows 14, for at most 3% of the time.) A window that admits one request, and admitted
    /// one from the first (a rate with no burst: nginx's `limit_req` without one), is searched
    /// to a thirty-second: its window is the interval between requests, so the time a job
    /// takes is the window kept, and one more midpoint costs one 429 at most (real nginx at
    /// 10 r/s: 1.053-1.062 × to 1.023 ×). Not behind a server's pause: each midpoint refused
    /// costs that pause, and at a fast rate a thirty-second is within the network's jitter
    /// of the edge (the grid's nginx at 12 r/s behind `Retry-After: 2`, once 84 ms was
    /// admitted, drew refusals at 74, 80 and 81 ms apart, 2 s each, and measured its window
    /// again: 7 × 429, 1.39-1.40 ×; 6, 1.35-1.36 × at a sixteenth). Not one down to a
    /// request after a burst: a bucket that counts refused requests drew 17 × 429 in a minute
    /// (12) at a thirty-second.
    /// After [`FINE_AFTER_WINDOWS`] windows every window is searched to a thirty-second: the
    /// job has run long enough that the time a window kept a sixteenth long loses (up to 6 %
    /// of every window to come, over the 5 % a job may take) outweighs the one 429 the next
    /// midpoint costs at most (real express-rate-limit's fixed window of 20 per 2 s, silent,
    /// kept 2.124 s over a lower bound of 1.994 s: 1.079-1.090 × in two jobs of five). Not
    /// where the server asks a pause with its refusals: each midpoint refused costs that pause.
    /// Before any midpoint, a first window whose probe was admitted just after a round offset
    /// tries a 64th under it (see [`round::ROUND_OFFSETS_MS`]); a rate with no burst tries the
    /// round interval nearest the midpoint, just over then just under it (see
    /// [`Silence::round_trial`]).
    pub(super) fn next_try(&self, window: Duration) -> Duration {
        if self.restart.confirmed() {
            return self.restart_step(window).unwrap_or(window);
        }
        if self.midpoint_refused {
            return window;
        }
        // Before the search, the trial of a window that each refusal begins again (one 429
        // where they do not): by the first window with no refusal, the one the probe admitted
        // began. Made once the search had settled, it left windows up to 2.5 × too long for
        // 10 s of a job of 49 (real `@fastify/rate-limit`, 6 per 1 s: 1.224 ×).
        if let Some(gap) = self.restart.trial_gap()
            && gap < window
            && !self.refused_in_window
        {
            return gap;
        }
        let fine = (self.rate_without_burst() && !self.rate_behind_pause())
            || (self.windows_begun >= FINE_AFTER_WINDOWS
                && !self.server_pauses
                && self.ceiling.is_none_or(|ceiling| ceiling > 1));
        let share = if fine { FINE_SHARE } else { SEARCH_SHARE };
        if self.bounds_within(window, share) {
            return window;
        }
        // The first window's probe was admitted just after a round offset (or a trial just
        // over a round interval): the next trial goes a 64th under it (a 128th for a rate
        // with no burst). Refused, the bounds are within a thirty-second (a sixty-fourth) at
        // one 429; admitted, the window is not that round one, and the search goes on below.
        if let Some(round) = self.round_window {
            let margin = if self.rate_without_burst() {
                rate_margin(round)
            } else {
                window_margin(round)
            };
            let under = round.saturating_sub(margin);
            if self.too_short < under && under < window {
                return under;
            }
        }
        let (_, midpoint, _) = self.middle_half(window);
        self.round_trial(window)
            .or_else(|| {
                self.window_round(window)
                    .map(|round| round + rate_margin(round))
            })
            .unwrap_or(midpoint)
    }

    /// For a window of more than one request, the round window people configure (see
    /// [`ROUND_WINDOWS_MS`]) in the middle half of the bounds nearest their midpoint: the
    /// search tries a 128th over it, and, admitted there, a 64th under it next (see
    /// [`Silence::round_window`]), so a round window is known to a thirty-second at one 429.
    /// The midpoints halve their way to it with windows kept long meanwhile and a 429 at each
    /// that falls under (real express-rate-limit, bare, 25 per 2.5 s: found just after 3 s, a
    /// 64th under it admitted, then the midpoint 2.48 s refused, and windows up to a fifth
    /// slow on to 2.5 s). None where no round window falls there: the midpoint.
    fn window_round(&self, window: Duration) -> Option<Duration> {
        if self.rate_without_burst() || self.ceiling.is_some_and(|ceiling| ceiling <= 1) {
            return None;
        }
        let (low, midpoint, high) = self.middle_half(window);
        ROUND_WINDOWS_MS
            .iter()
            .map(|&ms| Duration::from_millis(ms))
            .filter(|&round| round >= low && round <= high && round + rate_margin(round) < window)
            .min_by_key(|&round| round.abs_diff(midpoint))
    }

    /// For a rate with no burst, the round interval (see the `round` module) in the middle
    /// half of the bounds nearest their midpoint, as a trial a 128th over it: admitted there,
    /// the next trial goes a 128th under it (see [`Silence::round_window`]), so a round
    /// interval is known to a sixty-fourth at one 429, where the midpoints halve their way to
    /// it with a 429 at each one that falls under (the grid's nginx at 2 r/s behind
    /// `Retry-After: 1`: the midpoints 261, 391, 454, 486 and 494 ms refused, a second's pause
    /// each). The intervals by the second first, the likelier: only where none of them falls
    /// in the middle half, one by the minute (with all of them in one set, the grid's nginx at
    /// 2 r/s tried 300 ms, 200 a minute, on its way at two phases of 32, and drew 4 × 429
    /// for 2). None for a window of more than one request.
    fn round_trial(&self, window: Duration) -> Option<Duration> {
        if !self.rate_behind_pause() {
            return None;
        }
        let (low, midpoint, high) = self.middle_half(window);
        let by_the_second = round_intervals_by_the_second().map(|round| (0, round));
        let by_the_minute = round_intervals_by_the_minute().map(|round| (1, round));
        by_the_second
            .chain(by_the_minute)
            .filter(|&(_, round)| {
                let margin = rate_margin(round);
                round >= low
                    && round <= high
                    && round.saturating_sub(margin) > self.too_short
                    && round + margin < window
            })
            .min_by_key(|&(tier, round)| (tier, round.abs_diff(midpoint)))
            .map(|(_, round)| round + rate_margin(round))
    }

    /// A window `this` long was not enough for `quota` requests: the lower bound on the window,
    /// if it raises it.
    fn raise_too_short(&mut self, this: Duration, quota: u64) {
        if this > self.too_short {
            self.too_short = this;
            self.too_short_for = quota;
        }
    }

    /// The middle half of the window's bounds (from the window known too short to `window`):
    /// its low end, midpoint and high end, where a round trial is tried.
    fn middle_half(&self, window: Duration) -> (Duration, Duration, Duration) {
        let gap = window.saturating_sub(self.too_short);
        (
            self.too_short + gap / 4,
            self.too_short + gap / 2,
            window.saturating_sub(gap / 4),
        )
    }

    /// A rate with no burst (see [`Silence::rate_without_burst`]) whose server asks a pause
    /// with each refusal: each refusal costs that pause.
    fn rate_behind_pause(&self) -> bool {
        self.rate_without_burst() && self.server_pauses
    }

    /// A window of one request whose first window admitted one: a rate with no burst
    /// (nginx's `limit_req` without one), whose window is the interval between requests.
    fn rate_without_burst(&self) -> bool {
        self.ceiling == Some(1) && self.first_measured <= 1
    }

    pub(super) fn admitted(&mut self, now: Duration, ticket: Ticket, was_probe: bool) -> Learned {
        self.aimed_at_window = false;
        if self.anchor.is_some_and(|anchor| ticket.sent > anchor) {
            self.since_anchor = self.since_anchor.saturating_add(1);
        }
        if let Some(rate) = self.rate.as_deref_mut() {
            rate.admitted(ticket.sent, now);
            return Learned::Counted;
        }
        if let Some(pace) = self.pace.as_deref_mut() {
            pace.admitted(ticket.sent);
            return Learned::Counted;
        }
        if was_probe && let Some(probing) = self.probing.take() {
            if self.window.is_none() && probing.measured.max(self.admitted) == 0 {
                return Learned::Nothing;
            }
            // The server admits again: the measured window is bounded, and a new one began
            // with this probe.
            let window = ticket
                .sent
                .saturating_sub(probing.from)
                .max(Duration::from_millis(1));
            // Requests of the measured window answered after the throttle count too.
            let measured = probing.measured.max(self.admitted);
            self.window = Some(window);
            self.too_short = probing.refused_after.min(window);
            self.too_short_for = measured;
            // Sent just after a round offset (not held later by a pause the server asked).
            self.round_window = probing
                .round
                .filter(|&offset| window >= offset && window <= offset + round_margin(offset) * 2);
            self.before_trials = None;
            self.midpoint_refused = false;
            self.previous_sends.clear();
            self.sends = vec![ticket.sent];
            self.block_window_begins(probing.from, ticket.sent);
            self.previous_start = probing.from;
            self.previous_admitted = measured;
            self.window_start = ticket.sent;
            self.used = 1;
            self.admitted = 1;
            // The refusals were the measured window's; none yet of the one the probe began.
            self.refused_in_window = false;
            if self.first_measured == 0 {
                if measured == 1 {
                    // The first window admitted one of the requests sent into it (the slow
                    // start sends the second as soon as the first is answered): a rate with no
                    // burst, or a quota of one. The curve does not climb to two a window to
                    // find out: that climb is refused, and behind a `Retry-After` each refusal
                    // costs the pause the server asks (real nginx at 2 r/s behind
                    // `Retry-After: 1`: a second's pause at 2.4 s).
                    self.ceiling = Some(1);
                }
                self.first_measured = measured;
                self.first_window = Some(window);
                self.first_refused_probe = probing
                    .probe_refused
                    .then_some(probing.refused_after.min(window));
                self.restart.read(&probing, ticket.sent, self.too_short);
            }
            // A whole window, counted: a floor. The curve restarts from the throttle as after
            // any other, so it probes above the floor only once it has climbed back to it (K
            // windows later).
            self.floor = measured;
            self.curve
                .throttled(measured as f64, self.windows_at(probing.at));
            self.block_confirmed(ticket.sent, window, probing.probe_refused);
            return Learned::Counted;
        }
        if ticket.window == Some(self.window_start) || self.window.is_none() {
            self.admitted = self.admitted.saturating_add(1);
            // A success of the refused window answered after the refusal: it was admitted
            // too, so the window's quota was at least this.
            if ticket.window.is_some() && ticket.window == self.floor_window {
                self.floor = self.floor.max(self.admitted);
            }
        }
        // A window's first request went before the estimated window had passed, and was let
        // in: the window is no longer than that.
        if was_probe
            && ticket.window == Some(self.window_start)
            && let Some(window) = self.window
        {
            let into = self.window_start.saturating_sub(self.previous_start);
            if self.restart_admitted(into, window) {
                return Learned::Counted;
            }
            if into < window {
                // The trial under a round window was let in: that round window is not it. A
                // trial just over a round length was: its edge may be that one, tried next.
                let tried = if self.rate_without_burst() {
                    round_tried(into).filter(|_| self.server_pauses)
                } else {
                    self.window_round(window)
                        .filter(|&round| just_over(round, into))
                };
                self.round_window = tried.filter(|_| self.round_window.is_none());
                self.before_trial = Some(window);
                if self.rested {
                    self.before_trials.get_or_insert(window);
                }
                self.window = Some(into.max(self.too_short));
            }
        }
        Learned::Counted
    }

    /// A bare throttle at `now` on `ticket`; returns the pause before the next probe.
    /// `still_out` says how many of ours sent after an instant, and no later than this one,
    /// are unanswered (the bounds on a bucket's rate count them as possibly admitted).
    pub(super) fn throttled(
        &mut self,
        now: Duration,
        ticket: Ticket,
        was_probe: bool,
        still_out: &dyn Fn(Duration) -> u64,
    ) -> Duration {
        self.aimed_at_window = false;
        if let Some(rate) = self.rate.as_deref_mut() {
            if let Some(pause) = rate.refused(ticket.sent, now, still_out) {
                return pause;
            }
            return self.hand_back(now, ticket);
        }
        if let Some(pace) = self.pace.as_deref_mut() {
            return pace.refused(ticket.sent, now);
        }
        let settled = self.settled();
        let anchor = *self.anchor.get_or_insert(ticket.sent);
        let still_out = still_out(anchor);
        self.bound_bucket(now, ticket.sent, anchor, still_out);
        if self.probing.is_none()
            && let Some(pause) = self
                .hand_over(now, ticket, still_out)
                .or_else(|| self.pace_evenly(now))
        {
            return pause;
        }
        if let Some(pause) = self.restart_refused(now, ticket, was_probe) {
            return pause;
        }
        self.unproven = true;
        self.rested = false;
        self.refused_in_window = true;
        if !was_probe && self.window.is_some() && ticket.window == Some(self.window_start) {
            self.block_refused_inside(ticket.sent);
        }
        // No window measured yet: the first window's probes, which go back to round offsets.
        let first = self.window.is_none();
        if let Some(probing) = &mut self.probing {
            // A probe failed: the window has not ended yet; wait longer before the next.
            return probing.refused(ticket.sent, now, first);
        }
        let probing = match self.window {
            // The very first throttle: the quiet spell before it was one window.
            None => Probing {
                from: self.window_start,
                measured: self.admitted,
                at: now,
                next_pause: FIRST_PAUSE,
                refused_after: ticket.sent.saturating_sub(self.window_start),
                probe_refused: false,
                round: None,
                longest_refused_gap: Duration::ZERO,
            },
            // The first request of a window was refused: the window before is still running;
            // what it admitted is its quota.
            Some(window) if was_probe && ticket.window == Some(self.window_start) => {
                match self.first_of_window_refused(now, window, settled) {
                    Ok(pause) => return pause,
                    Err(probing) => probing,
                }
            }
            // Refused inside a window whose length is a trial: the shorter window was not
            // enough after all (see `trial_refused`). Not once the window has admitted its
            // whole floor on a server's credit: the request refused went above the quota
            // measured, and says the quota is no more (real nginx at 2 r/s behind
            // `Retry-After: 1`: the estimate's climb to two a window, refused, taken for the
            // trials' doing, left it free to climb and be refused again).
            Some(window)
                if ticket.window == Some(self.window_start)
                    && ((self.before_trial.is_some()
                        && self.admitted < self.previous_admitted)
                        || (self.before_trials.is_some_and(|enough| enough > window)
                            && self.admitted < self.floor)) =>
            {
                return self.trial_refused(now, window);
            }
            // Refused inside a window: the quota estimate was too high.
            Some(window) => return self.quota_refused(now, ticket, window, still_out),
        };
        let pause = probing.next_pause;
        let mut probing = Probing {
            next_pause: pause.mul_f64(PAUSE_GROWTH),
            ..probing
        };
        let pause = probing.aim(now, pause, first);
        self.probing = Some(probing);
        pause
    }

    /// The current window's first request was refused: the window before it goes on, with
    /// what it admitted and when its requests went.
    fn undo_window(&mut self) {
        self.block_window_undone();
        self.window_start = self.previous_start;
        self.admitted = self.previous_admitted;
        self.sends = std::mem::take(&mut self.previous_sends);
    }

    /// The first request of a window was refused: the window before is still running, and what
    /// it admitted is its quota. Sent early, at a midpoint: the pause until its successor goes,
    /// at the window known to be enough. Sent at the estimated end: the estimate was too
    /// short, and the window is measured again (the probing returned), unless it was a rate's
    /// interval, settled (see below).
    fn first_of_window_refused(
        &mut self,
        now: Duration,
        window: Duration,
        settled: bool,
    ) -> Result<Duration, Probing> {
        let into = self.window_start.saturating_sub(self.previous_start);
        self.undo_window();
        if into < window {
            // It went early, at the midpoint: the window is longer than that. Its successor
            // goes at the window's end, known to be enough; the next midpoint waits for the
            // window after (another midpoint of this one would be refused as often: four 429s
            // in a window against a fixed window on the clock, whose edge our first requests
            // do not set).
            self.raise_too_short(into, self.admitted);
            self.block_early_refused(self.window_start + into, into);
            self.round_window = None;
            self.used = u64::MAX;
            self.midpoint_refused = true;
            let next = self.window_start.saturating_add(self.next_try(window));
            return Ok(next.saturating_sub(now).max(Duration::from_millis(1)));
        }
        if settled && self.rate_without_burst() {
            // A rate with no burst (one request a window from the first), its interval settled and
            // proven by the window before: this request reached the server a little sooner after
            // the last than it went (the network's jitter, a timer's tick). The interval is a
            // little longer than it went at, not unknown: it grows by the search's last step (a
            // thirty-second, 2 ms at most: a jitter's size) and goes on, where measuring it again
            // paused a quarter of a second, bisected anew and settled higher (real nginx at 20
            // r/s: 51 to 54 ms for the rest of the job). Refused again before a window has gone
            // through at the longer interval, it is no longer settled, and is measured again.
            let step = (into / 32).clamp(Duration::from_millis(1), Duration::from_millis(2));
            let wider = into.saturating_add(step);
            tracing::debug!(
                into_ms = into.as_secs_f64() * 1e3,
                wider_ms = wider.as_secs_f64() * 1e3,
                "pacing: a settled interval refused at its end: a step longer"
            );
            // The next request goes an interval after this one (sent `into` after the window
            // it followed began): the request before may have reached the server late, and
            // a rate counts from when it did.
            self.too_short = into;
            self.too_short_for = 1;
            self.window = Some(wider);
            self.used = u64::MAX;
            let next = self.window_start.saturating_add(into).saturating_add(wider);
            return Ok(next.saturating_sub(now).max(Duration::from_millis(1)));
        }
        self.block_suspected(self.window_start + into, into);
        // It went at the estimated end: the estimate was too short. Measure again, the first
        // probe a sixteenth of the window later: the edge is near, but a window of seconds
        // probed from a quarter of a second drew four refusals in the 1.5 s to it (the grid's
        // silent fixed window of 60 per 10 s on the clock, whose edges our windows drift
        // against).
        Err(Probing {
            from: self.previous_start,
            measured: self.previous_admitted,
            at: now,
            next_pause: FIRST_PAUSE.max(window / REMEASURE_SHARE),
            refused_after: into,
            probe_refused: false,
            round: None,
            longest_refused_gap: Duration::ZERO,
        })
    }

    /// Refused inside a window whose length is a trial: the shorter window was not enough after
    /// all. Either the window's first request, sent early, found part of the quota free, not
    /// all of it (fewer admitted than in the window before), or a trial made while the server
    /// rested passed on its credit. Every trial since the last refusal is undone (the earlier
    /// ones may have passed on a credit too), and the window refused is known too short. The
    /// quota is not lowered: at the longer window it was enough. Returns the pause.
    ///
    /// Unless the window admitted part of a burst (fewer than the window before it, and two
    /// fewer than the first or less) and the refusals refuted a bucket by far
    /// ([`REFUTED_BY_FAR`]): what a shortened window admits is what the limiter had freed by
    /// then, part of a burst for a counter that frees one gradually, none for a fixed window
    /// not yet over. The key is then paced evenly (see
    /// [`Silence::pace_evenly`]). A bucket frees part of a burst too, but its refusals cross
    /// their bounds by a hair, if at all: on the grid's bucket of 5 per second behind
    /// `Retry-After: 1` (by 1.5 %), the hand-over without that condition drew up to 11 × 429
    /// late (0-1 with it). A fixed window on the clock whose first burst straddled its edge
    /// admitted more than its quota at first, and a later window admits the whole quota, no
    /// more than the window before: without that condition it was handed over at the first
    /// burst's interval (a traced run of `learning_shapes::silent_windows_over_a_long_job`, 20
    /// per 2 s, 35 admitted at first: 63 ms a request for 100).
    fn trial_refused(&mut self, now: Duration, window: Duration) -> Duration {
        // A trial within a sixteenth of the window (the search gone on to a thirty-second late
        // in a job, see `next_try`) is no news of a counter: the windows have held their
        // quota at the estimate for many windows, which a counter charging each burst into
        // the next would not. Part of a burst is then what a window on the clock admits when
        // our window straddles its edge, or a sliding log that frees its first slot only.
        // (A trial goes only while the bounds are more than 2 ms apart, so `bounds_within`'s
        // floor changes nothing here.)
        let fine = self
            .before_trial
            .is_some_and(|before| self.bounds_within(before, SEARCH_SHARE));
        if !fine
            && self.admitted > 0
            && self.admitted < self.previous_admitted
            && self.bucket_lo > REFUTED_BY_FAR * self.bucket_hi
            && let Some(pause) = self.pace_at(now, self.admitted)
        {
            return pause;
        }
        let trial = self.before_trial.take().unwrap_or(window);
        let enough = self.before_trials.take().unwrap_or(trial).max(trial);
        self.raise_too_short(window, self.quota(now));
        self.window = Some(enough);
        self.used = u64::MAX;
        let next = self.window_start.saturating_add(self.next_try(enough));
        next.saturating_sub(now).max(Duration::from_millis(1))
    }

    /// Refused inside a window: the quota estimate was too high. The curve is cut (it probes
    /// above again only K windows later), but what this window admitted is the server's quota,
    /// measured again: the floor. Wait for the next window, whose first request goes alone as
    /// always (or, for a bucket's burst spent, hand the key over to the rate). Returns the
    /// pause.
    fn quota_refused(
        &mut self,
        now: Duration,
        ticket: Ticket,
        window: Duration,
        still_out: u64,
    ) -> Duration {
        self.before_trials = None;
        let measured = self.admitted;
        let this_window = ticket.window == Some(self.window_start);
        // As many of this window as went before the refused one may have been admitted: their
        // answers may still be out (`measured` counts those answered).
        let went_before = if this_window {
            self.sends
                .iter()
                .filter(|&&at| at <= ticket.sent)
                .count()
                .saturating_sub(1) as u64
        } else {
            0
        };
        let found_for = self.too_short_for;
        // The round window was found for a larger quota (the first window's, say): a window
        // refused inside before as many went holds fewer. Refused after them, the quota's
        // curve probed above the quota, and the round window stands: cleared, the search went
        // on by midpoints, and a fixed window of 5 per 2.5 s drew three 429s where the trial
        // under the round window draws one.
        if went_before < found_for {
            self.round_window = None;
        }
        if this_window {
            let ceiling = self.ceiling.map_or(measured, |c| c.min(measured)).max(1);
            self.ceiling = Some(ceiling);
            if ceiling < found_for && went_before < found_for {
                // Fewer per window than the lower bound on the window was found for. A bucket
                // frees fewer requests in a shorter time, so a shorter window may do for fewer:
                // the midpoints may look there again. (The window known to be enough still is.)
                // Not a bound found for this quota already, though the estimate had climbed
                // above it since: real nginx at 2 r/s behind `Retry-After: 1` had its bound
                // of 472 ms, found for one request, halved when two were refused, and paid a
                // 429 and a second's pause for it. Nor when the refused request went after as
                // many as it was found for, answered or not: a fixed window of 25 per 2.5 s
                // refused the 26th of a window with one answer still out, counted 24, and the
                // bound found at a trial refused fell from 2.46 to 2.36 s, where the search
                // went on late in the job and drew a 429.
                let scale = ceiling as f64 / found_for as f64;
                self.too_short = self.too_short.mul_f64(scale);
                self.too_short_for = ceiling;
            }
        }
        if let Some(pause) = self.hand_over(now, ticket, still_out) {
            return pause;
        }
        tracing::debug!(
            measured,
            first = self.first_measured,
            bucket = ?self.bucket,
            "pacing: a silent window refused inside"
        );
        if let Some(pause) = self.pace_evenly(now) {
            return pause;
        }
        self.floor = measured;
        self.floor_window = Some(self.window_start);
        self.curve.throttled(measured as f64, self.windows_at(now));
        self.used = u64::MAX;
        let next_window = self.window_start.saturating_add(self.next_try(window));
        next_window
            .saturating_sub(now)
            .max(Duration::from_millis(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// The state of real nginx at 3 r/s with a burst of 10 behind `Retry-After: 2`, 20 s in:
    /// a first window of 11, later ones refused at 6, a window measured at 1.85 s, and the
    /// refusals bounding a rate of 2.9 to 3.05 a second.
    fn a_bucket_drawn_in_windows() -> Silence {
        let mut silence = Silence::first(Duration::ZERO, 11);
        silence.first_measured = 11;
        silence.window = Some(MS * 1850);
        silence.too_short = MS * 1800;
        silence.ceiling = Some(6);
        silence.floor = 6;
        silence.bucket_lo = 2.9;
        silence.bucket_hi = 3.05;
        silence.used = 6;
        silence
    }

    fn goes_at(silence: &mut Silence, now: Duration) -> Option<Duration> {
        match silence.admit(now, 1) {
            SilentAdmission::Go { .. } => None,
            SilentAdmission::WaitUntil(at) => Some(at),
        }
    }

    #[test]
    fn a_possible_bucket_s_windows_go_no_faster_than_the_rate_its_refusals_bound() {
        // Six a window at no more than 3.05 a second: 1.967 s, not the 1.85 measured.
        let mut silence = a_bucket_drawn_in_windows();
        assert_eq!(silence.quota(MS * 1850), 6);
        let shortest = Duration::from_secs_f64(6.0 / 3.05);
        assert_eq!(goes_at(&mut silence, MS * 1850), Some(shortest));
        assert_eq!(
            goes_at(&mut silence, shortest),
            None,
            "a new window, its first alone"
        );
        // Bounds that do not agree yet (a sliding counter's, early on), a server shown to be
        // no bucket, or windows that admit the first burst whole: the window measured.
        for change in [
            (|s: &mut Silence| s.bucket_lo = 1.0) as fn(&mut Silence),
            |s| s.bucket = Bucket::NoOneRate,
            |s| s.ceiling = Some(10),
        ] {
            let mut silence = a_bucket_drawn_in_windows();
            change(&mut silence);
            assert_eq!(goes_at(&mut silence, MS * 1850), None);
        }
    }

    /// A window of 20 per 2 s whose refusals refuted a bucket by far, begun early (a trial
    /// `into` after the window before, whose estimate was 2 s and lower bound `too_short`), and
    /// refused inside it after 2 admitted: whether the key went to the even pace.
    fn trial_refused_after_two(too_short: Duration, into: Duration) -> bool {
        let mut silence = Silence::first(Duration::ZERO, 20);
        silence.first_measured = 20;
        silence.previous_admitted = 20;
        silence.bucket_lo = 30.0;
        silence.bucket_hi = 10.0;
        silence.bucket = Bucket::NoOneRate;
        silence.first_window = Some(MS * 2000);
        silence.too_short = too_short;
        silence.before_trial = Some(MS * 2000);
        silence.window = Some(into);
        silence.admitted = 2;
        silence.trial_refused(MS * 60_000, into);
        silence.pace.is_some()
    }

    #[test]
    fn a_trial_within_a_sixteenth_refused_after_part_of_a_burst_keeps_the_windows() {
        // Searched from [1.5 s, 2 s]: part of a burst at 1.75 s is what a counter frees
        // gradually, and the key goes to the even pace, as before.
        assert!(trial_refused_after_two(MS * 1500, MS * 1750));
        // Searched on to a thirty-second from [1.9 s, 2 s], after windows that each held the
        // quota: a window on the clock straddled at its edge (or a sliding log's first slot
        // freed), not a counter. The windows stay, the trial known too short.
        assert!(!trial_refused_after_two(MS * 1900, MS * 1950));
    }

    /// A refusal inside the current window of a key whose window was searched to
    /// [472, 940] ms, its lower bound found for `found_for` requests, after one was admitted.
    fn refused_after_one(found_for: u64) -> Duration {
        let mut silence = Silence::first(Duration::ZERO, 1);
        silence.window = Some(MS * 940);
        silence.too_short = MS * 472;
        silence.too_short_for = found_for;
        // The estimate at two a window.
        silence.floor = 2;
        assert_eq!(silence.quota(MS * 100), 2);
        silence.admitted = 1;
        let ticket = Ticket {
            epoch: 0,
            serial: 5,
            sent: MS * 100,
            seen: None,
            window: Some(silence.window_start),
        };
        silence.quota_refused(MS * 102, ticket, MS * 940, 0);
        assert_eq!(silence.ceiling, Some(1));
        silence.too_short
    }

    #[test]
    fn a_window_s_lower_bound_is_lowered_by_a_smaller_quota_only_if_found_for_a_larger() {
        // Found for one request (a rate with no burst), the estimate since climbed to two
        // and refused at the second: the bound stands.
        assert_eq!(refused_after_one(1), MS * 472);
        // Found for four: a bucket frees one in a quarter of the time.
        assert_eq!(refused_after_one(4), MS * 118);
    }

    #[test]
    fn a_possible_bucket_s_settled_window_goes_at_the_rate_its_refusals_bound_within_its_bounds() {
        // The window searched to [1.8, 1.85] s: six a window at no more than 3.3 a second is
        // 1.818 s, between the two, and the window goes at it.
        let mut silence = a_bucket_drawn_in_windows();
        silence.bucket_hi = 3.3;
        let at_rate = Duration::from_secs_f64(6.0 / 3.3);
        assert_eq!(goes_at(&mut silence, MS * 1810), Some(at_rate));
        assert_eq!(goes_at(&mut silence, at_rate), None, "a new window");
        // At 3.4 a second (1.765 s) it would go inside the window refused: at the window.
        let mut silence = a_bucket_drawn_in_windows();
        silence.bucket_hi = 3.4;
        assert_eq!(goes_at(&mut silence, MS * 1810), Some(MS * 1850));
        // While the search goes on (a midpoint at 1.675 s), no sooner than the rate's window.
        let mut silence = a_bucket_drawn_in_windows();
        silence.bucket_hi = 3.3;
        silence.too_short = MS * 1500;
        assert_eq!(goes_at(&mut silence, MS * 1600), Some(at_rate));
    }

    /// HAProxy's 20 per 2 s, silent, its windows from our first request: a first window of
    /// 20 measured by a probe just after 3 s (3.024 s), the one before refused at 2.016 s,
    /// handed to the even pace at 3.06 s by a window that admitted `sustained`.
    fn handed_to_the_even_pace(sustained: u64) -> SilentPace {
        let mut silence = Silence::first(Duration::ZERO, 20);
        silence.bucket = Bucket::NoOneRate;
        silence.first_measured = 20;
        silence.first_window = Some(MS * 3024);
        silence.first_refused_probe = Some(MS * 2016);
        silence.pace_at(MS * 3060, sustained).expect("handed over");
        *silence.pace.expect("an even pace")
    }

    #[test]
    fn a_counter_that_admitted_a_quarter_of_its_first_burst_again_is_tried_shorter_at_once() {
        // It admitted 6 of 20 one first window after the last (it counts the probes it
        // refused): the first window's pace, 151.2 ms, is slower than the edge, and the first
        // trial goes at once to the refused probe's bound, 100.8 ms.
        let pace = handed_to_the_even_pace(6);
        assert_eq!(pace.interval(), Duration::from_micros(100_800));
        assert_eq!(pace.proven(), Duration::from_micros(151_200));
        // Two of 20 (a counter that frees a burst gradually, on the clock): the first
        // window's pace may be faster than the edge, and is proven first.
        let pace = handed_to_the_even_pace(2);
        assert_eq!(pace.interval(), Duration::from_micros(151_200));
    }
}
