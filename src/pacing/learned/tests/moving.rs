//! A moving window (sliding log) told by its answers: a reset that moves on within a window,
//! its slots freed one window after the requests that spent them, and the copy of the last
//! window's send times that paces the next.

use super::*;

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
