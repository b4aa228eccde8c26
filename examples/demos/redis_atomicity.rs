//! The seed's second experiment: 20 racers, each on its own connection, released together by
//! a barrier to take the last token of a bucket; 1,000 repetitions. The crate's atomic script
//! (`RedisLimiter::token_bucket`) admits exactly one every time; a naive limiter that reads the
//! tokens (GET) and writes them back (SET) in two commands lets several through.
//!
//! One more repetition of each is logged: the order in which Redis executed the attempts. For
//! the script, the order of the server times each run read (`TIME`, inside the script, which
//! runs alone); for the naive limiter, Redis's own `MONITOR` log of every GET and SET.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use reqwest_polite::limiter::redis::{RedisLimiter, RedisStore};
use reqwest_polite::time::Rate;
use tokio::sync::Barrier;

/// The bucket's capacity; each race starts with one token left.
pub const CAPACITY: u64 = 5;
/// One token per ~17 minutes (1,000 s), `CAPACITY` at most: nothing refills during a race.
const REFILL: Rate = Rate::new(NonZeroU32::MIN, Duration::from_secs(1000))
    .expect("not zero")
    .with_burst(NonZeroU32::new(CAPACITY as u32).expect("not zero"));
/// Longest wait for one Redis command (setup, attempt, MONITOR line).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// How many racers got the token, per repetition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Races {
    pub admitted: Vec<usize>,
}

impl Races {
    /// `counts[n]`: repetitions in which `n` racers were admitted, for `n` in `0..=racers`.
    pub fn histogram(&self, racers: usize) -> Vec<usize> {
        let mut counts = vec![0; racers.max(self.most()) + 1];
        for &n in &self.admitted {
            counts[n] += 1;
        }
        counts
    }

    /// Repetitions with exactly one winner, as it must be.
    pub fn exactly_one(&self) -> usize {
        self.admitted.iter().filter(|&&n| n == 1).count()
    }

    /// Repetitions in which more than one racer got the last token.
    pub fn over_admitted_repetitions(&self) -> usize {
        self.admitted.iter().filter(|&&n| n > 1).count()
    }

    /// Tokens handed out that did not exist: Σ (admitted − 1) over those repetitions.
    pub fn over_admissions(&self) -> usize {
        self.admitted.iter().map(|&n| n.saturating_sub(1)).sum()
    }

    /// The most racers admitted in one repetition.
    pub fn most(&self) -> usize {
        self.admitted.iter().copied().max().unwrap_or(0)
    }
}

/// One attempt in a logged repetition, in the order Redis executed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Microseconds after the first step, on the Redis server's clock.
    pub after_us: u64,
    /// Which racer (0-based).
    pub racer: usize,
    /// What it did, e.g. `script: admitted`, `GET: read 1`, `SET 0`.
    pub what: String,
}

/// Racers using the crate's atomic script, each with its own connection.
pub struct AtomicRacers {
    limiters: Vec<RedisLimiter>,
}

impl AtomicRacers {
    /// `racers` limiters on `url`, each its own store (its own connection), all on one bucket
    /// name under `run_id`.
    pub async fn connect(url: &str, racers: usize, run_id: &str) -> Result<Self, String> {
        let options = reqwest_polite::limiter::redis::RedisOptions::default()
            .with_command_timeout(COMMAND_TIMEOUT)
            .with_connect_timeout(Duration::from_secs(1));
        let mut limiters = Vec::with_capacity(racers);
        for _ in 0..racers {
            let store = RedisStore::standalone(url, options)
                .await
                .map_err(|error| format!("bad Redis URL {url}: {error}"))?;
            let limiter = RedisLimiter::token_bucket(store, format!("{run_id}:race"), REFILL);
            limiters.push(limiter);
        }
        Ok(AtomicRacers { limiters })
    }

    /// One race on a fresh bucket `key`: (racer, admitted, server time of its decision).
    async fn race(&self, key: &str) -> Result<Vec<(usize, bool, SystemTime)>, String> {
        let setup = self.limiters[0]
            .check(key, CAPACITY - 1)
            .await
            .map_err(|error| format!("Redis failed: {error}"))?;
        if setup.remaining != 1 {
            return Err(format!(
                "bucket {key} was not fresh: {} tokens left after setup",
                setup.remaining
            ));
        }
        let barrier = Arc::new(Barrier::new(self.limiters.len()));
        let racers: Vec<_> = self
            .limiters
            .iter()
            .enumerate()
            .map(|(racer, limiter)| {
                let (limiter, barrier, key) = (limiter.clone(), barrier.clone(), key.to_owned());
                tokio::spawn(async move {
                    barrier.wait().await;
                    let reply = limiter.check_with_server_time(&key, 1).await;
                    reply.map(|reply| (racer, reply.decision.allowed, reply.server_time))
                })
            })
            .collect();
        let mut outcomes = Vec::with_capacity(racers.len());
        for racer in racers {
            let outcome = racer.await.map_err(|error| error.to_string())?;
            outcomes.push(outcome.map_err(|error| format!("Redis failed: {error}"))?);
        }
        Ok(outcomes)
    }

    /// `repetitions` races, each on its own fresh bucket.
    pub async fn run(&self, repetitions: usize) -> Result<Races, String> {
        let mut races = Races::default();
        for repetition in 0..repetitions {
            let outcomes = self.race(&format!("bucket-{repetition}")).await?;
            races
                .admitted
                .push(outcomes.iter().filter(|(_, admitted, _)| *admitted).count());
        }
        Ok(races)
    }

    /// One more race, with its attempts in the order the scripts ran: the order of the server
    /// times they read (scripts run one at a time, so those times never go back).
    pub async fn logged(&self) -> Result<Vec<Step>, String> {
        let mut outcomes = self.race("bucket-logged").await?;
        outcomes.sort_by_key(|&(racer, _, at)| (at, racer));
        let first = outcomes.first().map_or(UNIX_EPOCH, |&(_, _, at)| at);
        Ok(outcomes
            .into_iter()
            .map(|(racer, admitted, at)| Step {
                after_us: micros_between(first, at),
                racer,
                what: if admitted {
                    "script: admitted (took the last token)".to_owned()
                } else {
                    "script: rejected (0 left)".to_owned()
                },
            })
            .collect())
    }
}

/// Racers using the naive limiter: GET the tokens, then SET them minus one, on plain
/// connections (one each).
pub struct NaiveRacers {
    client: redis::Client,
    connections: Vec<MultiplexedConnection>,
    setup: MultiplexedConnection,
    run_id: String,
}

impl NaiveRacers {
    /// `racers` connections to `url`, plus one to set each race up.
    pub async fn connect(url: &str, racers: usize, run_id: &str) -> Result<Self, String> {
        let client =
            redis::Client::open(url).map_err(|error| format!("bad Redis URL {url}: {error}"))?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(COMMAND_TIMEOUT));
        let mut connections = Vec::with_capacity(racers + 1);
        for _ in 0..=racers {
            let connection = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map_err(|error| format!("cannot reach Redis at {url}: {error}"))?;
            connections.push(connection);
        }
        let setup = connections.pop().expect("one more than the racers");
        Ok(NaiveRacers {
            client,
            connections,
            setup,
            run_id: run_id.to_owned(),
        })
    }

    /// One race on `key`, set to one token: (racer, tokens it read, admitted).
    async fn race(&self, key: &str) -> Result<Vec<(usize, u64, bool)>, String> {
        let mut setup = self.setup.clone();
        let _: () = setup
            .set(key, 1_u64)
            .await
            .map_err(|error| format!("Redis failed: {error}"))?;
        let barrier = Arc::new(Barrier::new(self.connections.len()));
        let racers: Vec<_> = self
            .connections
            .iter()
            .enumerate()
            .map(|(racer, connection)| {
                let (mut connection, barrier, key) =
                    (connection.clone(), barrier.clone(), key.to_owned());
                tokio::spawn(async move {
                    barrier.wait().await;
                    naive_take(&mut connection, &key)
                        .await
                        .map(|(read, admitted)| (racer, read, admitted))
                })
            })
            .collect();
        let mut outcomes = Vec::with_capacity(racers.len());
        for racer in racers {
            let outcome = racer.await.map_err(|error| error.to_string())?;
            outcomes.push(outcome.map_err(|error| format!("Redis failed: {error}"))?);
        }
        let _: () = setup
            .del(key)
            .await
            .map_err(|error| format!("Redis failed: {error}"))?;
        Ok(outcomes)
    }

    fn key(&self, repetition: &str) -> String {
        format!("{}:naive:{repetition}", self.run_id)
    }

    /// `repetitions` races.
    pub async fn run(&self, repetitions: usize) -> Result<Races, String> {
        let mut races = Races::default();
        for repetition in 0..repetitions {
            let outcomes = self.race(&self.key(&repetition.to_string())).await?;
            races
                .admitted
                .push(outcomes.iter().filter(|(_, _, admitted)| *admitted).count());
        }
        Ok(races)
    }

    /// One more race under Redis's `MONITOR`: every GET and SET in the order Redis executed
    /// them, with the racers they came from. Returns the steps and how many were admitted.
    pub async fn logged(&self) -> Result<(Vec<Step>, usize), String> {
        // Which racer each client address is.
        let mut racer_at = HashMap::new();
        for (racer, connection) in self.connections.iter().enumerate() {
            let info: String = redis::cmd("CLIENT")
                .arg("INFO")
                .query_async(&mut connection.clone())
                .await
                .map_err(|error| format!("CLIENT INFO failed: {error}"))?;
            let address = info
                .split_whitespace()
                .find_map(|field| field.strip_prefix("addr="))
                .ok_or_else(|| format!("no addr= in CLIENT INFO: {info}"))?;
            racer_at.insert(address.to_owned(), racer);
        }

        let monitor = self
            .client
            .get_async_monitor()
            .await
            .map_err(|error| format!("MONITOR failed: {error}"))?;
        let mut lines = monitor.into_on_message::<String>();
        let key = self.key("logged");
        let outcomes = self.race(&key).await?;
        let admitted = outcomes.iter().filter(|(_, _, admitted)| *admitted).count();
        let read_by: HashMap<usize, u64> = outcomes
            .iter()
            .map(|&(racer, read, _)| (racer, read))
            .collect();

        // Every racer's GET, and a SET from each one admitted.
        let expected = racer_at.len() + admitted;
        let mut steps: Vec<(u64, Step)> = Vec::with_capacity(expected);
        while steps.len() < expected {
            let line = tokio::time::timeout(COMMAND_TIMEOUT, lines.next())
                .await
                .map_err(|_| "MONITOR went quiet before every GET and SET was seen".to_owned())?
                .ok_or_else(|| "MONITOR connection closed".to_owned())?;
            let Some(entry) = MonitorLine::parse(&line) else {
                continue;
            };
            let Some(&racer) = racer_at.get(entry.address) else {
                continue;
            };
            if entry.args.get(1).map(String::as_str) != Some(key.as_str()) {
                continue;
            }
            let what = match entry.args[0].to_ascii_uppercase().as_str() {
                "GET" => format!("GET: read {}", read_by.get(&racer).copied().unwrap_or(0)),
                "SET" => format!(
                    "SET {}: admitted",
                    entry.args.get(2).map_or("?", String::as_str)
                ),
                _ => continue,
            };
            steps.push((
                entry.at_us,
                Step {
                    after_us: 0,
                    racer,
                    what,
                },
            ));
        }
        let first = steps.first().map_or(0, |(at, _)| *at);
        Ok((
            steps
                .into_iter()
                .map(|(at, step)| Step {
                    after_us: at.saturating_sub(first),
                    ..step
                })
                .collect(),
            admitted,
        ))
    }
}

/// The counterexample: read the tokens, then write them back, in two commands. Between them,
/// every other racer may read the same value.
async fn naive_take(
    connection: &mut MultiplexedConnection,
    key: &str,
) -> redis::RedisResult<(u64, bool)> {
    let tokens: Option<u64> = connection.get(key).await?;
    let tokens = tokens.unwrap_or(0);
    if tokens == 0 {
        return Ok((0, false));
    }
    let _: () = connection.set(key, tokens - 1).await?;
    Ok((tokens, true))
}

/// One line of `MONITOR`: `1700000000.123456 [0 127.0.0.1:5678] "GET" "key"`.
struct MonitorLine<'a> {
    at_us: u64,
    address: &'a str,
    args: Vec<String>,
}

impl<'a> MonitorLine<'a> {
    fn parse(line: &'a str) -> Option<MonitorLine<'a>> {
        let (time, rest) = line.split_once(' ')?;
        let (seconds, micros) = time.split_once('.')?;
        let at_us = seconds.parse::<u64>().ok()? * 1_000_000 + micros.parse::<u64>().ok()?;
        let rest = rest.strip_prefix('[')?;
        let (source, command) = rest.split_once("] ")?;
        let (_db, address) = source.split_once(' ')?;
        Some(MonitorLine {
            at_us,
            address,
            args: quoted_words(command),
        })
    }
}

/// The `"…"` words of a MONITOR command, unescaped enough for keys and numbers.
fn quoted_words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut word = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => word.extend(chars.next()),
                '"' => break,
                c => word.push(c),
            }
        }
        words.push(word);
    }
    words
}

fn micros_between(earlier: SystemTime, later: SystemTime) -> u64 {
    later
        .duration_since(earlier)
        .unwrap_or_default()
        .as_micros() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_lines_are_parsed() {
        let line = r#"1700000000.000123 [0 127.0.0.1:5678] "SET" "run:naive:logged" "0""#;
        let entry = MonitorLine::parse(line).unwrap();
        assert_eq!(entry.at_us, 1_700_000_000_000_123);
        assert_eq!(entry.address, "127.0.0.1:5678");
        assert_eq!(entry.args, ["SET", "run:naive:logged", "0"]);
        assert!(MonitorLine::parse("OK").is_none());
    }
}
