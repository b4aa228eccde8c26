//! `RedisStore::connect` reaches Redis at start-up and names the cause when it cannot: refused,
//! DNS, authentication, timeout, each with the resolver's or the client's error as its source;
//! an unknown scheme, and a port where an HTTP server, or another protocol, answers. (TLS and
//! ACL users: `redis_tls.rs`.)
use std::error::Error as _;
use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt as _;

use crate::support::{RedisServer, closed_port};
use reqwest_polite::limiter::redis::{RedisConnectError, RedisOptions, RedisStore};

/// "At once" for a refused connection on loopback, with margin for a busy machine (the
/// connect timeout is 1 s: a refusal must not wait for it).
const PROMPT: Duration = Duration::from_millis(500);

/// The client's error under a `RedisConnectError`.
fn redis_source(error: &RedisConnectError) -> &redis::RedisError {
    error
        .source()
        .and_then(|source| source.downcast_ref::<redis::RedisError>())
        .unwrap_or_else(|| panic!("no redis error as the source of {error:?}"))
}

#[tokio::test]
async fn a_closed_port_is_refused_at_once_with_the_cause() {
    let port = closed_port();
    let started = Instant::now();
    let error = RedisStore::connect(
        &format!("redis://127.0.0.1:{port}"),
        RedisOptions::default(),
    )
    .await
    .expect_err("nothing listens");
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
    let RedisConnectError::Refused { address, .. } = &error else {
        panic!("not a refusal: {error:?}");
    };
    assert_eq!(address, &format!("127.0.0.1:{port}"));
    assert!(redis_source(&error).is_connection_refusal());
    assert_eq!(
        error.to_string(),
        format!("redis at 127.0.0.1:{port} refused the connection")
    );
}

#[tokio::test]
async fn a_live_server_gives_a_working_store() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), RedisOptions::default())
        .await
        .expect("redis is up");
    let script = redis::Script::new("return redis.call('INCR', KEYS[1])");
    let n: i64 = store
        .eval(&script, &["rp:{connect}:n".to_owned()], &[])
        .await
        .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn credentials_refused_or_missing_are_auth_errors() {
    let server = RedisServer::start();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("right-secret")
        .query(&mut server.connection())
        .unwrap();
    let with_password = |password: &str| {
        server
            .url()
            .replacen("redis://", &format!("redis://:{password}@"), 1)
    };

    // No password: Redis answers the PING with NOAUTH.
    let missing = RedisStore::connect(&server.url(), RedisOptions::default())
        .await
        .expect_err("a password is required");
    assert!(
        matches!(missing, RedisConnectError::Auth { .. }),
        "{missing:?}"
    );
    assert_eq!(redis_source(&missing).code(), Some("NOAUTH"));

    // A wrong password: the handshake's AUTH fails.
    let wrong = RedisStore::connect(&with_password("wrong-secret"), RedisOptions::default())
        .await
        .expect_err("the password is wrong");
    assert!(matches!(wrong, RedisConnectError::Auth { .. }), "{wrong:?}");
    assert_eq!(
        redis_source(&wrong).kind(),
        redis::ErrorKind::AuthenticationFailed
    );
    // The message and its chain name the address, never the password.
    let mut chain = wrong.to_string();
    let mut source = wrong.source();
    while let Some(cause) = source {
        chain.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    assert!(
        chain.contains(&format!("127.0.0.1:{}", server.port())),
        "{chain}"
    );
    assert!(!chain.contains("wrong-secret"), "{chain}");

    RedisStore::connect(&with_password("right-secret"), RedisOptions::default())
        .await
        .expect("the right password");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_after_the_connect_timeout() {
    // Connections complete in the kernel's backlog, and nobody ever reads them.
    let silent = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = silent.local_addr().unwrap().port();
    // Longer than the Redis client's own default timeouts (1 s to connect, 500 ms per
    // reply), which must not cut the wait short.
    let after = Duration::from_millis(1500);
    let started = Instant::now();
    let error = RedisStore::connect(
        &format!("redis://127.0.0.1:{port}"),
        RedisOptions::default().with_connect_timeout(after),
    )
    .await
    .expect_err("no answer");
    let elapsed = started.elapsed();
    assert!(
        matches!(&error, RedisConnectError::Timeout { after: a, .. } if *a == after),
        "{error:?}"
    );
    // Not before the timeout; after it, only the timer's and a busy machine's lateness.
    assert!(elapsed >= after && elapsed < after + PROMPT, "{elapsed:?}");
    assert!(error.source().is_none());
}

#[tokio::test]
async fn a_host_that_does_not_resolve_is_a_dns_error() {
    // `.invalid` never resolves (RFC 2606). The generous timeout lets a slow resolver say so
    // rather than time out.
    let opts = RedisOptions::default().with_connect_timeout(Duration::from_secs(10));
    let error = RedisStore::connect("redis://no-such-host.invalid:6379", opts)
        .await
        .expect_err("the name does not resolve");
    let RedisConnectError::Dns { host, .. } = &error else {
        panic!("not a DNS error: {error:?}");
    };
    assert_eq!(host, "no-such-host.invalid");
    assert!(error.source().unwrap().is::<std::io::Error>(), "{error:?}");
}

#[tokio::test]
async fn a_url_that_is_not_redis_is_refused_before_any_connection() {
    for (url, scheme) in [
        ("http://127.0.0.1:6379", "http"),
        ("Redis2://x:1", "Redis2"),
    ] {
        let error = RedisStore::connect(url, RedisOptions::default())
            .await
            .expect_err("not a redis URL");
        let RedisConnectError::UnknownScheme { scheme: named } = &error else {
            panic!("{url}: not an unknown scheme: {error:?}");
        };
        assert_eq!(named, scheme);
        assert_eq!(
            error.to_string(),
            format!(
                "`{scheme}:` is not a redis URL scheme: use redis://, rediss:// (TLS) or unix://"
            )
        );
    }
    // A known scheme, the rest malformed: the client's own error.
    let error = RedisStore::connect("redis://127.0.0.1:notaport", RedisOptions::default())
        .await
        .expect_err("not a port");
    assert!(
        matches!(error, RedisConnectError::InvalidUrl(_)),
        "{error:?}"
    );
    assert_eq!(
        redis_source(&error).kind(),
        redis::ErrorKind::InvalidClientConfig
    );
}

#[tokio::test]
async fn a_port_where_an_http_server_listens_is_named_an_http_server() {
    let http = wiremock::MockServer::start().await;
    let port = http.address().port();
    let mut schemes = vec!["redis"];
    if cfg!(any(feature = "rustls", feature = "native-tls")) {
        schemes.push("rediss");
    }
    for scheme in schemes {
        let error = RedisStore::connect(
            &format!("{scheme}://127.0.0.1:{port}"),
            RedisOptions::default(),
        )
        .await
        .expect_err("not redis");
        assert!(
            matches!(&error, RedisConnectError::HttpServer { .. }),
            "{scheme}: {error:?}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "the server at 127.0.0.1:{port} speaks HTTP, not redis: check the host and port"
            )
        );
    }
}

#[tokio::test]
async fn a_port_where_another_protocol_answers_is_not_redis() {
    // An SSH server's greeting, to every connection: the check's and the probe's (at most 3).
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let greeter = tokio::spawn(async move {
        for _ in 0..3 {
            let (mut stream, _) = listener.accept().await.unwrap();
            let _ = stream.write_all(b"SSH-2.0-OpenSSH_9.2\r\n").await;
        }
    });
    let error = RedisStore::connect(
        &format!("redis://127.0.0.1:{port}"),
        RedisOptions::default(),
    )
    .await
    .expect_err("not redis");
    greeter.abort();
    assert!(
        matches!(&error, RedisConnectError::NotRedis { .. }),
        "{error:?}"
    );
    assert_eq!(redis_source(&error).kind(), redis::ErrorKind::Parse);
    assert_eq!(
        error.to_string(),
        format!(
            "the server at 127.0.0.1:{port} does not speak redis's protocol: check the host and \
             port"
        )
    );
}

/// Without the crate's TLS features, `rediss://` says which feature it needs.
#[cfg(not(any(feature = "rustls", feature = "native-tls")))]
#[tokio::test]
async fn a_rediss_url_without_a_tls_feature_names_the_feature() {
    let error = RedisStore::connect("rediss://127.0.0.1:6380", RedisOptions::default())
        .await
        .expect_err("no TLS in this build");
    assert!(matches!(error, RedisConnectError::TlsNotBuilt), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("`rustls` or `native-tls` feature"),
        "{error}"
    );
}
