use super::*;
use crate::headers::{PolicySource, QuotaPolicy};

const HOST: &str = "api.example.com:443";

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// An answer stating 20 per window, `remaining` left, the window ending `reset` from now.
fn stated(remaining: u64, reset: Duration, pk: Option<&[u8]>) -> RateLimitInfo {
    let policy = QuotaPolicy {
        source: if pk.is_some() {
            PolicySource::Ietf
        } else {
            PolicySource::XRateLimit
        },
        name: pk.map(|_| "per-api-key".to_owned()),
        quota: Some(20),
        quota_unit: QuotaUnit::Requests,
        window: None,
        remaining: Some(remaining),
        reset: Some(reset),
        partition_key: pk.map(<[u8]>::to_vec),
    };
    RateLimitInfo {
        limit: Some(20),
        remaining: Some(remaining),
        reset: Some(reset),
        policies: vec![policy],
        ..RateLimitInfo::default()
    }
}

/// One request of `partition`, sent at `sent` and answered at `answered` with `info`.
fn exchange(
    table: &Arc<ScopeTable>,
    partition: &str,
    sent: Duration,
    answered: Duration,
    info: &RateLimitInfo,
) -> Change {
    table
        .sending(partition, HOST, sent)
        .answered(answered, info)
        .0
}

/// The window every answer below states: it ends at 1 s.
fn until_1s(now: Duration) -> Duration {
    Duration::from_secs(1) - now
}

/// One request of `partition` sent at `sent` ms, answered at `answered` ms with `remaining`
/// left of 20 (`X-RateLimit-*`, no `pk`) in the window ending at 1 s.
fn answer(
    table: &Arc<ScopeTable>,
    partition: &str,
    sent: u64,
    answered: u64,
    remaining: u64,
) -> Change {
    let info = stated(remaining, until_1s(ms(answered)), None);
    exchange(table, partition, ms(sent), ms(answered), &info)
}

#[test]
fn partitions_stating_one_pk_share_one_quota_entry() {
    let table = Arc::new(ScopeTable::default());
    let key = Some(&b"k1"[..]);
    let first = exchange(&table, "acme", ms(0), ms(5), &stated(19, ms(995), key));
    assert_eq!(first, Change::None);
    // The first partition in the server's partition keeps its own entry; the next joins it.
    let joined = exchange(&table, "globex", ms(1), ms(6), &stated(18, ms(994), key));
    assert_eq!(joined, Change::Joined("acme".into()));
    assert_eq!(table.quota_key("globex").as_deref(), Some("acme"));
    assert_eq!(table.quota_key("acme"), None);
    assert!(table.is_shared("acme"));
    assert!(table.moved("globex", "globex"));
    assert!(!table.moved("globex", "acme"));
    // Another pk is another quota, whatever its counter shows.
    let other = exchange(
        &table,
        "initech",
        ms(2),
        ms(7),
        &stated(3, ms(993), Some(b"k2")),
    );
    assert_eq!(other, Change::None);
    assert_eq!(table.quota_key("initech"), None);
}

#[test]
fn one_counter_falling_across_partitions_is_one_quota() {
    let table = Arc::new(ScopeTable::default());
    assert_eq!(answer(&table, "acme", 0, 10, 19), Change::None);
    // globex sent one request, and its counter shows two spent: someone else spends it.
    assert_eq!(
        answer(&table, "globex", 1, 12, 18),
        Change::Joined("acme".into())
    );
    assert_eq!(table.quota_key("globex").as_deref(), Some("acme"));
}

#[test]
fn counters_that_each_count_their_own_partition_are_not_merged() {
    let table = Arc::new(ScopeTable::default());
    // Two quotas, each counting its own partition's requests only: 19, 18, 17 apiece.
    for (i, remaining) in [19, 18, 17].into_iter().enumerate() {
        let at = 10 * (i as u64 + 1);
        assert_eq!(answer(&table, "acme", at - 5, at, remaining), Change::None);
        assert_eq!(
            answer(&table, "globex", at - 5, at, remaining),
            Change::None
        );
    }
    assert_eq!(table.quota_key("acme"), None);
    assert_eq!(table.quota_key("globex"), None);
}

#[test]
fn answers_in_other_windows_are_no_evidence() {
    let table = Arc::new(ScopeTable::default());
    answer(&table, "acme", 0, 10, 19);
    // Outspent, but its window ends a second later than acme's: not the same count.
    let info = stated(10, Duration::from_secs(2) - ms(12), None);
    assert_eq!(
        exchange(&table, "globex", ms(1), ms(12), &info),
        Change::None
    );
}

#[test]
fn a_partition_whose_counter_moves_apart_is_split_and_kept_apart() {
    let table = Arc::new(ScopeTable::default());
    answer(&table, "acme", 0, 10, 19);
    assert_eq!(
        answer(&table, "globex", 1, 12, 17),
        Change::Joined("acme".into())
    );
    // acme answered 10 at 20 ms; globex's request sent after it sees 15 in the same window: one
    // counter only falls. Once may be a misread window's end: globex stays.
    answer(&table, "acme", 15, 20, 10);
    assert_eq!(answer(&table, "globex", 21, 25, 15), Change::None);
    assert_eq!(table.quota_key("globex").as_deref(), Some("acme"));
    // Twice in a row: globex counts apart.
    answer(&table, "acme", 26, 27, 9);
    assert_eq!(answer(&table, "globex", 28, 30, 14), Change::Split);
    assert_eq!(table.quota_key("globex"), None);
    assert!(!table.is_shared("acme"));
    // Evidence that would merge them again does not: the pair is proven apart.
    assert_eq!(answer(&table, "globex", 31, 35, 2), Change::None);
    assert_eq!(table.quota_key("globex"), None);
}

#[test]
fn an_answer_that_agrees_clears_a_contradiction() {
    let table = Arc::new(ScopeTable::default());
    answer(&table, "acme", 0, 10, 19);
    answer(&table, "globex", 1, 12, 17);
    answer(&table, "acme", 15, 20, 10);
    assert_eq!(answer(&table, "globex", 21, 25, 15), Change::None);
    // One that agrees (below acme's 8), then one more contradiction: not two in a row.
    answer(&table, "acme", 26, 27, 8);
    assert_eq!(answer(&table, "globex", 28, 30, 7), Change::None);
    answer(&table, "acme", 31, 32, 6);
    assert_eq!(answer(&table, "globex", 33, 35, 6), Change::None);
    assert_eq!(table.quota_key("globex").as_deref(), Some("acme"));
}

#[test]
fn a_request_sent_before_the_other_answer_may_see_more_left() {
    let table = Arc::new(ScopeTable::default());
    answer(&table, "acme", 0, 10, 19);
    answer(&table, "globex", 1, 12, 17);
    answer(&table, "acme", 15, 20, 10);
    // Sent at 16 ms, before acme's answer of 10 came: counted before it, so 12 agrees, twice.
    assert_eq!(answer(&table, "globex", 16, 25, 12), Change::None);
    assert_eq!(answer(&table, "globex", 17, 26, 11), Change::None);
    assert_eq!(table.quota_key("globex").as_deref(), Some("acme"));
}

#[test]
fn idle_partitions_are_forgotten_and_their_members_paced_alone() {
    let table = Arc::new(ScopeTable::default());
    answer(&table, "acme", 0, 10, 19);
    answer(&table, "globex", 1, 12, 17);
    assert!(table.quota_key("globex").is_some());
    table.prune(Duration::from_secs(120), Duration::from_secs(60));
    assert_eq!(table.quota_key("globex"), None);
    assert!(table.lock().partitions.is_empty());
}
