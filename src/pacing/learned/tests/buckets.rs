//! A silent server that is no window limiter: a bucket paced at its rate once its burst is
//! spent (and handed back when a refusal refutes it), and sliding counters paced evenly.

use super::*;

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
