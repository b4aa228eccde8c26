//! Production Redis: TLS (`rediss://`, a private CA, client certificates), a password and ACL
//! users, against a real `redis-server` listening with TLS only, its certificates made at test
//! time. A store that was never configured right fails at connect with a variant that names
//! the cause, and a message that says what to fix: never as an outage a failure policy would
//! hide.

use std::error::Error as _;
use std::time::Duration;

use reqwest_polite::limiter::redis::{
    BlockingRedisStore, RedisConnectError, RedisLimitError, RedisLimiter, RedisOptions, RedisStore,
    RedisTls,
};
use reqwest_polite::pacing::{Pacer, PacingError, PacingMode, SharedBucket, StoreFailure};
use reqwest_polite::time::Rate;

use crate::support::{
    RedisServer, TestCertificates, TlsServerSetup, closed_port, nz, take_turn, take_turn_blocking,
};

const PASSWORD: &str = "default-secret";
/// An ACL user allowed what pacing needs and little else: the rule the README gives.
const PACER: &[&str] = &[
    "pacer",
    "on",
    ">pacer-secret",
    "~rp:*",
    "+@read",
    "+@write",
    "-@dangerous",
    "+time",
    "+evalsha",
    "+eval",
    "+script|load",
];
/// An ACL user that may read `rp:` keys but run no script.
const READER: &[&str] = &["reader", "on", ">reader-secret", "~rp:*", "+@read"];
/// An ACL user that may run anything, on keys that are not the crate's.
const STRANGER: &[&str] = &["stranger", "on", ">stranger-secret", "~other:*", "+@all"];

/// How the TLS library says that no trusted CA signed the server's certificate.
const UNTRUSTED: &str = if cfg!(feature = "rustls") {
    "invalid peer certificate: UnknownIssuer"
} else {
    "certificate verify failed"
};

/// A TLS-only server with the default user's password and the ACL users.
fn tls_server(certificates: &TestCertificates, client_certificates: bool) -> RedisServer {
    RedisServer::start_tls(&TlsServerSetup {
        certificates,
        password: PASSWORD,
        users: &[PACER, READER, STRANGER],
        client_certificates,
    })
}

fn trusting(certificates: &TestCertificates) -> RedisTls {
    RedisTls::default().with_root_certificates(certificates.ca_pem.as_str())
}

/// `scheme://user:password@127.0.0.1:port`.
fn url(scheme: &str, credentials: &str, port: u16) -> String {
    format!("{scheme}://{credentials}@127.0.0.1:{port}")
}

/// The error and its sources on one line, as a log shows them.
fn chain(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        line.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    line
}

/// Two pacers, as two processes would have, each with its own store on the same Redis.
async fn two_processes(url: &str, tls: &RedisTls) -> (Pacer, Pacer) {
    let mut pacers = Vec::new();
    for _ in 0..2 {
        let store = RedisStore::connect_tls(url, working_options(), tls.clone())
            .await
            .unwrap_or_else(|error| panic!("{}", chain(&error)));
        // 3 at once, then one a minute: a fourth request within the test is refused.
        let rate = Rate::per_minute(nz(1)).with_burst(nz(3));
        let bucket = SharedBucket::redis(store, "partner", rate)
            // a store error fails the test instead of letting a request through unpaced
            .on_failure(StoreFailure::FailClosed);
        pacers.push(
            Pacer::builder()
                .shared(bucket)
                .mode(PacingMode::FailFast)
                .build(),
        );
    }
    let second = pacers.pop().unwrap();
    (pacers.pop().unwrap(), second)
}

#[tokio::test]
async fn a_tls_redis_with_a_password_paces_two_processes_as_one() {
    let _turn = take_turn(module_path!()).await;
    let certificates = TestCertificates::new("e2e");
    let server = tls_server(&certificates, false);
    let tls = trusting(&certificates);

    // The default user with its password, then the ACL user, each on a key of its own.
    let users = [format!(":{PASSWORD}"), "pacer:pacer-secret".to_owned()];
    for (run, credentials) in users.iter().enumerate() {
        let url = url("rediss", credentials, server.port());
        let (first, second) = two_processes(&url, &tls).await;
        let key = format!("partner.example:443/{run}");
        // The burst is shared: two to the first process, one to the second, then none.
        for pacer in [&first, &first, &second] {
            drop(pacer.acquire(&key, 1).await.expect("within the burst"));
        }
        for pacer in [&first, &second] {
            let refused = pacer
                .acquire(&key, 1)
                .await
                .expect_err("the burst is spent");
            assert!(
                matches!(refused, PacingError::Throttled { .. }),
                "{refused:?}"
            );
        }
    }
    // The bucket lives in the TLS Redis, under the crate's prefix.
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("rp:*")
        .query(&mut server.connection())
        .unwrap();
    assert!(keys.iter().any(|key| key.contains("partner")), "{keys:?}");
}

#[tokio::test]
async fn a_limiter_on_a_tls_store_with_an_acl_user_decides() {
    let _turn = take_turn(module_path!()).await;
    let certificates = TestCertificates::new("limiter");
    let server = tls_server(&certificates, false);
    let url = url("rediss", "pacer:pacer-secret", server.port());
    let store = RedisStore::connect_tls(&url, working_options(), trusting(&certificates))
        .await
        .unwrap_or_else(|error| panic!("{}", chain(&error)));
    let limiter =
        RedisLimiter::fixed_window(store, "search", 2, Duration::from_secs(3600)).unwrap();
    let verdicts = [
        limiter.check("api-key", 1).await.unwrap().allowed,
        limiter.check("api-key", 1).await.unwrap().allowed,
        limiter.check("api-key", 1).await.unwrap().allowed,
    ];
    assert_eq!(verdicts, [true, true, false]);
}

#[tokio::test]
async fn a_wrong_password_fails_at_connect_as_a_refused_authentication() {
    let _turn = take_turn(module_path!()).await;
    let certificates = TestCertificates::new("auth");
    let server = tls_server(&certificates, false);
    let port = server.port();
    // The default user's password, wrong; an ACL user's, wrong; a user Redis does not know.
    for credentials in [":wrong-secret", "pacer:wrong-secret", "nobody:pacer-secret"] {
        let error = RedisStore::connect_tls(
            &url("rediss", credentials, port),
            RedisOptions::default(),
            trusting(&certificates),
        )
        .await
        .expect_err("the credentials are wrong");
        let RedisConnectError::Auth { address, source } = &error else {
            panic!("{credentials}: not an auth error: {}", chain(&error));
        };
        assert_eq!(address, &format!("127.0.0.1:{port}"));
        assert_eq!(source.kind(), redis::ErrorKind::AuthenticationFailed);
        assert_eq!(
            error.to_string(),
            format!(
                "redis at 127.0.0.1:{port} refused to authenticate the connection: check the \
                 user and password in the URL (redis://user:password@host:port)"
            )
        );
        assert!(!chain(&error).contains("wrong-secret"), "{}", chain(&error));
    }

    // No password at all: the check's first command meets NOAUTH.
    let error = RedisStore::connect_tls(
        &format!("rediss://127.0.0.1:{port}"),
        RedisOptions::default(),
        trusting(&certificates),
    )
    .await
    .expect_err("a password is required");
    let RedisConnectError::Auth { source, .. } = &error else {
        panic!("not an auth error: {}", chain(&error));
    };
    assert_eq!(source.code(), Some("NOAUTH"));
}

#[tokio::test]
async fn a_user_the_acl_denies_scripts_or_keys_fails_at_connect_as_a_permission_error() {
    let _turn = take_turn(module_path!()).await;
    let certificates = TestCertificates::new("acl");
    let server = tls_server(&certificates, false);
    for credentials in ["reader:reader-secret", "stranger:stranger-secret"] {
        let error = RedisStore::connect_tls(
            &url("rediss", credentials, server.port()),
            RedisOptions::default(),
            trusting(&certificates),
        )
        .await
        .expect_err("the user may not run the scripts on rp: keys");
        let RedisConnectError::Permission { source, .. } = &error else {
            panic!("{credentials}: not a permission error: {}", chain(&error));
        };
        assert_eq!(source.code(), Some("NOPERM"));
        let fix = "allow it the keys rp:* and the commands +@read +@write +time +evalsha +eval \
                   +script|load";
        assert!(error.to_string().ends_with(fix), "{error}");
    }
}

#[tokio::test]
async fn a_plain_url_to_a_tls_port_is_told_to_use_rediss() {
    let _turn = take_turn(module_path!()).await;
    let certificates = TestCertificates::new("plain-to-tls");
    let server = tls_server(&certificates, false);
    let port = server.port();
    let error = RedisStore::connect(
        &url("redis", &format!(":{PASSWORD}"), port),
        RedisOptions::default(),
    )
    .await
    .expect_err("the port speaks TLS");
    assert!(
        matches!(&error, RedisConnectError::TlsRequired { address } if *address == format!("127.0.0.1:{port}")),
        "{}",
        chain(&error)
    );
    assert_eq!(
        error.to_string(),
        format!("redis at 127.0.0.1:{port} speaks TLS only: use a rediss:// URL")
    );
}

#[tokio::test]
async fn a_rediss_url_to_a_plain_port_is_told_to_use_redis() {
    let _turn = take_turn(module_path!()).await;
    let server = RedisServer::start();
    let port = server.port();
    // The handshake may wait for an answer that never comes (Redis waits for the end of a
    // line), or fail on Redis's error reply: either way, the cause is named.
    let error = RedisStore::connect(
        &format!("rediss://127.0.0.1:{port}"),
        RedisOptions::default().with_connect_timeout(Duration::from_millis(500)),
    )
    .await
    .expect_err("the port speaks no TLS");
    assert!(
        matches!(&error, RedisConnectError::TlsNotOffered { .. }),
        "{}",
        chain(&error)
    );
    assert_eq!(
        error.to_string(),
        format!(
            "redis at 127.0.0.1:{port} speaks no TLS: use a redis:// URL, or the port of the \
             server's TLS listener"
        )
    );
}

#[tokio::test]
async fn a_server_certificate_from_an_untrusted_ca_fails_the_handshake_with_the_cause() {
    let _turn = take_turn(module_path!()).await;
    let certificates = TestCertificates::new("untrusted");
    let other = TestCertificates::new("other");
    let server = tls_server(&certificates, false);
    let url = url("rediss", &format!(":{PASSWORD}"), server.port());
    // Neither the platform's roots nor another CA trust the server's certificate.
    for tls in [None, Some(trusting(&other))] {
        let opts = RedisOptions::default();
        let error = match tls {
            None => RedisStore::connect(&url, opts).await,
            Some(tls) => RedisStore::connect_tls(&url, opts, tls).await,
        }
        .expect_err("the certificate is not trusted");
        assert!(
            matches!(&error, RedisConnectError::TlsHandshake { .. }),
            "{}",
            chain(&error)
        );
        // The TLS library's own words, under the message.
        let cause = chain(error.source().unwrap());
        assert!(cause.contains(UNTRUSTED), "{cause}");
    }
}

#[tokio::test]
async fn a_server_that_asks_for_client_certificates_takes_the_one_its_ca_signed() {
    let _turn = take_turn(module_path!()).await;
    let certificates = TestCertificates::new("mtls");
    let server = tls_server(&certificates, true);
    let url = url("rediss", &format!(":{PASSWORD}"), server.port());

    let error = RedisStore::connect_tls(&url, RedisOptions::default(), trusting(&certificates))
        .await
        .expect_err("no client certificate");
    assert!(
        matches!(&error, RedisConnectError::TlsHandshake { .. }),
        "{}",
        chain(&error)
    );
    assert!(
        error
            .to_string()
            .ends_with("needs one (RedisTls::with_client_certificate)"),
        "{error}"
    );

    let tls = trusting(&certificates).with_client_certificate(
        certificates.client_pem.as_str(),
        certificates.client_key_pem.as_str(),
    );
    let store = RedisStore::connect_tls(&url, working_options(), tls)
        .await
        .unwrap_or_else(|error| panic!("{}", chain(&error)));
    let script = redis::Script::new("return redis.call('INCR', KEYS[1])");
    let n: i64 = store
        .eval(&script, &["rp:{mtls}:n".to_owned()], &[])
        .await
        .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn tls_settings_for_a_plain_url_or_pem_without_certificates_are_refused_before_connecting() {
    let certificates = TestCertificates::new("settings");
    // Nothing listens there: a refusal would mean the settings were let through.
    let port = closed_port();
    let plain = format!("redis://127.0.0.1:{port}");
    let tls = format!("rediss://127.0.0.1:{port}");
    let not_pem = RedisTls::default().with_root_certificates("not a certificate");
    let key_for_chain = trusting(&certificates).with_client_certificate(
        certificates.client_pem.as_str(),
        certificates.client_pem.as_str(),
    );
    let cases = [
        (
            plain.as_str(),
            trusting(&certificates),
            "TLS client requires",
        ),
        (tls.as_str(), not_pem, "hold no PEM certificate"),
        (tls.as_str(), key_for_chain, "holds no PEM private key"),
    ];
    for (url, settings, cause) in cases {
        let error = RedisStore::connect_tls(url, RedisOptions::default(), settings)
            .await
            .expect_err("the settings cannot be used");
        assert!(
            matches!(&error, RedisConnectError::InvalidTls(_)),
            "{}",
            chain(&error)
        );
        assert!(chain(&error).contains(cause), "{}", chain(&error));
    }
}

#[test]
fn a_blocking_store_reports_refused_credentials_as_misconfigured_not_unavailable() {
    let _turn = take_turn_blocking(module_path!());
    let server = RedisServer::start();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("right-secret")
        .query(&mut server.connection())
        .unwrap();
    let script = redis::Script::new("return 1");
    for credentials in [":wrong-secret", ""] {
        let url = format!("redis://{credentials}@127.0.0.1:{}", server.port()).replace("//@", "//");
        let store = BlockingRedisStore::standalone(&url, RedisOptions::default()).unwrap();
        let error: RedisLimitError = store.eval::<i64>(&script, &[], &[]).unwrap_err();
        assert!(
            error.is_misconfigured() && !error.is_unavailable(),
            "{credentials:?}: {}",
            chain(&error)
        );
    }
}

/// Options for a store the test then uses: a second per command, not the default 50 ms. What
/// these tests check is TLS and credentials; a first script call over TLS in a debug build,
/// on a 2-core machine busy with a build, took over 50 ms (the store was then set aside).
fn working_options() -> RedisOptions {
    RedisOptions::default().with_command_timeout(Duration::from_secs(1))
}
