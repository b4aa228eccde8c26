//! A window that each refused request begins again (`@fastify/rate-limit`'s
//! `continueExceeding`), beside a fixed window from the first request that refusals do not
//! begin again, and one whose first refusal blocks the key for a while (the `block` module,
//! which shares the restart's hold): a minute of each against the silent model.

use super::*;
use crate::limiter::{FixedWindow, RateLimiter};
use crate::time::ManualClock;

/// A silent fixed window of `limit` per `window` from the key's first request, which each
/// refused request begins again (its count kept) when `restarted` (`@fastify/rate-limit`'s
/// `continueExceeding`).
fn first_request_window(
    limit: u64,
    window: Duration,
    restarted: bool,
) -> impl FnMut(Duration) -> bool {
    let (mut start, mut count) = (None::<Duration>, 0u64);
    move |now| {
        if start.is_none_or(|start| now >= start + window) {
            start = Some(now);
            count = 0;
        }
        count += 1;
        let admitted = count <= limit;
        if !admitted && restarted {
            start = Some(now);
        }
        admitted
    }
}

/// A minute against [`first_request_window`], with none refused in its second half: what
/// went, how many were refused, how many admitted in the second half, and the estimate at
/// the end.
struct MinuteJob {
    sent: Vec<(Duration, bool)>,
    refused: usize,
    admitted_late: usize,
    quota: u64,
    window: Duration,
}

fn a_minute_from_the_first_request(limit: u64, window: Duration, restarted: bool) -> MinuteJob {
    let mut q = KeyQuota::new(false);
    let sent = drive_silently(
        &mut q,
        &mut first_request_window(limit, window, restarted),
        secs(60),
    );
    let (refused, late, admitted_late) = tally(&sent);
    assert_eq!(late, 0, "refused in the second half");
    let (quota, window) = q.estimate(secs(60)).expect("an estimate");
    MinuteJob {
        sent,
        refused,
        admitted_late,
        quota,
        window,
    }
}

/// When the requests refused after `from` (and before `to`) went.
fn refused_between(sent: &[(Duration, bool)], from: Duration, to: Duration) -> Vec<Duration> {
    sent.iter()
        .filter(|(at, ok)| !ok && *at > from && *at < to)
        .map(|(at, _)| *at)
        .collect()
}

#[test]
fn a_window_that_each_refusal_begins_again_is_paced_at_the_gap_that_let_a_probe_through() {
    // 6 per 1 s, begun again by each refusal: the first window's probes at 0.26, 0.64, 1, 1.5
    // and 2 s are each refused (the one before began the window again), the one at 3 s, a
    // second after the last, is admitted. Read from the window's first request, the window
    // is over 2 s; before searching there, one window goes the gap admitted (1 s) after its
    // first request, is admitted, and the windows go at that from then on.
    let MinuteJob {
        sent,
        refused,
        admitted_late,
        quota,
        window,
    } = a_minute_from_the_first_request(6, secs(1), true);
    // The trial goes in the window after the probe admitted, not once a search over the
    // misread bounds (2 to 3 s) has settled: measured, 48 admitted in the first 10 s (24
    // when it waited for the search).
    let early = sent.iter().filter(|(at, ok)| *ok && *at < secs(10)).count();
    assert!(early >= 40, "{early} admitted in the first 10 s");
    // Measured: 6 refusals, 180 admitted in the second half, the window 1.008 s; without the
    // trial, 90 admitted and a window of 2.07 s.
    assert!(
        admitted_late >= 170,
        "{admitted_late} admitted in the second half"
    );
    assert!(refused <= 7, "{refused} refusals");
    assert_eq!(quota, 6);
    assert!(window <= MS * 1_010, "{window:?}");
}

#[test]
fn a_window_that_each_refusal_begins_again_between_two_probe_gaps_steps_down_to_it() {
    // 4 per 1.5 s, begun again by each refusal: the probes after the first refusal go at
    // round offsets from the window's first request, refused at 2 and 3 s (a gap of 1 s),
    // admitted at 5 s (2 s). The trial of 2 s is admitted; a round step under it, 1.5 s
    // (just over, as a trial), is admitted too, and the windows go at that.
    let job = a_minute_from_the_first_request(4, MS * 1_500, true);
    let (refused, admitted_late, window) = (job.refused, job.admitted_late, job.window);
    // Measured: 80 admitted in the second half (60 with the windows at 2 s, without the
    // step), 7 refusals.
    assert!(
        admitted_late >= 76,
        "{admitted_late} admitted in the second half"
    );
    assert!(refused <= 8, "{refused} refusals");
    assert_eq!(job.quota, 4);
    assert!(window >= MS * 1_500 && window <= MS * 1_520, "{window:?}");
}

#[test]
fn a_window_that_each_refusal_begins_again_on_a_probe_gap_pays_one_step_and_keeps_it() {
    // 10 per 2 s, begun again by each refusal: read as 2 s, as it is. The step under it (1.5
    // s) is refused once, begins the window again, and the windows stay at 2 s.
    let job = a_minute_from_the_first_request(10, secs(2), true);
    let (refused, window) = (job.refused, job.window);
    let after_trial = refused_between(&job.sent, secs(6), secs(60));
    assert_eq!(after_trial.len(), 1, "{after_trial:?}");
    // Measured: 8 refusals, the step's among them (none after 6 s without it).
    assert!(refused <= 8, "{refused} refusals");
    assert_eq!(job.quota, 10);
    assert!(window >= secs(2) && window <= MS * 2_030, "{window:?}");
}

#[test]
fn a_window_that_refusals_do_not_begin_again_pays_one_trial_and_keeps_its_length() {
    // 6 per 3 s from the first request: its probes read the same as 6 per 1 s begun again by
    // each refusal (the refusals at 1, 1.5 and 2 s, the probe admitted at 3 s). The trial of
    // the shorter window, made by the window after the probe admitted (3 s), is refused
    // once, and the windows stay at 3 s.
    let job = a_minute_from_the_first_request(6, secs(3), false);
    let (refused, admitted_late, window) = (job.refused, job.admitted_late, job.window);
    assert!(
        admitted_late >= 58,
        "{admitted_late} admitted in the second half"
    );
    let trials = refused_between(&job.sent, secs(3), MS * 4_500);
    assert_eq!(trials.len(), 1, "{trials:?}");
    // Measured: 9 refusals, one of them the trial (8 without it).
    assert!(refused <= 9, "{refused} refusals");
    assert!(window >= secs(3), "{window:?}");
}

#[test]
fn a_window_that_each_refusal_begins_again_longer_than_the_longest_pause_is_let_in_again() {
    // 5 per 45 s, begun again by each refusal: the probes go back to round offsets up to 60 s,
    // then 30 s apart, and each one refused begins the window again (capped at 30 s, the
    // pauses never let one in). Once a probe sent 30 s after a refusal is refused too, the
    // pauses grow on by half: the one of 45 s after the refusal at 120.5 s is let in, the
    // trial of that gap too, and the windows go 45 s apart from then on, with no refusal.
    let mut q = KeyQuota::new(false);
    let sent = drive_silently(
        &mut q,
        &mut first_request_window(5, secs(45), true),
        secs(600),
    );
    let first_refused = sent.iter().position(|(_, ok)| !ok).expect("a refusal");
    let admitted: Vec<Duration> = sent[first_refused..]
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(at, _)| *at)
        .collect();
    let escaped = *admitted
        .first()
        .expect("let in again after the first refusal");
    assert!(escaped < secs(180), "let in again at {escaped:?}");
    let late = refused_between(&sent, escaped, secs(600));
    assert!(late.is_empty(), "refused after {escaped:?}: {late:?}");
    // Each window's first request, 45 s (and a margin) after the last one's.
    let firsts: Vec<Duration> = admitted.iter().step_by(5).copied().collect();
    assert!(firsts.len() >= 9, "{firsts:?}");
    assert!(
        firsts.windows(2).all(|w| w[1] - w[0] < MS * 45_500),
        "{firsts:?}"
    );
}

/// The mock's fixed window of `limit` per `window` from the key's first request whose first
/// refusal blocks the key for `block` ([`FixedWindow::blocked_after_refusal`]), asked at each
/// instant on a manual clock.
fn blocked_window(limit: u64, window: Duration, block: Duration) -> impl FnMut(Duration) -> bool {
    let clock = ManualClock::new();
    let limiter = FixedWindow::new(limit, window)
        .expect("a valid window")
        .blocked_after_refusal(block)
        .with_clock(clock.clone());
    move |now| {
        clock.set(now);
        limiter.check("key", 1).allowed
    }
}

#[test]
fn a_window_whose_refusals_block_the_key_is_paced_at_its_window_once_a_block_shows() {
    // 8 per 2 s, the key blocked 3.5 s from its first refusal. The first window's probes all
    // fall in the block and read a window that each refusal begins again, 2 s; the round step
    // under it (1.5 s) is refused, and the block refuses the window's first request a whole
    // window after that refusal: a block, measured by the probes, held after each refusal
    // since. The windows go at 2 s, where they went at the probes' 3.5-5.5 s.
    let mut q = KeyQuota::new(false);
    let sent = drive_silently(
        &mut q,
        &mut blocked_window(8, secs(2), MS * 3_500),
        secs(60),
    );
    let (refused, late, admitted_late) = tally(&sent);
    assert_eq!(late, 0, "refused in the second half");
    let (quota, window) = q.estimate(secs(60)).expect("an estimate");
    assert_eq!(quota, 8);
    assert!(window >= secs(2) && window <= MS * 2_030, "{window:?}");
    assert!(
        admitted_late >= 112,
        "{admitted_late} admitted in the second half"
    );
    assert!(refused <= 12, "{refused} refusals");
}
