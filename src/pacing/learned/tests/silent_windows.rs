//! A server that states nothing (or only a `Retry-After`): the silent window model's probes
//! and their round offsets, the search over the window's bounds, round windows and round
//! intervals tried first, and the quota's floor and ceiling.

use super::*;

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
fn probe_pauses_grow_by_half_back_to_round_offsets_up_to_thirty_seconds_then_on_if_refused_there() {
    let mut q = KeyQuota::new(false);
    let ticket = reserve(&mut q, Duration::ZERO);
    let mut pause = see(&mut q, MS, ticket, true, &silent()).unwrap();
    let mut now = MS + pause;
    let mut sent = vec![now];
    for _ in 0..24 {
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
    // Every pause 30 s at most, until a probe sent 30 s after a refusal is refused too (the
    // one at 90.2 s): then each half again the one before, up to ten minutes.
    let pauses: Vec<Duration> = sent.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(pauses[..14].iter().all(|&p| p <= secs(30)), "{pauses:?}");
    assert_eq!(&pauses[12..14], &[secs(30), secs(30)]);
    let ms = Duration::from_micros;
    assert_eq!(
        &pauses[14..],
        &[
            secs(45),
            ms(67_500_000),
            ms(101_250_000),
            ms(151_875_000),
            ms(227_812_500),
            ms(341_718_750),
            ms(512_578_125),
            secs(600),
            secs(600),
            secs(600),
        ]
    );
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
