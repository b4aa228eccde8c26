//! The pacing scripts are atomic, as the limiter scripts are (`redis_atomicity.rs`): for each
//! of them, 20 callers on 20 connections race 1,000 times over fresh keys on a standalone
//! server, and 200 times on a 3-master Redis Cluster, and every race ends exactly as one caller
//! after another would have left it:
//!
//! - `bucket_take.lua`: racers taking 1 from a bucket with K left: exactly K taken; taking up
//!   to 3 each: K taken in all, none over 3; racing a gate closed among them: what was taken
//!   and what is left add up to K; each giving back 3 while taking 1: the bucket never passes
//!   its capacity and ends at exactly 9 of 10;
//! - `learned_take.lua`: racers taking 1 from a learned count of K: exactly K taken; at the
//!   start of a window nothing is known of: exactly one taken (the probe of all); newcomers
//!   beside M requests in line: exactly K - M taken; racing a gate: taken and left add up to K;
//!   on a silent server before anything is measured: exactly the slow start's cap in flight;
//!   on one whose quota and window are measured, at a window's start: exactly one taken (the
//!   probe of all);
//! - `learned_note.lua`: racers noting different counts and ends of one window: the least
//!   count and the soonest end win, and the quota per window is one racer's whole (never
//!   one's limit with another's window); answers of one window of a silent server, admitted
//!   and refused in any order: every admission counted, the quota what was admitted before
//!   the first refusal (or after it), and one pause (the others are the same news);
//! - `close_gate.lua`: racers closing one gate for different pauses: it ends at the longest.
//!
//! And on the cluster, every key a pacer writes for one partition key (bucket, gate, count,
//! quota) lies in one slot; and the take script and the limiter's token bucket read one state.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use http::StatusCode;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use redis::{FromRedisValue, Script, Value};
use reqwest_polite::RateLimitInfo;
use reqwest_polite::limiter::redis::{RedisOptions, RedisStore};
use reqwest_polite::pacing::{Pacer, PacingMode, SharedBucket, StoreFailure};
use reqwest_polite::time::Rate;
use tokio::sync::Barrier;

use crate::support::{RedisCluster, RedisServer, nz, take_turn};

const RACERS: usize = 20;
const REPETITIONS: usize = 1_000;
/// The races again on a Cluster, fewer: the scripts and their orders are the standalone's (a
/// script runs whole on one node either way); what the Cluster adds is routing, and a key sent
/// to the wrong node or a script spanning two slots fails every call, not one race in many. A
/// race on the Cluster costs about twice one on a standalone server (debug build, CI's 2 cores).
const CLUSTER_REPETITIONS: usize = 200;

static BUCKET_TAKE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../src/pacing/shared/bucket_take.lua")));
static CLOSE_GATE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../src/pacing/shared/close_gate.lua")));
static LEARNED_TAKE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../src/pacing/shared/learned_take.lua")));
static LEARNED_NOTE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../src/pacing/shared/learned_note.lua")));

/// A bucket of KEYS[1] holding exactly ARGV[1] tokens, its time an hour ahead of the server's
/// clock so that nothing refills during a race (the script refills nothing until the server
/// passes the last time seen); returns that time.
static ARRANGE_BUCKET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local t = redis.call('TIME') \
         local at = string.format('%.0f', t[1] * 1000000 + t[2] + 3600000000) \
         redis.call('HSET', KEYS[1], 't', ARGV[1], 'at', at) \
         return at",
    )
});
/// The tokens in bucket KEYS[1] (a string) and the PTTL of KEYS[2].
static INSPECT: LazyLock<Script> = LazyLock::new(|| {
    Script::new("return { redis.call('HGET', KEYS[1], 't') or '', redis.call('PTTL', KEYS[2]) }")
});
/// The PTTL of KEYS[1].
static INSPECT_GATE: LazyLock<Script> =
    LazyLock::new(|| Script::new("return redis.call('PTTL', KEYS[1])"));
/// A learned count of ARGV[1] in KEYS[1] for ARGV[3] ms (an hour if empty), or (ARGV[1]
/// empty) a quota per window of ARGV[2] per hour in KEYS[2] and no count: a new window to open.
static ARRANGE_LEARNED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local ttl = tonumber(ARGV[3] or '') or 3600000 \
         if ARGV[1] ~= '' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl) \
         else redis.call('HSET', KEYS[2], 'limit', ARGV[2], 'window', 3600000) end \
         return 1",
    )
});
/// Puts ARGV[1] requests in line in KEYS[1] (the learned take's line), each due to ask again
/// ARGV[2] ms from now.
static ARRANGE_LINE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local t = redis.call('TIME') \
         local due = tonumber(t[1]) * 1000 + tonumber(ARGV[2]) \
         for i = 1, tonumber(ARGV[1]) do redis.call('ZADD', KEYS[1], due, ARGV[3] .. i) end \
         return 1",
    )
});

/// The keys of a learned take: count, quota, gate, probe and line.
const LEARNED_KEYS: [&str; 5] = ["left", "quota", "gate", "probe", "line"];

/// A learned take of 1 by request `asker`, which has waited `waited_ms`.
fn learned_take_call(keys: &[String], want: u64, asker: usize, waited_ms: u64) -> Call {
    Call {
        script: &LEARNED_TAKE,
        keys: keys.to_vec(),
        args: vec![
            "1".to_owned(),
            want.to_string(),
            "1000".to_owned(),
            "20".to_owned(),
            format!("racer-{asker}"),
            waited_ms.to_string(),
        ],
    }
}
/// A learned count: its value, its PTTL, and the quota hash's limit and window.
static INSPECT_LEARNED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "return { redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), \
         redis.call('HGET', KEYS[2], 'limit') or '', redis.call('HGET', KEYS[2], 'window') or '' }",
    )
});

/// The token bucket's capacity in the races, and its refill (per second; nothing refills in
/// a race anyway, the bucket's time being ahead).
const CAPACITY: u64 = 10;
const REFILL: &str = "0.001";

/// A script's reply as strings: an array's items, or the one value.
fn fields(reply: &Value) -> Vec<String> {
    let text = |value: &Value| String::from_redis_value_ref(value).unwrap_or_default();
    match reply {
        Value::Array(items) => items.iter().map(text).collect(),
        other => vec![text(other)],
    }
}

/// One racer's call.
struct Call {
    script: &'static Script,
    keys: Vec<String>,
    args: Vec<String>,
}

/// Every racer sends its call at once (a barrier), each on its own connection; the replies in
/// racer order.
async fn race(stores: &[RedisStore], calls: Vec<Call>) -> Vec<Vec<String>> {
    let barrier = Arc::new(Barrier::new(calls.len()));
    let racers: Vec<_> = stores
        .iter()
        .zip(calls)
        .map(|(store, call)| {
            let (store, barrier) = (store.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let reply: Value = store
                    .eval(call.script, &call.keys, &call.args)
                    .await
                    .unwrap();
                fields(&reply)
            })
        })
        .collect();
    let mut replies = Vec::with_capacity(racers.len());
    for racer in racers {
        replies.push(racer.await.unwrap());
    }
    replies
}

async fn eval(store: &RedisStore, script: &Script, keys: &[String], args: &[&str]) -> Vec<String> {
    let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
    let reply: Value = store.eval(script, keys, &args).await.unwrap();
    fields(&reply)
}

/// The keys of one race: the pacer's layout, under a hash tag no other race uses.
fn keys(kind: &str, rep: usize, parts: &[&str]) -> Vec<String> {
    parts
        .iter()
        .map(|part| format!("rp:{{race-{kind}-{rep}}}:{part}"))
        .collect()
}

fn take_call(keys: &[String], want: u64, give_back: &str) -> Call {
    Call {
        script: &BUCKET_TAKE,
        keys: keys.to_vec(),
        args: vec![
            CAPACITY.to_string(),
            REFILL.to_owned(),
            "1".to_owned(),
            want.to_string(),
            give_back.to_owned(),
        ],
    }
}

fn close_call(keys: &[String], millis: u64) -> Call {
    Call {
        script: &CLOSE_GATE,
        keys: keys.to_vec(),
        args: vec![millis.to_string()],
    }
}

/// Tokens granted by take replies (`{1, taken, …}`; a gate's `1` is not a take).
fn granted(replies: &[Vec<String>]) -> u64 {
    replies
        .iter()
        .filter(|reply| reply.len() > 1 && reply[0] == "1")
        .map(|reply| reply[1].parse::<u64>().unwrap())
        .sum()
}

/// Units left before repetition `rep`: 1 to 5, so neither a script that always admits one nor
/// one that always admits the same number passes.
fn left_before(rep: usize) -> u64 {
    1 + (rep % 5) as u64
}

/// One kind of race: arranges a repetition's keys, races, and says what went wrong, if
/// anything.
type Race = fn(Vec<RedisStore>, usize) -> BoxFuture<'static, Option<String>>;

fn bucket_single_takes(stores: Vec<RedisStore>, rep: usize) -> BoxFuture<'static, Option<String>> {
    Box::pin(async move {
        let keys = keys("single", rep, &["tb", "gate"]);
        let left = left_before(rep);
        eval(&stores[0], &ARRANGE_BUCKET, &keys, &[&left.to_string()]).await;
        let calls = (0..RACERS).map(|_| take_call(&keys, 1, "")).collect();
        let replies = race(&stores, calls).await;
        let taken = replies.iter().filter(|r| r[0] == "1").count() as u64;
        let refused = replies.iter().filter(|r| r[0] == "0").count() as u64;
        (taken != left || taken + refused != RACERS as u64)
            .then(|| format!("{taken} taken, {refused} refused, {left} left"))
    })
}

fn bucket_batches(stores: Vec<RedisStore>, rep: usize) -> BoxFuture<'static, Option<String>> {
    Box::pin(async move {
        let keys = keys("batch", rep, &["tb", "gate"]);
        let left = 5 + left_before(rep);
        eval(&stores[0], &ARRANGE_BUCKET, &keys, &[&left.to_string()]).await;
        let calls = (0..RACERS).map(|_| take_call(&keys, 3, "")).collect();
        let replies = race(&stores, calls).await;
        let over = replies
            .iter()
            .any(|r| r[0] == "1" && r[1].parse::<u64>().unwrap() > 3);
        let now = eval(&stores[0], &INSPECT, &keys, &[]).await;
        let tokens: f64 = now[0].parse().unwrap();
        (granted(&replies) != left || over || tokens != 0.0).then(|| {
            format!(
                "{} granted of {left}, over 3: {over}, {tokens} left",
                granted(&replies)
            )
        })
    })
}

fn bucket_takes_and_gate(
    stores: Vec<RedisStore>,
    rep: usize,
) -> BoxFuture<'static, Option<String>> {
    Box::pin(async move {
        let keys = keys("gated", rep, &["tb", "gate"]);
        let left = left_before(rep);
        eval(&stores[0], &ARRANGE_BUCKET, &keys, &[&left.to_string()]).await;
        // Every fourth racer closes the gate; the others take.
        let calls = (0..RACERS)
            .map(|i| {
                if i % 4 == 0 {
                    close_call(&keys[1..], 3_600_000)
                } else {
                    take_call(&keys, 1, "")
                }
            })
            .collect();
        let replies = race(&stores, calls).await;
        let takes = replies.iter().enumerate().filter(|(i, _)| i % 4 != 0);
        let known = takes
            .clone()
            .all(|(_, r)| matches!(r[0].as_str(), "0" | "1" | "2"));
        let taken = granted(&replies);
        let now = eval(&stores[0], &INSPECT, &keys, &[]).await;
        let tokens: f64 = now[0].parse().unwrap();
        // The gate closed, nothing after it taken: taken and left add up.
        (!known || taken + tokens as u64 != left || tokens.fract() != 0.0)
            .then(|| format!("{taken} taken, {tokens} left of {left}; replies {replies:?}"))
    })
}

fn bucket_give_backs(stores: Vec<RedisStore>, rep: usize) -> BoxFuture<'static, Option<String>> {
    Box::pin(async move {
        let keys = keys("back", rep, &["tb", "gate"]);
        let at = eval(&stores[0], &ARRANGE_BUCKET, &keys, &["2"]).await;
        // Each racer gives back 3 (taken when the bucket held 5: room for 5 under the
        // capacity of 10), then takes 1. One after another: 2 → 4 → 6 → 8 → 9, then 9 for
        // every further racer, the capacity holding.
        let back = format!("3 5 {}", at[0]);
        let calls = (0..RACERS).map(|_| take_call(&keys, 1, &back)).collect();
        let replies = race(&stores, calls).await;
        let now = eval(&stores[0], &INSPECT, &keys, &[]).await;
        let tokens: f64 = now[0].parse().unwrap();
        (granted(&replies) != RACERS as u64 || tokens != 9.0)
            .then(|| format!("{} taken, {tokens} left", granted(&replies)))
    })
}

fn learned_takes(stores: Vec<RedisStore>, rep: usize) -> BoxFuture<'static, Option<String>> {
    Box::pin(async move {
        let keys = keys("learned", rep, &LEARNED_KEYS);
        let left = left_before(rep);
        // Even repetitions take from a count; odd ones find a window nothing is known of.
        let (count, limit) = if rep.is_multiple_of(2) {
            (left.to_string(), String::new())
        } else {
            (String::new(), left.to_string())
        };
        eval(&stores[0], &ARRANGE_LEARNED, &keys, &[&count, &limit]).await;
        let want = if rep % 4 < 2 { 1 } else { 3 };
        let calls = (0..RACERS)
            .map(|i| learned_take_call(&keys, want, i, 0))
            .collect();
        let replies = race(&stores, calls).await;
        let now = eval(&stores[0], &INSPECT_LEARNED, &keys, &[]).await;
        let taken = granted(&replies);
        if rep.is_multiple_of(2) {
            (taken != left || now[0] != "0").then(|| {
                format!(
                    "{taken} taken of {left} (want {want}), count now {:?}",
                    now[0]
                )
            })
        } else {
            // One request goes alone, whatever it wants; the count waits for its answer.
            let probes = replies.iter().filter(|r| r[0] == "1").count();
            (taken != 1 || probes != 1 || !now[0].is_empty())
                .then(|| format!("{probes} probes, {taken} taken, count now {:?}", now[0]))
        }
    })
}

fn learned_takes_beside_a_line(
    stores: Vec<RedisStore>,
    rep: usize,
) -> BoxFuture<'static, Option<String>> {
    Box::pin(async move {
        let keys = keys("learned-line", rep, &LEARNED_KEYS);
        // K from 6 to 10 left (the window ends in an hour), M from 0 to 4 in line due within
        // it: what is left beyond the line goes to newcomers, the rest stays for the line.
        // Three more in line are due after the window ends (refused until its end): they hold
        // nothing of it.
        let left = 5 + left_before(rep);
        let line = (rep % 5) as u64;
        eval(
            &stores[0],
            &ARRANGE_LEARNED,
            &keys,
            &[&left.to_string(), ""],
        )
        .await;
        eval(
            &stores[0],
            &ARRANGE_LINE,
            &keys[4..],
            &[&line.to_string(), "60000", "due-soon-"],
        )
        .await;
        eval(
            &stores[0],
            &ARRANGE_LINE,
            &keys[4..],
            &["3", "3700000", "due-later-"],
        )
        .await;
        let calls = (0..RACERS)
            .map(|i| learned_take_call(&keys, 1, i, 0))
            .collect();
        let replies = race(&stores, calls).await;
        let now = eval(&stores[0], &INSPECT_LEARNED, &keys, &[]).await;
        let count: u64 = now[0].parse().unwrap();
        let taken = granted(&replies);
        (taken != left - line || count != line)
            .then(|| format!("{taken} taken of {left} beside {line} in line, {count} left"))
    })
}

fn learned_takes_and_gate(
    stores: Vec<RedisStore>,
    rep: usize,
) -> BoxFuture<'static, Option<String>> {
    Box::pin(async move {
        let keys = keys("learned-gated", rep, &LEARNED_KEYS);
        let left = left_before(rep);
        eval(
            &stores[0],
            &ARRANGE_LEARNED,
            &keys,
            &[&left.to_string(), ""],
        )
        .await;
        let calls = (0..RACERS)
            .map(|i| {
                if i % 4 == 0 {
                    close_call(&keys[2..3], 3_600_000)
                } else {
                    learned_take_call(&keys, 1, i, 0)
                }
            })
            .collect();
        let replies = race(&stores, calls).await;
        let now = eval(&stores[0], &INSPECT_LEARNED, &keys, &[]).await;
        let count: u64 = now[0].parse().unwrap();
        (granted(&replies) + count != left)
            .then(|| format!("{} taken, {count} left of {left}", granted(&replies)))
    })
}

fn learned_notes(stores: Vec<RedisStore>, rep: usize) -> BoxFuture<'static, Option<String>> {
    Box::pin(async move {
        let keys = keys("note", rep, &["left", "quota", "probe"]);
        let mut rng = rand::rngs::StdRng::seed_from_u64(rep as u64);
        // Half the repetitions start from a count above every racer's, ending later in the
        // same window (an end stated less finely).
        if rep.is_multiple_of(2) {
            eval(&stores[0], &ARRANGE_LEARNED, &keys, &["1000", "", "600950"]).await;
        }
        let notes: Vec<(u64, u64, u64)> = (0..RACERS)
            .map(|i| {
                let left = rng.random_range(100..900);
                // One window's ends, as answers stating it in different grains would.
                let ends = rng.random_range(600_000..600_900);
                (left, ends, 50 + i as u64)
            })
            .collect();
        let calls = notes
            .iter()
            .map(|&(left, ends, limit)| Call {
                script: &LEARNED_NOTE,
                keys: keys.clone(),
                args: vec![
                    left.to_string(),
                    ends.to_string(),
                    limit.to_string(),
                    (limit * 1000).to_string(),
                    "3600000".to_owned(),
                    String::new(),
                ],
            })
            .collect();
        let started = Instant::now();
        race(&stores, calls).await;
        let now = eval(&stores[0], &INSPECT_LEARNED, &keys, &[]).await;
        let least = notes.iter().map(|n| n.0).min().unwrap();
        let soonest = notes.iter().map(|n| n.1).min().unwrap();
        let count: u64 = now[0].parse().unwrap();
        let ttl: u64 = now[1].parse().unwrap();
        let (limit, window): (u64, u64) = (now[2].parse().unwrap(), now[3].parse().unwrap());
        let passed = started.elapsed().as_millis() as u64 + 5;
        let whole = window == limit * 1000 && (50..50 + RACERS as u64).contains(&limit);
        (count != least || ttl > soonest || ttl + passed < soonest || !whole).then(|| {
            format!(
                "count {count} (least {least}), ttl {ttl} ms (soonest {soonest}), quota \
                 {limit}/{window}"
            )
        })
    })
}

/// The keys of a learned take on a silent server: the take's five, the estimate shared and
/// the requests in flight.
const SILENT_KEYS: [&str; 7] = ["left", "quota", "gate", "probe", "line", "silent", "flying"];

/// The note's keys in the order of `learned_note.lua`, from [`SILENT_KEYS`].
fn note_keys(keys: &[String]) -> Vec<String> {
    vec![
        keys[0].clone(),
        keys[1].clone(),
        keys[3].clone(),
        keys[2].clone(),
        keys[5].clone(),
        keys[6].clone(),
    ]
}

/// A silent server's estimate, shared, in KEYS[2] (the quota hash: silent) and KEYS[6] (the
/// estimate): its counting began ARGV[1] ms ago, ARGV[2] admitted since; a quota ARGV[3] and
/// window ARGV[4] ms when not empty; ARGV[5] requests `racer-<i>` in flight in KEYS[7], taken
/// ARGV[6] ms ago.
static ARRANGE_SILENT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local t = redis.call('TIME') \
         local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
         redis.call('HSET', KEYS[2], 'silent', '1') \
         redis.call('HSET', KEYS[6], 'start', now - tonumber(ARGV[1]), 'admitted', ARGV[2]) \
         if ARGV[3] ~= '' then redis.call('HSET', KEYS[6], 'q', ARGV[3], 'w', ARGV[4]) end \
         for i = 0, tonumber(ARGV[5]) - 1 do \
           redis.call('ZADD', KEYS[7], now - tonumber(ARGV[6]), 'racer-' .. i) end \
         return 1",
    )
});
/// The estimate's fields q, admitted, pause, probing, probe; the gate's PTTL; the requests in
/// flight; the count and its PTTL.
static INSPECT_SILENT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local f = redis.call('HMGET', KEYS[6], 'q', 'admitted', 'pause', 'probing', 'probe') \
         return { f[1] or '', f[2] or '', f[3] or '', f[4] or '', f[5] or '', \
           redis.call('PTTL', KEYS[3]), redis.call('ZCARD', KEYS[7]), \
           redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]) }",
    )
});

/// A learned take of 1 on a silent server by request `racer-<asker>`. The slow start
/// doubles its cap every 10 s, not every 100 ms: a race on a loaded machine stays in one step.
fn silent_take_call(keys: &[String], asker: usize) -> Call {
    let mut call = learned_take_call(keys, 1, asker, 0);
    call.args.push("10000".to_owned());
    call
}

/// A note of a bare answer to request `racer-<asker>`: admitted, or refused.
fn silent_note_call(keys: &[String], asker: usize, refused: bool) -> Call {
    let flag = |on: bool| if on { "1" } else { "" }.to_owned();
    Call {
        script: &LEARNED_NOTE,
        keys: note_keys(keys),
        args: vec![
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            "3600000".to_owned(),
            flag(!refused),
            flag(refused),
            format!("racer-{asker}"),
        ],
    }
}

/// Before anything is measured, the fleet's slow start: racers for a window whose counting
/// began 0, 1.5 or 3.5 steps ago (caps of 1, 2 and 8 requests in flight), some in flight already:
/// exactly the cap goes, whatever the race.
fn silent_slow_starts(stores: Vec<RedisStore>, rep: usize) -> BoxFuture<'static, Option<String>> {
    Box::pin(async move {
        let keys = keys("silent-start", rep, &SILENT_KEYS);
        let (ago, cap) = [(0u64, 1u64), (15_000, 2), (35_000, 8)][rep % 3];
        let flying = (rep as u64 / 3) % cap;
        eval(
            &stores[0],
            &ARRANGE_SILENT,
            &keys,
            &[&ago.to_string(), "0", "", "", &flying.to_string(), "10"],
        )
        .await;
        // Racers from 100 up: none of them is one of those in flight.
        let calls = (0..RACERS)
            .map(|i| silent_take_call(&keys, 100 + i))
            .collect();
        let replies = race(&stores, calls).await;
        let now = eval(&stores[0], &INSPECT_SILENT, &keys, &[]).await;
        let in_flight: u64 = now[6].parse().unwrap();
        let taken = granted(&replies);
        (taken + flying != cap || in_flight != cap).then(|| {
            format!("{taken} taken beside {flying} in flight under a cap of {cap}, {in_flight} now")
        })
    })
}

/// A window to open on a silent server whose quota and window are measured: exactly one of
/// the racers goes, alone, and is the probe of all.
fn silent_windows_open(stores: Vec<RedisStore>, rep: usize) -> BoxFuture<'static, Option<String>> {
    Box::pin(async move {
        let keys = keys("silent-open", rep, &SILENT_KEYS);
        eval(
            &stores[0],
            &ARRANGE_SILENT,
            &keys,
            &["5000", "10", "10", "3000", "0", "0"],
        )
        .await;
        let calls = (0..RACERS).map(|i| silent_take_call(&keys, i)).collect();
        let replies = race(&stores, calls).await;
        let now = eval(&stores[0], &INSPECT_SILENT, &keys, &[]).await;
        let went: Vec<usize> = (0..RACERS).filter(|&i| replies[i][0] == "1").collect();
        (went.len() != 1 || now[4] != format!("racer-{}", went[0]))
            .then(|| format!("{went:?} went, the probe is {:?}", now[4]))
    })
}

/// Answers racing in: K admitted before, 1 to 5 more racers admitted and the others refused,
/// all sent in the window counted. Whatever the order, the quota is what was admitted before
/// the first refusal that came, or after it too (answers of the window measured count); the
/// pause is the first refusal's alone (the others are the same news), and the gate is
/// closed for it.
fn silent_notes(stores: Vec<RedisStore>, rep: usize) -> BoxFuture<'static, Option<String>> {
    Box::pin(async move {
        let keys = keys("silent-note", rep, &SILENT_KEYS);
        let before = 10;
        let admitted = left_before(rep) as usize;
        eval(
            &stores[0],
            &ARRANGE_SILENT,
            &keys,
            &[
                "1000",
                &before.to_string(),
                "",
                "",
                &RACERS.to_string(),
                "100",
            ],
        )
        .await;
        let calls = (0..RACERS)
            .map(|i| silent_note_call(&keys, i, i >= admitted))
            .collect();
        race(&stores, calls).await;
        let now = eval(&stores[0], &INSPECT_SILENT, &keys, &[]).await;
        let (q, counted): (u64, u64) = (now[0].parse().unwrap(), now[1].parse().unwrap());
        let gate: i64 = now[5].parse().unwrap();
        let whole = before as u64 + admitted as u64;
        let right = (before as u64..=whole).contains(&q)
            && counted == whole
            && now[2] == "375"
            && now[3] == "1"
            && (1..=250).contains(&gate)
            && now[6] == "0";
        (!right).then(|| format!("estimate {now:?}, {whole} admitted in all"))
    })
}

fn gate_closes(stores: Vec<RedisStore>, rep: usize) -> BoxFuture<'static, Option<String>> {
    Box::pin(async move {
        let keys = keys("gate", rep, &["gate"]);
        let mut pauses: Vec<u64> = (0..RACERS as u64).map(|i| 600_000 + i * 10_000).collect();
        pauses.shuffle(&mut rand::rngs::StdRng::seed_from_u64(rep as u64));
        let longest = *pauses.iter().max().unwrap();
        let calls = pauses.iter().map(|&p| close_call(&keys, p)).collect();
        race(&stores, calls).await;
        let ttl: u64 = eval(&stores[0], &INSPECT_GATE, &keys, &[]).await[0]
            .parse()
            .unwrap();
        // The longest pause won: the next longest would leave at most 10 s less.
        (ttl > longest || ttl + 10_000 <= longest)
            .then(|| format!("gate at {ttl} ms, the longest {longest} ms"))
    })
}

const RACES: [(&str, Race); 12] = [
    ("bucket_take, single takes", bucket_single_takes),
    ("bucket_take, batches of up to 3", bucket_batches),
    ("bucket_take beside close_gate", bucket_takes_and_gate),
    ("bucket_take with give-backs", bucket_give_backs),
    ("learned_take", learned_takes),
    ("learned_take beside a line", learned_takes_beside_a_line),
    ("learned_take beside close_gate", learned_takes_and_gate),
    ("learned_note", learned_notes),
    ("learned_take, silent, slow start", silent_slow_starts),
    (
        "learned_take, silent, a window to open",
        silent_windows_open,
    ),
    ("learned_note, silent, answers of one window", silent_notes),
    ("close_gate", gate_closes),
];

/// Every kind of race, `repetitions` times each, the kinds at once (each on its own keys).
async fn every_race(stores: Vec<RedisStore>, what: &str, repetitions: usize) {
    let started = Instant::now();
    let runs: Vec<_> = RACES
        .iter()
        .map(|&(name, race)| {
            let stores = stores.clone();
            tokio::spawn(async move {
                let mut wrong = Vec::new();
                for rep in 0..repetitions {
                    if let Some(what) = race(stores.clone(), rep).await {
                        wrong.push(format!("{name} #{rep}: {what}"));
                    }
                }
                wrong
            })
        })
        .collect();
    let mut wrong = Vec::new();
    for run in runs {
        wrong.extend(run.await.unwrap());
    }
    eprintln!(
        "{what}: {} races of {RACERS} racers ({} kinds x {repetitions}) took {:?}",
        RACES.len() * repetitions,
        RACES.len(),
        started.elapsed()
    );
    assert!(
        wrong.is_empty(),
        "{what}: {} wrong: {wrong:#?}",
        wrong.len()
    );
}

/// A loaded machine must not turn a slow answer into a failed race.
fn options() -> RedisOptions {
    RedisOptions::default().with_command_timeout(Duration::from_secs(5))
}

/// A standalone server of its own, and a store on it (the server stops when dropped).
async fn one_server() -> (RedisServer, RedisStore) {
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), options())
        .await
        .unwrap();
    (server, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_racers_leave_every_pacing_script_as_one_after_another_would() {
    let _turn = take_turn(module_path!()).await;
    let server = RedisServer::start();
    let mut stores = Vec::with_capacity(RACERS);
    for _ in 0..RACERS {
        stores.push(
            RedisStore::standalone(&server.url(), options())
                .await
                .unwrap(),
        );
    }
    every_race(stores, "standalone", REPETITIONS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_redis_cluster_too() {
    let _turn = take_turn(module_path!()).await;
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let mut stores = Vec::with_capacity(RACERS);
    for _ in 0..RACERS {
        stores.push(RedisStore::cluster(&urls, options()).await.unwrap());
    }
    every_race(stores, "cluster", CLUSTER_REPETITIONS).await;
}

/// The hash tag of a key, `rp:{tag}:part`, and its part.
fn tag_and_part(key: &str) -> (String, String) {
    let open = key.find('{').expect("a hash tag");
    let close = key.find('}').expect("a closed hash tag");
    (key[open + 1..close].to_owned(), key[close + 2..].to_owned())
}

/// Pacers on a Redis Cluster (fail-closed: a cross-slot script would fail the test) take,
/// close gates and share what they learn for 16 partition keys; then every key they wrote is
/// found, node by node. Each partition key's keys (bucket and gate; count, quota and gate)
/// share one hash tag, so one slot and one node, and the partition keys spread over the
/// masters.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_redis_cluster_every_key_of_a_partition_is_in_one_slot() {
    let _turn = take_turn(module_path!()).await;
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let store = RedisStore::cluster(&urls, options()).await.unwrap();
    let wait = PacingMode::Wait {
        max_wait: Duration::from_secs(5),
    };
    // Slow to refill, so that the buckets are still there (a full bucket is no key).
    let rate = Rate::per_hour(nz(100)).with_burst(nz(100));
    let bucket = SharedBucket::redis(store.clone(), "slots-bucket", rate)
        .on_failure(StoreFailure::FailClosed);
    let learned =
        SharedBucket::redis_learned(store, "slots-learned").on_failure(StoreFailure::FailClosed);
    let pacers = [
        Pacer::builder().shared(bucket).mode(wait).build(),
        Pacer::builder().shared(learned).mode(wait).build(),
    ];
    let mut stated = RateLimitInfo::default();
    stated.limit = Some(100);
    stated.remaining = Some(50);
    stated.reset = Some(Duration::from_secs(60));
    stated.window = Some(Duration::from_secs(60));
    let mut refused = RateLimitInfo::default();
    // Long enough for the gates to be there when the keys are looked for.
    refused.retry_after = Some(Duration::from_secs(60));
    for pacer in &pacers {
        for tenant in 0..16 {
            let key = format!("tenant-{tenant}");
            let permit = pacer.acquire(&key, 1).await.unwrap();
            permit.finish(StatusCode::OK, &stated).await;
            let permit = pacer.acquire(&key, 1).await.unwrap();
            permit.finish(StatusCode::TOO_MANY_REQUESTS, &refused).await;
        }
        let health = pacer.store_health().unwrap();
        assert_eq!((health.outages, health.decided_without_store), (0, 0));
    }
    // Tag → (node, parts); a tag seen on two nodes is a partition split over slots.
    let mut found: BTreeMap<String, (usize, BTreeSet<String>)> = BTreeMap::new();
    for (node, mut connection) in cluster.node_connections().into_iter().enumerate() {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("rp:*")
            .query(&mut connection)
            .unwrap();
        for key in keys {
            let slot: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(&key)
                .query(&mut connection)
                .unwrap();
            let (tag, part) = tag_and_part(&key);
            let tag_slot: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(&tag)
                .query(&mut connection)
                .unwrap();
            assert_eq!(slot, tag_slot, "{key}");
            let entry = found.entry(tag.clone()).or_insert((node, BTreeSet::new()));
            assert_eq!(entry.0, node, "{tag} on nodes {} and {node}", entry.0);
            entry.1.insert(part);
        }
    }
    let bucket_parts: BTreeSet<String> = ["gate", "tb"].map(String::from).into();
    let learned_parts: BTreeSet<String> = ["gate", "left", "quota"].map(String::from).into();
    let (mut buckets, mut counts) = (0, 0);
    for (tag, (_, parts)) in &found {
        if tag.starts_with("slots-bucket:") {
            assert_eq!(parts, &bucket_parts, "{tag}");
            buckets += 1;
        } else if tag.starts_with("slots-learned:") {
            assert_eq!(parts, &learned_parts, "{tag}");
            counts += 1;
        }
    }
    assert_eq!((buckets, counts), (16, 16), "{found:?}");
    let nodes: BTreeSet<usize> = found.values().map(|(node, _)| *node).collect();
    assert!(nodes.len() >= 2, "every partition on one master: {found:?}");
}

/// `bucket_take.lua` keeps the limiter's token bucket (`token_bucket.lua`): one key, one state,
/// one arithmetic. Taken from by turns, they agree on every token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_take_script_and_the_limiter_share_one_bucket() {
    use reqwest_polite::limiter::redis::RedisLimiter;
    let _turn = take_turn(module_path!()).await;
    let (_server, store) = one_server().await;
    // 10 tokens, one per 1,000 s: nothing refills meanwhile.
    let rate = crate::support::refill(0.001, 10);
    let limiter = RedisLimiter::token_bucket(store.clone(), "one-bucket", rate);
    let pacer = Pacer::builder()
        .shared(SharedBucket::redis(store, "one-bucket", rate).on_failure(StoreFailure::FailClosed))
        .mode(PacingMode::FailFast)
        .build();
    assert_eq!(limiter.check("k", 6).await.unwrap().remaining, 4);
    for _ in 0..3 {
        drop(pacer.acquire("k", 1).await.unwrap());
    }
    assert_eq!(limiter.check("k", 0).await.unwrap().remaining, 1);
    drop(pacer.acquire("k", 1).await.unwrap());
    let refused = limiter.check("k", 1).await.unwrap();
    assert!(!refused.allowed && refused.remaining == 0, "{refused:?}");
    // The pacer's next request waits as long as the limiter's would: about one token's
    // 1,000 s. It does not ask: its last take said what was left.
    let error = pacer.acquire("k", 1).await.unwrap_err();
    let wait = error.wait().unwrap();
    let expected = refused.retry_after.unwrap();
    assert!(
        wait.abs_diff(expected) < Duration::from_secs(1),
        "{wait:?} vs {expected:?}"
    );
    assert_eq!(pacer.shared_calls().takes, 4);
}

/// One call, alone.
async fn one_call(store: &RedisStore, call: Call) -> Vec<String> {
    let reply: Value = store
        .eval(call.script, &call.keys, &call.args)
        .await
        .unwrap();
    fields(&reply)
}

/// A silent server learned by all the processes as one, call after call on real time: a
/// refusal after 10 admissions of all makes the quota 10 and closes the gate 250 ms for
/// everyone; past it, one request probes for all (the others wait for its answer); refused, the
/// next pause is 375 ms; admitted, the window is bounded and a count of the quota (less the
/// probe) paces the next window until its first midpoint, the requests in line first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_is_learned_by_all_as_one() {
    let _turn = take_turn(module_path!()).await;
    let (_server, store) = one_server().await;
    let keys = keys("silent-seq", 0, &SILENT_KEYS);
    // Counting began 1 s ago, 10 admitted since; racer-0 went 10 ms ago.
    eval(
        &store,
        &ARRANGE_SILENT,
        &keys,
        &["1000", "10", "", "", "1", "10"],
    )
    .await;
    let call = |made: Call| one_call(&store, made);
    assert_eq!(call(silent_note_call(&keys, 0, true)).await, ["1", "250"]);
    assert_eq!(
        call(silent_take_call(&keys, 1)).await[0],
        "2",
        "the gate holds all"
    );
    tokio::time::sleep(Duration::from_millis(270)).await;
    assert_eq!(call(silent_take_call(&keys, 1)).await, ["1", "1", "-1"]);
    let waits = call(silent_take_call(&keys, 2)).await;
    assert_eq!(waits[0], "0", "one probe for all: {waits:?}");
    assert_eq!(call(silent_note_call(&keys, 1, true)).await, ["1", "375"]);
    tokio::time::sleep(Duration::from_millis(390)).await;
    assert_eq!(call(silent_take_call(&keys, 3)).await, ["1", "1", "-1"]);
    assert_eq!(call(silent_note_call(&keys, 3, false)).await, ["1", "0"]);
    let now = eval(&store, &INSPECT_SILENT, &keys, &[]).await;
    assert_eq!(now[0], "10", "the quota of all: {now:?}");
    assert_eq!(now[7], "9", "the window's count, less the probe: {now:?}");
    // The window is about 1.66 s (counting began 1 s before the refusal, the probe went 0.66 s
    // after it); the first midpoint, between the probe refused at 1.27 s and that, is about
    // 1.46 s after the probe. Loose by 150 ms for a loaded machine.
    let ttl: u64 = now[8].parse().unwrap();
    assert!((1_300..=1_600).contains(&ttl), "{now:?}");
    let mut taken = 0;
    for racer in 10..20 {
        let reply = call(silent_take_call(&keys, racer)).await;
        if reply[0] == "1" {
            taken += 1;
        }
    }
    // The ninth is kept for the request that waited for the probe's answer (it is in line).
    assert_eq!(taken, 8);
    assert_eq!(call(silent_take_call(&keys, 2)).await[0], "1");
    assert_eq!(call(silent_take_call(&keys, 20)).await[0], "0");
}

/// A note of what is left and when the window ends, no quota stated (as `shared_facts` sends).
fn stated_note_call(keys: &[String], left: u64, ends_ms: u64) -> Call {
    Call {
        script: &LEARNED_NOTE,
        keys: keys.to_vec(),
        args: vec![
            left.to_string(),
            ends_ms.to_string(),
            String::new(),
            String::new(),
            "60000".to_owned(),
            String::new(),
        ],
    }
}

/// Which window a note speaks of, when nobody stated the window: rate-limiter-flexible's first
/// answer of a window states its end rounded up to the second (2.96 s), the next ones finely,
/// up to a second sooner (2.0 s). Those are the same window, whose count ends with them; an
/// end more than a second before the count's is a late answer of a window that has ended, and
/// one more than a second after it a window that began since.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finer_end_of_an_unstated_window_up_to_a_second_sooner_ends_its_count() {
    let _turn = take_turn(module_path!()).await;
    let (_server, store) = one_server().await;
    let call = |made: Call| one_call(&store, made);
    // The count and its TTL in ms.
    let inspect = async |keys: &[String]| {
        let now = eval(&store, &INSPECT_LEARNED, keys, &[]).await;
        (now[0].clone(), now[1].parse::<i64>().unwrap())
    };
    let grain = keys("note-grain", 0, &["left", "quota", "probe"]);
    call(stated_note_call(&grain, 11, 2_960)).await;
    call(stated_note_call(&grain, 10, 2_000)).await;
    let (count, ttl) = inspect(&grain).await;
    assert_eq!(count, "10");
    assert!((1_800..=2_000).contains(&ttl), "the finer end: {ttl} ms");
    // Late, from a window that has ended: more than a second sooner.
    let late = keys("note-late", 0, &["left", "quota", "probe"]);
    call(stated_note_call(&late, 11, 2_960)).await;
    call(stated_note_call(&late, 1, 1_500)).await;
    let (count, ttl) = inspect(&late).await;
    assert_eq!(count, "11");
    assert!(ttl > 2_500, "the count's end kept: {ttl} ms");
    // A window that began since: more than a second later.
    call(stated_note_call(&late, 12, 4_200)).await;
    let (count, ttl) = inspect(&late).await;
    assert_eq!(count, "12");
    assert!(ttl > 3_900, "the new window's end: {ttl} ms");
}

/// A silent server's estimate, shared, while it is probed: counting began ARGV[1] ms ago
/// (10 admitted, the quota 10), the next pause ARGV[2] ms, the last refusal ARGV[3] ms after
/// counting began, and the probe `racer-0` sent just now.
static ARRANGE_PROBING: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local t = redis.call('TIME') \
         local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
         redis.call('HSET', KEYS[2], 'silent', '1') \
         redis.call('HSET', KEYS[6], 'start', now - tonumber(ARGV[1]), 'admitted', 10, \
           'q', 10, 'probing', '1', 'pause', ARGV[2], 'rafter', ARGV[3], \
           'probe', 'racer-0', 'ptime', now) \
         redis.call('ZADD', KEYS[7], now, 'racer-0') \
         return 1",
    )
});

/// The probes of a silent server learned by all: a probe refused 15 s after the last refusal
/// keeps the next pause at 30 s; one refused 31 s after it lets the pauses grow past 30 s (a
/// window longer than that which each refusal begins again refuses every probe 30 s apart),
/// to ten minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_servers_probe_pauses_grow_past_thirty_seconds_once_one_that_long_is_refused() {
    let _turn = take_turn(module_path!()).await;
    let (_server, store) = one_server().await;
    // (counting began, the pause, the last refusal after counting began) -> the pause asked,
    // and the next one.
    let cases = [
        (40_000, "30000", "25000", "30000", "30000"),
        (40_000, "30000", "9000", "30000", "45000"),
        (900_000, "500000", "100000", "500000", "600000"),
    ];
    for (rep, (began, pause, refused, asked, next)) in cases.into_iter().enumerate() {
        let keys = keys("silent-pressed", rep, &SILENT_KEYS);
        eval(
            &store,
            &ARRANGE_PROBING,
            &keys,
            &[&began.to_string(), pause, refused],
        )
        .await;
        let reply = one_call(&store, silent_note_call(&keys, 0, true)).await;
        assert_eq!(reply, ["1", asked], "case {rep}");
        let now = eval(&store, &INSPECT_SILENT, &keys, &[]).await;
        assert_eq!(now[2], next, "case {rep}: {now:?}");
    }
}

/// Heads refused at a spent count ask again in the order they began to wait. Against a silent
/// server (whose windows the store measures by when their first requests went) the first of
/// them asks at the count's end, not held back by the spread: A began 5 min ago, first in
/// line: the end. B just came, 5 min after A: the end plus 29 % of the spread (one half-life,
/// 10 min here, is 50 %). C began 15 min ago, now first: the end. A again, 10 min after C: half
/// the spread. C served: A is first again. Against a stated quota every head asks after the end
/// by the spread halved for every half-life it has waited: 10 min waited, half the spread. A
/// spread of a minute and a half-life of 10 min here (the pacer's: 64 ms and 6 s), so that each
/// wait's turn stands clear of the milliseconds between calls and moves little with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heads_refused_ask_again_in_the_order_they_began_to_wait() {
    let _turn = take_turn(module_path!()).await;
    let (_server, store) = one_server().await;
    const END: u64 = 5_000;
    const SPREAD: u64 = 60_000;
    let spent = |kind: &str| {
        let mut keys = keys(kind, 0, &SILENT_KEYS);
        keys.push(format!("rp:{{race-{kind}-0}}:since"));
        keys
    };
    let (silent, stated) = (spent("turns-silent"), spent("turns-stated"));
    eval(
        &store,
        &ARRANGE_SILENT,
        &silent,
        &["1000", "10", "", "", "0", "0"],
    )
    .await;
    for keys in [&silent, &stated] {
        eval(&store, &ARRANGE_LEARNED, keys, &["0", "", &END.to_string()]).await;
    }
    let ask = |keys: &[String], asker: usize, waited_ms: u64| {
        let mut call = learned_take_call(keys, 1, asker, waited_ms);
        call.args
            .extend(["100", &SPREAD.to_string(), "600000"].map(str::to_owned));
        one_call(&store, call)
    };
    let wait = |reply: Vec<String>| -> u64 {
        assert_eq!(reply[0], "0", "refused: {reply:?}");
        reply[1].parse().unwrap()
    };
    // Each wait is the count's end (less the few ms since it was set) plus the turn's part.
    let near = |wait: u64, part: u64| (END - 500 + part..=END + part + 10).contains(&wait);
    let a = wait(ask(&silent, 0, 300_000).await);
    assert!(near(a, 0), "A, first in line: {a} ms");
    let b = wait(ask(&silent, 1, 0).await);
    let part = (SPREAD as f64 * (1.0 - 0.5f64.powf(0.5))) as u64;
    assert!(
        near(b, part),
        "B, 5 min after A: {b} ms, the end plus {part}"
    );
    let c = wait(ask(&silent, 2, 900_000).await);
    assert!(near(c, 0), "C, now first: {c} ms");
    let a = wait(ask(&silent, 0, 300_000).await);
    assert!(near(a, SPREAD / 2), "A, 10 min after C: {a} ms");
    // The count refilled: C takes, and is out of the line; A is first again.
    eval(
        &store,
        &ARRANGE_LEARNED,
        &silent,
        &["1", "", &END.to_string()],
    )
    .await;
    assert_eq!(ask(&silent, 2, 900_000).await[0], "1", "C takes");
    eval(
        &store,
        &ARRANGE_LEARNED,
        &silent,
        &["0", "", &END.to_string()],
    )
    .await;
    let a = wait(ask(&silent, 0, 300_000).await);
    assert!(near(a, 0), "A, first again: {a} ms");
    // A stated count: the spread by what each has waited, the first too.
    let d = wait(ask(&stated, 3, 600_000).await);
    assert!(near(d, SPREAD / 2), "D, stated, 10 min waited: {d} ms");
    let e = wait(ask(&stated, 4, 0).await);
    assert!(near(e, SPREAD), "E, stated, just come: {e} ms");
}

/// What is left of a window goes to the heads in line in the order they began to wait, not to
/// whoever asks first: a request in line leaves each head due to ask soon that began to wait
/// before it its share of what is left (shared by all of them, itself too), and is told to
/// ask again once they have. B and C began 10 and 5 min ago, were refused by a spent count and
/// are due back in about 0.1 s; A began a minute ago and asks as the count holds 6: it takes 2
/// (6, then 5, less a share of 2 for each of B and C), and the third is kept for them, A told
/// to come back in well under the hour the count still runs. B and C then take, and A again.
/// (Each process's next request asks as soon as the one before is served: left to the first to
/// ask, four processes took whole windows in turn, one done 12-26 s before another.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_left_goes_first_to_the_heads_that_began_to_wait_first() {
    let _turn = take_turn(module_path!()).await;
    let (_server, store) = one_server().await;
    let mut keys = keys("share", 0, &SILENT_KEYS);
    keys.push("rp:{race-share-0}:since".to_owned());
    let ask = |asker: usize, waited_ms: u64| {
        let mut call = learned_take_call(&keys, 1, asker, waited_ms);
        call.args.extend(["100", "20", "600000"].map(str::to_owned));
        one_call(&store, call)
    };
    // A spent count ending in 0.1 s: B and C refused, due back then.
    eval(&store, &ARRANGE_LEARNED, &keys, &["0", "", "100"]).await;
    for (asker, waited) in [(1, 600_000), (2, 300_000)] {
        let reply = ask(asker, waited).await;
        assert_eq!(reply[0], "0", "refused: {reply:?}");
    }
    // The next window's count: 6, for an hour.
    eval(&store, &ARRANGE_LEARNED, &keys, &["6", "", "3600000"]).await;
    for left in ["5", "4"] {
        let reply = ask(0, 60_000).await;
        assert_eq!(reply[..3], ["1", "1", left], "A takes: {reply:?}");
    }
    let kept = ask(0, 60_000).await;
    assert_eq!(kept[0], "0", "the rest is kept for B and C: {kept:?}");
    let wait: u64 = kept[1].parse().unwrap();
    assert!(
        wait <= 250,
        "A asks again after B and C are due, not at the count's end: {wait} ms"
    );
    for (asker, waited, left) in [(1, 600_000, "3"), (2, 300_000, "2"), (0, 60_000, "1")] {
        let reply = ask(asker, waited).await;
        assert_eq!(reply[..3], ["1", "1", left], "racer {asker}: {reply:?}");
    }
}
