//! A limiter that each refused request begins its window again (`@fastify/rate-limit`'s
//! `continueExceeding`, limiters made against brute force) refuses every probe that goes
//! within a window of the refusal before it, so the first window's probes read a window far
//! longer than its own. Where the probe admitted came clearly longer after the last refusal
//! than any refused came after the one before, the window may be that gap (see [`reading`]):
//! the first window after the probe's with no refusal sends its successor that gap after its
//! first request, before the search over the misread bounds. Refused, the window stands, at
//! the cost of that 429, and the search goes on at the instant it had (the pause not spread);
//! admitted, the window is the gap, not searched by midpoints (each refusal would begin it
//! again), and a refusal holds the key a window from the refused request (see
//! [`Silence::refused_restarting`]). The gap is one between two of the probes' round offsets,
//! so the round lengths under it are then tried, longest first, until one is refused (see
//! [`Silence::restart_step`]). A key that each refusal blocks for a while is held the same
//! way, for the block's length (see the `block` module), and its round lengths tried alike.

use std::time::Duration;

use super::probes::{Probing, pressed};
use super::round::{ROUND_OFFSETS_MS, ROUND_WINDOWS_MS, rate_margin};
use super::{Silence, Ticket};

/// The first window's probe admitted this many times as long after the last refusal as the
/// longest gap between two refusals before it (a pause grows by half a probe; a round offset
/// can double it): the refusals may each have begun a window again (see [`reading`]).
const RESTART_GAP_RATIO: f64 = 1.75;

/// What a silent key knows of whether each refusal begins its window again.
#[derive(Debug, Clone, Default)]
pub(super) struct Restart {
    /// A window that each refusal begins again may be this long (from above the longest gap
    /// refused to the gap admitted): its successor goes that long after its first request
    /// once, as a trial (see [`reading`]).
    trial: Option<(Duration, Duration)>,
    /// That trial was admitted: the window is measured from the requests that begin it, and
    /// not searched below the estimate (each refusal would begin it again).
    confirmed: bool,
    /// Round lengths under the window may still be tried (see [`Silence::restart_step`]).
    steps: bool,
    /// The current window began at such a step.
    stepping: bool,
    /// When the last request refused while `confirmed` went.
    refused_at: Option<Duration>,
    /// The current window began at that trial's gap (told by what began it, not by its time:
    /// over a socket a window begins a little after it was due).
    trying: bool,
    /// How long a refusal holds the key, if not a window: a block (see the `block` module).
    hold: Option<Duration>,
}

impl Restart {
    /// Whether the windows are taken for ones that each refusal begins again.
    pub(super) fn confirmed(&self) -> bool {
        self.confirmed
    }

    /// The key's refusals block it for `hold` (see the `block` module): each holds the key that
    /// long, and the round lengths under the window are tried as for a window that refusals
    /// begin again.
    pub(super) fn confirm_block(&mut self, hold: Duration) {
        self.trial = None;
        self.trying = false;
        self.confirmed = true;
        self.steps = true;
        self.refused_at = None;
        self.hold = Some(hold);
    }

    /// The gap the trial sends a window's successor at, while it is to be made.
    pub(super) fn trial_gap(&self) -> Option<Duration> {
        self.trial.map(|(_, gap)| gap)
    }

    /// A window begins `next_try` after the last one's first request, shorter than the
    /// estimate if `trial`: whether it is the trial of the gap, or a round step under it.
    pub(super) fn begin_window(&mut self, next_try: Duration, trial: bool) {
        self.trying = self.trial.is_some_and(|(_, gap)| next_try == gap);
        self.stepping = self.confirmed && trial;
    }

    /// The first window's probe, sent at `admitted`, was let in after `probing`'s refusals:
    /// the trial to make, if any (see [`reading`]).
    pub(super) fn read(&mut self, probing: &Probing, admitted: Duration, too_short: Duration) {
        self.trial = reading(probing, admitted, too_short);
    }
}

/// The first window's probe, sent at `admitted`, was let in after `probing`'s refusals, and
/// the window is known longer than `too_short` from its first request. If each refusal had
/// begun the window again, every probe refused went within one window of the refusal before
/// it, and the one admitted a window or more after the last: the window is then longer than
/// the longest gap refused and no longer than the gap admitted. Worth one trial when the gap
/// admitted is clearly longer than any refused ([`RESTART_GAP_RATIO`]) and shorter than the
/// window's lower bound: its successor goes that gap after its first request, and is refused
/// (one 429, at no cost in time: the search's next window follows) unless refusals do begin
/// the window again. A window that they do not begin again ends at its own time, whatever the
/// gaps, and probes that go just after round offsets can double a gap: a round window of 3 s
/// probed at 2 s and 3 s reads the same as a window of 1 s begun again at each refusal.
/// Once a probe refused went at the longest pause or later, the pauses grow by half and no
/// more (see [`Probing::refused`]): any gap admitted longer than every one refused is then
/// worth the trial (a window of 45 s begun again at each refusal, let in at a gap of 45 s
/// after one of 30 s, was otherwise searched above the 120 s of the last probe refused, and
/// paced at 126-143 s).
fn reading(
    probing: &Probing,
    admitted: Duration,
    too_short: Duration,
) -> Option<(Duration, Duration)> {
    let gap = admitted.saturating_sub(probing.last_refused());
    let longest = probing.longest_refused_gap;
    (probing.probe_refused
        && !longest.is_zero()
        && (gap.as_secs_f64() >= RESTART_GAP_RATIO * longest.as_secs_f64()
            || (pressed(longest) && gap > longest))
        && gap < too_short)
        .then_some((longest, gap))
}

impl Silence {
    /// A refusal that the restart model explains: the pause it asks, or `None` (the refusal
    /// handled as any other). A refusal inside the trial's window, not its first request,
    /// says the window is not one that refusals begin again, or not one that short: the trial
    /// is not made again.
    pub(super) fn restart_refused(
        &mut self,
        now: Duration,
        ticket: Ticket,
        was_probe: bool,
    ) -> Option<Duration> {
        if let Some(pause) = self.refused_restarting(now, ticket, was_probe) {
            return Some(pause);
        }
        if self.restart.trying {
            if was_probe
                && ticket.window == Some(self.window_start)
                && let Some(window) = self.window
            {
                return Some(self.restart_trial_refused(now, window));
            }
            self.restart.trial = None;
            self.restart.trying = false;
        }
        None
    }

    /// A refusal while the window is taken for one that each refusal begins again: the window
    /// begins with the refused request, spent, and its successor goes a window after it. The
    /// pause until then, or `None` (the refusal handled as any other) when this refusal
    /// refutes it: the first request of a window begun a whole window after the last such
    /// refusal was refused too.
    fn refused_restarting(
        &mut self,
        now: Duration,
        ticket: Ticket,
        was_probe: bool,
    ) -> Option<Duration> {
        let window = self
            .window
            .filter(|_| self.restart.confirmed && self.probing.is_none())?;
        let hold = self.restart.hold.unwrap_or(window);
        let first_of_window = was_probe && ticket.window == Some(self.window_start);
        if first_of_window && self.restart.stepping {
            // A round step too short: the window is longer, and no shorter step is tried.
            let into = self.window_start.saturating_sub(self.previous_start);
            self.raise_too_short(into, self.previous_admitted);
            // A step goes only after a window with no refusal: no block refused it.
            self.block_bound(into);
            self.restart.stepping = false;
            self.restart.steps = false;
        } else if first_of_window
            && self
                .restart
                .refused_at
                .is_some_and(|at| self.window_start >= at.saturating_add(hold))
        {
            tracing::debug!("pacing: a window that refusals begin again, refuted");
            // Held longer than a window by its last refusal: a block from it, maybe (see the
            // `block` module), which the probes that follow measure.
            if let Some(at) = self
                .restart
                .refused_at
                .filter(|_| self.restart.hold.is_none())
            {
                self.block_suspected_after(at, window);
            }
            self.restart.confirmed = false;
            self.restart.steps = false;
            self.restart.refused_at = None;
            self.restart.hold = None;
            return None;
        }
        let at = self
            .restart
            .refused_at
            .map_or(ticket.sent, |at| at.max(ticket.sent));
        self.restart.refused_at = Some(at);
        self.unproven = true;
        self.refused_in_window = true;
        if first_of_window {
            // The window before is still running: what it admitted stays its count.
            self.admitted = self.previous_admitted;
        }
        // The refused request began the window again (no window began before it went).
        self.window_start = self.window_start.max(at);
        self.used = u64::MAX;
        // The pause ends where that window does, and the next one's first request goes
        // alone: aimed, not spread (spread, a step refused waited up to 10 % of a window
        // more).
        self.aimed_at_window = true;
        let next = at.saturating_add(hold);
        Some(next.saturating_sub(now).max(Duration::from_millis(1)))
    }

    /// For a window that each refusal begins again, the next round length under it to try
    /// (just over it, as a trial): the longest of the round offsets and windows (see
    /// [`ROUND_OFFSETS_MS`], [`ROUND_WINDOWS_MS`]) between the longest gap refused and the
    /// window, while no step has been refused, and only after a window with no refusal. The
    /// gap that let the first probe through is a gap between two round offsets from the
    /// window's first request (1, 2, 5, 15 s ...), so a window between them is read as the
    /// longer one (real `@fastify/rate-limit`, 4 per 1.5 s: 2 s, 1.387 ×). From the longest
    /// down, the steps admitted shorten the window and the first refused ends them: one 429,
    /// and a window's wait from it (the refusal begins the window again).
    pub(super) fn restart_step(&self, window: Duration) -> Option<Duration> {
        if !self.restart.steps || self.refused_in_window {
            return None;
        }
        ROUND_OFFSETS_MS
            .iter()
            .chain(ROUND_WINDOWS_MS.iter())
            .map(|&ms| Duration::from_millis(ms))
            .filter(|&round| round > self.too_short && round + rate_margin(round) * 2 <= window)
            .max()
            .map(|round| round + rate_margin(round))
    }

    /// A window's first request, sent `into` the window before (shorter than the estimate
    /// `window`), was let in: whether the restart model took it (a round step, which shortens
    /// the window; or the trial of the gap, which confirms the model).
    pub(super) fn restart_admitted(&mut self, into: Duration, window: Duration) -> bool {
        if self.restart.stepping {
            // A round length under the gap was let in: the window is no longer.
            self.restart.stepping = false;
            tracing::debug!(
                window_ms = into.as_secs_f64() * 1e3,
                "pacing: a window that each refusal begins again, a round step shorter"
            );
            self.window = Some(into.min(window));
            return true;
        }
        let Some((lower, _)) = self.restart.trial.filter(|_| self.restart.trying) else {
            return false;
        };
        self.restart.trial = None;
        self.restart.trying = false;
        tracing::debug!(
            lower_ms = lower.as_secs_f64() * 1e3,
            window_ms = into.as_secs_f64() * 1e3,
            "pacing: a silent window that each refusal begins again"
        );
        self.restart.confirmed = true;
        self.restart.steps = true;
        self.too_short = lower;
        self.too_short_for = self.previous_admitted;
        // A climb above the quota measured would be refused, and begin the window again.
        self.ceiling = Some(self.ceiling.unwrap_or(self.floor).min(self.floor).max(1));
        self.round_window = None;
        self.window = Some(into);
        true
    }

    /// The trial of a window that each refusal begins again (see [`reading`]) was refused:
    /// they do not, and the window's bounds stand. The trial's window is undone (the one before
    /// it goes on, and it was not refused: the trial went only after a window with no refusal),
    /// and its successor goes where the search has it, at that instant: the pause is aimed,
    /// not spread (see [`Silence::probe_aimed`]). Spread, it sent the next window up to a tenth
    /// of the pause late, where a clock's window that had begun meanwhile let the search's next
    /// trial in, and the search went on below the window (the grid's fixed 30 per 3 s: 13-14 ×
    /// 429 where 9).
    fn restart_trial_refused(&mut self, now: Duration, window: Duration) -> Duration {
        self.restart.trial = None;
        self.restart.trying = false;
        let (sent, into) = (
            self.window_start,
            self.window_start.saturating_sub(self.previous_start),
        );
        self.undo_window();
        self.block_early_refused(sent, into);
        self.used = u64::MAX;
        self.aimed_at_window = true;
        let next = self.window_start.saturating_add(self.next_try(window));
        next.saturating_sub(now).max(Duration::from_millis(1))
    }
}
