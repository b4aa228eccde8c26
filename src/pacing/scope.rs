//! The quota's scope: which partitions draw on one server quota, learned from the responses.
//!
//! The partition a user chooses says whose requests they are (a tenant, a route); the quota
//! they draw on is the server's. Partitions found to share one quota are paced as one: the
//! key table maps each of them to one quota entry (one queue, one learned model), while each
//! keeps its own name in the user's code. The rule, checked on every response that states a
//! quota, with its governing policy:
//!
//! 1. **The server's partition key.** A policy stated with the IETF draft's `pk` names the
//!    partition the server counted the request in: partitions on the same host whose
//!    responses state the same policy name and the same `pk` are one quota, and different
//!    `pk`s are different quotas, whatever the counters do.
//! 2. **One counter, falling across partitions.** Without a `pk`, two partitions on the same
//!    host that state the identical policy (name, limit, window, unit) in the same window
//!    (the same reset instant, to within half the reset's grain) share one quota when either
//!    shows its counter spent faster than its own requests explain: `limit - remaining` above
//!    the partition's answers in that window plus its requests in flight. A counter only its
//!    own partition spends never shows that, whatever order the answers come in; the
//!    partitions' first answers race, so the one that answers first need not show it yet.
//! 3. **Undone when the counters move apart.** Inside a merged quota, a request sent after
//!    another partition's answer must see a lower `remaining` than that answer, in the same
//!    window (one counter only falls). Two answers in a row that see as much or more prove
//!    the partition counts apart: it is split out of the quota again, and the pair is never
//!    merged on evidence again.
//!
//! A partition that joins a quota moves its waiting requests to the quota entry's queue, where
//! partitions take turns (the `turns` module), and brings the window's count with it: the
//! partitions' first answers race, so the entry may have adopted the stated quota before the
//! counter showed the others' requests. Its budget is then at most the fewest left any of its
//! partitions' answers stated in the window, less the requests on their way that the counter
//! had not counted yet (it had counted every answer, and as many more as `limit - remaining`
//! exceeds them). The rule is learned by
//! [`PacingMiddleware`](super::PacingMiddleware), which knows each request's host; a
//! [`Pacer`](super::Pacer) used on its own paces each key it is given. Quotas whose reset
//! moves with every request (sliding logs, token buckets) give no window to compare counters
//! in: their partitions are merged by `pk` only.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use super::pacer::Pacer;
use crate::headers::{QuotaUnit, RateLimitInfo};

/// Partitions held at most per host and policy: the candidates a response is compared with.
const CANDIDATES: usize = 64;

/// Answers in a row that contradict one counter before a partition is split from it: one
/// alone may be a window's end read from a reset stated in whole seconds.
const STRIKES: u32 = 2;

/// The most partitions held in all; past it, idle ones are dropped at once.
const MAX_PARTITIONS: usize = 100_000;

/// The tolerance on a reset instant when the server states it to the millisecond or finer.
const FINE_TOLERANCE: Duration = Duration::from_millis(25);

/// A partition the server named: host, policy name, `pk`.
type ServerPartition = (Box<str>, Option<String>, Vec<u8>);

/// Which policy a response states, as far as telling quotas apart goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PolicyId {
    host: Box<str>,
    name: Option<String>,
    limit: Option<u64>,
    window: Option<Duration>,
    unit: QuotaUnit,
}

/// One response's account of its quota.
#[derive(Debug, Clone)]
struct Sighting {
    remaining: u64,
    /// When the window ends, by the pacer's clock.
    reset_at: Duration,
    /// How far `reset_at` may be off (half the stated reset's grain).
    tolerance: Duration,
    arrived: Duration,
    /// Whether the counter was spent faster than this partition's own requests explain.
    outspent: bool,
}

impl Sighting {
    fn same_window(&self, other: &Sighting) -> bool {
        self.reset_at.abs_diff(other.reset_at) <= self.tolerance.max(other.tolerance)
    }
}

/// What is known of one partition.
#[derive(Debug, Default)]
struct Member {
    /// The host its requests go to.
    host: Box<str>,
    /// The quota key it is paced on, when it shares a quota (`None`: its own key).
    quota: Option<Arc<str>>,
    /// The policy its last response stated.
    policy: Option<PolicyId>,
    pk: Option<Vec<u8>>,
    last: Option<Sighting>,
    /// Its answers stating the window of `last`.
    in_window: u64,
    in_flight: u64,
    /// Answers in a row that contradicted one counter (see [`STRIKES`]).
    strikes: u32,
    /// Partitions proven to count apart from this one.
    apart: HashSet<Box<str>>,
    used: Duration,
}

#[derive(Debug, Default)]
struct Scopes {
    partitions: HashMap<Box<str>, Member>,
    /// The partitions last seen stating each policy, oldest first.
    candidates: HashMap<PolicyId, Vec<Box<str>>>,
    /// The quota key of each stated partition key: host, policy name, `pk`.
    by_pk: HashMap<ServerPartition, Arc<str>>,
    /// Partitions whose quota key changed since the aliases were last brought up to date.
    changed: Vec<Box<str>>,
}

/// The partitions that share a quota, and the quota entries they share.
#[derive(Debug, Default)]
struct Aliases {
    /// Each such partition's quota entry.
    of: HashMap<Box<str>, Arc<str>>,
    /// The quota entries that other partitions draw on.
    shared: HashSet<Arc<str>>,
}

/// Which partitions share a quota; part of the pacer's key table.
#[derive(Debug, Default)]
pub(crate) struct ScopeTable {
    scopes: Mutex<Scopes>,
    /// Each partition that shares a quota, with the key of its quota entry: read by every
    /// acquire, so apart from the evidence's lock.
    aliases: RwLock<Aliases>,
    /// Whether any partition shares a quota (most pacers never have one: no lookup then).
    any: AtomicBool,
}

/// A request on its way to the server, counted in its partition's requests in flight until
/// answered or dropped.
#[derive(Debug)]
pub(crate) struct Sending {
    table: Arc<ScopeTable>,
    partition: Box<str>,
    host: Box<str>,
    sent: Duration,
    answered: bool,
}

/// What an answer says of the one counter its partition is taken to share.
#[derive(Debug)]
enum Verdict {
    /// It shows as much left as, or more than, this partition's answer that came before it
    /// was sent.
    Contradicts(Box<str>),
    /// It shows less left than every such answer.
    Agrees,
    /// No answer to compare it with.
    Untested,
}

/// What the answers of the window showed of a quota's one counter when partitions joined it:
/// the quota entry learned nothing of their requests, which went on their own entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counted {
    /// The fewest left that any answer of the quota's partitions stated in the window.
    pub(crate) remaining: u64,
    /// How many of the requests on their way the server had counted by then.
    pub(crate) counted: u64,
    /// The quota's partitions' requests on their way on the quota entry.
    pub(crate) on_entry: u64,
    /// Requests on their way that the quota entry does not know of: reserved on the entries
    /// the joining partitions left, or by the host's partitions not heard from in the window.
    pub(crate) elsewhere: u64,
}

/// How one response changed the scopes (for tests and traces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    None,
    /// The partition now draws on this quota entry.
    Joined(Arc<str>),
    /// The partition is paced on its own again.
    Split,
}

impl ScopeTable {
    fn lock(&self) -> MutexGuard<'_, Scopes> {
        self.scopes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The quota key `partition` is paced on, when it is not its own.
    pub(crate) fn quota_key(&self, partition: &str) -> Option<Arc<str>> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let aliases = self.aliases.read().unwrap_or_else(|e| e.into_inner());
        aliases.of.get(partition).cloned()
    }

    /// Whether other partitions draw on `partition`'s own quota entry.
    pub(crate) fn is_shared(&self, partition: &str) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        let aliases = self.aliases.read().unwrap_or_else(|e| e.into_inner());
        aliases.shared.contains(partition)
    }

    /// Whether `partition` no longer draws on `key`.
    pub(crate) fn moved(&self, partition: &str, key: &str) -> bool {
        match self.quota_key(partition) {
            Some(quota) => &*quota != key,
            None => partition != key,
        }
    }

    /// Brings the aliases up to date with `scopes`.
    fn publish(&self, scopes: &mut Scopes) {
        if scopes.changed.is_empty() {
            return;
        }
        let mut aliases = self.aliases.write().unwrap_or_else(|e| e.into_inner());
        for partition in scopes.changed.drain(..) {
            match scopes
                .partitions
                .get(&partition)
                .and_then(|m| m.quota.clone())
            {
                Some(quota) => aliases.of.insert(partition, quota),
                None => aliases.of.remove(&partition),
            };
        }
        aliases.shared = aliases.of.values().cloned().collect();
        self.any.store(!aliases.of.is_empty(), Ordering::Release);
    }

    /// Counts a request of `partition` on `host` in flight from `now`.
    pub(crate) fn sending(self: &Arc<Self>, partition: &str, host: &str, now: Duration) -> Sending {
        let mut scopes = self.lock();
        if scopes.partitions.len() >= MAX_PARTITIONS && !scopes.partitions.contains_key(partition) {
            scopes.prune(now, Duration::ZERO);
            self.publish(&mut scopes);
        }
        let member = scopes
            .partitions
            .entry(partition.into())
            .or_insert_with(|| Member {
                host: host.into(),
                ..Member::default()
            });
        member.in_flight += 1;
        member.used = now;
        Sending {
            table: self.clone(),
            partition: partition.into(),
            host: host.into(),
            sent: now,
            answered: false,
        }
    }

    /// Makes `partition` draw on `quota`'s entry, as evidence would.
    #[cfg(test)]
    pub(crate) fn join(&self, partition: &str, quota: &str) {
        let mut scopes = self.lock();
        scopes.partitions.entry(partition.into()).or_default();
        scopes.assign(partition, Some(quota.into()));
        self.publish(&mut scopes);
    }

    /// Drops partitions unused for `idle_after` with nothing in flight.
    pub(crate) fn prune(&self, now: Duration, idle_after: Duration) {
        let mut scopes = self.lock();
        scopes.prune(now, idle_after);
        self.publish(&mut scopes);
    }
}

impl Pacer {
    /// Counts a request of `partition` to `host` in flight, when the pacer learns from the
    /// server; hand the answer to [`Sending::answered`].
    pub(super) fn sending(&self, partition: &str, host: &str) -> Option<Sending> {
        let inner = &self.inner;
        inner.learn.then(|| {
            let now = inner.clock.now();
            inner.keys.scopes.sending(partition, host, now)
        })
    }

    /// The answer to a request counted by [`sending`](Self::sending). When its partition
    /// joins a quota, the quota entry learns what the partitions' answers of the window
    /// showed: their first answers race, so the one that answered first adopted the stated
    /// quota unaware of the others' requests, which the server counted all the same.
    pub(super) fn answered(&self, sending: Sending, info: &RateLimitInfo) -> Change {
        let now = self.inner.clock.now();
        let (change, counted) = sending.answered(now, info);
        if let (Change::Joined(quota), Some(counted)) = (&change, counted) {
            self.inner.keys.with(quota, |state| {
                // The entry's requests on their way, as it counts them (the scope counts a
                // request a moment after it is reserved). Before the entry's first answer of
                // its own, that answer may be read here already and not there yet: its request
                // is then among the answers, and the scope's count is the one to take.
                let ours = match state.quota.budget() {
                    Some(_) => state.quota.in_flight(),
                    None => state.quota.in_flight().min(counted.on_entry),
                };
                let uncounted = ours
                    .saturating_add(counted.elsewhere)
                    .saturating_sub(counted.counted);
                state
                    .quota
                    .counted_elsewhere(now, counted.remaining, uncounted);
            });
            tracing::trace!(
                quota = %super::key::key_digest(quota),
                remaining = counted.remaining,
                counted = counted.counted,
                on_entry = counted.on_entry,
                elsewhere = counted.elsewhere,
                "pacing: a partition joined a quota, the window's count folded in"
            );
        }
        change
    }
}

impl Sending {
    /// Reads the answer's quota facts at `now`: the scope may change for the next requests.
    /// With a join, what the window's answers showed of the quota joined.
    pub(crate) fn answered(
        mut self,
        now: Duration,
        info: &RateLimitInfo,
    ) -> (Change, Option<Counted>) {
        self.answered = true;
        let mut scopes = self.table.lock();
        if let Some(member) = scopes.partitions.get_mut(&self.partition) {
            member.in_flight = member.in_flight.saturating_sub(1);
            member.used = now;
        }
        let observed = scopes.observe(&self.partition, &self.host, self.sent, now, info);
        self.table.publish(&mut scopes);
        observed
    }
}

impl Drop for Sending {
    fn drop(&mut self) {
        if !self.answered
            && let Some(member) = self.table.lock().partitions.get_mut(&self.partition)
        {
            member.in_flight = member.in_flight.saturating_sub(1);
        }
    }
}

impl Scopes {
    fn prune(&mut self, now: Duration, idle_after: Duration) {
        let changed = &mut self.changed;
        self.partitions.retain(|key, m| {
            let keep = m.in_flight > 0 || now.saturating_sub(m.used) < idle_after;
            if !keep && m.quota.is_some() {
                changed.push(key.clone());
            }
            keep
        });
        // A quota whose own key is gone: its members are paced on their own again.
        let partitions = &self.partitions;
        let orphans: Vec<Box<str>> = partitions
            .iter()
            .filter(|(_, m)| {
                m.quota
                    .as_ref()
                    .is_some_and(|q| !partitions.contains_key(&**q))
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in orphans {
            self.assign(&key, None);
        }
        let partitions = &self.partitions;
        self.candidates.retain(|_, list| {
            list.retain(|p| partitions.contains_key(p));
            !list.is_empty()
        });
        self.by_pk.retain(|_, key| partitions.contains_key(&**key));
    }

    /// Reads one answer of `partition`; with a join, what the window's answers showed of the
    /// quota joined.
    fn observe(
        &mut self,
        partition: &str,
        host: &str,
        sent: Duration,
        now: Duration,
        info: &RateLimitInfo,
    ) -> (Change, Option<Counted>) {
        // The partitions this answer moves are the ones assigned from here on.
        let moved_from = self.changed.len();
        let change = self.judge(partition, host, sent, now, info);
        let counted = match &change {
            Change::Joined(quota) => self.counted(partition, quota, moved_from),
            _ => None,
        };
        (change, counted)
    }

    /// What the answers of `quota`'s partitions showed in the window of `partition`'s last
    /// answer, once the partitions assigned since `moved_from` joined it.
    ///
    /// The counter had counted `limit - remaining` by its fewest-left answer: every answer of
    /// the window, and as many more of the requests then on their way. Those the quota entry
    /// does not know of are the movers' (reserved on the entries they left) and those of the
    /// host's partitions whose first answer of the window has not come (they may count on
    /// this counter too; a partition proven apart does not).
    fn counted(&self, partition: &str, quota: &Arc<str>, moved_from: usize) -> Option<Counted> {
        let joiner = self.partitions.get(partition)?;
        let window = joiner.last.as_ref()?;
        let limit = joiner.policy.as_ref().and_then(|p| p.limit);
        let moved = &self.changed[moved_from..];
        let (mut remaining, mut answers) = (None::<u64>, 0u64);
        let (mut on_entry, mut elsewhere) = (0u64, 0u64);
        for (key, m) in &self.partitions {
            let seen = m.last.as_ref().filter(|last| last.same_window(window));
            if **key == **quota || m.quota.as_ref() == Some(quota) {
                if let Some(last) = seen {
                    remaining = Some(remaining.map_or(last.remaining, |r| r.min(last.remaining)));
                    answers += m.in_window;
                }
                match moved.contains(key) {
                    true => elsewhere += m.in_flight,
                    false => on_entry += m.in_flight,
                }
            } else if seen.is_none()
                && m.in_flight > 0
                && m.host == joiner.host
                && !joiner.apart.contains(&**key)
            {
                elsewhere += m.in_flight;
            }
        }
        let remaining = remaining?;
        let counted = limit.map_or(0, |limit| {
            limit.saturating_sub(remaining).saturating_sub(answers)
        });
        Some(Counted {
            remaining,
            counted,
            on_entry,
            elsewhere,
        })
    }

    /// Applies the rule to one answer of `partition`.
    fn judge(
        &mut self,
        partition: &str,
        host: &str,
        sent: Duration,
        now: Duration,
        info: &RateLimitInfo,
    ) -> Change {
        let Some(policy) = info.governing_policy() else {
            return Change::None;
        };
        let (Some(remaining), Some(reset)) = (policy.remaining, policy.reset) else {
            return Change::None;
        };
        let id = PolicyId {
            host: host.into(),
            name: policy.name.clone(),
            limit: policy.quota,
            window: policy.window,
            unit: policy.quota_unit.clone(),
        };
        let Some(member) = self.partitions.get_mut(partition) else {
            return Change::None;
        };
        let tolerance = info.reset_grain.map_or(FINE_TOLERANCE, |grain| grain / 2);
        let reset_at = now.saturating_add(reset);
        let new_window = member.last.as_ref().is_none_or(|last| {
            reset_at.abs_diff(last.reset_at) > tolerance.max(last.tolerance)
                && reset_at > last.reset_at
        }) || member.policy.as_ref() != Some(&id);
        if new_window {
            member.in_window = 1;
        } else {
            member.in_window += 1;
        }
        let used = id.limit.map_or(0, |limit| limit.saturating_sub(remaining));
        let sighting = Sighting {
            remaining,
            reset_at,
            tolerance,
            arrived: now,
            outspent: used > member.in_window + member.in_flight,
        };
        if new_window
            || member
                .last
                .as_ref()
                .is_none_or(|l| l.same_window(&sighting))
        {
            member.last = Some(sighting.clone());
        }
        member.policy = Some(id.clone());
        member.pk.clone_from(&policy.partition_key);
        let list = self.candidates.entry(id.clone()).or_default();
        list.retain(|p| &**p != partition);
        list.push(partition.into());
        if list.len() > CANDIDATES {
            list.remove(0);
        }
        match &policy.partition_key {
            Some(pk) => self.by_server_key(partition, &id, pk.clone()),
            None => match self.contradiction(partition, &id, sent, &sighting) {
                Verdict::Contradicts(other) => {
                    let member = self.partitions.get_mut(partition).expect("observed above");
                    member.strikes += 1;
                    if member.strikes < STRIKES {
                        return Change::None;
                    }
                    member.strikes = 0;
                    self.split(partition, &other)
                }
                Verdict::Agrees => {
                    if let Some(member) = self.partitions.get_mut(partition) {
                        member.strikes = 0;
                    }
                    Change::None
                }
                Verdict::Untested => self.by_evidence(partition, &id, &sighting),
            },
        }
    }

    /// Rule 1: the server named the partition.
    fn by_server_key(&mut self, partition: &str, id: &PolicyId, pk: Vec<u8>) -> Change {
        let scope = (id.host.clone(), id.name.clone(), pk);
        let quota = self.by_pk.get(&scope).cloned();
        let member = self.partitions.get_mut(partition).expect("observed above");
        match quota {
            Some(quota) if &*quota == partition => Change::None,
            Some(quota) => {
                if member.quota.as_ref() == Some(&quota) {
                    return Change::None;
                }
                self.assign(partition, Some(quota.clone()));
                Change::Joined(quota)
            }
            None => {
                // The first partition seen in the server's partition paces it on its own key.
                self.by_pk.insert(scope, partition.into());
                match member.quota.is_some() {
                    true => {
                        self.assign(partition, None);
                        Change::Split
                    }
                    false => Change::None,
                }
            }
        }
    }

    /// The partitions that draw on the quota entry `quota` (its own partition included).
    fn members(&self, quota: &Arc<str>) -> Vec<Box<str>> {
        self.partitions
            .iter()
            .filter(|(key, m)| ***key == **quota || m.quota.as_ref() == Some(quota))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Sets the quota entry `partition` draws on (`None`: its own).
    fn assign(&mut self, partition: &str, quota: Option<Arc<str>>) {
        if let Some(member) = self.partitions.get_mut(partition) {
            member.quota = quota;
            self.changed.push(partition.into());
        }
    }

    /// The quota key a partition draws on.
    fn quota_of(&self, partition: &str) -> Arc<str> {
        self.partitions
            .get(partition)
            .and_then(|m| m.quota.clone())
            .unwrap_or_else(|| partition.into())
    }

    /// Rule 3: another partition of the same quota whose answer came before this request was
    /// sent, in the same window, showing no more than this answer does.
    fn contradiction(
        &self,
        partition: &str,
        id: &PolicyId,
        sent: Duration,
        sighting: &Sighting,
    ) -> Verdict {
        let quota = self.quota_of(partition);
        let Some(candidates) = self.candidates.get(id) else {
            return Verdict::Untested;
        };
        let mut verdict = Verdict::Untested;
        for other in candidates {
            if &**other == partition || self.quota_of(other) != quota {
                continue;
            }
            let Some(last) = self.partitions.get(other).and_then(|m| m.last.as_ref()) else {
                continue;
            };
            let before = last.arrived <= sent;
            let open = last.reset_at.saturating_sub(last.tolerance) > sent;
            if !(before && open && last.same_window(sighting) && last.remaining > 0) {
                continue;
            }
            if sighting.remaining >= last.remaining {
                return Verdict::Contradicts(other.clone());
            }
            verdict = Verdict::Agrees;
        }
        verdict
    }

    /// Splits whichever of `partition` and `other` is not its quota's own key.
    fn split(&mut self, partition: &str, other: &str) -> Change {
        let quota = self.quota_of(partition);
        let leaving: Box<str> = if &*quota == partition {
            other.into()
        } else {
            partition.into()
        };
        let members = self.members(&quota);
        for key in &members {
            if *key != leaving {
                if let Some(m) = self.partitions.get_mut(key) {
                    m.apart.insert(leaving.clone());
                }
                if let Some(m) = self.partitions.get_mut(&leaving) {
                    m.apart.insert(key.clone());
                }
            }
        }
        self.assign(&leaving, None);
        tracing::debug!("pacing: partitions count apart, split from a shared quota");
        if *leaving == *partition {
            Change::Split
        } else {
            Change::None
        }
    }

    /// Rule 2: one counter falling across partitions.
    fn by_evidence(&mut self, partition: &str, id: &PolicyId, sighting: &Sighting) -> Change {
        let quota = self.quota_of(partition);
        let Some(member) = self.partitions.get(partition) else {
            return Change::None;
        };
        if member.pk.is_some() {
            return Change::None;
        }
        let partner = self.candidates.get(id).and_then(|list| {
            list.iter().rev().find(|other| {
                let Some(m) = self.partitions.get(&***other) else {
                    return false;
                };
                &***other != partition
                    && self.quota_of(other) != quota
                    && !member.apart.contains(&***other)
                    && m.pk.is_none()
                    && m.last.as_ref().is_some_and(|last| {
                        // Either counter shows requests that are not its partition's.
                        (sighting.outspent || last.outspent) && last.same_window(sighting)
                    })
            })
        });
        let Some(partner) = partner.cloned() else {
            return Change::None;
        };
        let target = self.quota_of(&partner);
        // This partition's whole quota (itself, and any partition already merged into it)
        // moves to the partner's.
        let moving = self.members(&quota);
        for key in moving {
            let quota = (*key != *target).then(|| target.clone());
            self.assign(&key, quota);
        }
        tracing::debug!("pacing: partitions share one counter, paced as one quota");
        Change::Joined(target)
    }
}

#[cfg(test)]
mod tests;
