//! What the pacer knows, visible: snapshots after a stated and a silent quota were learned,
//! every event kind received by a hook, and (feature `metrics`) every metric the docs name
//! seen by a recorder. All on tokio's paused clock with the mock answering in process.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::headers::HeaderDialect;
use reqwest_polite::mock::RateLimitedApi;
use reqwest_polite::observe::{EventHook, GiveUpReason, PoliteEvent};
use reqwest_polite::pacing::{Pacer, QuotaModel};
use reqwest_polite::retry::{RetryPolicy, RetryReason};

use crate::support::{simulated_sync_job, start_at_phase};

const LIMIT: u64 = 20;
const WINDOW: Duration = Duration::from_secs(2);
/// The key of the simulated job's requests (`http://api.test/items`).
const KEY: &str = "api.test:80";

/// A hook that keeps every event.
fn recording() -> (EventHook, Arc<Mutex<Vec<PoliteEvent>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let kept = events.clone();
    let hook: EventHook =
        Arc::new(move |event: &PoliteEvent| kept.lock().unwrap().push(event.clone()));
    (hook, events)
}

#[tokio::test(start_paused = true)]
async fn a_snapshot_after_a_stated_quota_shows_the_quota_stated() {
    start_at_phase(Duration::from_millis(300)).await;
    let responder = RateLimitedApi::global(LIMIT, WINDOW)
        .dialect(HeaderDialect::Ietf)
        .responder()
        .unwrap();
    let pacer = Pacer::builder().build();
    let stack = PoliteClientBuilder::new().pacer(pacer.clone());
    simulated_sync_job(stack, &responder, 5, 50).await;

    let snapshot = pacer.snapshot(KEY).expect("the key was used");
    assert_eq!(
        snapshot.model,
        QuotaModel::Stated {
            quota: Some(LIMIT),
            window: Some(WINDOW)
        }
    );
    assert_eq!(snapshot.model.per_second(), Some(10.0));
    assert_eq!((snapshot.queued, snapshot.in_flight), (0, 0));
    assert!(!snapshot.key.contains("api.test"), "{}", snapshot.key);
    assert_eq!(snapshot.key.len(), 12);
    // 50 requests of 20 per window: 10 left of the third window, or a new window's 20.
    let remaining = snapshot.remaining.expect("the server states what is left");
    assert!(remaining <= LIMIT, "{remaining}");
    // At the stated pace, 20 + remaining more requests take one more window after this one.
    let eta = snapshot.eta(remaining + LIMIT).unwrap();
    let reset = snapshot.reset_in.unwrap();
    assert!(reset <= WINDOW, "{reset:?}");
    assert_eq!(eta, reset);
    assert_eq!(pacer.snapshots(10), vec![snapshot]);
    assert!(pacer.snapshot("elsewhere:443").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_snapshot_after_a_silent_server_shows_the_quota_it_enforced() {
    for phase in [100, 300, 500, 700, 900] {
        start_at_phase(Duration::from_millis(phase)).await;
        let responder = RateLimitedApi::global(LIMIT, WINDOW)
            .silent()
            .responder()
            .unwrap();
        let pacer = Pacer::builder().build();
        let stack = PoliteClientBuilder::new().pacer(pacer.clone());
        let run = simulated_sync_job(stack, &responder, 10, 200).await;

        let snapshot = pacer.snapshot(KEY).expect("the key was used");
        let QuotaModel::Inferred {
            quota,
            window: Some(window),
            ..
        } = snapshot.model
        else {
            panic!("not inferred: {snapshot:?}");
        };
        println!("{phase} ms into a second: {quota} per {window:?}");
        // The server enforces 20 per 2 s. Its windows roll with the wall clock, so a window's
        // first request may go sooner than 2 s after the last window's first, and the
        // estimate is a bound that the probes narrow while the job runs: within a quarter
        // of the window. The quota is what windows admitted before a refusal; between
        // refusals the curve climbs above it to look for more (see the `adaptive` module), so
        // it is 20 or a little over, never under.
        assert!((LIMIT..=LIMIT + LIMIT / 4).contains(&quota), "{snapshot:?}");
        assert!(window.abs_diff(WINDOW) <= WINDOW / 4, "{snapshot:?}");
        assert_eq!(snapshot.throttled, run.rejected as u64, "{snapshot:?}");
        assert!(snapshot.probes >= 1, "{snapshot:?}");
        assert_eq!(snapshot.remaining, None);
        assert_eq!((snapshot.queued, snapshot.in_flight), (0, 0));
    }
}

#[tokio::test(start_paused = true)]
async fn a_configured_rate_is_the_model_until_the_server_says_more() {
    let rate = reqwest_polite::time::Rate::per_second(std::num::NonZeroU32::new(5).unwrap());
    let pacer = Pacer::builder().rate(rate).build();
    drop(pacer.acquire("k", 1).await.unwrap());
    let snapshot = pacer.snapshot("k").unwrap();
    assert_eq!(snapshot.model, QuotaModel::Configured { rate });
    assert_eq!(snapshot.eta(10), Some(Duration::from_secs(2)));
}

/// The kinds of the events kept, in order of first appearance.
fn kinds(events: &[PoliteEvent]) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    for event in events {
        let kind = match event {
            PoliteEvent::RateLimited { .. } => "rate_limited",
            PoliteEvent::Paused { .. } => "paused",
            PoliteEvent::Opened { .. } => "opened",
            PoliteEvent::ModelChanged { .. } => "model_changed",
            PoliteEvent::Retrying { .. } => "retrying",
            PoliteEvent::GaveUp { .. } => "gave_up",
            PoliteEvent::StoreUnavailable { .. } => "store_unavailable",
            PoliteEvent::StoreBack => "store_back",
            _ => "other",
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds
}

#[tokio::test(start_paused = true)]
async fn a_hook_on_the_client_hears_the_pacer_and_the_retries() {
    start_at_phase(Duration::from_millis(300)).await;
    let responder = RateLimitedApi::global(LIMIT, WINDOW)
        .silent()
        .responder()
        .unwrap();
    let (hook, events) = recording();
    let stack = PoliteClientBuilder::new().on_event(hook);
    let run = simulated_sync_job(stack, &responder, 10, 60).await;
    let events = events.lock().unwrap();
    let kinds = kinds(&events);
    for kind in [
        "rate_limited",
        "paused",
        "opened",
        "model_changed",
        "retrying",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    let refusals = events
        .iter()
        .filter(|e| matches!(e, PoliteEvent::RateLimited { status: 429, .. }))
        .count();
    assert_eq!(refusals, run.rejected);
    // Every refusal of a silent server was retried as rate-limited, the pacer holding it.
    assert!(events.iter().any(|e| matches!(
        e,
        PoliteEvent::Retrying {
            reason: RetryReason::RateLimited,
            held: true,
            ..
        }
    )));
    // The model went from nothing to an estimate first.
    let first_model = events.iter().find_map(|e| match e {
        PoliteEvent::ModelChanged { from, to, .. } => Some((*from, *to)),
        _ => None,
    });
    assert!(
        matches!(
            first_model,
            Some((QuotaModel::Unknown, QuotaModel::Inferred { .. }))
        ),
        "{first_model:?}"
    );
    // No event names the key: digests only.
    let shown = format!("{events:?}");
    assert!(!shown.contains("api.test"), "{shown}");
}

#[tokio::test(start_paused = true)]
async fn a_hook_on_the_pacer_hears_a_stated_quota_learned() {
    start_at_phase(Duration::from_millis(300)).await;
    let responder = RateLimitedApi::global(LIMIT, WINDOW)
        .dialect(HeaderDialect::Ietf)
        .responder()
        .unwrap();
    let (hook, events) = recording();
    let pacer = Pacer::builder().on_event(hook).build();
    simulated_sync_job(PoliteClientBuilder::new().pacer(pacer), &responder, 5, 30).await;
    let events = events.lock().unwrap();
    let learned = events.iter().find_map(|e| match e {
        PoliteEvent::ModelChanged { to, .. } => Some(*to),
        _ => None,
    });
    assert_eq!(
        learned,
        Some(QuotaModel::Stated {
            quota: Some(LIMIT),
            window: Some(WINDOW)
        })
    );
    // The quota spent before the window's end pauses the key, with no refusal, and opens it.
    assert!(
        events
            .iter()
            .any(|e| matches!(e, PoliteEvent::Paused { refused: false, .. }))
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, PoliteEvent::Opened { .. }))
    );
}

#[tokio::test(start_paused = true)]
async fn a_hook_on_the_retry_layer_hears_it_give_up() {
    // One request per ten minutes, not paced, no retries: the second is refused and given up.
    let responder = RateLimitedApi::global(1, Duration::from_secs(600))
        .dialect(HeaderDialect::Ietf)
        .responder()
        .unwrap();
    let (hook, events) = recording();
    let retry = reqwest_polite::retry::RetryMiddleware::new(
        RetryPolicy::new()
            .with_max_retries(0)
            .with_max_server_wait(Duration::from_secs(3600)),
    )
    .on_event(hook);
    let client = PoliteClientBuilder::new()
        .retry(retry)
        .no_pacing()
        .with_inner(responder)
        .build();
    for _ in 0..2 {
        let _ = client.get("http://api.test/items").send().await.unwrap();
    }
    let events = events.lock().unwrap();
    assert_eq!(kinds(&events), ["gave_up"], "{events:?}");
    assert!(matches!(
        events[0],
        PoliteEvent::GaveUp {
            attempts: 1,
            reason: GiveUpReason::RetriesExhausted,
            status: Some(429)
        }
    ));
}

/// With the `metrics` feature, a recorder sees every metric the `observe` docs name.
#[cfg(feature = "metrics")]
mod metrics {
    use std::collections::BTreeSet;

    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use metrics_util::{CompositeKey, MetricKind};

    use super::*;

    /// The metric names the docs list.
    fn documented() -> BTreeSet<String> {
        let docs = include_str!("../../src/observe/mod.rs");
        let mut names = BTreeSet::new();
        for (at, _) in docs.match_indices("`reqwest_polite_") {
            let name: String = docs[at + 1..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            names.insert(name);
        }
        names
    }

    type Seen = Vec<(CompositeKey, DebugValue)>;

    /// Runs `job` on a paused current-thread runtime with a recorder, and returns what it saw.
    fn recorded(job: impl std::future::Future<Output = ()>) -> Seen {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        ::metrics::with_local_recorder(&recorder, || runtime.block_on(job));
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| (key, value))
            .collect()
    }

    #[test]
    fn a_recorder_sees_every_metric_the_docs_name() {
        let seen = recorded(async {
            start_at_phase(Duration::from_millis(300)).await;
            let silent = RateLimitedApi::global(LIMIT, WINDOW)
                .silent()
                .responder()
                .unwrap();
            simulated_sync_job(PoliteClientBuilder::new(), &silent, 10, 60).await;
            // A request given up: refused for ten minutes, with no retries allowed.
            let strict = RateLimitedApi::global(1, Duration::from_secs(600))
                .responder()
                .unwrap();
            let client = PoliteClientBuilder::new()
                .retry_policy(RetryPolicy::new().with_max_retries(0))
                .no_pacing()
                .with_inner(strict)
                .build();
            for _ in 0..2 {
                let _ = client.get("http://api.test/items").send().await;
            }
        });
        let names: BTreeSet<String> = seen
            .iter()
            .map(|(key, _)| key.key().name().to_string())
            .collect();
        let documented = documented();
        assert!(documented.len() >= 8, "{documented:?}");
        let missing: Vec<_> = documented.difference(&names).collect();
        assert!(
            missing.is_empty(),
            "not recorded: {missing:?} (saw {names:?})"
        );
        let undocumented: Vec<_> = names.difference(&documented).collect();
        assert!(undocumented.is_empty(), "not in the docs: {undocumented:?}");
        // The paced job's 60 requests succeeded in the end, each counted once as a success (the
        // unpaced client's are not counted: the pacing layer counts).
        let successes = seen.iter().find_map(|(key, value)| {
            let success = key.key().name() == "reqwest_polite_requests_total"
                && key.key().labels().any(|l| l.value() == "success");
            match value {
                DebugValue::Counter(n) if success => Some(*n),
                _ => None,
            }
        });
        assert_eq!(successes, Some(60));
        // Nobody waits at the end: the queue gauge is back to 0.
        for (key, value) in &seen {
            if key.kind() == MetricKind::Gauge {
                assert_eq!(*value, DebugValue::Gauge(0.0.into()), "{key:?}");
            }
        }
    }

    #[test]
    fn the_queue_gauge_labels_at_most_64_keys() {
        let seen = recorded(async {
            let pacer = Pacer::builder().build();
            for i in 0..100 {
                drop(pacer.acquire(&format!("tenant-{i}"), 1).await.unwrap());
            }
        });
        let labels: BTreeSet<String> = seen
            .iter()
            .filter(|(key, _)| key.key().name() == "reqwest_polite_queue_depth")
            .flat_map(|(key, _)| {
                key.key()
                    .labels()
                    .map(|l| l.value().to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(labels.len(), 65, "{labels:?}");
        assert!(labels.contains("other"));
        assert!(labels.iter().all(|l| l == "other" || l.len() == 12));
    }
}

#[tokio::test(start_paused = true)]
async fn a_hook_may_look_at_the_pacer() {
    // Events are told with no lock of the pacer's held: a hook that takes a snapshot on each
    // one does not deadlock, and sees the news already in the snapshot.
    start_at_phase(Duration::from_millis(300)).await;
    let responder = RateLimitedApi::global(LIMIT, WINDOW)
        .dialect(HeaderDialect::Ietf)
        .responder()
        .unwrap();
    let pacer = Pacer::builder().build();
    let looked = pacer.clone();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let hook: EventHook = Arc::new(move |event: &PoliteEvent| {
        if let PoliteEvent::Paused { .. } | PoliteEvent::ModelChanged { .. } = event {
            kept.lock().unwrap().push(looked.snapshot(KEY).unwrap());
        }
    });
    let stack = PoliteClientBuilder::new().pacer(pacer).on_event(hook);
    simulated_sync_job(stack, &responder, 5, 30).await;
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(
        seen.iter()
            .all(|s| matches!(s.model, QuotaModel::Stated { .. }))
    );
    assert!(seen.iter().any(|s| s.opens_in.is_some()), "{seen:?}");
}
