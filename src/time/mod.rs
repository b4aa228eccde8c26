//! Time, below every other module: clocks, sleeps, rates, and how waits are spread.
//!
//! - [`Clock`]: what a component reads the time from. The limiters decide without sleeping and
//!   are tested on a [`ManualClock`]; the pacer and the retry layer sleep with tokio, read a
//!   [`TokioClock`], and are tested on tokio's paused clock, which moves clocks and sleeps
//!   together.
//! - [`Sleeper`]: the retry layer's one hook for waiting (tests record the waits).
//! - [`Rate`]: the crate's one rate type (pacer, bucket limiters, Redis scripts, mocks).
//! - [`Jitter`]: how a wait is spread so that clients told the same time do not wake together.
//!   Inside the crate, three request and response extensions let the layers of one stack agree
//!   on a single draw per server wait and on one deadline.
//!
//! `retry`, `pacing`, `limiter` and `headers` use this module; it uses none of them.

mod clock;
mod jitter;
pub(crate) mod nanos;
mod rate;
mod sleep;

use std::time::Duration;

pub(crate) use clock::wall_now;
pub use clock::{Clock, ManualClock, SystemClock, TokioClock, UnixClock};
pub use jitter::Jitter;
pub(crate) use rate::ExactRate;
pub use rate::Rate;
pub use sleep::Sleeper;
pub(crate) use sleep::TokioSleeper;

/// A wait that an inner layer of the stack has already drawn (jitter applied) for the request
/// it answered, carried in the response's extensions.
///
/// The pacing layer inserts it on a 429: it has paused the request's partition key for this
/// long (from when the response came back), for every request of the key. The retry layer
/// above then waits exactly that, without drawing again: one draw per server wait, so the
/// spread the jitter promises is the spread the server sees.
///
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DrawnWait(pub(crate) Duration);

/// The jitter the outermost retry layer uses, carried in the request's extensions so that an
/// inner layer drawing a wait for that request spreads it the same way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RequestJitter(pub(crate) Jitter);

/// When the outermost retry layer gives up on the request (its policy's deadline), carried in
/// the request's extensions so that an inner layer never waits past it: the pacer refuses a
/// permit it could only grant later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestDeadline(pub(crate) tokio::time::Instant);

/// `n` as a `NonZeroU32`, for the crate's unit tests (0 panics: a test's typo, not input).
#[cfg(test)]
pub(crate) const fn nz(n: u32) -> std::num::NonZeroU32 {
    match std::num::NonZeroU32::new(n) {
        Some(n) => n,
        None => panic!("a rate count of 0 in a test"),
    }
}
