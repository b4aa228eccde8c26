//! What both limiter variants share: the scripts, their arguments, the keys and the reply.

use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use redis::{Script, Value};

use super::RedisLimitError;
use super::keys::{key, key_prefix};
use crate::limiter::Decision;
use crate::limiter::error::check_window;
use crate::time::Rate;

static FIXED_WINDOW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("fixed_window.lua")));
static SLIDING_WINDOW_LOG: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("sliding_window_log.lua")));
static SLIDING_WINDOW_COUNTER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("sliding_window_counter.lua")));
static TOKEN_BUCKET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("token_bucket.lua")));

/// Lua numbers are doubles: integers above 2^53 would silently lose precision.
const MAX_EXACT: u64 = 1 << 53;
/// Longest window, in µs (about 142 years): keeps window arithmetic on server time exact.
const MAX_WINDOW_MICROS: u64 = 1 << 52;

/// A decision together with the Redis server time it was made at.
///
/// The scripts read the time from the server (`TIME`), never from the caller; this exposes it,
/// so a caller can line its own clock up with the shared one (tests drive a
/// [`ManualClock`](crate::time::ManualClock) with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerDecision {
    /// The verdict.
    pub decision: Decision,
    /// The Redis server's clock when it decided.
    pub server_time: SystemTime,
}

/// Which script a limit runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Algorithm {
    FixedWindow,
    SlidingWindowLog,
    SlidingWindowCounter,
    TokenBucket { refill_per_sec: f64 },
}

/// One configured limit: which script, with which numbers, under which name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LimitSpec {
    name: String,
    algorithm: Algorithm,
    limit: u64,
    window: Duration,
}

impl LimitSpec {
    pub(crate) fn token_bucket(name: String, refill: Rate) -> Self {
        let capacity = u64::from(refill.burst().get());
        let refill_per_sec = refill.units_per_second();
        // the time a bucket takes to fill from empty
        let window = refill.exact().time_for(refill.exact().scaled(capacity));
        Self {
            name,
            algorithm: Algorithm::TokenBucket { refill_per_sec },
            limit: capacity,
            window,
        }
    }

    /// `limit` units per `window` with one of the three windowed scripts.
    pub(crate) fn windowed(
        name: String,
        algorithm: Algorithm,
        limit: u64,
        window: Duration,
    ) -> Result<Self, RedisLimitError> {
        check_window(limit, window)?;
        let window = window.min(Duration::from_micros(MAX_WINDOW_MICROS));
        Ok(Self {
            name,
            algorithm,
            limit: limit.min(MAX_EXACT),
            window,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    pub(crate) fn window(&self) -> Duration {
        self.window
    }

    pub(crate) fn script(&self) -> &'static Script {
        match self.algorithm {
            Algorithm::FixedWindow => &FIXED_WINDOW,
            Algorithm::SlidingWindowLog => &SLIDING_WINDOW_LOG,
            Algorithm::SlidingWindowCounter => &SLIDING_WINDOW_COUNTER,
            Algorithm::TokenBucket { .. } => &TOKEN_BUCKET,
        }
    }

    /// The keys the script touches for `identity`; all share one hash tag.
    pub(crate) fn keys(&self, identity: &str) -> Vec<String> {
        let prefix = key_prefix(&self.name, identity);
        match self.algorithm {
            Algorithm::FixedWindow => vec![key(&prefix, "fw")],
            Algorithm::SlidingWindowLog => vec![key(&prefix, "log"), key(&prefix, "seq")],
            Algorithm::SlidingWindowCounter => vec![key(&prefix, "swc")],
            Algorithm::TokenBucket { .. } => vec![key(&prefix, "tb")],
        }
    }

    /// The script's arguments. No time among them: the script reads the server's clock.
    pub(crate) fn args(&self, cost: u64) -> Vec<String> {
        let cost = cost.min(MAX_EXACT).to_string();
        match self.algorithm {
            Algorithm::TokenBucket { refill_per_sec } => {
                // `Display` for f64 prints the shortest string that reads back to the same value
                vec![self.limit.to_string(), refill_per_sec.to_string(), cost]
            }
            _ => {
                // at least 1 µs: a sub-µs window would divide by zero in the script
                let micros = u64::try_from(self.window.as_micros()).unwrap_or(MAX_WINDOW_MICROS);
                vec![self.limit.to_string(), micros.max(1).to_string(), cost]
            }
        }
    }

    /// Reads the script's reply:
    /// `{ allowed, remaining, reset µs, retry_after µs or "", server seconds, server µs }`.
    pub(crate) fn parse_reply(&self, reply: &Value) -> Result<ServerDecision, RedisLimitError> {
        let Value::Array(items) = reply else {
            return Err(unexpected(format!(
                "expected an array, got {}",
                shape(reply)
            )));
        };
        let [allowed, remaining, reset, retry_after, seconds, micros] = items.as_slice() else {
            return Err(unexpected(format!(
                "expected 6 elements, got {}",
                items.len()
            )));
        };
        let allowed = integer(allowed, "allowed")? == 1;
        let remaining = u64::try_from(integer(remaining, "remaining")?).unwrap_or(0);
        let reset = micros_duration(reset, "reset")?.unwrap_or(Duration::ZERO);
        let retry_after = micros_duration(retry_after, "retry_after")?;
        let seconds = u64::try_from(integer(seconds, "server seconds")?).unwrap_or(0);
        let micros = u64::try_from(integer(micros, "server microseconds")?).unwrap_or(0);
        let server_time =
            SystemTime::UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_micros(micros);
        Ok(ServerDecision {
            decision: Decision {
                allowed,
                limit: self.limit,
                remaining: remaining.min(self.limit),
                reset,
                retry_after: if allowed { None } else { retry_after },
            },
            server_time,
        })
    }
}

fn unexpected(detail: String) -> RedisLimitError {
    RedisLimitError::UnexpectedReply { detail }
}

/// The kind of a reply value, for error messages: never its content.
fn shape(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Int(_) => "an integer",
        Value::BulkString(_) => "a bulk string",
        Value::SimpleString(_) => "a simple string",
        Value::Array(_) => "an array",
        Value::Okay => "OK",
        Value::ServerError(_) => "a server error",
        _ => "another kind of value",
    }
}

fn text<'a>(value: &'a Value, field: &str) -> Result<&'a str, RedisLimitError> {
    match value {
        Value::BulkString(bytes) => {
            std::str::from_utf8(bytes).map_err(|_| unexpected(format!("{field}: not UTF-8")))
        }
        Value::SimpleString(text) => Ok(text),
        other => Err(unexpected(format!(
            "{field}: expected a string, got {}",
            shape(other)
        ))),
    }
}

fn integer(value: &Value, field: &str) -> Result<i64, RedisLimitError> {
    match value {
        Value::Int(n) => Ok(*n),
        other => text(other, field)?
            .parse()
            .map_err(|_| unexpected(format!("{field}: not an integer"))),
    }
}

/// A fractional number of µs sent as a string (`""` for none), as a `Duration` rounded up.
fn micros_duration(value: &Value, field: &str) -> Result<Option<Duration>, RedisLimitError> {
    let text = text(value, field)?;
    if text.is_empty() {
        return Ok(None);
    }
    // The scripts' `%.3f` text, read digit by digit: through an f64, µs × 1000 loses
    // nanoseconds beyond 2^53 ns (about 104 days) and may round them down.
    if let Some(exact) = plain_decimal_micros(text) {
        return Ok(Some(exact));
    }
    let micros: f64 = text
        .parse()
        .map_err(|_| unexpected(format!("{field}: not a number")))?;
    if micros.is_nan() {
        return Err(unexpected(format!("{field}: not a number")));
    }
    let nanos = (micros.max(0.0) * 1000.0).ceil();
    // `as` saturates: an infinite wait becomes the longest Duration we can build from nanos
    Ok(Some(Duration::from_nanos(nanos as u64)))
}

/// `<digits>[.<digits>]` µs as a `Duration`, rounded up to the nanosecond; `None` for any
/// other form (signs, exponents, `inf`) or a value beyond `Duration`.
fn plain_decimal_micros(text: &str) -> Option<Duration> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let mut nanos = 0;
    for place in 0..3 {
        let digit = fraction
            .as_bytes()
            .get(place)
            .map_or(0, |b| u64::from(b - b'0'));
        nanos = nanos * 10 + digit;
    }
    let beyond_nanos = fraction.bytes().skip(3).any(|b| b != b'0');
    Duration::from_micros(whole).checked_add(Duration::from_nanos(nanos + u64::from(beyond_nanos)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU32;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    /// A script reply: allowed, remaining, then reset, retry_after, seconds and µs as text.
    fn reply(allowed: i64, remaining: i64, texts: [&str; 4]) -> Value {
        let mut items = vec![Value::Int(allowed), Value::Int(remaining)];
        items.extend(texts.map(bulk));
        Value::Array(items)
    }

    fn windowed(
        algorithm: Algorithm,
        limit: u64,
        window: Duration,
    ) -> Result<LimitSpec, RedisLimitError> {
        LimitSpec::windowed("api".into(), algorithm, limit, window)
    }

    fn spec() -> LimitSpec {
        windowed(Algorithm::FixedWindow, 10, Duration::from_secs(1)).unwrap()
    }

    #[test]
    fn a_reply_becomes_a_decision_with_the_server_time() {
        let reply = reply(0, 0, ["250000.500", "1000.001", "1700000000", "42"]);
        let got = spec().parse_reply(&reply).unwrap();
        assert_eq!(
            got.decision,
            Decision {
                allowed: false,
                limit: 10,
                remaining: 0,
                reset: Duration::from_nanos(250_000_500),
                retry_after: Some(Duration::from_nanos(1_000_001)),
            }
        );
        assert_eq!(
            got.server_time,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000) + Duration::from_micros(42)
        );
    }

    #[test]
    fn malformed_replies_are_errors_not_panics() {
        let replies = [
            Value::Nil,
            Value::Int(1),
            Value::Array(vec![Value::Int(1)]),
            Value::Array(vec![
                Value::Nil,
                Value::Int(0),
                bulk("0"),
                bulk(""),
                bulk("1"),
                bulk("2"),
            ]),
            reply(1, 0, ["nan", "", "1", "2"]),
            Value::Array(vec![
                Value::Int(1),
                Value::Int(0),
                Value::BulkString(vec![0xff]),
                bulk(""),
                bulk("1"),
                bulk("2"),
            ]),
        ];
        for reply in replies {
            let err = spec().parse_reply(&reply).unwrap_err();
            assert!(
                matches!(err, RedisLimitError::UnexpectedReply { .. }),
                "{err}"
            );
        }
    }

    #[test]
    fn infinite_or_negative_waits_saturate() {
        let reply = reply(0, -3, ["inf", "-5", "1", "2"]);
        let got = spec().parse_reply(&reply).unwrap().decision;
        assert_eq!(got.remaining, 0);
        assert_eq!(got.reset, Duration::from_nanos(u64::MAX));
        assert_eq!(got.retry_after, Some(Duration::ZERO));
    }

    #[test]
    fn arguments_carry_no_time_and_clamp_to_exact_lua_numbers() {
        assert_eq!(spec().args(3), ["10", "1000000", "3"]);
        assert_eq!(spec().args(u64::MAX)[2], MAX_EXACT.to_string());
        let half = Rate::from_per_second(0.5).unwrap();
        let bucket = LimitSpec::token_bucket("b".into(), half.with_burst(NonZeroU32::MAX));
        assert_eq!(
            bucket.args(1),
            [u32::MAX.to_string(), "0.5".into(), "1".into()]
        );
    }

    #[test]
    fn unusable_windows_are_rejected() {
        // (A bucket's rate cannot be unusable: `Rate` has no zero, negative or NaN value.)
        assert!(windowed(Algorithm::SlidingWindowLog, 1, Duration::ZERO).is_err());
        assert!(windowed(Algorithm::FixedWindow, 0, Duration::from_secs(1)).is_err());
    }

    #[test]
    fn long_waits_keep_every_nanosecond() {
        // a century's reset, beyond 2^53 ns, where µs × 1000 in f64 loses the last digits
        let reply = reply(
            0,
            0,
            ["1357550994918398.000", "3153600000000000.0015", "1", "2"],
        );
        let got = spec().parse_reply(&reply).unwrap().decision;
        assert_eq!(got.reset, Duration::from_micros(1_357_550_994_918_398));
        assert_eq!(
            got.retry_after,
            Some(Duration::from_micros(3_153_600_000_000_000) + Duration::from_nanos(2))
        );
    }

    #[test]
    fn token_bucket_window_is_the_time_to_fill_from_empty() {
        let four = Rate::per_second(crate::time::nz(4));
        let bucket = LimitSpec::token_bucket("b".into(), four.with_burst(crate::time::nz(10)));
        assert_eq!(bucket.window(), Duration::from_millis(2500));
    }
}
