//! A server that states its quota: the budget a window refills, the gate a refusal or an
//! empty window closes, the windows rolled at the stated reset, resets in whole seconds (the
//! phase probed before them) and windows stated rounded up (the `span` module's bounds).

use super::*;

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
fn a_whole_second_reset_is_probed_before_even_beside_a_finer_retry_after() {
    // rate-limiter-flexible's README headers, on every answer: the reset as a Unix time
    // (whole seconds, rounded up) and a `Retry-After` with a fraction of a second. The reset
    // is still rounded: one request probes before it, as without the `Retry-After` (waiting
    // for the stated second cost a third of the quota's time: windows of 2 s every 3 s).
    let fine_wait = |remaining: u64, reset: Duration| RateLimitInfo {
        retry_after: Some(reset - MS * 300),
        grain: None,
        ..coarse(remaining, reset)
    };
    let mut q = KeyQuota::default();
    let first = reserve(&mut q, Duration::ZERO);
    see(&mut q, MS, first, false, &fine_wait(19, secs(2) - MS));
    let rest: Vec<Ticket> = (0..19).map(|_| reserve(&mut q, MS * 2)).collect();
    for (i, ticket) in rest.into_iter().enumerate() {
        let left = 18 - i as u64;
        see(
            &mut q,
            MS * 3,
            ticket,
            false,
            &fine_wait(left, secs(2) - MS * 3),
        );
    }
    assert_eq!(q.try_reserve(MS * 4, 1), Admission::WaitUntil(MS * 1875));
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
    // 18 left as the server saw it, one of ours sent after it still out: 17, until the reset
    // at 2 s.
    assert_eq!(
        q.shared_facts(MS * 5, Some(18), first),
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
    assert_eq!(q.shared_facts(secs(3), Some(0), second).left, None);
    q.abandon(late);
    // A silent server's estimate is this process's share, not the server's quota: not shared.
    let mut silent_key = KeyQuota::default();
    let ticket = reserve(&mut silent_key, Duration::ZERO);
    see(&mut silent_key, MS, ticket, true, &RateLimitInfo::default());
    assert_eq!(
        silent_key.shared_facts(MS, None, ticket),
        SharedFacts::default()
    );
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

/// A quota of 4 per 2 s stated in whole seconds (`w=2`), whose windows begin with their first
/// request: a first window at 0, then one our roll begins at 2.001 s, three of its four spent,
/// all answered. Its answers bound the window's length between 1 and 2 s (the `span` module).
fn three_of_a_rounded_window_spent() -> (KeyQuota, Duration) {
    let stated = |left: u64| RateLimitInfo {
        grain: Some(secs(1)),
        reset_grain: Some(secs(1)),
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

/// A window of 20 per 2 s that begins with its first request, spent by four processes: this
/// one began the first window at 0, and the others begin the second 60 ms after this one's
/// roll at 2 s. Its first answer after the roll counts the whole quota spent, one request of
/// it ours; returns when its next request may go.
fn fleet_window_after_roll(with_others: bool) -> Admission {
    let mut q = KeyQuota::default();
    q.counted_with_others(with_others);
    let first = reserve(&mut q, Duration::ZERO);
    see(
        &mut q,
        MS,
        first,
        false,
        &info(20, 19, secs(2), Some(secs(2))),
    );
    let rest: Vec<Ticket> = (0..4).map(|_| reserve(&mut q, MS * 2)).collect();
    for (i, ticket) in rest.into_iter().enumerate() {
        see(
            &mut q,
            MS * 3,
            ticket,
            false,
            &info(20, 3 - i as u64, secs(2), Some(secs(2))),
        );
    }
    // The window's count spent: the roll at its end (2 s as this process's answers put it).
    assert_eq!(q.try_reserve(MS * 4, 1), Admission::WaitUntil(MS * 2001));
    // The other processes' requests began the server's second window at 2.06 s; this one's,
    // sent at 2.07 s, is its last slot, which ends at 4.06 s (stated as 2 s, rounded up).
    let ours = reserve(&mut q, MS * 2070);
    see(
        &mut q,
        MS * 2071,
        ours,
        false,
        &info(20, 0, secs(2), Some(secs(2))),
    );
    q.try_reserve(MS * 2072, 1)
}

#[test]
fn with_other_processes_a_roll_s_first_answer_counting_theirs_keeps_the_stated_end() {
    // Alone, more counted than this process sent reads as a sliding log's leftovers: a slot
    // frees a window after the request that spent it, and the next request goes at 2.074 s,
    // long before the server's end at 4.06 s (refused).
    assert_eq!(
        fleet_window_after_roll(false),
        Admission::WaitUntil(MS * 2074)
    );
    // Where other processes spend too, their requests made that count: the window is
    // bounded by its answer (2.071 s plus the window), after the server's end.
    assert_eq!(
        fleet_window_after_roll(true),
        Admission::WaitUntil(MS * 4071)
    );
}
