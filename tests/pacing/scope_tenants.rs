//! One quota, many partitions: a multi-tenant sync job partitioned per tenant
//! (`PerHeader::new("x-tenant").and(PerHost)`) against a partner whose one quota covers every
//! tenant. The pacer learns the quota's scope from the responses (the `pk` the server states,
//! or one counter falling across the tenants) and paces the three tenants as one quota; and it
//! keeps apart tenants whose quotas really are their own.
//!
//! The job: 30 tasks, 300 items, three tenants (item `i` is tenant `i % 3`'s), one quota of
//! 20 per second: 15 windows, the first partial (the mock's windows start on whole seconds),
//! so its minimum time is 14 s. Checked on tokio's paused clock, the mock answering in
//! process, over 10 start phases within the second; and once over real sockets.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest_polite::headers::HeaderDialect;
use reqwest_polite::limiter::FixedWindow;
use reqwest_polite::mock::{Layer, Partition, RateLimitedApi};
use reqwest_polite::pacing::{PartitionKey, PerHeader, PerHost};
use reqwest_polite::time::UnixClock;
use reqwest_polite::{ClientWithMiddleware, PoliteClientBuilder};
use tokio::time::Instant;

use crate::support::{start_at_phase, take_turn};

const TENANTS: [&str; 3] = ["acme", "globex", "initech"];
const TASKS: usize = 30;
const ITEMS: usize = 300;
const LIMIT: u64 = 20;
const WINDOW: Duration = Duration::from_secs(1);
const PHASES: u64 = 10;

/// What one run of the job measured.
#[derive(Debug)]
struct Run {
    elapsed: Duration,
    /// When each tenant's last item was fetched, from the start.
    finished: [Duration; 3],
}

impl Run {
    /// How far apart the first and the last tenant finished.
    fn spread(&self) -> Duration {
        let first = self.finished.iter().min().copied().unwrap_or_default();
        let last = self.finished.iter().max().copied().unwrap_or_default();
        last - first
    }
}

/// The client a newcomer builds for the job: one partition per tenant and host.
fn per_tenant() -> PoliteClientBuilder {
    PoliteClientBuilder::new().partition(PerHeader::new("x-tenant").and(PerHost))
}

/// The job: every item fetched, each task taking the next until none is left.
async fn job(client: ClientWithMiddleware, url: String, api_key: fn(usize) -> &'static str) -> Run {
    let queue: VecDeque<usize> = (0..ITEMS).collect();
    let queue = Arc::new(Mutex::new(queue));
    let finished = Arc::new(Mutex::new([Duration::ZERO; 3]));
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (client, url, queue, finished) =
                (client.clone(), url.clone(), queue.clone(), finished.clone());
            tokio::spawn(async move {
                loop {
                    let next = queue.lock().unwrap().pop_front();
                    let Some(item) = next else { return };
                    let tenant = item % 3;
                    let response = client
                        .get(format!("{url}/items/{item}"))
                        .header("x-tenant", TENANTS[tenant])
                        .header("x-api-key", api_key(tenant))
                        .send()
                        .await
                        .expect("a request failed");
                    assert_eq!(response.status(), 200, "item {item} was not fetched");
                    let at = started.elapsed();
                    let mut finished = finished.lock().unwrap();
                    finished[tenant] = finished[tenant].max(at);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a task panicked");
    }
    let finished = *finished.lock().unwrap();
    Run {
        elapsed: started.elapsed(),
        finished,
    }
}

/// One API key for every tenant.
fn one_key(_tenant: usize) -> &'static str {
    "the-job's-key"
}

/// A key per tenant.
fn own_key(tenant: usize) -> &'static str {
    TENANTS[tenant]
}

/// The quota's minimum time for `items` at 20 per second: every window full, the first one
/// partial (at least).
fn minimum(items: usize) -> Duration {
    WINDOW * (items as u32 / LIMIT as u32 - 1)
}

/// Runs the job from each start phase against a fresh `api()`; checks each run's 429s, time
/// (at most `ratio` × the minimum for `items_per_quota`) and tenants' spread.
async fn sweep(
    name: &str,
    api: impl Fn() -> RateLimitedApi,
    api_key: fn(usize) -> &'static str,
    items_per_quota: usize,
    max_429: usize,
) {
    let bar = minimum(items_per_quota).mul_f64(1.1);
    let (mut fastest, mut slowest, mut most_429, mut widest) =
        (Duration::MAX, Duration::ZERO, 0, Duration::ZERO);
    for phase in 0..PHASES {
        let phase = Duration::from_millis(1000 / PHASES * phase);
        start_at_phase(phase).await;
        let responder = api().responder().expect("a valid mock");
        let client = per_tenant().with_inner(responder.clone()).build();
        let run = job(client, "http://partner.test".into(), api_key).await;
        let rejected = responder.log().rejected();
        let context = format!("{name}, starting {phase:?} into a second: {run:?}");
        assert_eq!(responder.log().admitted(), ITEMS, "{context}");
        assert!(rejected <= max_429, "{context}: {rejected} × 429");
        assert!(run.elapsed <= bar, "{context}: over {bar:?}");
        assert!(run.spread() <= WINDOW, "{context}: tenants finished apart");
        fastest = fastest.min(run.elapsed);
        slowest = slowest.max(run.elapsed);
        most_429 = most_429.max(rejected);
        widest = widest.max(run.spread());
    }
    println!(
        "{name}: {ITEMS} items in {:.2}–{:.2} s (bar {:.2} s), at most {most_429} × 429, \
         tenants at most {:.2} s apart, over {PHASES} start phases",
        fastest.as_secs_f64(),
        slowest.as_secs_f64(),
        bar.as_secs_f64(),
        widest.as_secs_f64(),
    );
}

/// 20 per second per value of `x-tenant`: each tenant has a quota of its own.
fn per_tenant_quota(dialect: HeaderDialect) -> RateLimitedApi {
    let window = FixedWindow::new(LIMIT, WINDOW)
        .expect("20 per second is a valid window")
        .with_clock(UnixClock);
    let partition = Partition::Header("x-tenant".parse().expect("a header name"));
    RateLimitedApi::new()
        .layer(Layer::new("per-tenant", partition, window))
        .dialect(dialect)
}

#[tokio::test(start_paused = true)]
async fn tenants_on_one_stated_quota_are_paced_as_one() {
    // `X-RateLimit-*` has no partition key: the tenants' one counter falling across them is
    // the evidence.
    let api = || RateLimitedApi::global(LIMIT, WINDOW).dialect(HeaderDialect::XRateLimit);
    sweep("X-RateLimit-*, one quota", api, one_key, ITEMS, 3).await;
}

#[tokio::test(start_paused = true)]
async fn tenants_on_one_ietf_quota_without_pk_are_paced_as_one() {
    // IETF headers for a quota of the whole API: no `pk`, so the counters are the evidence.
    let api = || RateLimitedApi::global(LIMIT, WINDOW).dialect(HeaderDialect::Ietf);
    sweep("IETF without pk, one quota", api, one_key, ITEMS, 3).await;
}

#[tokio::test(start_paused = true)]
async fn tenants_the_server_counts_under_one_pk_are_paced_as_one() {
    // IETF headers with `pk`: the quota is per API key, and the job has one key.
    let api = || RateLimitedApi::per_api_key(LIMIT, WINDOW).dialect(HeaderDialect::Ietf);
    sweep("IETF with pk, one quota", api, one_key, ITEMS, 3).await;
}

#[tokio::test(start_paused = true)]
async fn tenants_with_quotas_of_their_own_are_not_merged() {
    // Merged, the job would take the 14 s of one quota; apart, a third of it. Each quota is
    // learned on its own: up to two 429s each (the `X-RateLimit-*` learner's cost for one
    // quota, see `pacing_learning`).
    for dialect in [HeaderDialect::XRateLimit, HeaderDialect::Ietf] {
        let name = format!("{dialect:?}, a quota per tenant");
        sweep(&name, || per_tenant_quota(dialect), own_key, ITEMS / 3, 6).await;
    }
}

#[tokio::test(start_paused = true)]
async fn tenants_with_their_own_api_keys_are_kept_apart_by_pk() {
    let api = || RateLimitedApi::per_api_key(LIMIT, WINDOW).dialect(HeaderDialect::Ietf);
    sweep("IETF with a pk per tenant", api, own_key, ITEMS / 3, 3).await;
}

/// The same job over real sockets (wiremock on 127.0.0.1), held to the same 3 × 429. The
/// time allows the machine's scheduling a window more than on the paused clock. The tenants'
/// first answers race here: the first to answer adopts the stated quota before the others'
/// answers show the counter shared, and the quota entry they join takes in the window's count
/// from their answers (measured: 2 × 429 in 20 of 20 runs, the learner's early probes, in
/// 13.3-13.7 s, the tenants at most 0.02 s apart). Under the load of the whole suite it failed
/// two runs of 2026-12-06 (one of `cargo test --test pacing`, one of CI on a clean clone, where
/// a tenant's last item took a slot a window before the others': 12.388 s against 13.388 s,
/// 1.0008 s apart); 17 of 17 runs alone passed. The tenants are held to a window apart and a
/// tenth for the answers' jitter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_real_sockets_tenants_on_one_quota_are_paced_as_one() {
    let _turn = take_turn(module_path!()).await;
    let api = RateLimitedApi::global(LIMIT, WINDOW)
        .dialect(HeaderDialect::XRateLimit)
        .start()
        .await
        .expect("a mock server");
    let run = job(per_tenant().build(), api.uri(), one_key).await;
    println!(
        "real sockets: {ITEMS} items in {:.2} s, {} × 429, tenants {:.2} s apart",
        run.elapsed.as_secs_f64(),
        api.rejected(),
        run.spread().as_secs_f64()
    );
    assert_eq!(api.admitted(), ITEMS);
    assert!(api.rejected() <= 3, "{} × 429", api.rejected());
    assert!(
        run.elapsed <= minimum(ITEMS).mul_f64(1.1) + WINDOW,
        "{run:?}"
    );
    assert!(run.spread() <= WINDOW + WINDOW / 10, "{run:?}");
}

/// `tasks` tasks fetching `items` items of `tenant`; returns when the last was fetched.
async fn tenant_job(
    client: ClientWithMiddleware,
    tenant: &'static str,
    tasks: usize,
    items: usize,
) -> Duration {
    let started = Instant::now();
    let left = Arc::new(Mutex::new(items));
    let workers: Vec<_> = (0..tasks)
        .map(|_| {
            let (client, left) = (client.clone(), left.clone());
            tokio::spawn(async move {
                loop {
                    {
                        let mut left = left.lock().unwrap();
                        if *left == 0 {
                            return;
                        }
                        *left -= 1;
                    }
                    let response = client
                        .get("http://partner.test/items")
                        .header("x-tenant", tenant)
                        .send()
                        .await
                        .expect("a request failed");
                    assert_eq!(response.status(), 200);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a task panicked");
    }
    started.elapsed()
}

#[tokio::test(start_paused = true)]
async fn a_tenants_burst_does_not_starve_the_others_on_one_quota() {
    // One quota of 20 per second. acme bursts 200 items from 20 tasks; globex and initech
    // have 20 items each, from 5 tasks each. Taking turns, each of them gets a third of the
    // quota while all three wait: their 20 items take about 3 s. In arrival order they would
    // get a sixth each (5 tasks of 30) and take about 6 s.
    for phase in [0, 300, 700] {
        start_at_phase(Duration::from_millis(phase)).await;
        let api = RateLimitedApi::global(LIMIT, WINDOW).dialect(HeaderDialect::XRateLimit);
        let responder = api.responder().expect("a valid mock");
        let client = per_tenant().with_inner(responder.clone()).build();
        let acme = tokio::spawn(tenant_job(client.clone(), "acme", 20, 200));
        let globex = tokio::spawn(tenant_job(client.clone(), "globex", 5, 20));
        let initech = tokio::spawn(tenant_job(client, "initech", 5, 20));
        let (globex, initech) = (globex.await.unwrap(), initech.await.unwrap());
        let acme = acme.await.unwrap();
        println!(
            "a burst beside two small tenants, starting {phase} ms into a second: globex {:.2} s, \
             initech {:.2} s, acme {:.2} s, {} × 429",
            globex.as_secs_f64(),
            initech.as_secs_f64(),
            acme.as_secs_f64(),
            responder.log().rejected()
        );
        for small in [globex, initech] {
            assert!(small <= Duration::from_millis(4500), "{small:?}");
        }
        // The learner's one or two, and one per tenant that joins the quota (the first answers race).
        assert!(responder.log().rejected() <= 5);
    }
}
