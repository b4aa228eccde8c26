//! After a bare 429, the probes: one request at a time, each after a pause that grows by half
//! from a quarter of a second, until the server admits one. The first window's probes go back
//! to the round offsets from its first request ([`ROUND_OFFSETS_MS`]), where the windows people
//! configure end; those that measure a window again do not (its edge is near the estimate).

use std::time::Duration;

use super::round::{ROUND_OFFSETS_MS, round_margin};

/// The first pause after a bare throttle; each failed probe makes the next one longer.
pub(super) const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// How much longer each pause is than the one before.
pub(super) const PAUSE_GROWTH: f64 = 1.5;
/// A window measured again (its estimate refused at its end) is probed first this share of
/// it after the refusal, if that is longer than [`FIRST_PAUSE`].
pub(super) const REMEASURE_SHARE: u32 = 16;
/// The longest pause between probes of a silent server, until a probe sent that long after
/// the refusal before it is refused too (see [`grown_pause`]).
const LONGEST_PAUSE: Duration = Duration::from_secs(30);
/// The longest pause between probes once one sent [`LONGEST_PAUSE`] after a refusal was
/// refused too: ten minutes, the longest round window tried
/// ([`ROUND_WINDOWS_MS`](super::round::ROUND_WINDOWS_MS)).
const LONGEST_PRESSED_PAUSE: Duration = Duration::from_secs(600);
/// A round offset up to this share of the pause past a probe's due time is waited for: a
/// probe at 9.3 s, then one just after 10 s, was two 429s for a window of 10 s, where the
/// pause grown by half from 5 s fell short of it.
const ROUND_REACH: u32 = 4;
/// A round probe goes at least this long after the refusal before it.
const ROUND_GAP: Duration = Duration::from_millis(100);

/// A silent server's window being measured: from a refusal until a probe is admitted.
#[derive(Debug, Clone, Copy)]
pub(super) struct Probing {
    /// When the measured window began.
    pub(super) from: Duration,
    /// What it admitted before the throttle.
    pub(super) measured: u64,
    /// When the throttle came.
    pub(super) at: Duration,
    /// The pause before the next probe, if this one fails.
    pub(super) next_pause: Duration,
    /// How long after `from` the last refused request went: the window is longer.
    pub(super) refused_after: Duration,
    /// Whether that request was a probe (sent after a pause), not one of the burst refused.
    pub(super) probe_refused: bool,
    /// The round offset from `from` the next probe goes just after (see
    /// [`ROUND_OFFSETS_MS`]), if it does.
    pub(super) round: Option<Duration>,
    /// The longest time from one refused request to the next probe refused (for a window that
    /// each refusal begins again, each is shorter than the window).
    pub(super) longest_refused_gap: Duration,
}

impl Probing {
    /// When the last refused request went.
    pub(super) fn last_refused(&self) -> Duration {
        self.from.saturating_add(self.refused_after)
    }

    /// A probe sent at `sent` was refused at `now`: the window has not ended yet. Returns the
    /// pause before the next probe (aimed at a round offset if `rounds`, see [`Probing::aim`]),
    /// and grows the one after it (see [`grown_pause`]).
    pub(super) fn refused(&mut self, sent: Duration, now: Duration, rounds: bool) -> Duration {
        let gap = sent.saturating_sub(self.last_refused());
        self.longest_refused_gap = self.longest_refused_gap.max(gap);
        self.refused_after = sent.saturating_sub(self.from);
        self.probe_refused = true;
        let pause = self.next_pause;
        self.next_pause = grown_pause(pause, gap);
        self.aim(now, pause, rounds)
    }

    /// The pause before the next probe, due `pause` after `now`: to just after the first
    /// round offset it would pass, if `rounds` (the first window's probes do; those that
    /// measure a window again do not, its edge is near the estimate; see [`round_probe`]).
    pub(super) fn aim(&mut self, now: Duration, pause: Duration, rounds: bool) -> Duration {
        let due = now.saturating_add(pause);
        let round = rounds
            .then(|| round_probe(self.from, now, self.refused_after, due))
            .flatten();
        self.round = round.map(|(offset, _)| offset);
        round.map_or(pause, |(_, to)| to)
    }
}

/// The pause before the next probe after `pause`, once a probe sent `gap` after the refusal
/// before it was refused: half again as long, up to [`LONGEST_PAUSE`]; past it, once `gap`
/// reached it, up to [`LONGEST_PRESSED_PAUSE`]. A window that each refusal begins again
/// (see the `restart` module) and is longer than the longest pause refuses every probe sent
/// at it, each refusal beginning the window again: a key probed every 30 s against such a
/// window of 45 s was never let in again. A long fixed window draws fewer 429s too, at the
/// cost of a probe up to half its pause late.
fn grown_pause(pause: Duration, gap: Duration) -> Duration {
    let longest = if pressed(gap) {
        LONGEST_PRESSED_PAUSE
    } else {
        LONGEST_PAUSE
    };
    pause.mul_f64(PAUSE_GROWTH).min(longest)
}

/// Whether a probe refused `gap` after the refusal before it went at the longest pause
/// ([`LONGEST_PAUSE`]) or later: the pauses grow on past it (see [`grown_pause`]).
pub(super) fn pressed(gap: Duration) -> bool {
    gap >= LONGEST_PAUSE
}

/// The first window's next probe, due at `due`: just after the first round offset from
/// `from` (see [`ROUND_OFFSETS_MS`]) it would pass or nearly reach (a quarter of the pause
/// past `due`, [`ROUND_REACH`]), at least [`ROUND_GAP`] after `now` and
/// past `refused_after` (the offset of the request just refused), with the offset and the
/// pause until then. Its margin ([`round_margin`]) covers a network's jitter between the two
/// sends. `None` when no round offset is in reach: the probe goes when due.
pub(super) fn round_probe(
    from: Duration,
    now: Duration,
    refused_after: Duration,
    due: Duration,
) -> Option<(Duration, Duration)> {
    let earliest = now.saturating_sub(from).saturating_add(ROUND_GAP);
    let offset = ROUND_OFFSETS_MS
        .iter()
        .map(|&ms| Duration::from_millis(ms))
        .find(|&offset| offset >= earliest && offset > refused_after)?;
    let at = from
        .saturating_add(offset)
        .saturating_add(round_margin(offset));
    let reach = due.saturating_add(due.saturating_sub(now) / ROUND_REACH);
    (at <= reach).then(|| (offset, at.saturating_sub(now)))
}
