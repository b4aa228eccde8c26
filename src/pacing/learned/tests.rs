//! The learned quota's exact tests on a manual clock: the helpers every shape's tests share and
//! the tests of what holds before the server has said anything. Each shape's tests are in a
//! file of their own.

use super::silent_pace::sliding_counter;
use super::silent_rate::TestBucket;
use super::*;

mod buckets;
mod moving;
mod restart;
mod silent_windows;
mod stated;

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
fn without_any_news_every_request_is_admitted() {
    let mut q = KeyQuota::default();
    for i in 0..1000 {
        reserve(&mut q, MS * i);
    }
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

/// What a server stating its reset in whole seconds and no window says (`X-RateLimit-*` with a
/// Unix-time reset): the pacer may probe before the stated instant.
fn coarse(remaining: u64, reset: Duration) -> RateLimitInfo {
    RateLimitInfo {
        limit: Some(20),
        remaining: Some(remaining),
        reset: Some(reset),
        grain: Some(secs(1)),
        reset_grain: Some(secs(1)),
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

/// What an IETF server with 10 per 1 s says (`RateLimit: r;t`, `w=1`): whole seconds.
fn per_second(remaining: u64) -> RateLimitInfo {
    RateLimitInfo {
        grain: Some(secs(1)),
        reset_grain: Some(secs(1)),
        ..info(10, remaining, secs(1), Some(secs(1)))
    }
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
