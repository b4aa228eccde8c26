//! What every demo does the same way: flags parsed by clap with one-line errors (exit code 2),
//! a Redis given by URL checked before use, and terminal bars.

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
// Only the Redis demos need these; thundering_herd builds without the `redis` feature.
#[cfg(feature = "redis")]
use {
    reqwest_polite::limiter::redis::{RedisOptions, RedisStore},
    std::time::Duration,
};

/// The exit code for bad input: an unknown flag, a zero count, an unreachable Redis.
pub const BAD_INPUT: u8 = 2;

/// Prints `program: message` as one line on stderr and gives exit code 2.
pub fn bad_input(program: &str, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("{program}: {message}");
    ExitCode::from(BAD_INPUT)
}

/// The flags, or the exit code to end with: 0 after `--help`, 2 (one line on stderr) for
/// anything clap refuses.
pub fn parse_flags<T: Parser>(program: &str) -> Result<T, ExitCode> {
    parse_flags_from(program, std::env::args_os())
}

/// [`parse_flags`] over given arguments (the first is the program name).
pub fn parse_flags_from<T, I, A>(program: &str, args: I) -> Result<T, ExitCode>
where
    T: Parser,
    I: IntoIterator<Item = A>,
    A: Into<std::ffi::OsString> + Clone,
{
    match T::try_parse_from(args) {
        Ok(flags) => Ok(flags),
        Err(error)
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            let _ = error.print();
            Err(ExitCode::SUCCESS)
        }
        Err(error) => Err(bad_input(program, one_line(&error))),
    }
}

/// clap's message on one line: its first paragraph (which may list arguments on lines of
/// their own), without the "error: " prefix, the tips and the usage block.
pub fn one_line(error: &clap::Error) -> String {
    let text = error.to_string();
    let paragraph: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|line| !line.is_empty())
        .collect();
    let message = paragraph.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    if message.is_empty() {
        return "invalid arguments (see --help)".to_owned();
    }
    format!("{message} (see --help)")
}

/// Timeouts for the demos' Redis: generous, since a loaded 2-core machine must not turn a slow
/// answer into a failed run.
#[cfg(feature = "redis")]
pub fn redis_options() -> RedisOptions {
    RedisOptions::default()
        .with_command_timeout(Duration::from_secs(2))
        .with_connect_timeout(Duration::from_secs(1))
}

/// A store on the Redis at `url` (nodes separated by commas: a Redis Cluster), after one round
/// trip proved it answers. The message of an error fits on one line.
#[cfg(feature = "redis")]
pub async fn connect_redis(url: &str) -> Result<RedisStore, String> {
    // Nodes separated by commas: a Redis Cluster.
    let store = if url.contains(',') {
        let nodes: Vec<&str> = url.split(',').map(str::trim).collect();
        RedisStore::cluster(&nodes, redis_options()).await
    } else {
        RedisStore::standalone(url, redis_options()).await
    }
    .map_err(|error| format!("bad Redis URL {url}: {}", error_chain(&error)))?;
    let ping = redis::Script::new("return 1");
    match store.eval::<i64>(&ping, &[], &[]).await {
        Ok(1) => Ok(store),
        Ok(other) => Err(format!("Redis at {url} answered {other} to a test script")),
        Err(error) => Err(format!(
            "cannot reach Redis at {url}: {}",
            error_chain(&error)
        )),
    }
}

/// An error and its sources on one line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text.replace('\n', " ")
}

/// A bar of `count` out of `max`, `width` cells at most, drawn with eighth blocks so small
/// differences show; a non-zero count always gets at least a sliver.
pub fn bar(count: usize, max: usize, width: usize) -> String {
    if count == 0 || max == 0 {
        return String::new();
    }
    let eighths = (count * width * 8).div_ceil(max).max(1);
    let mut text = "█".repeat(eighths / 8);
    const PARTS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    text.push_str(PARTS[eighths % 8]);
    text
}

/// A name for keys in a shared Redis that no earlier run used: the program, its process id
/// and the time it started.
pub fn run_id(program: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{program}-{}-{}", std::process::id(), now.as_millis())
}
