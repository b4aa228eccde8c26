use std::sync::Mutex as StdMutex;

use super::*;
use crate::time::{Rate, nz};

/// A pacer of 10 per second per quota entry, on which `globex` and `initech` draw on
/// `acme`'s entry, as if learned.
fn shared_pacer(weights: Option<fn(&str) -> u32>) -> Pacer {
    let mut builder = Pacer::builder().rate(Rate::per_second(nz(10)));
    if let Some(weights) = weights {
        builder = builder.turn_weights(weights);
    }
    let pacer = builder.build();
    pacer.inner.keys.scopes.join("globex", "acme");
    pacer.inner.keys.scopes.join("initech", "acme");
    pacer
}

/// `acme` bursts 30 requests; 1 ms later `globex` and `initech` send 6 each. Returns the
/// partitions in the order their permits came.
async fn order(pacer: Pacer) -> Vec<&'static str> {
    let served = Arc::new(StdMutex::new(Vec::new()));
    let mut tasks = Vec::new();
    let mut spawn = |partition: &'static str| {
        let (pacer, served) = (pacer.clone(), served.clone());
        tasks.push(tokio::spawn(async move {
            let permit = pacer.acquire(partition, 1).await.expect("a permit");
            served.lock().unwrap().push(partition);
            drop(permit);
        }));
    };
    for _ in 0..30 {
        spawn("acme");
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    for _ in 0..6 {
        spawn("globex");
        spawn("initech");
    }
    for task in tasks {
        task.await.unwrap();
    }
    Arc::try_unwrap(served).unwrap().into_inner().unwrap()
}

/// Where the last permit of `partition` came.
fn last_of(order: &[&str], partition: &str) -> usize {
    order.iter().rposition(|p| *p == partition).unwrap()
}

#[tokio::test(start_paused = true)]
async fn partitions_of_one_quota_take_turns() {
    let order = order(shared_pacer(None)).await;
    assert_eq!(order.len(), 42);
    // The burst's first request went before the others came; then one each in turn: the
    // sixth round ends at the 19th permit.
    assert_eq!(&order[1..4], ["acme", "globex", "initech"]);
    assert_eq!(last_of(&order, "globex"), 17, "{order:?}");
    assert_eq!(last_of(&order, "initech"), 18, "{order:?}");
}

#[tokio::test(start_paused = true)]
async fn a_heavier_partition_takes_more_turns_per_round() {
    let weights = |partition: &str| if partition == "globex" { 2 } else { 1 };
    let order = order(shared_pacer(Some(weights))).await;
    // Two of globex's for each of the others': its six are served in three rounds.
    assert_eq!(last_of(&order, "globex"), 12, "{order:?}");
    assert_eq!(last_of(&order, "initech"), 18, "{order:?}");
}

#[tokio::test(start_paused = true)]
async fn a_partition_on_its_own_quota_has_no_lane() {
    let pacer = Pacer::builder().rate(Rate::per_second(nz(10))).build();
    let permit = pacer.acquire("acme", 1).await.unwrap();
    drop(permit);
    assert_eq!(pacer.inner.lanes.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_pause_on_a_partition_of_a_shared_quota_pauses_the_quota() {
    let pacer = Pacer::builder().mode(PacingMode::FailFast).build();
    pacer.inner.keys.scopes.join("globex", "acme");
    pacer.pause("globex", Duration::from_secs(5));
    let refused = pacer.acquire("acme", 1).await;
    assert!(
        matches!(refused, Err(PacingError::Throttled { .. })),
        "{refused:?}"
    );
    // A partition of its own is not held.
    assert!(pacer.acquire("initech", 1).await.is_ok());
}
