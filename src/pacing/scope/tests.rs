use super::*;
use crate::headers::{PolicySource, QuotaPolicy};
use crate::pacing::PacingMode;

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
        reset_fine: false,
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

/// The job's first moments on a pacer: acme, globex and initech each send a first request
/// (alone, as a new key does), and their answers come in `order`, stating the `left` each
/// request saw of one counter of 20. Returns how many more requests the quota they share lets
/// go in the window: those it lets go once the second answer has come (before the third), and
/// after the third. With `late`, the first answer reaches its own entry only after the second
/// was read (the two tasks run on two threads).
async fn first_answers_race(order: [(&'static str, u64); 3], late: bool) -> usize {
    let pacer = Pacer::builder().mode(PacingMode::FailFast).build();
    let info = |left| stated(left, ms(900), None);
    let mut out = HashMap::new();
    for tenant in ["acme", "globex", "initech"] {
        let permit = pacer.acquire(tenant, 1).await.expect("a first request");
        let sending = pacer.sending(tenant, HOST).expect("the pacer learns");
        out.insert(tenant, (permit, sending));
    }
    let mut sent = Vec::new();
    let mut held = None;
    for (i, (tenant, left)) in order.into_iter().enumerate() {
        let (permit, sending) = out.remove(tenant).expect("one request each");
        pacer.answered(sending, &info(left));
        match late && i == 0 {
            true => held = Some((permit, left)),
            false => permit.finish(http::StatusCode::OK, &info(left)).await,
        }
        if i == 1
            && let Some((permit, left)) = held.take()
        {
            permit.finish(http::StatusCode::OK, &info(left)).await;
        }
        if i == 0 {
            continue;
        }
        // The second tenant to answer has joined the first one's quota.
        assert_eq!(
            pacer.inner.keys.quota_key(tenant).as_deref(),
            Some(order[0].0),
            "{tenant} shares a quota"
        );
        while let Ok(permit) = pacer.acquire(tenant, 1).await {
            sent.push(permit);
            assert!(sent.len() <= 20, "the window's quota is 20");
        }
    }
    sent.len()
}

#[tokio::test(start_paused = true)]
async fn a_partition_that_joins_a_quota_brings_the_windows_count_with_it() {
    // acme's answer came before the server counted the others' requests: its entry took 19
    // left. initech's and globex's answers show them counted: 17 are left, not 19.
    assert_eq!(
        first_answers_race([("acme", 19), ("initech", 17), ("globex", 18)], false).await,
        17
    );
    // The same, with acme's answer read by the scope before its own entry: its request is
    // counted among the answers, not also among those on their way.
    assert_eq!(
        first_answers_race([("acme", 19), ("initech", 17), ("globex", 18)], true).await,
        17
    );
    // initech joins while globex's request is still on its way, not yet counted (18 left
    // after two): it will be, so 17 are left for the quota entry.
    assert_eq!(
        first_answers_race([("acme", 19), ("initech", 18), ("globex", 17)], false).await,
        17
    );
    // acme's answer came last of the server's three (17 left) but first here: every request
    // on its way was counted already, and 17 are left, not fewer. (One unspent would let an
    // early probe through, read as the window freed.)
    assert_eq!(
        first_answers_race([("acme", 17), ("initech", 18), ("globex", 19)], false).await,
        17
    );
}
