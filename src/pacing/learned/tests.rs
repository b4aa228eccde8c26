use super::silent_pace::sliding_counter;
use super::silent_rate::TestBucket;
use super::*;

const MS: Duration = Duration::from_millis(1);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn info(limit: u64, remaining: u64, reset: Duration, window: Option<Duration>) -> RateLimitInfo {
    RateLimitInfo {
        limit: Some(limit),
        remaining: Some(remaining),
        reset: Some(reset),
        window,
        ..RateLimitInfo::default()
    }
}

fn reserve(q: &mut KeyQuota, now: Duration) -> Ticket {
    match q.try_reserve(now, 1) {
        Admission::Reserved(ticket) => ticket,
        Admission::WaitUntil(t) => {
            panic!("expected a reservation at {now:?}, told to wait until {t:?}")
        }
    }
}

/// Feeds a response back as the pacer does (with no jitter): learn, then close the gate for
/// the pause asked for.
fn see(
    q: &mut KeyQuota,
    now: Duration,
    ticket: Ticket,
    throttled: bool,
    info: &RateLimitInfo,
) -> Option<Duration> {
    let outcome = if throttled {
        Outcome::Throttled
    } else {
        Outcome::Answered
    };
    let pause = q.observe(now, ticket, outcome, info);
    if let Some(wait) = pause {
        q.close_gate(now, wait);
    }
    pause
}

#[test]
fn stated_quota_is_adopted_as_a_budget_that_refills_each_window() {
    let mut q = KeyQuota::default();
    let ticket = reserve(&mut q, Duration::ZERO);
    see(
        &mut q,
        Duration::ZERO,
        ticket,
        false,
        &info(20, 19, secs(2), Some(secs(2))),
    );
    let wave: Vec<Ticket> = (0..19).map(|i| reserve(&mut q, MS * i)).collect();
    assert_eq!(q.try_reserve(MS * 20, 1), Admission::WaitUntil(secs(2)));
    for (i, ticket) in wave.into_iter().enumerate() {
        let left = 18 - i as u64;
        see(
            &mut q,
            MS * 20,
            ticket,
            false,
            &info(20, left, MS * 1980, Some(secs(2))),
        );
    }
    // The window rolls at the stated reset. Its first request goes alone: its answer says
    // whether the window came back whole (a fixed window) or one slot at a time (a moving
    // one).
    let first = reserve(&mut q, secs(2));
    assert_eq!(
        q.try_reserve(secs(2), 1),
        Admission::WaitUntil(secs(2) + PROBE_FOR)
    );
    see(
        &mut q,
        secs(2),
        first,
        false,
        &info(20, 19, secs(2), Some(secs(2))),
    );
    // Whole: the rest of the quota, and the next reset known.
    for _ in 0..19 {
        reserve(&mut q, secs(2));
    }
    assert_eq!(
        q.try_reserve(secs(2) + MS, 1),
        Admission::WaitUntil(secs(4))
    );
}

#[test]
fn first_news_counts_the_requests_still_in_flight() {
    let mut q = KeyQuota::default();
    let tickets: Vec<Ticket> = (0..10).map(|_| reserve(&mut q, Duration::ZERO)).collect();
    // One response says 15 left; nine others are still out and may not be counted yet.
    see(&mut q, MS, tickets[0], false, &info(20, 15, secs(2), None));
    assert_eq!(q.budget(), Some(6));
    // Later news can only lower the estimate: our reservations are already taken off.
    see(&mut q, MS, tickets[1], false, &info(20, 17, secs(2), None));
    assert_eq!(q.budget(), Some(6));
    see(&mut q, MS, tickets[2], false, &info(20, 3, secs(2), None));
    assert_eq!(q.budget(), Some(3));
}

#[test]
fn reservations_spend_the_budget_before_responses_come_back() {
    let mut q = KeyQuota::default();
    let ticket = reserve(&mut q, Duration::ZERO);
    see(
        &mut q,
        Duration::ZERO,
        ticket,
        false,
        &info(5, 3, secs(1), None),
    );
    for _ in 0..3 {
        reserve(&mut q, MS);
    }
    // Three requests in flight, none answered: the fourth must wait for the reset.
    assert_eq!(q.try_reserve(MS, 1), Admission::WaitUntil(secs(1)));
}

#[test]
fn a_429_closes_the_gate_until_its_retry_after_and_a_later_gate_wins() {
    let mut q = KeyQuota::default();
    let ticket = reserve(&mut q, Duration::ZERO);
    let told = RateLimitInfo {
        retry_after: Some(secs(3)),
        ..RateLimitInfo::default()
    };
    see(&mut q, secs(1), ticket, true, &told);
    assert_eq!(q.try_reserve(secs(2), 1), Admission::WaitUntil(secs(4)));
    q.close_gate(secs(2), secs(1));
    assert_eq!(q.try_reserve(secs(2), 1), Admission::WaitUntil(secs(4)));
    q.close_gate(secs(2), secs(5));
    assert_eq!(q.try_reserve(secs(3), 1), Admission::WaitUntil(secs(7)));
    reserve(&mut q, secs(7));
}

#[test]
fn remaining_zero_closes_the_gate_until_the_reset() {
    let mut q = KeyQuota::default();
    let ticket = reserve(&mut q, Duration::ZERO);
    see(&mut q, MS, ticket, false, &info(10, 0, MS * 700, None));
    assert_eq!(q.try_reserve(MS * 2, 1), Admission::WaitUntil(MS * 701));
}

#[test]
fn a_response_from_an_ended_window_does_not_close_the_new_one() {
    let mut q = KeyQuota::default();
    let first = reserve(&mut q, Duration::ZERO);
    see(
        &mut q,
        Duration::ZERO,
        first,
        false,
        &info(20, 10, secs(1), None),
    );
    let late = reserve(&mut q, MS);
    // The window rolls (its first request goes alone); then the late response of the old
    // window arrives, rounded up.
    let first = reserve(&mut q, secs(1));
    see(
        &mut q,
        secs(1) + MS,
        late,
        false,
        &info(20, 0, secs(1), None),
    );
    see(
        &mut q,
        secs(1) + MS,
        first,
        false,
        &info(20, 19, secs(1), None),
    );
    reserve(&mut q, secs(1) + MS * 2);
    assert_eq!(q.budget(), Some(18));
}

#[test]
fn a_cancelled_reservation_is_refunded_and_an_abandoned_one_is_not() {
    let mut q = KeyQuota::default();
    let ticket = reserve(&mut q, Duration::ZERO);
    see(
        &mut q,
        Duration::ZERO,
        ticket,
        false,
        &info(10, 5, secs(1), None),
    );
    let cancelled = reserve(&mut q, MS);
    assert_eq!(q.budget(), Some(4));
    q.cancel(cancelled, 1);
    assert_eq!(q.budget(), Some(5));
    let abandoned = reserve(&mut q, MS);
    q.abandon(abandoned);
    assert_eq!(q.budget(), Some(4));
}

#[test]
fn a_roll_after_an_idle_spell_lands_on_the_current_window() {
    let mut q = KeyQuota::default();
    let ticket = reserve(&mut q, Duration::ZERO);
    see(
        &mut q,
        Duration::ZERO,
        ticket,
        false,
        &info(2, 1, secs(1), Some(secs(1))),
    );
    // Idle through windows [1,2), [2,3); at 3.5 s the current window ends at 4 s. Its first
    // request goes alone; its answer finds the window whole.
    let first = reserve(&mut q, MS * 3500);
    see(
        &mut q,
        MS * 3500,
        first,
        false,
        &info(2, 1, MS * 500, Some(secs(1))),
    );
    reserve(&mut q, MS * 3500);
    assert_eq!(q.try_reserve(MS * 3500, 1), Admission::WaitUntil(secs(4)));
}

#[test]
fn without_any_news_every_request_is_admitted() {
    let mut q = KeyQuota::default();
    for i in 0..1000 {
        reserve(&mut q, MS * i);
    }
}

#[test]
fn whole_second_resets_are_tightened_to_the_earliest_bound_of_the_window() {
    let mut q = KeyQuota::default();
    let first = reserve(&mut q, Duration::ZERO);
    let last = reserve(&mut q, Duration::ZERO);
    // At 100 ms the server says "reset in 1 s" (its 0.9 s rounded up): the reset is by 1.1 s.
    see(&mut q, MS * 100, first, false, &info(2, 1, secs(1), None));
    // At 900 ms it says "1 s" again (its 0.1 s rounded up): no later than 1.9 s, but 1.1 s
    // is the better bound, and the spent quota pauses the key until then, not 1.9 s.
    let pause = see(&mut q, MS * 900, last, false, &info(2, 0, secs(1), None));
    assert_eq!(pause, Some(MS * 200));
    assert_eq!(q.try_reserve(MS * 950, 1), Admission::WaitUntil(MS * 1100));
}

#[test]
fn a_key_with_no_news_sends_one_request_alone_until_its_answer() {
    let mut q = KeyQuota::new(true);
    let probe = reserve(&mut q, Duration::ZERO);
    // The others wait while the first request is out (the pacer wakes them on its answer)...
    assert_eq!(q.try_reserve(MS, 1), Admission::WaitUntil(secs(2)));
    // ...and go once its answer is in: here it says 5 remain.
    see(&mut q, MS * 30, probe, false, &info(10, 5, secs(1), None));
    for i in 0..5 {
        reserve(&mut q, MS * (31 + i));
    }
    assert_eq!(q.try_reserve(MS * 40, 1), Admission::WaitUntil(MS * 1030));
}

#[test]
fn a_probe_without_answer_holds_the_others_for_two_seconds_at_most() {
    let mut q = KeyQuota::new(true);
    reserve(&mut q, Duration::ZERO);
    assert_eq!(q.try_reserve(MS * 1999, 1), Admission::WaitUntil(secs(2)));
    reserve(&mut q, secs(2));
    // Not probing (the pacer does not learn): nobody waits for anybody.
    let mut q = KeyQuota::default();
    reserve(&mut q, Duration::ZERO);
    reserve(&mut q, Duration::ZERO);
}

/// A response that states nothing.
fn silent() -> RateLimitInfo {
    RateLimitInfo::default()
}

/// `count` requests reserved at `sent` and admitted at `seen` by a server that states nothing.
fn admit_silently(q: &mut KeyQuota, count: usize, sent: Duration, seen: Duration) {
    for _ in 0..count {
        let ticket = reserve(q, sent);
        see(q, seen, ticket, false, &silent());
    }
}

/// Five admitted from 0 ms, a throttle, a failed probe, then a probe admitted at 637 ms: the
/// estimate is 5 per 637 ms, and the window that began with that probe is running.
fn estimated() -> KeyQuota {
    let mut q = KeyQuota::new(false);
    for i in 0..5 {
        let ticket = reserve(&mut q, MS * i);
        see(&mut q, MS * i + MS, ticket, false, &silent());
    }
    let refused = reserve(&mut q, MS * 10);
    let also_refused = reserve(&mut q, MS * 10);
    assert_eq!(
        see(&mut q, MS * 11, refused, true, &silent()),
        Some(MS * 250)
    );
    // Sent before the pause began: the same news again, no longer pause.
    assert_eq!(see(&mut q, MS * 12, also_refused, true, &silent()), None);
    assert_eq!(q.try_reserve(MS * 100, 1), Admission::WaitUntil(MS * 261));
    let probe = reserve(&mut q, MS * 261);
    // The others wait for the probe's answer.
    assert_eq!(
        q.try_reserve(MS * 262, 1),
        Admission::WaitUntil(MS * 261 + PROBE_FOR)
    );
    // Refused: the next pause is half as long again.
    assert_eq!(
        see(&mut q, MS * 262, probe, true, &silent()),
        Some(MS * 375)
    );
    let probe = reserve(&mut q, MS * 637);
    see(&mut q, MS * 638, probe, false, &silent());
    q
}

#[test]
fn a_silent_servers_first_window_is_probed_just_after_round_offsets() {
    let mut q = KeyQuota::new(false);
    for i in 0..5 {
        let ticket = reserve(&mut q, MS * i);
        see(&mut q, MS * i + MS, ticket, false, &silent());
    }
    // Refused at 11 ms: probes after 250 ms, then 375 ms (no round offset under a second).
    let refused = reserve(&mut q, MS * 10);
    assert_eq!(
        see(&mut q, MS * 11, refused, true, &silent()),
        Some(MS * 250)
    );
    let probe = reserve(&mut q, MS * 261);
    assert_eq!(
        see(&mut q, MS * 262, probe, true, &silent()),
        Some(MS * 375)
    );
    let probe = reserve(&mut q, MS * 637);
    // The next, due 562.5 ms after this refusal (at 1200.5 ms), goes back to just after the
    // round 1 s from the first request: a 128th of it later, at 1007.8125 ms.
    let pause = see(&mut q, MS * 638, probe, true, &silent()).expect("a pause");
    let at = MS * 638 + pause;
    assert_eq!(at, Duration::from_nanos(1_007_812_500));
    let probe = reserve(&mut q, at);
    see(&mut q, at + MS, probe, false, &silent());
    // Admitted: the window is 1007.8 ms at most, and likely the round 1 s.
    assert_eq!(q.estimate(at + MS), Some((5, at)));
    admit_silently(&mut q, 4, at + MS, at + MS * 2);
    // So the next window's first request tries a 64th under 1 s (984.375 ms in), not the
    // midpoint of 637 and 1007.8 ms.
    let under = at + Duration::from_nanos(984_375_000);
    assert_eq!(q.try_reserve(at + MS * 2, 1), Admission::WaitUntil(under));
    let first = reserve(&mut q, under);
    // Refused: the window is between 984 and 1008 ms, within a thirty-second of it, and the
    // search is over at one 429: every window from here on is 1007.8 ms.
    let pause = see(&mut q, under + MS, first, true, &silent()).expect("a pause");
    let second_window = under + MS + pause;
    assert_eq!(second_window, at * 2);
    let mut start = second_window;
    for _ in 0..3 {
        let first = reserve(&mut q, start);
        see(&mut q, start + MS, first, false, &silent());
        // The window's quota goes (as the curve has it), then the key waits for the next.
        let mut now = start + MS;
        let next = loop {
            match q.try_reserve(now, 1) {
                Admission::Reserved(ticket) => {
                    see(&mut q, now + MS, ticket, false, &silent());
                }
                Admission::WaitUntil(until) if until < start + MS * 500 => now = until,
                Admission::WaitUntil(until) => break until,
            };
        };
        assert_eq!(next, start + at);
        start += at;
    }
}

#[test]
fn a_probe_due_a_little_before_a_round_offset_waits_for_it() {
    // A silent fixed window of 5 per 10 s from the first request. The first window's probes
    // go at 250 and 375 ms pauses growing by half, back to the round offsets 1, 1.5, 2, 3 and
    // 5 s; the pause after 5 s (4.27 s) falls due at 9.3 s, short of 10 s by less than a
    // quarter of itself, and the probe waits for 10 s: no probe between 5 and 10 s.
    let mut q = KeyQuota::new(false);
    let mut counted = (0u128, 0u64);
    let sent = drive_silently(
        &mut q,
        &mut |now| {
            let which = now.as_millis() / 10_000;
            if which != counted.0 {
                counted = (which, 0);
            }
            counted.1 += 1;
            counted.1 <= 5
        },
        secs(11),
    );
    let refused: Vec<Duration> = sent
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(at, _)| *at)
        .collect();
    let first_admitted_again = sent
        .iter()
        .find(|(at, ok)| *ok && *at >= secs(1))
        .map(|(at, _)| *at);
    assert!(
        refused
            .iter()
            .all(|at| *at <= MS * 5_100 || *at >= secs(10)),
        "a probe between 5 and 10 s: {refused:?}"
    );
    // The burst's refusal, then the probes at 0.26, 0.64, 1, 1.5, 2, 3 and 5 s.
    assert_eq!(refused.len(), 8, "{refused:?}");
    assert!(
        first_admitted_again.is_some_and(|at| at >= secs(10) && at < MS * 10_100),
        "admitted again at {first_admitted_again:?}"
    );
}

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
fn a_bare_throttle_pauses_then_probes_and_the_probe_bounds_the_window() {
    let mut q = estimated();
    // Five were admitted in the window that ended between 261 ms and 637 ms after it began.
    assert_eq!(q.estimate(MS * 638), Some((5, MS * 637)));
    // The probe was the window's first: four more go, then the key waits for the next window.
    admit_silently(&mut q, 4, MS * 640, MS * 641);
    // A window of 261 ms was not enough, 637 ms was: the next window's first request goes
    // alone at the midpoint, 449 ms in.
    assert_eq!(q.try_reserve(MS * 641, 1), Admission::WaitUntil(MS * 1086));
    let first = reserve(&mut q, MS * 1086);
    assert_eq!(
        q.try_reserve(MS * 1086, 1),
        Admission::WaitUntil(MS * 1086 + PROBE_FOR)
    );
    // Let in: the window is no longer than 449 ms.
    see(&mut q, MS * 1087, first, false, &silent());
    assert_eq!(q.estimate(MS * 1087), Some((5, MS * 449)));
    // The other four go 449 ms after those of the last window went (at 640 ms), not at once:
    // a moving window frees each slot one window after the request that spent it.
    assert_eq!(q.try_reserve(MS * 1088, 1), Admission::WaitUntil(MS * 1089));
    for _ in 0..4 {
        reserve(&mut q, MS * 1089);
    }
    // Bounds 261 and 449 ms: the next first request goes at 355 ms.
    assert_eq!(q.try_reserve(MS * 1089, 1), Admission::WaitUntil(MS * 1441));
}

#[test]
fn a_refusal_inside_an_estimated_window_floors_the_quota_at_what_it_admitted_and_waits() {
    let mut q = estimated();
    admit_silently(&mut q, 2, MS * 640, MS * 641);
    let refused = reserve(&mut q, MS * 650);
    // Three were admitted in this window (the probe and two): the quota is three, a ceiling
    // the curve never climbs above again. The curve is cut to 70% of three (2.1), but three is
    // what the server admitted. Fewer per window than the five the bounds were found for: the
    // window known too short (261 ms) shrinks with the quota, to 3/5 of it (156.6 ms), since
    // a bucket frees three sooner than five; the next window's first try goes at the midpoint
    // of that and 637 ms, 396.8 ms in, 382.8 ms from now.
    let pause = see(&mut q, MS * 651, refused, true, &silent()).expect("a pause");
    assert_eq!(pause.as_micros(), 382_800);
    assert_eq!(q.estimate(MS * 651), Some((3, MS * 637)));
    // K = ∛(3 × 0.3 / 0.4) ≈ 1.31 windows after the cut the curve is back at 3; two windows
    // later still under 4.
    assert_eq!(q.estimate(MS * (651 + 2 * 637)).map(|e| e.0), Some(3));
    assert!(
        matches!(q.try_reserve(MS * 700, 1), Admission::WaitUntil(at) if at.as_micros() == 1_033_800)
    );
}

#[test]
fn a_first_request_refused_at_the_midpoint_raises_the_lower_bound() {
    let mut q = estimated();
    admit_silently(&mut q, 4, MS * 640, MS * 641);
    // Refused 449 ms into the window: the window is longer. The running window keeps its
    // count; its successor goes where the window is known to be enough (637 ms in), not at
    // another midpoint of the same window (one 429 a midpoint, not one per try).
    let first = reserve(&mut q, MS * 1086);
    assert_eq!(
        see(&mut q, MS * 1087, first, true, &silent()),
        Some(MS * 187)
    );
    assert_eq!(q.try_reserve(MS * 1100, 1), Admission::WaitUntil(MS * 1274));
    let second = reserve(&mut q, MS * 1274);
    see(&mut q, MS * 1275, second, false, &silent());
    assert_eq!(q.estimate(MS * 1275), Some((5, MS * 637)));
    // The window after tries the next midpoint, of 449 and 637 ms: 543 ms in.
    let mut now = MS * 1276;
    let mut sent = 0;
    while sent < 4 {
        match q.try_reserve(now, 1) {
            Admission::Reserved(ticket) => {
                see(&mut q, now + MS, ticket, false, &silent());
                sent += 1;
            }
            Admission::WaitUntil(until) => now = until,
        }
    }
    assert_eq!(q.try_reserve(now + MS, 1), Admission::WaitUntil(MS * 1817));
}

#[test]
fn a_window_of_one_request_is_searched_to_a_thirty_second_and_others_to_a_sixteenth() {
    let mut silence = silent::Silence::first(Duration::ZERO, 1);
    // 95 ms was too short, 100 ms was enough: 5 ms apart, under a sixteenth (6.25 ms).
    silence.too_short = MS * 95;
    silence.ceiling = Some(5);
    assert_eq!(silence.next_try(MS * 100), MS * 100);
    // One request a window: the interval is the job's pace, and 5 ms is over a thirty-second.
    silence.ceiling = Some(1);
    assert_eq!(silence.next_try(MS * 100), Duration::from_micros(97_500));
    // Within a thirty-second (3.125 ms), the search stops there too.
    silence.too_short = MS * 97;
    assert_eq!(silence.next_try(MS * 100), MS * 100);
    // A window down to one request after a first one that admitted a burst (a bucket that
    // counts refused requests, handed back to the windows): each trial refused adds to the
    // debt, and the search stops at a sixteenth.
    silence.too_short = MS * 95;
    silence.first_measured = 20;
    assert_eq!(silence.next_try(MS * 100), MS * 100);
}

#[test]
fn a_rate_with_no_burst_behind_a_retry_after_tries_the_round_interval_nearest_the_midpoint() {
    let mut silence = silent::Silence::first(Duration::ZERO, 1);
    silence.ceiling = Some(1);
    silence.first_measured = 1;
    // A server that asks no pause: a refusal costs the model's own short one, and the
    // midpoints go on as they do.
    assert_eq!(silence.next_try(MS * 950), MS * 475);
    // Each refusal costs the pause the server asks.
    silence.server_pauses = true;
    // Between 0 and 950 ms (the pause a `Retry-After: 1` asked): 500 ms, a 128th over it.
    assert_eq!(
        silence.next_try(MS * 950),
        Duration::from_nanos(503_906_250)
    );
    // Between 0 and 250 ms: 125 ms (8 a second), the round one nearest the midpoint.
    assert_eq!(
        silence.next_try(MS * 250),
        Duration::from_nanos(125_976_562)
    );
    // Between 0 and 4.5 s: one request every 2 s (2.4 s, 25 a minute, is nearer 2.25 s, but
    // the intervals by the second go first).
    assert_eq!(
        silence.next_try(MS * 4500),
        Duration::from_micros(2_015_625)
    );
    // Between 333 and 500 ms, where no interval by the second falls in the middle half: 400
    // ms (150 a minute).
    silence.too_short = MS * 333;
    assert_eq!(silence.next_try(MS * 500), Duration::from_micros(403_125));
    // Between 61 and 123 ms: 100 ms, 10 a second.
    silence.too_short = MS * 61;
    assert_eq!(
        silence.next_try(MS * 123),
        Duration::from_nanos(100_781_250)
    );
    // None in the middle half of 0 to 90 ms: the midpoint.
    silence.too_short = Duration::ZERO;
    assert_eq!(silence.next_try(MS * 90), MS * 45);
    // A window of more than one request is searched by midpoints.
    silence.ceiling = Some(5);
    silence.first_measured = 5;
    assert_eq!(silence.next_try(MS * 950), MS * 475);
}

#[test]
fn a_window_searched_to_a_sixteenth_is_searched_on_to_a_thirty_second_after_ten_windows() {
    let started = |server_pauses: bool| {
        let mut silence = silent::Silence::first(Duration::ZERO, 5);
        // 95 ms was too short, 100 ms was enough: within a sixteenth, so the search stops.
        silence.window = Some(MS * 100);
        silence.too_short = MS * 95;
        silence.ceiling = Some(5);
        silence.server_pauses = server_pauses;
        silence
    };
    let mut silence = started(false);
    let mut now = Duration::ZERO;
    for begun in 0..10 {
        assert_eq!(
            silence.next_try(MS * 100),
            MS * 100,
            "after {begun} windows"
        );
        now += MS * 100;
        assert!(matches!(
            silence.admit(now, 1),
            silent::SilentAdmission::Go { alone: true }
        ));
    }
    // Ten windows in: a job this long has more to come, and 5 ms is over a thirty-second.
    assert_eq!(silence.next_try(MS * 100), Duration::from_micros(97_500));
    // Where each refusal costs a pause the server asks, the search stays at a sixteenth.
    let mut silence = started(true);
    for _ in 0..10 {
        now += MS * 100;
        silence.admit(now, 1);
    }
    assert_eq!(silence.next_try(MS * 100), MS * 100);
}

#[test]
fn a_settled_interval_refused_at_its_end_grows_a_step_and_is_not_measured_again() {
    // A rate of 20 a second with no burst (nginx's `limit_req` without one). One request,
    // 30 s in, reaches the server 3 ms late; the next one, sent at the settled interval, then
    // finds it less than 50 ms old and is refused.
    let mut q = KeyQuota::new(true);
    let mut bucket = TestBucket::new(20.0, 1.0);
    let mut delayed = false;
    let sent = drive_silently(
        &mut q,
        &mut |now| {
            let late = !delayed && now >= secs(30);
            delayed |= late;
            bucket.take(now + if late { MS * 3 } else { Duration::ZERO })
        },
        secs(60),
    );
    let (_, late, _) = tally(&sent);
    assert_eq!(late, 1, "one refusal in the second half: the jitter's");
    let refused_at = sent
        .iter()
        .rev()
        .find(|(_, ok)| !ok)
        .map(|(at, _)| *at)
        .unwrap();
    // The interval settled on: between the last two requests before the refused one.
    let before: Vec<Duration> = sent
        .iter()
        .map(|(at, _)| *at)
        .filter(|at| *at < refused_at)
        .collect();
    let settled = before[before.len() - 1] - before[before.len() - 2];
    let after: Vec<Duration> = sent
        .iter()
        .filter(|(at, _)| *at > refused_at)
        .map(|(at, _)| *at)
        .collect();
    // No pause to measure it again: the next request goes about an interval after the
    // refused one (a quarter of a second with the probes).
    assert!(
        after[0] - refused_at < MS * 60,
        "{:?} after the refusal",
        after[0] - refused_at
    );
    // And the interval kept is a step longer (2 ms at most), not searched anew.
    let kept = after[2] - after[1];
    assert!(
        kept > settled && kept <= settled + settled / 16,
        "{kept:?} a request after it, {settled:?} before"
    );
    assert!(q.silence.as_deref().unwrap().settled());
}

#[test]
fn probe_pauses_grow_by_half_back_to_round_offsets_and_up_to_thirty_seconds() {
    let mut q = KeyQuota::new(false);
    let ticket = reserve(&mut q, Duration::ZERO);
    let mut pause = see(&mut q, MS, ticket, true, &silent()).unwrap();
    let mut now = MS + pause;
    let mut sent = vec![now];
    for _ in 0..20 {
        let probe = reserve(&mut q, now);
        pause = see(&mut q, now, probe, true, &silent()).unwrap();
        now += pause;
        sent.push(now);
    }
    let ns = Duration::from_nanos;
    // 250 ms, then 375 ms after the refusals; the next pause (562.5 ms) would pass 1 s from
    // the first request, so the probe goes a 128th after it; each later one likewise, while a
    // round offset (1, 1.5, 2, 3, 5, 10, 15, 30 or 60 s) is in its reach.
    assert_eq!(&sent[..2], &[MS * 251, MS * 626]);
    for round in [
        ns(1_007_812_500),
        ns(1_511_718_750),
        ns(2_015_625_000),
        ns(3_023_437_500),
        ns(5_039_062_500),
        ns(10_078_125_000),
        ns(15_117_187_500),
        ns(30_234_375_000),
    ] {
        assert!(sent.contains(&round), "{round:?} in {sent:?}");
    }
    // Every pause 30 s at most, and 30 s at the end.
    assert!(sent.windows(2).all(|w| w[1] - w[0] <= secs(30)));
    assert_eq!(sent[20] - sent[19], secs(30));
}

#[test]
fn a_stated_quota_replaces_the_estimate() {
    let mut q = estimated();
    let ticket = reserve(&mut q, MS * 640);
    see(
        &mut q,
        MS * 641,
        ticket,
        false,
        &info(20, 17, secs(2), None),
    );
    assert_eq!(q.estimate(MS * 641), None);
    assert_eq!(q.budget(), Some(17));
}

#[test]
fn a_first_request_refused_at_the_estimated_end_measures_the_window_again() {
    let mut q = estimated();
    admit_silently(&mut q, 4, MS * 640, MS * 641);
    // Say the bounds have met: 630 ms was not enough, 637 ms was. The next first request goes
    // at the window's end, 1274 ms...
    q.silence.as_mut().unwrap().too_short = MS * 630;
    assert_eq!(q.try_reserve(MS * 700, 1), Admission::WaitUntil(MS * 1274));
    // ...and is refused: the estimate was wrong (the server changed, or its window drifts).
    // The key pauses and probes as after a first throttle, measuring from the running
    // window's start (637 ms).
    let first = reserve(&mut q, MS * 1274);
    assert_eq!(
        see(&mut q, MS * 1275, first, true, &silent()),
        Some(MS * 250)
    );
    let probe = reserve(&mut q, MS * 1525);
    see(&mut q, MS * 1526, probe, false, &silent());
    assert_eq!(q.estimate(MS * 1526), Some((5, MS * 888)));
}

#[test]
fn successes_of_a_refused_window_answered_after_the_refusal_raise_its_floor() {
    let mut q = estimated();
    // Three more go in the window, then a fourth, which the server refuses before the
    // others' answers come back.
    let sent: Vec<Ticket> = (0..3).map(|_| reserve(&mut q, MS * 640)).collect();
    let refused = reserve(&mut q, MS * 640);
    see(&mut q, MS * 641, refused, true, &silent());
    // Only the probe was answered by then: the floor read 1...
    assert_eq!(q.estimate(MS * 641).map(|e| e.0), Some(1));
    // ...but the three were admitted too: the window's quota was four.
    for ticket in sent {
        see(&mut q, MS * 642, ticket, false, &silent());
    }
    assert_eq!(q.estimate(MS * 642).map(|e| e.0), Some(4));
}

/// What a server stating its reset in whole seconds and no window says (`X-RateLimit-*` with a
/// Unix-time reset): the pacer may probe before the stated instant.
fn coarse(remaining: u64, reset: Duration) -> RateLimitInfo {
    RateLimitInfo {
        limit: Some(20),
        remaining: Some(remaining),
        reset: Some(reset),
        grain: Some(secs(1)),
        ..RateLimitInfo::default()
    }
}

/// A 429 whose `Retry-After` is an HTTP-date: whole seconds.
fn refused_until(now: Duration, latest: Duration) -> RateLimitInfo {
    RateLimitInfo {
        retry_after: Some(latest - now),
        grain: Some(secs(1)),
        ..RateLimitInfo::default()
    }
}

/// A window spent at once: one request, then 19, the last answer saying none is left until
/// `latest`.
fn spend_window(q: &mut KeyQuota, latest: Duration) {
    let first = reserve(q, Duration::ZERO);
    see(q, MS, first, false, &coarse(19, latest - MS));
    let rest: Vec<Ticket> = (0..19).map(|_| reserve(q, MS * 2)).collect();
    for (i, ticket) in rest.into_iter().enumerate() {
        let left = 18 - i as u64;
        see(q, MS * 3, ticket, false, &coarse(left, latest - MS * 3));
    }
}

#[test]
fn a_whole_second_reset_lets_one_request_probe_before_it_and_its_success_opens_the_gate() {
    let mut q = KeyQuota::default();
    spend_window(&mut q, secs(2));
    // Spent until 2 s, as stated, rounded up: the quota may free anywhere in the second
    // before. One request probes an eighth of a second early; the others wait for its
    // answer.
    assert_eq!(q.try_reserve(MS * 4, 1), Admission::WaitUntil(MS * 1875));
    let probe = reserve(&mut q, MS * 1875);
    assert_eq!(q.try_reserve(MS * 1875, 1), Admission::WaitUntil(secs(2)));
    // Admitted: the window has turned; everyone goes, against the new window's budget.
    assert_eq!(
        see(&mut q, MS * 1876, probe, false, &coarse(19, MS * 124)),
        None
    );
    reserve(&mut q, MS * 1876);
    assert_eq!(q.budget(), Some(18));
}

#[test]
fn refused_probes_narrow_the_phase_which_carries_over_to_the_next_window() {
    let mut q = KeyQuota::default();
    spend_window(&mut q, secs(2));
    // The quota frees exactly at the stated instant: the early probe, an eighth of a second
    // before, is refused (a 429); an eighth is narrow enough.
    assert_eq!(q.try_reserve(MS * 4, 1), Admission::WaitUntil(MS * 1875));
    let probe = reserve(&mut q, MS * 1875);
    let now = MS * 1876;
    see(&mut q, now, probe, true, &refused_until(now, secs(2)));
    // Then at the stated instant, and in the next window straight at its stated instant:
    // no more 429s.
    assert_eq!(q.try_reserve(MS * 1900, 1), Admission::WaitUntil(secs(2)));
    let probe = reserve(&mut q, secs(2));
    see(
        &mut q,
        secs(2) + MS,
        probe,
        false,
        &coarse(19, secs(2) - MS),
    );
    let rest: Vec<Ticket> = (0..19).map(|_| reserve(&mut q, secs(2) + MS)).collect();
    see(
        &mut q,
        secs(2) + MS * 2,
        rest[18],
        false,
        &coarse(0, secs(2) - MS * 2),
    );
    assert_eq!(
        q.try_reserve(secs(2) + MS * 3, 1),
        Admission::WaitUntil(secs(4))
    );
}

#[test]
fn a_window_begun_by_its_first_request_just_past_a_whole_second_is_probed_a_window_after_it() {
    // 20 per 1 s, each window begun by its first request, the reset stated as a Unix time
    // (rounded up); the whole seconds fall at 0.125 s, 1.125 s, ... on this clock.
    let mut q = KeyQuota::default();
    spend_window(&mut q, MS * 1125);
    // The first window ends at 1 s: the probe an eighth before the stated instant is refused.
    assert_eq!(q.try_reserve(MS * 4, 1), Admission::WaitUntil(secs(1)));
    let probe = reserve(&mut q, secs(1));
    let now = secs(1) + MS;
    see(&mut q, now, probe, true, &refused_until(now, MS * 1125));
    // The next window begins with the request at the stated instant, counted just past the
    // whole second: it ends at 2.125 s, stated as 3.125 s.
    let first = reserve(&mut q, MS * 1125);
    let now = MS * 1126;
    see(&mut q, now, first, false, &coarse(19, MS * 3125 - now));
    let rest: Vec<Ticket> = (0..19).map(|_| reserve(&mut q, MS * 1127)).collect();
    for (i, ticket) in rest.into_iter().enumerate() {
        let now = MS * 1128;
        let left = 18 - i as u64;
        see(&mut q, now, ticket, false, &coarse(left, MS * 3125 - now));
    }
    // The last window freed by 1.126 s after its first request went: the probe goes that
    // long after this window's first, not at the phase's end of the stated second (3.125 s,
    // where each window would begin just past a second again and last nearly two).
    assert_eq!(
        q.try_reserve(MS * 1129, 1),
        Admission::WaitUntil(MS * (1125 + 1126))
    );
}

#[test]
fn a_window_on_the_clock_first_met_late_in_its_course_bounds_nothing_by_its_short_lag() {
    // 20 per 1 s on the clock's seconds, which fall at 0.125 s, 1.125 s, ... here: the key's
    // first request went 0.875 s into a window, which freed 0.125 s later.
    let mut q = KeyQuota::default();
    spend_window(&mut q, MS * 125);
    let probe = match q.try_reserve(MS * 4, 1) {
        Admission::Reserved(ticket) => ticket,
        Admission::WaitUntil(t) => reserve(&mut q, t),
    };
    let now = probe.sent + MS;
    if probe.sent < MS * 125 {
        see(&mut q, now, probe, true, &refused_until(now, MS * 125));
        let at = match q.try_reserve(now, 1) {
            Admission::WaitUntil(t) => t,
            Admission::Reserved(_) => panic!("a refused probe closes the gate"),
        };
        assert!(
            at <= MS * 125,
            "the stated instant at the latest, not {at:?}"
        );
        let first = reserve(&mut q, MS * 125);
        see(&mut q, MS * 126, first, false, &coarse(19, MS * 999));
    } else {
        see(&mut q, now, probe, false, &coarse(19, MS * 1125 - now));
    }
    let rest: Vec<Ticket> = (0..19).map(|_| reserve(&mut q, MS * 127)).collect();
    for (i, ticket) in rest.into_iter().enumerate() {
        let left = 18 - i as u64;
        see(&mut q, MS * 128, ticket, false, &coarse(left, MS * 997));
    }
    // The first window freed 0.126 s after its first request, but it was not begun by it:
    // the answer that found the next one whole stated nearly a second to go. The probe goes
    // near the stated end (an eighth before it at the most), not 0.126 s into the window.
    match q.try_reserve(MS * 129, 1) {
        Admission::WaitUntil(at) => assert!(
            at >= MS * 1000 && at <= MS * 1125,
            "the next window probed at {at:?}, its end at 1.125 s"
        ),
        Admission::Reserved(_) => panic!("the window is spent"),
    }
}

/// The last window: one request at 0, then one every 10 ms, each answered 1 ms later. The
/// probe at 1.875 s is admitted, but the answer says nothing more is left: the quota frees one
/// request at a time (a sliding log), as the last window's requests age out.
fn open_after_ten_ms_apart(q: &mut KeyQuota) {
    let first = reserve(q, Duration::ZERO);
    see(q, MS, first, false, &coarse(19, secs(2) - MS));
    for i in 1..20u32 {
        let ticket = reserve(q, MS * (10 * i));
        let now = MS * (10 * i + 1);
        see(
            q,
            now,
            ticket,
            false,
            &coarse(u64::from(19 - i), secs(2) - now),
        );
    }
    let probe = reserve(q, MS * 1875);
    see(q, MS * 1876, probe, false, &coarse(0, MS * 1124));
}

/// The copy of the window `open_after_ten_ms_apart` opened: the n-th request 10 ms after the
/// (n-1)-th, each answered 1 ms later, stating what `left(n)` and `end(n)` say.
fn copy_stating(q: &mut KeyQuota, left: impl Fn(u64) -> u64, end: impl Fn(u64) -> Duration) {
    for n in 1..20u64 {
        let at = MS * (1877 + 10 * n as u32);
        let ticket = reserve(q, at);
        see(
            q,
            at + MS,
            ticket,
            false,
            &coarse(left(n), end(n) - at - MS),
        );
    }
}

#[test]
fn a_reset_that_moves_on_within_a_window_shows_a_moving_window() {
    // A moving window whose windows go as bursts: each request of the copy takes the slot
    // its rank freed, nothing is left between them, and the sign that more is left than
    // before never shows. The answers state when the oldest request counted ages out: the
    // last window's, by 3 s (rounded up), until its last slot is taken; then the probe's,
    // which opened this window at 1.875 s, by 4 s.
    let mut q = KeyQuota::default();
    open_after_ten_ms_apart(&mut q);
    copy_stating(&mut q, |_| 0, |n| if n < 19 { secs(3) } else { secs(4) });
    assert!(
        q.moving,
        "the reset moved on a second, in 180 ms, with nothing left"
    );

    // A fixed window's answers state one end, whatever the time between them.
    let mut q = KeyQuota::default();
    open_after_ten_ms_apart(&mut q);
    copy_stating(&mut q, |_| 0, |_| secs(3));
    assert!(!q.moving);

    // A fixed window that rolled under our requests states more left first, then its own
    // (later) end. (Fed to this rule alone: the rule that more left than before, yet not the
    // whole quota, is a moving window's, has its own test.)
    let mut q = KeyQuota::default();
    open_after_ten_ms_apart(&mut q);
    let ticket = reserve(&mut q, MS * 1887);
    q.reset_moved(MS * 1888, &ticket, &coarse(0, MS * 1112));
    q.reset_moved(MS * 1898, &ticket, &coarse(19, MS * 2102));
    q.reset_moved(MS * 1908, &ticket, &coarse(18, MS * 2092));
    assert!(!q.moving);
    // Without the roll, the same ends are the moving window's.
    q.reset_moved(MS * 1918, &ticket, &coarse(0, MS * 2082));
    assert!(!q.moving, "more left was stated since the first answer");
    let mut q = KeyQuota::default();
    open_after_ten_ms_apart(&mut q);
    let ticket = reserve(&mut q, MS * 1887);
    q.reset_moved(MS * 1888, &ticket, &coarse(0, MS * 1112));
    q.reset_moved(MS * 1908, &ticket, &coarse(0, MS * 2092));
    assert!(q.moving);
}

#[test]
fn a_refusal_takes_back_a_moving_window_told_by_the_reset_alone() {
    // The reset moved on a second with nothing left, as a moving window's does: and as a
    // sliding window counter's does at its clock's edge. The next request is refused.
    let mut q = KeyQuota::default();
    open_after_ten_ms_apart(&mut q);
    copy_stating(&mut q, |_| 0, |n| if n < 19 { secs(3) } else { secs(4) });
    assert!(q.moving);
    let at = MS * 2300;
    let ticket = match q.try_reserve(at, 1) {
        Admission::Reserved(ticket) => ticket,
        Admission::WaitUntil(t) => reserve(&mut q, t),
    };
    let answered = ticket.sent + MS;
    see(
        &mut q,
        answered,
        ticket,
        true,
        &refused_until(answered, secs(4)),
    );
    assert!(!q.moving, "refused while moving by the reset alone");

    // The sign is not read again for the key: the same answers in the next window leave it
    // as it is.
    let mut r = KeyQuota::default();
    open_after_ten_ms_apart(&mut r);
    r.reset_sign = window::ResetSign::Refuted;
    copy_stating(&mut r, |_| 0, |n| if n < 19 { secs(3) } else { secs(4) });
    assert!(!r.moving);
}

#[test]
fn a_moving_window_opened_early_frees_at_the_pace_the_last_window_went() {
    let mut q = KeyQuota::default();
    open_after_ten_ms_apart(&mut q);
    // The second request of the last window was answered 11 ms after the first went: the
    // second of this one goes 11 ms after the probe's answer, alone again.
    assert_eq!(q.try_reserve(MS * 1877, 1), Admission::WaitUntil(MS * 1887));
    let second = reserve(&mut q, MS * 1887);
    assert_eq!(q.try_reserve(MS * 1887, 1), Admission::WaitUntil(secs(3)));
    // Admitted with more freed: what it states is the budget.
    see(&mut q, MS * 1888, second, false, &coarse(2, MS * 1112));
    reserve(&mut q, MS * 1888);
    reserve(&mut q, MS * 1888);
    assert_eq!(q.budget(), Some(0));
}

#[test]
fn what_is_shared_is_the_current_windows_count_until_its_end_and_the_stated_quota() {
    let mut q = KeyQuota::default();
    let first = reserve(&mut q, Duration::ZERO);
    let second = reserve(&mut q, Duration::ZERO);
    see(
        &mut q,
        MS,
        first,
        false,
        &info(20, 18, secs(2) - MS, Some(secs(2))),
    );
    // 18 left as the server saw it, one of ours still out: 17, until the reset at 2 s.
    assert_eq!(
        q.shared_facts(MS * 5),
        SharedFacts {
            left: Some((17, secs(2) - MS * 5)),
            quota: Some((20, secs(2))),
            silent: false,
        }
    );
    // A window that has ended says nothing about what is left; the quota stays.
    let late = reserve(&mut q, secs(3));
    see(
        &mut q,
        secs(3),
        second,
        false,
        &info(20, 0, MS, Some(secs(2))),
    );
    assert_eq!(q.shared_facts(secs(3)).left, None);
    q.abandon(late);
    // A silent server's estimate is this process's share, not the server's quota: not shared.
    let mut silent_key = KeyQuota::default();
    let ticket = reserve(&mut silent_key, Duration::ZERO);
    see(&mut silent_key, MS, ticket, true, &RateLimitInfo::default());
    assert_eq!(silent_key.shared_facts(MS), SharedFacts::default());
}

/// What an IETF server with 10 per 1 s says (`RateLimit: r;t`, `w=1`): whole seconds.
fn per_second(remaining: u64) -> RateLimitInfo {
    RateLimitInfo {
        grain: Some(secs(1)),
        ..info(10, remaining, secs(1), Some(secs(1)))
    }
}

/// A window's first request at `at`, then a wave of nine, answered at once: the last answer
/// says none is left. (After a roll the first goes alone, and its answer tells the rest.)
fn spend_second(q: &mut KeyQuota, at: Duration) {
    let first = reserve(q, at);
    see(q, at, first, false, &per_second(9));
    let wave: Vec<Ticket> = (0..9).map(|_| reserve(q, at)).collect();
    for (i, ticket) in wave.into_iter().enumerate() {
        see(q, at, ticket, false, &per_second(8 - i as u64));
    }
}

#[test]
fn a_window_rolled_from_a_rounded_up_reset_is_not_taken_to_end_before_a_window_has_passed() {
    // The server's windows end at 0.149 s, 1.149 s, 2.149 s…; its resets come rounded up.
    let mut q = KeyQuota::default();
    spend_second(&mut q, Duration::ZERO);
    // "Reset in 1 s": the key waits until 1 s (by when the window has surely ended).
    assert_eq!(q.try_reserve(MS, 1), Admission::WaitUntil(secs(1)));
    // The next wave goes at 1.193 s, in the window that ends at 2.149 s, and spends it. That
    // window may have begun anywhere after 0.193 s (the first ended by 1 s, maybe a second
    // before): it ends by 2.193 s, as the answers say, and not by 2 s.
    spend_second(&mut q, MS * 1193);
    assert_eq!(q.try_reserve(MS * 1194, 1), Admission::WaitUntil(MS * 2193));
    assert_eq!(q.try_reserve(MS * 2111, 1), Admission::WaitUntil(MS * 2193));
    // At 2.193 s it has ended: a fresh window.
    spend_second(&mut q, MS * 2193);
    assert_eq!(q.try_reserve(MS * 2194, 1), Admission::WaitUntil(MS * 3193));
}

#[test]
fn a_lone_concurrency_quota_is_held_beside_no_governing_one() {
    // The server states only a cap of 2 in flight: no quota governs, the cap still holds.
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "ratelimit-policy",
        r#""conc";q=2;qu="concurrent-requests""#.parse().unwrap(),
    );
    headers.insert("ratelimit", r#""conc";r=1"#.parse().unwrap());
    let stated = RateLimitInfo::from_headers(&headers);
    assert!(stated.governing_policy().is_none());
    let mut q = KeyQuota::new(false);
    let first = reserve(&mut q, MS);
    see(&mut q, MS * 2, first, false, &stated);
    let (a, _b) = (reserve(&mut q, MS * 3), reserve(&mut q, MS * 3));
    assert!(matches!(q.try_reserve(MS * 3, 1), Admission::WaitUntil(_)));
    // One answered: a slot is free.
    see(&mut q, MS * 4, a, false, &stated);
    reserve(&mut q, MS * 4);
}

#[test]
fn an_answer_with_as_many_left_as_an_earlier_one_starts_a_new_window() {
    // The server's windows are whole seconds of its clock: [-0.9, 0.1), [0.1, 1.1)… of ours,
    // and each request reaches it 100 ms after it goes (its answer comes at once).
    let mut q = KeyQuota::default();
    let first = reserve(&mut q, Duration::ZERO);
    // Counted at 0.1 s, the first window's last instant: 9 left, "reset in 1 s" (its 0 s
    // rounded up).
    see(&mut q, MS * 100, first, false, &per_second(9));
    // Eight go on that answer and reach the server in its next window: 9 left again, then 8…
    // The first of them, sent after the answer that said 9, says 9: the window has rolled in
    // between, and ends a second after that request arrived (by its answer), at 1.2 s, not a
    // second after the first request went.
    let wave: Vec<Ticket> = (0..8).map(|_| reserve(&mut q, MS * 100)).collect();
    for (i, ticket) in wave.into_iter().enumerate() {
        see(&mut q, MS * 200, ticket, false, &per_second(9 - i as u64));
    }
    // Two are left in the new window: both go, and the key waits for its end. (Its answers
    // came in order: none came before the one that showed the roll.)
    reserve(&mut q, MS * 200);
    reserve(&mut q, MS * 200);
    assert_eq!(q.try_reserve(MS * 200, 1), Admission::WaitUntil(MS * 1200));
    assert_eq!(q.try_reserve(MS * 1000, 1), Admission::WaitUntil(MS * 1200));
}

#[test]
fn answers_of_a_new_window_that_came_before_the_one_that_showed_its_roll_are_counted_again() {
    // As above, but the server's threads answer out of order: of the eight sent on the answer
    // that said 9, the one that says 8 comes back first, taken for the old window's news; the
    // one that says 9 shows the roll. Counted from it alone, less the six still out, two would
    // be left; the server has one.
    let mut q = KeyQuota::default();
    let first = reserve(&mut q, Duration::ZERO);
    see(&mut q, MS * 100, first, false, &per_second(9));
    let wave: Vec<Ticket> = (0..8).map(|_| reserve(&mut q, MS * 100)).collect();
    see(&mut q, MS * 200, wave[1], false, &per_second(8));
    see(&mut q, MS * 201, wave[0], false, &per_second(9));
    for (i, ticket) in wave.into_iter().enumerate().skip(2) {
        see(&mut q, MS * 202, ticket, false, &per_second(9 - i as u64));
    }
    // The next goes alone (the others wait for it), and its answer says what the server has
    // left: none.
    let alone = reserve(&mut q, MS * 202);
    assert!(matches!(
        q.try_reserve(MS * 202, 1),
        Admission::WaitUntil(t) if t > MS * 202
    ));
    see(&mut q, MS * 210, alone, false, &per_second(0));
    assert!(matches!(
        q.try_reserve(MS * 210, 1),
        Admission::WaitUntil(t) if t >= MS * 1100
    ));
}

#[test]
fn a_quota_refused_inside_a_whole_window_is_never_probed_above_again() {
    let mut q = estimated();
    // The window that began with the probe at 637 ms: three more admitted, the fifth refused.
    admit_silently(&mut q, 3, MS * 640, MS * 641);
    let refused = reserve(&mut q, MS * 650);
    see(&mut q, MS * 651, refused, true, &silent());
    // Four is the most a whole window admitted: the curve climbs back, but never above four,
    // however many windows pass (before, it climbed above the floor and paid a 429 each time).
    for windows in [2u32, 10, 100, 1_000] {
        assert_eq!(
            q.estimate(MS * 651 + MS * 637 * windows).map(|e| e.0),
            Some(4),
            "{windows} windows later"
        );
    }
}

#[test]
fn a_shorter_window_whose_first_request_found_only_part_of_the_quota_free_is_undone() {
    let mut q = estimated();
    admit_silently(&mut q, 4, MS * 640, MS * 641);
    // The next window's first request goes alone at the midpoint (449 ms in) and is let in:
    // the window is taken to be no longer than that.
    let first = reserve(&mut q, MS * 1086);
    see(&mut q, MS * 1087, first, false, &silent());
    assert_eq!(q.estimate(MS * 1087), Some((5, MS * 449)));
    // But only one more is let in, fewer than the last window's five: a bucket refilling, not
    // a window that ended. The estimate goes back to 637 ms, and 449 ms is known too short.
    let second = reserve(&mut q, MS * 1089);
    see(&mut q, MS * 1090, second, false, &silent());
    let refused = reserve(&mut q, MS * 1089);
    see(&mut q, MS * 1091, refused, true, &silent());
    assert_eq!(q.estimate(MS * 1091), Some((5, MS * 637)));
    // The next try is the midpoint of 449 and 637 ms after this window's first request.
    assert_eq!(
        q.try_reserve(MS * 1092, 1),
        Admission::WaitUntil(MS * (1086 + 543))
    );
}

#[test]
fn a_moving_window_frees_its_slots_at_the_pace_its_last_window_went() {
    // 3 per second, a window stated (IETF `w`); the last window's requests went at 0, 10 and
    // 20 ms, each answered a millisecond later.
    let mut q = KeyQuota::default();
    let stated = |left, reset| info(3, left, reset, Some(secs(1)));
    for i in 0..3u32 {
        let ticket = reserve(&mut q, MS * 10 * i);
        let left = 2 - u64::from(i);
        see(
            &mut q,
            MS * (10 * i + 1),
            ticket,
            false,
            &stated(left, secs(1)),
        );
    }
    // The window began by its first answer (1 ms): it ends by 1.001 s. Its first request goes
    // alone, and its answer finds nothing left: the requests of 10 and 20 ms still count.
    let first = reserve(&mut q, MS * 1001);
    see(&mut q, MS * 1002, first, false, &stated(0, MS * 9));
    // A moving window: the next slot frees one window after the second request went, at the
    // last window's pace from this window's first answer (1.002 s + 11 ms), not at a reset.
    assert_eq!(q.try_reserve(MS * 1003, 1), Admission::WaitUntil(MS * 1013));
    let second = reserve(&mut q, MS * 1013);
    see(&mut q, MS * 1014, second, false, &stated(0, MS * 9));
    assert_eq!(q.try_reserve(MS * 1014, 1), Admission::WaitUntil(MS * 1023));
    // Refused at that pace: the quota frees some other way, and the stated reset rules.
    let third = reserve(&mut q, MS * 1023);
    see(&mut q, MS * 1024, third, true, &stated(0, MS * 500));
    assert_eq!(q.refill, Refill::Stated);
    assert!(matches!(q.try_reserve(MS * 1025, 1), Admission::WaitUntil(t) if t >= MS * 1524));
}

#[test]
fn while_nothing_is_known_the_requests_in_flight_start_at_one_and_double_every_step() {
    let mut q = KeyQuota::new(true);
    // The first request goes alone; its answer (stating nothing) starts the slow start.
    let first = reserve(&mut q, Duration::ZERO);
    see(&mut q, MS, first, false, &silent());
    let one = reserve(&mut q, MS);
    // One in flight is the cap for the first step: the next waits for the step's end (an
    // answer wakes it sooner).
    assert_eq!(
        q.try_reserve(MS * 2, 1),
        Admission::WaitUntil(MS + RAMP_STEP)
    );
    see(&mut q, MS * 3, one, false, &silent());
    let _one = reserve(&mut q, MS * 3);
    // Two after one step, four after two.
    let _two = reserve(&mut q, MS + RAMP_STEP);
    assert_eq!(
        q.try_reserve(MS + RAMP_STEP, 1),
        Admission::WaitUntil(MS + RAMP_STEP * 2)
    );
    let _more: Vec<Ticket> = (0..2)
        .map(|_| reserve(&mut q, MS + RAMP_STEP * 2))
        .collect();
    assert_eq!(
        q.try_reserve(MS + RAMP_STEP * 2, 1),
        Admission::WaitUntil(MS + RAMP_STEP * 3)
    );
}

#[test]
fn a_stated_quota_lifts_the_slow_start() {
    let mut q = KeyQuota::new(true);
    let first = reserve(&mut q, Duration::ZERO);
    see(
        &mut q,
        MS,
        first,
        false,
        &info(20, 19, secs(2), Some(secs(2))),
    );
    // The window's first answer said 19 are left: they go at once.
    for _ in 0..19 {
        reserve(&mut q, MS * 2);
    }
}

/// A 429 that states nothing but a wait (a static `Retry-After`, as proxies add).
fn asked_to_wait(wait: Duration) -> RateLimitInfo {
    RateLimitInfo {
        retry_after: Some(wait),
        ..RateLimitInfo::default()
    }
}

#[test]
fn a_refusal_stating_only_a_wait_pauses_that_long_and_measures_the_quota_as_a_bare_one() {
    let mut q = KeyQuota::new(false);
    admit_silently(&mut q, 5, Duration::ZERO, MS);
    let refused = reserve(&mut q, MS * 2);
    // The server's wait is the pause, not the silent model's first 250 ms.
    assert_eq!(
        see(&mut q, MS * 3, refused, true, &asked_to_wait(secs(1))),
        Some(secs(1))
    );
    let probe = reserve(&mut q, MS * 1003);
    see(&mut q, MS * 1004, probe, false, &silent());
    // What was admitted before the refusal is the quota, and the probe bounds the window.
    assert_eq!(q.estimate(MS * 1004), Some((5, MS * 1003)));
}

#[test]
fn a_refusal_before_anything_was_admitted_measures_no_quota() {
    let mut q = KeyQuota::new(true);
    let first = reserve(&mut q, Duration::ZERO);
    assert_eq!(
        see(&mut q, MS, first, true, &asked_to_wait(secs(1))),
        Some(secs(1))
    );
    let probe = reserve(&mut q, MS * 1001);
    see(&mut q, MS * 1002, probe, false, &silent());
    // Not "one request per second": nothing was measured, and the slow start begins again.
    assert_eq!(q.estimate(MS * 1002), None);
    let _one = reserve(&mut q, MS * 1002);
    assert_eq!(
        q.try_reserve(MS * 1002, 1),
        Admission::WaitUntil(MS * 1002 + RAMP_STEP)
    );
}

#[test]
fn a_moving_windows_budget_takes_off_the_answers_that_came_while_a_request_was_out() {
    let mut q = KeyQuota {
        moving: true,
        ..KeyQuota::default()
    };
    let first = reserve(&mut q, Duration::ZERO);
    see(&mut q, MS, first, false, &coarse(19, secs(2) - MS));
    let a = reserve(&mut q, MS * 2);
    let b = reserve(&mut q, MS * 2);
    // The server counted `a` before `b` (17 left after `b`), but `a`'s answer comes last:
    // its 18 left was stated before `b` was counted, and `b` is no longer in flight.
    see(&mut q, MS * 3, b, false, &coarse(17, secs(2) - MS * 3));
    see(&mut q, MS * 4, a, false, &coarse(18, secs(2) - MS * 4));
    assert_eq!(q.budget(), Some(17));
}

#[test]
fn a_spent_moving_window_probes_one_lag_after_its_first_send_not_at_an_older_reset() {
    let mut q = KeyQuota {
        moving: true,
        ..KeyQuota::default()
    };
    // Learned in earlier windows: the quota frees between 2.000 and 2.010 s after a
    // window's first send.
    q.lag.refused(MS * 2000);
    q.lag.freed(MS * 2010);
    // This window's first answer states the reset of the last window's oldest slot (1 s).
    let first = reserve(&mut q, Duration::ZERO);
    see(&mut q, MS, first, false, &coarse(19, secs(1) - MS));
    let rest: Vec<Ticket> = (0..19).map(|_| reserve(&mut q, MS * 2)).collect();
    for (i, ticket) in rest.into_iter().enumerate() {
        let left = 18 - i as u64;
        // Spent: the oldest slot is now this window's first, freeing by 3 s (rounded up).
        let reset = if left == 0 { secs(3) } else { secs(1) };
        see(&mut q, MS * 3, ticket, false, &coarse(left, reset - MS * 3));
    }
    // One request probes at the lag after the window's first send, alone; the others wait
    // for its answer or the stated reset.
    assert_eq!(q.try_reserve(MS * 4, 1), Admission::WaitUntil(MS * 2010));
    reserve(&mut q, MS * 2010);
    assert_eq!(q.try_reserve(MS * 2010, 1), Admission::WaitUntil(secs(3)));
}

/// Five admitted from 0 ms, the sixth refused (answered with `refusal`), a probe admitted at
/// 1010 ms (a window of 1010 ms), then windows begun at the midpoints tried, each admitted:
/// at 1520 ms (510 ms after the last) and at 1780 ms (260 ms). The third request of that
/// window is refused (answered with `refusal`); returns the window then estimated.
fn trials_then_refused(refusal: &RateLimitInfo) -> Duration {
    let mut q = KeyQuota::new(false);
    admit_silently(&mut q, 5, Duration::ZERO, MS);
    let refused = reserve(&mut q, MS * 10);
    see(&mut q, MS * 10, refused, true, refusal);
    admit_silently(&mut q, 5, MS * 1010, MS * 1011);
    assert_eq!(q.estimate(MS * 1011).map(|(_, w)| w), Some(MS * 1010));
    admit_silently(&mut q, 5, MS * 1520, MS * 1521);
    assert_eq!(q.estimate(MS * 1521).map(|(_, w)| w), Some(MS * 510));
    admit_silently(&mut q, 2, MS * 1780, MS * 1781);
    assert_eq!(q.estimate(MS * 1781).map(|(_, w)| w), Some(MS * 260));
    let refused = reserve(&mut q, MS * 1782);
    see(&mut q, MS * 1783, refused, true, refusal);
    let (quota, window) = q.estimate(MS * 1783).expect("an estimate");
    assert!(
        quota >= 5,
        "the quota was enough at the longer window: {quota}"
    );
    window
}

#[test]
fn a_refusal_after_a_rest_the_server_asked_undoes_every_trial_since() {
    // A static `Retry-After` longer than the model's pause: the bucket rested, and its credit
    // let both shorter windows through. Both are undone: the window before the first.
    assert_eq!(trials_then_refused(&asked_to_wait(secs(1))), MS * 1010);
    // A bare 429 (the model's own pause, no rest): only the trial this window began with.
    assert_eq!(trials_then_refused(&silent()), MS * 510);
}

#[test]
fn a_moving_windows_copy_carries_no_round_trip_and_no_late_timer_into_the_next_window() {
    let sent = |serial: u64, at: u64, due: u64, answered: u64, alone: bool| Sent {
        serial,
        at: Duration::from_millis(at),
        due: Duration::from_millis(due),
        answered: Duration::from_millis(answered),
        alone,
    };
    // The last window: its first alone at 0 (answered 2 ms later), a second beside others
    // at 1 ms (answered at 5 ms: the server's threads may have counted it that late), a
    // third alone, due at 40 ms and sent at 41 ms (its timer woke late), answered at 43 ms.
    // This window's first went alone at 2 s.
    let mut q = KeyQuota {
        moving: true,
        previous_sends: vec![
            sent(0, 0, 0, 2, true),
            sent(1, 1, 1, 5, false),
            sent(2, 41, 40, 43, true),
        ],
        sends: vec![sent(3, 2000, 2000, 2002, true)],
        ..KeyQuota::default()
    };
    // The second goes by the answer to the last window's second; the third when the last
    // window's third was due, one lag later: neither round trip nor the late timer.
    assert_eq!(q.mirrored(), Some(Duration::from_millis(2005)));
    q.sends.push(sent(4, 2005, 2005, 2008, false));
    assert_eq!(q.mirrored(), Some(Duration::from_millis(2040)));
    q.sends.push(sent(5, 2041, 2040, 2043, true));
    // Window after window, each request sent alone 1 ms late and answered 2 ms after: the
    // third's place in its window stays 40 ms after the first.
    for window in 2..32u64 {
        q.previous_sends = std::mem::take(&mut q.sends);
        let start = 2000 * window;
        q.sends = vec![sent(10 * window, start, start, start + 2, true)];
        let second = q.mirrored().expect("the last window had a second");
        let second = u64::try_from(second.as_millis()).expect("small");
        q.sends
            .push(sent(10 * window + 1, second, second, second + 3, false));
        let third = q.mirrored().expect("the last window had a third");
        assert_eq!(third, Duration::from_millis(start + 40), "window {window}");
        let due = start + 40;
        q.sends
            .push(sent(10 * window + 2, due + 1, due, due + 3, true));
    }
    // Until the window is known to move, each request is taken as counted by its answer.
    q.moving = false;
    q.sends.truncate(2);
    let start = 2000 * 31;
    assert_eq!(q.mirrored(), Some(Duration::from_millis(start + 2 + 43)));
}

#[test]
fn a_moving_window_ends_one_lag_after_its_first_send_not_at_a_reset_stated_mid_window() {
    let mut q = KeyQuota::default();
    // The probe at 1.875 s opens the next window, which is known to move (how that is
    // recognised is `a_moving_window_opened_early_frees_at_the_pace_the_last_window_went`'s).
    open_after_ten_ms_apart(&mut q);
    let second = reserve(&mut q, MS * 1887);
    see(&mut q, MS * 1888, second, false, &coarse(2, MS * 1112));
    q.moving = true;
    let rest = [reserve(&mut q, MS * 1888), reserve(&mut q, MS * 1888)];
    // Their answers find the window spent until 2 s: when the last window's next slot
    // frees, rounded up to the second. This window began with the probe, which freed 1.876 s
    // after the last window's first send: it ends no sooner than 3.751 s.
    see(&mut q, MS * 1889, rest[0], false, &coarse(0, MS * 111));
    see(&mut q, MS * 1890, rest[1], false, &coarse(0, MS * 110));
    assert_eq!(q.reset_at, Some(MS * 3751));
    // Past that second, the window does not roll with a whole quota: the copy's next request
    // goes alone, and the others wait for what its answer says.
    reserve(&mut q, MS * 2001);
    assert_eq!(q.budget(), Some(0));
}

/// Drives `q` against `server` (admitted or not at an instant) until `until`, one request at a time, each answered 2 ms after
/// it went (stating nothing); returns when each went and whether it was admitted.
fn drive_silently(
    q: &mut KeyQuota,
    server: &mut dyn FnMut(Duration) -> bool,
    until: Duration,
) -> Vec<(Duration, bool)> {
    drive(q, server, until, &silent())
}

/// [`drive_silently`], each refusal saying `refusal` (a `Retry-After`, say).
fn drive(
    q: &mut KeyQuota,
    server: &mut dyn FnMut(Duration) -> bool,
    until: Duration,
    refusal: &RateLimitInfo,
) -> Vec<(Duration, bool)> {
    let mut now = Duration::ZERO;
    let mut sent = Vec::new();
    while now < until {
        match q.try_reserve(now, 1) {
            Admission::WaitUntil(at) => now = at.max(now + MS / 10),
            Admission::Reserved(ticket) => {
                let admitted = server(now);
                sent.push((now, admitted));
                now += 2 * MS;
                let said = if admitted { silent() } else { refusal.clone() };
                see(q, now, ticket, !admitted, &said);
            }
        }
    }
    sent
}

/// The refusals of a driven job, those of its second half (from 30 s), and its admissions in
/// the second half.
fn tally(sent: &[(Duration, bool)]) -> (usize, usize, usize) {
    let late = |ok: bool| {
        sent.iter()
            .filter(|(at, o)| *at >= secs(30) && *o == ok)
            .count()
    };
    let refused = sent.iter().filter(|(_, ok)| !ok).count();
    (refused, late(false), late(true))
}

#[test]
fn a_silent_bucket_with_a_burst_is_paced_at_its_rate_once_the_burst_is_spent() {
    let mut q = KeyQuota::new(true);
    let mut bucket = TestBucket::new(13.0, 6.0);
    let sent = drive_silently(&mut q, &mut |now| bucket.take(now), secs(60));
    let silence = q.silence.as_deref().expect("a silent model");
    assert!(silence.rate.is_some(), "handed over to the rate model");
    assert!(silence.settled(), "the rate's bounds met");
    let (refused, late, admitted_late) = tally(&sent);
    // Measured (no jitter here): 5 refusals, none in the second half, 389 admitted in it.
    assert!(refused <= 7, "{refused} refusals in 60 s");
    assert_eq!(late, 0, "refusals in the second half");
    // 30 s at 13 a second is 390.
    assert!(
        admitted_late >= 380,
        "{admitted_late} admitted in the second half"
    );
}

#[test]
fn a_limiter_that_counts_refused_requests_refutes_the_rate_and_the_windows_resume() {
    let mut q = KeyQuota::new(true);
    let mut bucket = TestBucket::new(10.0, 20.0).counting_refused();
    let sent = drive_silently(&mut q, &mut |now| bucket.take(now), secs(60));
    let silence = q.silence.as_deref().expect("a silent model");
    assert!(
        silence.bucket == silent::Bucket::HandedBack,
        "the rate model was refuted by a refusal"
    );
    assert!(silence.rate.is_none(), "and not taken up again");
    let (refused, late, admitted_late) = tally(&sent);
    // Measured (no jitter here): 12 refusals, 1 in the second half, 295 admitted in it (10 a
    // second would be 300).
    assert!(refused <= 12, "{refused} refusals in 60 s");
    assert!(late <= 1, "{late} refusals in the second half");
    assert!(
        admitted_late >= 285,
        "{admitted_late} admitted in the second half"
    );
}

#[test]
fn a_rate_with_no_burst_behind_a_retry_after_is_tried_just_over_a_round_interval_then_under() {
    // A bucket of one request refilled at `per_second`, answering its 429s with
    // `Retry-After: 1`, driven for a minute: its refusals, those of the second half, and its
    // admissions there.
    let job = |per_second: f64| {
        let mut q = KeyQuota::new(true);
        let mut bucket = TestBucket::new(per_second, 1.0);
        let sent = drive(
            &mut q,
            &mut |now| bucket.take(now),
            secs(60),
            &asked_to_wait(secs(1)),
        );
        tally(&sent)
    };
    // nginx's `limit_req` at 2 r/s with no burst: each refusal costs a second. The midpoints
    // from the window the pause measured (a second) fell under 500 ms one after another; a
    // trial a 128th over 500 ms, then a 128th under, knows the interval to a sixty-fourth at
    // one refusal. Measured: 2 refusals (the second request, then the trial under 500 ms),
    // none late, 60 admitted late (6 refusals before).
    let (refused, late, admitted_late) = job(2.0);
    assert!(refused <= 2, "{refused} refusals in 60 s");
    assert_eq!(late, 0, "refusals in the second half");
    // 30 s at 2 a second is 60; at 504 ms, 59.
    assert!(admitted_late >= 59, "{admitted_late} admitted late");
    // 150 a minute (400 ms), no round interval by the second, is a round count a minute:
    // tried over and under too once the bounds hold it (250 and 333 ms refused on the way).
    // Measured: 4 refusals, none late, 74 admitted late (with the intervals by the second
    // only, searched by midpoints: 5).
    let (refused, late, admitted_late) = job(2.5);
    assert!(refused <= 4, "{refused} refusals in 60 s");
    assert_eq!(late, 0, "refusals in the second half");
    assert!(admitted_late >= 74, "{admitted_late} admitted late");
}

#[test]
fn a_silent_sliding_counter_on_the_clock_is_never_taken_for_a_bucket() {
    // 20 per 2 s, counted in windows on the clock, the last one weighed by how much of it
    // the sliding window still covers: its later windows admit less than its first, as a
    // bucket's do, but its refusals bound no one rate.
    let mut q = KeyQuota::new(true);
    let mut counter = sliding_counter(20, Duration::from_secs(2), false);
    drive_silently(&mut q, &mut counter, secs(60));
    let silence = q.silence.as_deref().expect("a silent model");
    assert!(
        silence.rate.is_none() && silence.bucket != silent::Bucket::HandedBack,
        "never handed over"
    );
}

#[test]
fn a_silent_counter_that_counts_refused_requests_is_paced_evenly_close_to_its_limit() {
    let mut q = KeyQuota::new(true);
    let mut counter = sliding_counter(20, Duration::from_secs(2), true);
    let sent = drive_silently(&mut q, &mut counter, secs(60));
    let silence = q.silence.as_deref().expect("a silent model");
    assert!(silence.pace.is_some(), "handed over to the even pace");
    assert!(silence.rate.is_none(), "not taken for a bucket");
    assert!(silence.settled(), "the pace's search has ended");
    let (refused, late, admitted_late) = tally(&sent);
    // Measured (no jitter here): 11 refusals, 2 in the second half, 277 admitted in it. 30 s
    // at the limit is 300; at one a window fewer, which a counter's rounding lets through
    // every time, 285.
    assert!(refused <= 12, "{refused} refusals in 60 s");
    assert!(late <= 2, "{late} refusals in the second half");
    assert!(
        admitted_late >= 270,
        "{admitted_late} admitted in the second half"
    );
}

/// Answers `tickets` at `now`, in order, each stating one fewer left than the last (`left`
/// for the first), the window ending at `end` (a Unix second).
fn answer_counting_down(
    q: &mut KeyQuota,
    now: Duration,
    tickets: Vec<Ticket>,
    left: u64,
    end: Duration,
) {
    for (i, ticket) in tickets.into_iter().enumerate() {
        see(q, now, ticket, false, &coarse(left - i as u64, end - now));
    }
}

#[test]
fn an_early_probe_that_takes_the_windows_last_unit_is_not_the_window_freed() {
    // 20 per 1 s on the clock's seconds, the reset stated as a Unix time. The key's first
    // request goes 10 ms before the second 1 s.
    let mut q = KeyQuota::default();
    let first = reserve(&mut q, MS * 990);
    see(&mut q, MS * 991, first, false, &coarse(19, MS * 9));
    let old = reserve(&mut q, MS * 998);
    let straddling: Vec<Ticket> = (0..2).map(|_| reserve(&mut q, MS * 998)).collect();
    see(&mut q, MS * 999, old, false, &coarse(18, MS));
    // The window rolls at 1 s with two requests on their way: the server counts them in the
    // new one (19, then 18 left), and the request sent after the roll (17 left) is answered
    // before the second of them. Net of that one, still in flight, the budget is 16, one short
    // of what the server has.
    let after = reserve(&mut q, secs(1));
    see(
        &mut q,
        secs(1) + MS,
        straddling[0],
        false,
        &coarse(19, MS * 999),
    );
    see(&mut q, secs(1) + MS, after, false, &coarse(17, MS * 999));
    see(
        &mut q,
        secs(1) + MS,
        straddling[1],
        false,
        &coarse(18, MS * 999),
    );
    let rest: Vec<Ticket> = std::iter::from_fn(|| match q.try_reserve(secs(1) + MS * 2, 1) {
        Admission::Reserved(ticket) => Some(ticket),
        Admission::WaitUntil(_) => None,
    })
    .collect();
    assert_eq!(rest.len(), 16);
    answer_counting_down(&mut q, secs(1) + MS * 3, rest, 16, secs(2));
    // The early probe goes before the stated second and takes that unit: none left, the same
    // reset. The window has not freed: nothing more goes before its stated end.
    let probe = match q.try_reserve(secs(1) + MS * 4, 1) {
        Admission::Reserved(ticket) => ticket,
        Admission::WaitUntil(t) => reserve(&mut q, t),
    };
    assert!(probe.sent < secs(2), "an early probe, at {:?}", probe.sent);
    let now = probe.sent + MS;
    see(&mut q, now, probe, false, &coarse(0, secs(2) - now));
    assert_eq!(q.try_reserve(now, 1), Admission::WaitUntil(secs(2)));
    // The next window, spent at once from 2 s: its probe goes at its stated end, where this
    // one found the quota freed (the probe that took the last unit does not place the phase
    // earlier).
    let first = reserve(&mut q, secs(2));
    see(&mut q, secs(2) + MS, first, false, &coarse(19, MS * 999));
    let rest: Vec<Ticket> = (0..19).map(|_| reserve(&mut q, secs(2) + MS)).collect();
    answer_counting_down(&mut q, secs(2) + MS * 2, rest, 18, secs(3));
    match q.try_reserve(secs(2) + MS * 3, 1) {
        Admission::WaitUntil(at) => assert!(
            at >= secs(3) - MS * 125 && at <= secs(3),
            "the next window probed at {at:?}, its end at 3 s"
        ),
        Admission::Reserved(_) => panic!("the window is spent"),
    }
}

#[test]
fn the_first_answer_of_a_rolled_window_does_not_raise_what_the_roll_left() {
    // 20 per 1 s on the clock's seconds. The key's first request, 2 ms before the second,
    // finds 19 left; six more go just before the second, and one at it, when the window
    // rolls (the six are taken off: they may be counted in the new window).
    let mut q = KeyQuota::default();
    let first = reserve(&mut q, MS * 998);
    see(&mut q, MS * 999, first, false, &coarse(19, MS));
    let out: Vec<Ticket> = (0..6).map(|_| reserve(&mut q, MS * 999)).collect();
    let rolled = reserve(&mut q, secs(1));
    // The first of the six is counted in the old window (18 left); the server counts the one
    // sent at the roll first in the new window (19 left), the second of the six next (18
    // left), and answers that one first.
    see(&mut q, secs(1), out[0], false, &coarse(18, MS));
    see(&mut q, secs(1) + MS, out[1], false, &coarse(18, MS * 999));
    see(
        &mut q,
        secs(1) + MS * 2,
        rolled,
        false,
        &coarse(19, MS * 998),
    );
    // The server has 18 left, four of ours still on their way to be counted: 14 may go, not
    // the 15 that the answer to the request sent at the roll alone would leave.
    let budget = q.budget().expect("a stated quota");
    assert!(budget <= 14, "{budget} may go, the server has 14 for us");
}

#[test]
fn a_bucket_s_rate_is_bounded_counting_the_requests_still_out_as_admitted() {
    // Five admitted from 0 ms, the sixth refused at 10 ms (the anchor), and the probe at
    // 261 ms admitted: five per 261 ms. The window it began goes on at 262 ms with four more,
    // and the last of them is refused while two sent before it are still out: a bucket may
    // have let those in, so its rate is at most five (the probe, one more admitted, the two
    // out, the fraction it held) over the 252 ms since the anchor.
    let mut q = KeyQuota::new(false);
    admit_silently(&mut q, 5, Duration::ZERO, MS);
    let refused = reserve(&mut q, MS * 10);
    see(&mut q, MS * 11, refused, true, &silent());
    let probe = reserve(&mut q, MS * 261);
    see(&mut q, MS * 262, probe, false, &silent());
    let sent = MS * 262;
    let first = reserve(&mut q, sent);
    let out = [reserve(&mut q, sent), reserve(&mut q, sent)];
    let refused = reserve(&mut q, sent);
    see(&mut q, MS * 263, first, false, &silent());
    see(&mut q, MS * 264, refused, true, &silent());
    let (_, hi) = q.silence.as_deref().expect("silent").bucket_bounds();
    assert!((hi - 5.0 / 0.252).abs() < 1e-9, "at most {hi} a second");
    for ticket in out {
        see(&mut q, MS * 265, ticket, false, &silent());
    }
}

#[test]
fn a_long_window_refused_at_its_estimated_end_is_probed_again_a_sixteenth_of_it_later() {
    // A fixed window of 60 per 10 s on the clock, its edges 0.6 s before every tenth second. Our
    // window starts drift against its edges, so an estimate settles short of 10 s and its end
    // is refused now and then. The window is then measured again: its first probe goes a
    // sixteenth of the estimate later (about 550 ms), not the 250 ms a window never measured
    // starts from, which drew refusals 252, 377 and 564 ms apart here (four probes
    // refused in the 1.5 s to the edge on the grid's 60 per 10 s).
    let mut q = KeyQuota::new(true);
    let mut counts = std::collections::HashMap::<u128, u32>::new();
    let sent = drive_silently(
        &mut q,
        &mut |now| {
            let count = counts.entry((now.as_millis() + 600) / 10_000).or_default();
            *count += 1;
            *count <= 60
        },
        secs(120),
    );
    let refused: Vec<Duration> = sent
        .iter()
        .filter(|(at, ok)| !ok && *at >= secs(15))
        .map(|(at, _)| *at)
        .collect();
    assert!(
        refused.len() >= 2,
        "the drift this test is about did not happen: {refused:?}"
    );
    let apart: Vec<Duration> = refused.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        apart.iter().all(|gap| *gap >= MS * 500),
        "refusals from 15 s on, apart by {apart:?}"
    );
}

#[test]
fn a_silent_window_between_round_offsets_is_tried_at_the_round_window_there() {
    // A silent fixed window of 5 per 2.5 s from the first request after the last one ended,
    // counting refused requests too (express-rate-limit's). 2.5 s is no round offset: the
    // first window's probe is admitted just after 3 s, and a 64th under 3 s is admitted too.
    // The round window between the bounds, 2.5 s, is tried a 128th over, then a 64th under
    // (refused), where the parent's midpoints kept windows of 2.60 s, then 2.54 s.
    let mut q = KeyQuota::new(false);
    let mut window = (Duration::ZERO, 0u64);
    let sent = drive_silently(
        &mut q,
        &mut |now| {
            if window.1 == 0 || now >= window.0 + MS * 2_500 {
                window = (now, 0);
            }
            window.1 += 1;
            window.1 <= 5
        },
        secs(40),
    );
    let refused = sent.iter().filter(|(_, ok)| !ok).count();
    // Each window's first request: the first admitted after a gap of more than a second.
    let starts: Vec<Duration> = sent
        .windows(2)
        .filter(|w| w[1].1 && w[1].0 - w[0].0 > secs(1))
        .map(|w| w[1].0)
        .collect();
    let windows: Vec<Duration> = starts.windows(2).map(|s| s[1] - s[0]).collect();
    // The burst's refusal, the probes at 0.26, 0.64, 1, 1.5 and 2 s, the 6th of the window
    // tried a 128th over 2.5 s (the quota's curve probing above 5), the trial under it, and,
    // once the search has settled, the trial of a window of 1 s that each refusal begins
    // again (the probe at 3 s went a second after the refusal at 2 s, the longest refused
    // gap was half that; see `Silence::restart_reading`).
    assert!(refused <= 9, "{refused} refusals: {sent:?}");
    // From the window after the trial under 2.5 s on, each is a 128th over it: the parent's
    // midpoints kept 2.60 s for six windows, then 2.54 s.
    let late: Vec<Duration> = windows.iter().skip(3).copied().collect();
    assert!(
        !late.is_empty() && late.iter().all(|w| *w >= MS * 2_500 && *w <= MS * 2_525),
        "windows {windows:?}"
    );
}

#[test]
fn a_fast_rate_with_no_burst_behind_a_long_pause_is_searched_to_a_sixteenth() {
    // nginx's `limit_req` at 12 r/s with no burst (83.3 ms), answering its 429s with
    // `Retry-After: 2`: each refusal costs 2 s, 24 requests' worth. Each request reaches it
    // 0-3 ms after it went (the network's jitter, a timer's tick), so a trial within a few
    // milliseconds of the edge is refused or not by chance. Searched to a sixteenth: 4
    // refusals in each of 8 jitter draws, 342-343 admitted in the second half; to a
    // thirty-second (the parent): 5 in each, 342-343.
    for seed in 0..8u32 {
        let mut q = KeyQuota::new(true);
        let mut bucket = TestBucket::new(12.0, 1.0);
        let mut draws = seed;
        let sent = drive(
            &mut q,
            &mut |now| {
                draws = draws.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                bucket.take(now + Duration::from_micros(u64::from(draws >> 16) % 3_000))
            },
            secs(60),
            &asked_to_wait(secs(2)),
        );
        let (refused, late, admitted_late) = tally(&sent);
        assert!(refused <= 4, "draw {seed}: {refused} refusals in 60 s");
        assert_eq!(late, 0, "draw {seed}: refusals in the second half");
        // 30 s at 12 a second is 360; at the sixteenth's edge (88.5 ms), 339.
        assert!(
            admitted_late >= 339,
            "draw {seed}: {admitted_late} admitted late"
        );
    }
}

#[test]
fn an_early_probe_answered_after_the_stated_reset_rolled_copies_the_last_window() {
    // A moving window opened by an early probe at 1.875 s; its copy states the probe's end
    // by 4 s. The next early probe goes at 3.995 s, and the key rolls at the stated 4 s
    // before its answer comes.
    let mut q = KeyQuota::default();
    open_after_ten_ms_apart(&mut q);
    copy_stating(&mut q, |_| 0, |n| if n < 19 { secs(3) } else { secs(4) });
    assert!(q.moving);
    let Admission::WaitUntil(early) = q.try_reserve(MS * 2100, 1) else {
        panic!("the key is closed until the stated reset");
    };
    assert!(early < MS * 3995);
    let probe = reserve(&mut q, MS * 3995);
    q.roll(secs(4));
    // Admitted with none left: the probe took the slot its window's first request freed,
    // and the rest of that window frees as its requests age out.
    see(&mut q, MS * 4010, probe, false, &coarse(0, MS * 990));
    // The last window is still the one the copy follows: its second request went 12 ms after
    // its first, so this window's second goes within a few tens of milliseconds, not one
    // moving lag (about a second) after the probe, which found the window half freed and
    // split it in two.
    let next = match q.try_reserve(MS * 4010, 1) {
        Admission::Reserved(_) => MS * 4010,
        Admission::WaitUntil(t) => t,
    };
    assert!(next <= MS * 4050, "the second request waits until {next:?}");
    assert_eq!(q.previous_sends.len(), 20);
}

/// A quota of 4 per 2 s stated in whole seconds (`w=2`), whose windows begin with their first
/// request: a first window at 0, then one our roll begins at 2.001 s, three of its four spent,
/// all answered. Its answers bound the window's length between 1 and 2 s (the `span` module).
fn three_of_a_rounded_window_spent() -> (KeyQuota, Duration) {
    let stated = |left: u64| RateLimitInfo {
        grain: Some(secs(1)),
        ..info(4, left, secs(2), Some(secs(2)))
    };
    let mut q = KeyQuota::default();
    for k in 0..4u32 {
        let ticket = reserve(&mut q, MS * k);
        see(
            &mut q,
            MS * (k + 1),
            ticket,
            false,
            &stated(u64::from(3 - k)),
        );
    }
    let Admission::WaitUntil(start) = q.try_reserve(MS * 10, 1) else {
        panic!("the first window is spent");
    };
    for k in 0..3u32 {
        let ticket = reserve(&mut q, start + MS * k);
        see(
            &mut q,
            start + MS * (k + 1),
            ticket,
            false,
            &stated(u64::from(3 - k)),
        );
    }
    (q, start + MS * 5)
}

#[test]
fn a_windows_last_unit_is_held_to_bound_its_length_only_while_others_wait_for_its_end() {
    let demand = |behind| Demand {
        requests: 1,
        bytes: 0,
        behind,
    };
    // Others queued behind it: the last unit waits until a grain before the bounds' midpoint
    // (about 1.5 s after the window's first request), so that its answer halves them; the
    // others would wait for the window's end anyway.
    let (mut q, now) = three_of_a_rounded_window_spent();
    match q.reserve(now, demand(3)) {
        Admission::WaitUntil(at) => assert!(at > now + MS * 400, "held until {at:?}"),
        Admission::Reserved(_) => panic!("the last unit went with others waiting behind it"),
    }
    // Others on their way (about to queue again): held as well.
    let (mut q, now) = three_of_a_rounded_window_spent();
    q.out.push_back((99, now));
    assert!(matches!(q.reserve(now, demand(0)), Admission::WaitUntil(_)));
    // Alone (a job's last request, an SDK's lone call): it goes.
    let (mut q, now) = three_of_a_rounded_window_spent();
    assert!(matches!(q.reserve(now, demand(0)), Admission::Reserved(_)));
}
