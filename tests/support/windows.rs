//! Windows that keep wall-clock tests clear of window boundaries.

use std::time::Duration;

/// A hundred years of 365 days.
///
/// Fixed windows on the wall clock (the mock's `UnixClock` shorthands, and every Redis fixed or
/// sliding window counter, which reads the Redis server's clock) are aligned to multiples of the
/// window since the Unix epoch. With a minute or an hour, a test that happens to run across a
/// boundary sees its counts restart halfway. The first boundary of this window falls in 2069,
/// so no run crosses one. It stays below the Redis limiters' longest window (2^52 µs, about
/// 142 years).
pub const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
