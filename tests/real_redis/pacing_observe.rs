//! The store's outage and return told to a pacer's event hook (real `redis-server` on
//! 127.0.0.1, stopped and restarted): one `StoreUnavailable` for the outage, one `StoreBack`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest_polite::limiter::redis::{RedisOptions, RedisStore};
use reqwest_polite::observe::{EventHook, PoliteEvent};
use reqwest_polite::pacing::{Pacer, SharedBucket, StoreFailure};
use reqwest_polite::time::Rate;

use crate::support::{RedisServer, nz, take_turn};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_hears_the_store_lost_and_back() {
    let _turn = take_turn(module_path!()).await;
    let mut redis = RedisServer::start();
    let options = RedisOptions::default().with_command_timeout(Duration::from_millis(50));
    let store = RedisStore::standalone(&redis.url(), options).await.unwrap();
    let bucket = SharedBucket::redis(store, "observed", Rate::per_second(nz(1000)))
        .on_failure(StoreFailure::FailOpen);
    let events = Arc::new(Mutex::new(Vec::new()));
    let kept = events.clone();
    let hook: EventHook = Arc::new(move |event: &PoliteEvent| {
        if matches!(
            event,
            PoliteEvent::StoreUnavailable { .. } | PoliteEvent::StoreBack
        ) {
            kept.lock().unwrap().push(event.clone());
        }
    });
    let pacer = Pacer::builder().shared(bucket).on_event(hook).build();
    let acquire_a_while = |pacer: Pacer, for_: Duration| async move {
        let until = tokio::time::Instant::now() + for_;
        while tokio::time::Instant::now() < until {
            drop(pacer.acquire("partner.example:443", 1).await);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };

    acquire_a_while(pacer.clone(), Duration::from_millis(100)).await;
    assert!(events.lock().unwrap().is_empty(), "{events:?}");
    tokio::task::block_in_place(|| redis.stop());
    acquire_a_while(pacer.clone(), Duration::from_millis(500)).await;
    assert_eq!(
        *events.lock().unwrap(),
        [PoliteEvent::StoreUnavailable {
            misconfigured: false
        }]
    );
    tokio::task::block_in_place(|| redis.restart());
    // The store is tried again every 200 ms.
    acquire_a_while(pacer.clone(), Duration::from_millis(1000)).await;
    assert_eq!(
        *events.lock().unwrap(),
        [
            PoliteEvent::StoreUnavailable {
                misconfigured: false
            },
            PoliteEvent::StoreBack
        ]
    );
}
