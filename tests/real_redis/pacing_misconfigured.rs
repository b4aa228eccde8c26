//! A shared bucket whose Redis refuses this client's settings (real `redis-server` with
//! `requirepass` and an ACL user, 127.0.0.1) is a configuration error, not an outage: every
//! request fails with `PacingError::StoreMisconfigured` whatever the failure policy, instead
//! of a fail-open job running unpaced while its owner believes the quota shared; once the
//! settings are fixed on the server, the next probe finds the store again.

use std::error::Error as _;
use std::time::Duration;

use reqwest_polite::limiter::redis::{RedisOptions, RedisStore};
use reqwest_polite::pacing::{Pacer, PacingError, SharedBucket, StoreFailure};
use reqwest_polite::time::Rate;

use crate::support::{RedisServer, nz, take_turn};

const POLICIES: [StoreFailure; 3] = [
    StoreFailure::FailOpen,
    StoreFailure::FailClosed,
    StoreFailure::LocalFallback { processes: 4 },
];

fn options() -> RedisOptions {
    RedisOptions::default().with_command_timeout(Duration::from_millis(500))
}

/// A server whose default user needs `right-secret`, with a user `reader` that may touch
/// only keys outside `rp:*`.
fn guarded_server() -> RedisServer {
    let server = RedisServer::start();
    let mut connection = server.connection();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "reader",
            "on",
            ">reader-secret",
            "~other:*",
            "+@all",
        ])
        .query(&mut connection)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "requirepass", "right-secret"])
        .query(&mut connection)
        .unwrap();
    server
}

/// A connection to a [`guarded_server`] as its default user.
fn admin(server: &RedisServer) -> redis::Connection {
    let url = format!("redis://:right-secret@127.0.0.1:{}", server.port());
    redis::Client::open(url)
        .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(1)))
        .unwrap()
}

async fn pacer(url: &str, name: &str, policy: StoreFailure, learned: bool) -> Pacer {
    let store = RedisStore::standalone(url, options()).await.unwrap();
    let bucket = if learned {
        SharedBucket::redis_learned(store, name)
    } else {
        SharedBucket::redis(store, name, Rate::per_second(nz(100)))
    };
    Pacer::builder().shared(bucket.on_failure(policy)).build()
}

/// The error and its sources on one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// Two requests in a row (the store answering, then set aside until its probe) fail as
/// misconfigured, naming `code`; none is let through or refused as an outage.
async fn assert_refused_as_misconfigured(pacer: &Pacer, code: &str, what: &str) {
    for attempt in 0..2 {
        let Err(error) = pacer.acquire("k", 1).await.map(drop) else {
            panic!(
                "{what}, attempt {attempt}: let through ({:?})",
                pacer.store_health()
            );
        };
        let PacingError::StoreMisconfigured { reason } = &error else {
            panic!("{what}, attempt {attempt}: {error:?}");
        };
        assert!(
            reason.is_misconfigured() && !reason.is_unavailable(),
            "{what}: {reason:?}"
        );
        assert!(chain(&error).contains(code), "{what}: {}", chain(&error));
        assert!(error.source().is_some());
    }
    let health = pacer.store_health().unwrap();
    assert!(
        health.misconfigured && !health.reachable,
        "{what}: {health:?}"
    );
    assert_eq!(health.decided_without_store, 0, "{what}: {health:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_wants_a_password_or_denies_the_keys_fails_every_policy() {
    let _turn = take_turn(module_path!()).await;
    let server = guarded_server();
    let port = server.port();
    let cases = [
        (format!("redis://127.0.0.1:{port}"), "NOAUTH", "no password"),
        (
            format!("redis://reader:reader-secret@127.0.0.1:{port}"),
            "no permissions",
            "a user denied rp:*",
        ),
    ];
    for (url, code, what) in &cases {
        for policy in POLICIES {
            for learned in [false, true] {
                let what = format!("{what}, {policy:?}, learned {learned}");
                let pacer = pacer(url, "guarded", policy, learned).await;
                // The learned take's script has more than 10 arguments with its keys: Redis
                // answers such a command from a client that sent no password with a protocol
                // error naming it unauthenticated, not NOAUTH.
                let code = match (learned, *code) {
                    (true, "NOAUTH") => "unauthenticated",
                    (_, code) => code,
                };
                assert_refused_as_misconfigured(&pacer, code, &what).await;
            }
        }
    }
    // The right password: the same buckets are used.
    let url = format!("redis://:right-secret@127.0.0.1:{port}");
    let pacer = pacer(&url, "guarded", StoreFailure::FailOpen, false).await;
    drop(pacer.acquire("k", 1).await.unwrap());
    assert!(pacer.store_health().unwrap().reachable);
}

/// An ACL fixed on the server while the job runs: the next probe (every 200 ms) finds the
/// store, and requests are paced by it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_the_acl_is_fixed_the_next_probe_finds_the_store() {
    let _turn = take_turn(module_path!()).await;
    let server = guarded_server();
    let url = format!("redis://reader:reader-secret@127.0.0.1:{}", server.port());
    let pacer = pacer(&url, "fixed", StoreFailure::FailOpen, false).await;
    assert_refused_as_misconfigured(&pacer, "no permissions", "before the fix").await;
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "reader", "~rp:*"])
        .query(&mut admin(&server))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    drop(pacer.acquire("k", 1).await.unwrap());
    let health = pacer.store_health().unwrap();
    assert!(health.reachable && !health.misconfigured, "{health:?}");
    assert_eq!(health.decided_without_store, 0);
}

/// A user's ACL narrowed while the job runs: its next call is denied, and a fail-open pacer
/// refuses from then on rather than let the job run unpaced. (Only refusals the store can tell
/// apart: a wrong password in the URL of a lazily connecting store, or a password required
/// after the connection dropped, reach the pacer as timeouts, the client retrying its
/// handshake; `RedisStore::connect` names them at start instead.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_narrowed_mid_run_fails_a_fail_open_pacer() {
    let _turn = take_turn(module_path!()).await;
    let server = guarded_server();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "reader", "~rp:*"])
        .query(&mut admin(&server))
        .unwrap();
    let url = format!("redis://reader:reader-secret@127.0.0.1:{}", server.port());
    let pacer = pacer(&url, "mid-run", StoreFailure::FailOpen, false).await;
    drop(pacer.acquire("k", 1).await.unwrap());
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "reader", "resetkeys", "~other:*"])
        .query(&mut admin(&server))
        .unwrap();
    assert_refused_as_misconfigured(&pacer, "no permissions", "after the change").await;
}
