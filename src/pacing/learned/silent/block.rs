//! A limiter that blocks a key for a while from its first refusal (rate-limiter-flexible's
//! `blockDuration`, limiters made against brute force) refuses every request of that block,
//! however late into a window it goes, and the probes that follow a refusal measure the block,
//! not the window. Its first episode reads like a long window (the first probes are all
//! refused), but later evidence contradicts a plain window: a window that admitted its whole
//! quota `g` after its predecessor began, and then had a refusal (a climb above the quota, a
//! shorter window tried), has its successor's first request refused `g` or later after it
//! began (see [`Silence::block_suspected`]). No window anchored at a request, nor a sliding
//! log, does that. A window that each refusal begins again (see the `restart` module) whose
//! window's first request, a window after a refusal, is refused suggests a block too. The
//! probes then measure the block; one refused, and the one admitted far later than `g`,
//! confirm it ([`Silence::block_confirmed`]): the window goes back to `g`, the key is held the
//! block's length after each refusal (not probed through it, a 429 a probe), and the round
//! lengths under `g` are tried, longest first, as for a window that each refusal begins again
//! (the `restart` module, which the block shares). The lower bounds that refusals after
//! another refusal set are void: the one kept is what refusals after a window with none said.
//!
//! A block that ends within a probe's pause of the window's end is not told from the window
//! (the first probe after the refusal is let in); nor is one that no refusal after the first
//! episode shows, where the probes read a window that each refusal begins again, and its round
//! steps stop at the longest gap refused.

use std::time::Duration;

use super::Silence;

/// A window's first request refused this share of its gap later (and 2 ms, at least) than
/// the gap a window admitted whole at is a contradiction, not the network's jitter...
const LATER_SHARE: u32 = 128;
/// ...and refused at that gap (or as much earlier), so is it while the lower bound no block
/// set is more than this share of it under it: the window's edge is not that close.
const FAR_SHARE: u32 = 16;
/// The probe that ends the block is admitted at least this many times the gap a window
/// admitted whole at after that window began: the block is measured, not the window.
const CONFIRM_RATIO: f64 = 1.25;

/// What a silent key knows of whether its refusals block it.
#[derive(Debug, Clone, Default)]
pub(super) struct Blocking {
    /// How long after its predecessor the current window began, and the one before it.
    began_after: Duration,
    previous_began_after: Duration,
    /// The first refusal since the current window began (inside it, or of a successor's first
    /// request, undone): the window's start, and when the refused request went.
    refused: Option<(Duration, Duration)>,
    /// A block suspected (see [`Silence::block_suspected`]): when the refusal that would have
    /// begun it went, and the gap a whole window was admitted at.
    suspected: Option<(Duration, Duration)>,
    /// The longest gap that a window's first request was refused at, after a window with no
    /// refusal: a lower bound on the window that no block set.
    too_short: Duration,
}

impl Silence {
    /// A window begins `now`, after one that began at `after`.
    pub(super) fn block_window_begins(&mut self, after: Duration, now: Duration) {
        let blocking = &mut self.blocking;
        blocking.previous_began_after = blocking.began_after;
        blocking.began_after = now.saturating_sub(after);
    }

    /// The current window's first request was refused, and the window before goes on.
    pub(super) fn block_window_undone(&mut self) {
        self.blocking.began_after = self.blocking.previous_began_after;
    }

    /// When the first refusal since the current window began went, if one did: a block would
    /// have begun there.
    fn refused_since_window_began(&self) -> Option<Duration> {
        self.blocking
            .refused
            .filter(|&(window, _)| window == self.window_start)
            .map(|(_, at)| at)
    }

    /// A request of the current window, sent at `sent`, was refused.
    pub(super) fn block_refused_inside(&mut self, sent: Duration) {
        if self.refused_since_window_began().is_none() {
            self.blocking.refused = Some((self.window_start, sent));
        }
    }

    /// A window's first request, sent at `sent`, `into` the window before (now the current one
    /// again), was refused earlier than the estimate: a lower bound on the window, which a
    /// block leaves standing only if no refusal came before it since that window began.
    pub(super) fn block_early_refused(&mut self, sent: Duration, into: Duration) {
        if self.refused_since_window_began().is_none() {
            self.block_bound(into);
        }
        self.block_refused_inside(sent);
    }

    /// A window's first request, `into` the window before it, was refused, and no block can
    /// have refused it: a lower bound on the window that a block leaves standing.
    pub(super) fn block_bound(&mut self, into: Duration) {
        self.blocking.too_short = self.blocking.too_short.max(into);
    }

    /// The key was taken for one whose refusals each begin a `window` again, and a window's
    /// first request went a whole window after the last refusal, sent at `refused_at`, and was
    /// refused too: a block from that refusal, maybe, suspected until the probes that follow
    /// measure it.
    pub(super) fn block_suspected_after(&mut self, refused_at: Duration, window: Duration) {
        tracing::debug!(
            window_ms = window.as_secs_f64() * 1e3,
            "pacing: held longer than a window by a refusal: a block?"
        );
        self.blocking.suspected = Some((refused_at, window));
    }

    /// A window's first request, sent at `sent`, `into` the window before (now the current
    /// one again), was refused at or after the estimate. If that window admitted its whole
    /// quota `proven` after its predecessor began, so that no window anchored at a request
    /// (nor a sliding log) is longer, and a refusal since it began went before this one, a
    /// block from that refusal may explain this one: refused clearly later than `proven`, or
    /// at it while the bounds no block set are far apart (see [`LATER_SHARE`]). Suspected
    /// only, until the probes that follow measure it.
    pub(super) fn block_suspected(&mut self, sent: Duration, into: Duration) {
        let earlier = self.refused_since_window_began();
        self.block_refused_inside(sent);
        let Some(refused_at) = earlier else {
            return;
        };
        let proven = self.blocking.began_after;
        let margin = (proven / LATER_SHARE).max(Duration::from_millis(2));
        let later = into > proven + margin
            || (into + margin >= proven
                && proven.saturating_sub(self.blocking.too_short) > proven / FAR_SHARE);
        let whole = self.admitted >= self.floor.max(1);
        if whole && !proven.is_zero() && later && !self.restart.confirmed() {
            tracing::debug!(
                proven_ms = proven.as_secs_f64() * 1e3,
                into_ms = into.as_secs_f64() * 1e3,
                "pacing: a window refused after a gap that admitted one whole: a block?"
            );
            self.blocking.suspected = Some((refused_at, proven));
        }
    }

    /// The probe that ended a pause was admitted `measured` after the window it followed
    /// began, at `sent`, after another probe was refused (`probe_refused`) or not. If a block
    /// was suspected, a probe was refused after the refusal that raised the suspicion, and
    /// this is far longer than the gap a window was admitted whole at, the block is
    /// confirmed: the window is that gap, and each refusal holds the key as long as this one
    /// did. (A plain window refused at its edge by the network's jitter lets the first probe
    /// through.) Returns whether it was.
    pub(super) fn block_confirmed(
        &mut self,
        sent: Duration,
        measured: Duration,
        probe_refused: bool,
    ) -> bool {
        let Some((refused_at, proven)) = self.blocking.suspected.take() else {
            return false;
        };
        if !probe_refused || measured.as_secs_f64() < CONFIRM_RATIO * proven.as_secs_f64() {
            return false;
        }
        let hold = sent.saturating_sub(refused_at);
        tracing::debug!(
            window_ms = proven.as_secs_f64() * 1e3,
            hold_ms = hold.as_secs_f64() * 1e3,
            "pacing: a silent window whose refusals block the key"
        );
        self.restart.confirm_block(hold);
        self.window = Some(proven);
        self.too_short = self.blocking.too_short.min(proven);
        self.too_short_for = self.floor;
        self.ceiling = Some(self.ceiling.unwrap_or(self.floor).min(self.floor).max(1));
        self.round_window = None;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Bucket, SilentAdmission, Ticket};
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn ticket(sent: Duration, window: Duration) -> Ticket {
        Ticket {
            epoch: 0,
            serial: 0,
            sent,
            seen: None,
            window: Some(window),
        }
    }

    fn goes(silence: &mut Silence, now: Duration) {
        assert!(
            matches!(silence.admit(now, 1), SilentAdmission::Go { .. }),
            "{now:?} goes"
        );
    }

    /// Real rate-limiter-flexible, 10 per 1 s, bare, the key blocked 2 s from its first
    /// refusal (a traced job): its window estimated at 1.63 s and known longer than 1.55 s,
    /// the window begun at 7.359 s admits its ten whole, 1.63 s after the one before, and
    /// refuses an eleventh at 7.39 s (if `refused_above`). Its successor's first request, 1.69 s
    /// into it, is refused (the block), and so is a probe at 9.3 s (if `probe_refused`).
    /// Returns the model once the next probe, at `admitted`, is let in.
    fn blocked_then_admitted_at(
        admitted: Duration,
        refused_above: bool,
        probe_refused: bool,
    ) -> Silence {
        let mut silence = Silence::first(Duration::ZERO, 10);
        silence.first_measured = 10;
        silence.floor = 10;
        silence.previous_admitted = 10;
        silence.bucket = Bucket::NoOneRate;
        silence.window = Some(MS * 1630);
        silence.too_short = MS * 1550;
        silence.window_start = MS * 5729;
        silence.previous_start = MS * 3985;
        silence.used = u64::MAX;
        let start = MS * 7359;
        goes(&mut silence, start);
        silence.admitted(start, ticket(start, start), true);
        for n in 1..10 {
            let at = start + MS * n;
            goes(&mut silence, at);
            silence.admitted(at + MS, ticket(at, start), false);
        }
        let none_out = |_: Duration| 0;
        if refused_above {
            silence.throttled(MS * 7391, ticket(MS * 7390, start), false, &none_out);
        }
        let next = start + MS * 1690;
        silence.used = 0;
        silence.window_start = start;
        goes(&mut silence, next);
        silence.throttled(next + MS, ticket(next, next), true, &none_out);
        if probe_refused {
            goes(&mut silence, MS * 9300);
            silence.throttled(MS * 9301, ticket(MS * 9300, start), true, &none_out);
        }
        goes(&mut silence, admitted);
        silence.admitted(admitted + MS, ticket(admitted, start), true);
        silence
    }

    #[test]
    fn a_window_refused_after_a_gap_that_admitted_one_whole_is_a_block_once_measured_long() {
        // Admitted at 9.66 s, 2.3 s after the window began: the block, not the window. The
        // window goes back to 1.63 s, and the round lengths under it are tried from the top
        // (1.5 s, a 128th over), the bounds the blocked probes set void.
        let mut silence = blocked_then_admitted_at(MS * 9660, true, true);
        assert!(silence.restart.confirmed());
        assert_eq!(silence.window, Some(MS * 1630));
        let step = MS * 1500 + MS * 1500 / 128;
        assert_eq!(silence.next_try(MS * 1630), step);
        // A refusal now holds the key as long as the block did (from 7.39 s to 9.66 s): the
        // next window's first request goes 2.27 s after it, not a window after it.
        let refused = MS * 12_000;
        let pause = silence.throttled(
            refused + MS,
            ticket(refused, silence.window_start),
            false,
            &|_| 0,
        );
        assert_eq!(pause, MS * 2270 - MS);
    }

    #[test]
    fn a_refusal_after_a_window_admitted_whole_is_no_block_unless_the_probes_measure_one() {
        // Admitted at 9.35 s, 1.99 s after the window began (within a quarter over the 1.63 s
        // admitted whole): the window measured again, as before.
        let silence = blocked_then_admitted_at(MS * 9350, true, true);
        assert!(!silence.restart.confirmed());
        assert_eq!(silence.window, Some(MS * (9350 - 7359)));
        // No refusal above the quota in the window before: nothing began a block, and the
        // refusal at its end is the window's.
        let silence = blocked_then_admitted_at(MS * 9660, false, true);
        assert!(!silence.restart.confirmed());
        assert_eq!(silence.window, Some(MS * (9660 - 7359)));
        // The first probe after the refusal let through, however late: the network's jitter
        // may have refused a plain window at its edge.
        let silence = blocked_then_admitted_at(MS * 9660, true, false);
        assert!(!silence.restart.confirmed());
    }
}
