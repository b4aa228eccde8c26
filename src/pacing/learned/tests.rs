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

fn reserve(q: &mut KeyQuota, now: Duration) -> u64 {
    match q.try_reserve(now, 1) {
        Admission::Reserved { epoch } => epoch,
        Admission::WaitUntil(t) => {
            panic!("expected a reservation at {now:?}, told to wait until {t:?}")
        }
    }
}

#[test]
fn stated_quota_is_adopted_as_a_budget_that_refills_each_window() {
    let mut q = KeyQuota::default();
    let epoch = reserve(&mut q, Duration::ZERO);
    q.observe(
        Duration::ZERO,
        epoch,
        false,
        &info(20, 19, secs(2), Some(secs(2))),
    );
    for i in 0..19 {
        reserve(&mut q, MS * i);
    }
    assert_eq!(q.try_reserve(MS * 20, 1), Admission::WaitUntil(secs(2)));
    // The window rolls at the stated reset: the full quota again, and the next reset known.
    for _ in 0..20 {
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
    let epochs: Vec<u64> = (0..10).map(|_| reserve(&mut q, Duration::ZERO)).collect();
    // One response says 15 left; nine others are still out and may not be counted yet.
    q.observe(MS, epochs[0], false, &info(20, 15, secs(2), None));
    assert_eq!(q.budget(), Some(6));
    // Later news can only lower the estimate: our reservations are already taken off.
    q.observe(MS, epochs[1], false, &info(20, 17, secs(2), None));
    assert_eq!(q.budget(), Some(6));
    q.observe(MS, epochs[2], false, &info(20, 3, secs(2), None));
    assert_eq!(q.budget(), Some(3));
}

#[test]
fn reservations_spend_the_budget_before_responses_come_back() {
    let mut q = KeyQuota::default();
    let epoch = reserve(&mut q, Duration::ZERO);
    q.observe(Duration::ZERO, epoch, false, &info(5, 3, secs(1), None));
    for _ in 0..3 {
        reserve(&mut q, MS);
    }
    // Three requests in flight, none answered: the fourth must wait for the reset.
    assert_eq!(q.try_reserve(MS, 1), Admission::WaitUntil(secs(1)));
}

#[test]
fn a_429_closes_the_gate_until_its_retry_after_and_a_later_gate_wins() {
    let mut q = KeyQuota::default();
    let epoch = reserve(&mut q, Duration::ZERO);
    let told = RateLimitInfo {
        retry_after: Some(secs(3)),
        ..RateLimitInfo::default()
    };
    q.observe(secs(1), epoch, true, &told);
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
    let epoch = reserve(&mut q, Duration::ZERO);
    q.observe(MS, epoch, false, &info(10, 0, MS * 700, None));
    assert_eq!(q.try_reserve(MS * 2, 1), Admission::WaitUntil(MS * 701));
}

#[test]
fn a_response_from_an_ended_window_does_not_close_the_new_one() {
    let mut q = KeyQuota::default();
    let first = reserve(&mut q, Duration::ZERO);
    q.observe(Duration::ZERO, first, false, &info(20, 10, secs(1), None));
    let late = reserve(&mut q, MS);
    // The window rolls; then the late response of the old window arrives, rounded up.
    reserve(&mut q, secs(1));
    q.observe(secs(1) + MS, late, false, &info(20, 0, secs(1), None));
    reserve(&mut q, secs(1) + MS * 2);
    assert_eq!(q.budget(), Some(18));
}

#[test]
fn a_cancelled_reservation_is_refunded_and_an_abandoned_one_is_not() {
    let mut q = KeyQuota::default();
    let epoch = reserve(&mut q, Duration::ZERO);
    q.observe(Duration::ZERO, epoch, false, &info(10, 5, secs(1), None));
    let cancelled = reserve(&mut q, MS);
    assert_eq!(q.budget(), Some(4));
    q.cancel(cancelled, 1);
    assert_eq!(q.budget(), Some(5));
    reserve(&mut q, MS);
    q.abandon();
    assert_eq!(q.budget(), Some(4));
}

#[test]
fn a_roll_after_an_idle_spell_lands_on_the_current_window() {
    let mut q = KeyQuota::default();
    let epoch = reserve(&mut q, Duration::ZERO);
    q.observe(
        Duration::ZERO,
        epoch,
        false,
        &info(2, 1, secs(1), Some(secs(1))),
    );
    // Idle through windows [1,2), [2,3); at 3.5 s the current window ends at 4 s.
    for _ in 0..2 {
        reserve(&mut q, MS * 3500);
    }
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
fn prune_keeps_live_entries_and_drops_idle_ones() {
    let quotas = LearnedQuotas::default();
    assert!(matches!(
        quotas.try_reserve("idle", Duration::ZERO, 1),
        Admission::Reserved { .. }
    ));
    quotas.abandon("idle");
    assert!(matches!(
        quotas.try_reserve("gated", Duration::ZERO, 1),
        Admission::Reserved { .. }
    ));
    quotas.abandon("gated");
    quotas.close_gate("gated", Duration::ZERO, secs(1000));
    quotas.prune(secs(61));
    assert_eq!(quotas.len(), 1);
    assert!(matches!(
        quotas.try_reserve("gated", secs(61), 1),
        Admission::WaitUntil(_)
    ));
}

#[test]
fn whole_second_resets_are_tightened_to_the_earliest_bound_of_the_window() {
    let mut q = KeyQuota::default();
    let first = reserve(&mut q, Duration::ZERO);
    let last = reserve(&mut q, Duration::ZERO);
    // At 100 ms the server says "reset in 1 s" (its 0.9 s rounded up): the reset is by 1.1 s.
    q.observe(MS * 100, first, false, &info(2, 1, secs(1), None));
    // At 900 ms it says "1 s" again (its 0.1 s rounded up): no later than 1.9 s, but 1.1 s
    // is the better bound, and the spent quota pauses the key until then, not 1.9 s.
    let pause = q.observe(MS * 900, last, false, &info(2, 0, secs(1), None));
    assert_eq!(pause, Some(MS * 200));
    assert_eq!(q.try_reserve(MS * 950, 1), Admission::WaitUntil(MS * 1100));
}

#[test]
fn a_key_with_no_news_sends_one_request_alone_until_its_answer() {
    let mut q = KeyQuota {
        probe: true,
        ..KeyQuota::default()
    };
    let probe = reserve(&mut q, Duration::ZERO);
    // The others poll while the first request is out...
    assert_eq!(q.try_reserve(MS, 1), Admission::WaitUntil(MS * 6));
    // ...and go once its answer is in: here it says 5 remain.
    q.observe(MS * 30, probe, false, &info(10, 5, secs(1), None));
    for i in 0..5 {
        reserve(&mut q, MS * (31 + i));
    }
    assert_eq!(q.try_reserve(MS * 40, 1), Admission::WaitUntil(MS * 1030));
}

#[test]
fn a_probe_without_answer_holds_the_others_for_two_seconds_at_most() {
    let mut q = KeyQuota {
        probe: true,
        ..KeyQuota::default()
    };
    reserve(&mut q, Duration::ZERO);
    assert_eq!(q.try_reserve(MS * 1999, 1), Admission::WaitUntil(secs(2)));
    reserve(&mut q, secs(2));
    // Not probing (the pacer does not learn): nobody waits for anybody.
    let mut q = KeyQuota::default();
    reserve(&mut q, Duration::ZERO);
    reserve(&mut q, Duration::ZERO);
}
