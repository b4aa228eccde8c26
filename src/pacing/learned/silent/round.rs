//! The round numbers people configure a limiter with, which a silent server's search tries
//! before any midpoint: the offsets from a window's first request where the windows people
//! configure end (the first window's probes go just after them, see
//! [`round_probe`](super::probes::round_probe)), the windows between and beyond them, and the
//! intervals of a rate with no burst (a count a second, or a count a minute). A trial goes a
//! little over a round number (a 128th), then a little under (a 128th for an interval, a 64th
//! for a window): one 429 then tells whether the edge is that round one.

use std::time::Duration;

/// Round offsets from the first window's first request, in milliseconds: where the windows
/// people configure end. A probe of the first window whose pause would carry it past one goes
/// just after it instead (see [`round_probe`](super::probes::round_probe)), and is admitted
/// there if the window is that round one, with the window measured to within the probe's
/// margin, where a pause growing by half overshot it by up to half (real Flask-Limiter, a
/// moving window of 6 per 2 s: a probe refused at 1.98 s, the next admitted at 3.2 s). None
/// under a second: a bucket's refill is probed as before, at the pauses that grow by half
/// (its first window admits what it refilled by the probe, and a probe just after a round
/// offset finds less).
pub(super) const ROUND_OFFSETS_MS: [u64; 9] = [
    1_000, 1_500, 2_000, 3_000, 5_000, 10_000, 15_000, 30_000, 60_000,
];

/// Round counts a minute that no count a second gives (nginx's `limit_req` takes its rate
/// per second or per minute; an API's terms are often a minute's): 25 to 500 a minute, every
/// 2.4 s to 120 ms.
const ROUND_PER_MINUTE: [u64; 13] = [25, 45, 50, 75, 80, 90, 100, 150, 200, 250, 400, 450, 500];

/// The intervals of a rate with no burst people configure most (see
/// [`Silence::round_trial`](super::Silence::round_trial)): one to ten requests a second, and
/// one request every round offset of a second and more ([`ROUND_OFFSETS_MS`]: 1.5, 2, 3 s
/// ...). Faster ones lie closer together than the search's last steps.
pub(super) fn round_intervals_by_the_second() -> impl Iterator<Item = Duration> {
    let per_second = (1..=10u64).map(|per_second| Duration::from_micros(1_000_000 / per_second));
    let longer = ROUND_OFFSETS_MS
        .iter()
        .filter(|&&ms| ms > 1_000)
        .map(|&ms| Duration::from_millis(ms));
    per_second.chain(longer)
}

/// The round intervals by the minute ([`ROUND_PER_MINUTE`]), tried where none by the second
/// falls ([`Silence::round_trial`](super::Silence::round_trial)).
pub(super) fn round_intervals_by_the_minute() -> impl Iterator<Item = Duration> {
    ROUND_PER_MINUTE
        .iter()
        .map(|&per_minute| Duration::from_micros(60_000_000 / per_minute))
}

/// Every round interval. No two lie within 4 % of each other, so a trial just over one is
/// over no other (see [`round_tried`]).
fn round_intervals() -> impl Iterator<Item = Duration> {
    round_intervals_by_the_second().chain(round_intervals_by_the_minute())
}

/// The windows of a quota above one that people configure between and beyond the first
/// window's round offsets ([`ROUND_OFFSETS_MS`], which its probes find), in milliseconds (see
/// [`Silence::window_round`](super::Silence::window_round)). None under 2 s: a trial just
/// under a window on the clock is admitted at some phases, and the grid's silent fixed window
/// of 10 per 1 s behind `Retry-After: 1`, tried at 1 s and then just under, went on down to
/// windows of 0.6-0.7 s refused every third. Nor the round offsets themselves: tried at 2 s,
/// the grid's HAProxy counter of 10 per 1 s behind `Retry-After: 1` (whose bursts sent two of
/// its windows apart pass whole) was slower at its worst phases (both measured in
/// `benches/results/acceptance-2026-12-06-round-windows.txt`).
pub(super) const ROUND_WINDOWS_MS: [u64; 11] = [
    2_500, 4_000, 6_000, 12_000, 20_000, 45_000, 90_000, 120_000, 180_000, 300_000, 600_000,
];

/// How far over and under a round interval its trials go: a 128th, so that the two are a
/// sixty-fourth apart and the search stops there (see
/// [`Silence::next_try`](super::Silence::next_try)).
pub(super) fn rate_margin(round: Duration) -> Duration {
    round / 128
}

/// How far under a round window (of a quota above one) its trial goes: a 64th.
pub(super) fn window_margin(round: Duration) -> Duration {
    round / 64
}

/// The round interval (see [`round_intervals`]) a trial `into` went just over, or a little
/// later (its request waited its turn): a 128th to a 64th over.
pub(super) fn round_tried(into: Duration) -> Option<Duration> {
    round_intervals().find(|&round| just_over(round, into))
}

/// Whether a trial `into` went just over `round`: a 128th to a 64th over it (its request may
/// have waited its turn past the 128th it was due at).
pub(super) fn just_over(round: Duration, into: Duration) -> bool {
    let margin = rate_margin(round);
    into >= round + margin && into <= round + margin * 2
}

/// How long after a round offset its probe goes: a 128th of it, and 5 ms at least.
pub(super) fn round_margin(offset: Duration) -> Duration {
    (offset / 128).max(Duration::from_millis(5))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn no_two_round_intervals_lie_within_four_percent() {
        // So a trial a 128th to a 64th over one is over no other (`round_tried`).
        let mut rounds: Vec<Duration> = round_intervals().collect();
        rounds.sort_unstable();
        for pair in rounds.windows(2) {
            assert!(
                pair[1].as_secs_f64() > pair[0].as_secs_f64() * 1.04,
                "{:?} and {:?}",
                pair[0],
                pair[1]
            );
        }
        // 150 a minute is among them, 12 a second (83 ms) is not.
        assert!(rounds.contains(&Duration::from_millis(400)));
        assert_eq!(round_tried(Duration::from_micros(406_250)), Some(MS * 400));
        assert_eq!(round_tried(Duration::from_micros(84_000)), None);
    }
}
