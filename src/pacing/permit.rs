use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

use super::key::key_digest;
use super::learned::{Outcome, Ticket};
use super::pacer::{Pacer, PacerInner};
use super::shared::{Answer, SharedFacts};
use crate::headers::RateLimitInfo;
use crate::observe::{PoliteEvent, record};
use crate::time::Jitter;

/// Leave to send one request. Hand the response's rate-limit facts back with
/// [`Permit::finish`]; a permit dropped without them (the request failed) only ends its
/// in-flight count.
#[derive(Debug)]
#[must_use = "a permit feeds the pacer through `finish`"]
pub struct Permit {
    pub(super) waited: Duration,
    pub(super) reservation: Option<Reservation>,
}

impl Permit {
    /// How long the request waited for this permit.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Feeds the response's status and rate-limit facts to the pacer: a 429 or a spent quota
    /// pauses the key, a stated quota is adopted, and a 429 (or 503) that states nothing
    /// pauses the key and starts probing (see the [module docs](super)).
    pub async fn finish(self, status: StatusCode, info: &RateLimitInfo) {
        self.finish_with(status, info, None).await;
    }

    /// [`finish`](Self::finish), spreading a pause that a 429 causes with `jitter` (the retry
    /// layer's) instead of the pacer's own. Returns, for a 429, how long the key now stays
    /// paused: the one draw every request of the key waits, retries included.
    pub(super) async fn finish_with(
        mut self,
        status: StatusCode,
        info: &RateLimitInfo,
        jitter: Option<Jitter>,
    ) -> Option<Duration> {
        let mut reservation = self.reservation.take()?;
        reservation.sent = true;
        let inner = reservation.pacer.clone();
        let too_many = status == StatusCode::TOO_MANY_REQUESTS;
        if !inner.learn {
            inner.keys.with_existing(&reservation.key, |s| {
                s.quota.abandon(reservation.ticket);
                // A slot in flight freed: the head of the queue may go now.
                s.queue.news.notify_one();
            });
            return None;
        }
        let outcome = if too_many || status == StatusCode::SERVICE_UNAVAILABLE {
            Outcome::Throttled
        } else {
            Outcome::Answered
        };
        let now = inner.clock.now();
        let key = &reservation.key;
        // A pause caused by a 429 takes the retry layer's spread; a quota seen spent before
        // any 429 never opens before the reset.
        let jitter = match jitter {
            Some(jitter) if too_many => jitter,
            _ => not_before(inner.gate_jitter),
        };
        let learns = inner.shared.as_ref().is_some_and(|shared| shared.learns());
        let observer = &inner.observer;
        let throttled = outcome == Outcome::Throttled;
        if throttled {
            record::rate_limited(status.as_u16());
        }
        let states_nothing = info.limit.is_none()
            && info.remaining.is_none()
            && info.reset.is_none()
            && info.server_wait().is_none()
            && info.policies.is_empty();
        let (pause, held, facts, told) = inner.keys.with(key, |state| {
            let before = observer.listens().then(|| state.quota.model(now));
            let pause = state.quota.observe(now, reservation.ticket, outcome, info);
            // A window's end learned as an upper bound (late by a round trip already) is
            // kept as it is: its windows begin with their first request, whoever sends it.
            let bounded = state.quota.ends_by_span();
            let aimed = state.quota.silent_probe_aimed();
            let pause = pause.map(|wait| {
                if aimed {
                    // A silent server's first window probed just after a round offset: the
                    // aim is the point, and one request goes at it.
                    wait
                } else if too_many {
                    inner.spread(jitter, wait)
                } else if bounded {
                    wait
                } else {
                    // A quota seen spent before any 429: every task and process takes
                    // from the budget the server states, so there is no herd to spread,
                    // and a spread of 20% of a minute's window would idle 12 s of it.
                    let drawn = inner.spread(jitter, wait);
                    drawn.min(wait.saturating_add(SPENT_SPREAD))
                }
            });
            tracing::trace!(
                key = %key_digest(key),
                serial = reservation.ticket.serial,
                status = status.as_u16(),
                remaining = info.remaining,
                reset_ms = info.reset.map(|r| r.as_millis() as u64),
                pause_ms = pause.map(|p| p.as_millis() as u64),
                "pacing: answered"
            );
            if let Some(wait) = pause {
                state.quota.close_gate_stated(now, wait, info.server_wait());
            }
            if throttled {
                state.throttled += 1;
            }
            let told = before.map(|from| news(key, state, now, from, status, info, pause));
            // News for the head of the key's queue: it may go sooner (or must wait longer).
            state.queue.news.notify_one();
            // An admitted answer that states nothing at all: a silent server, for the others.
            let silent = !throttled && states_nothing;
            let facts = learns.then(|| {
                let facts = state
                    .quota
                    .shared_facts(now, info.remaining, reservation.ticket);
                SharedFacts {
                    silent,
                    // Reserved here, not yet taken from the count: their takes will count them.
                    left: facts
                        .left
                        .map(|(left, ends)| (left.saturating_add(state.taking), ends)),
                    ..facts
                }
            });
            (pause, state.quota.gate_after(now), facts, told)
        });
        // Told once the table's lock is let go: a hook may look at the pacer.
        for event in told.into_iter().flatten() {
            observer.emit(|| event);
        }
        // Whether the note carries a count of the window (what is left, until when).
        let counted = facts.as_ref().is_some_and(|facts| facts.left.is_some());
        let mut held = held;
        if let (Some(shared), Some(facts)) = (&inner.shared, facts) {
            let answer = Answer {
                asker: reservation.asker,
                bare_refusal: throttled && states_nothing,
            };
            let noted = shared.note(key, facts, answer).await;
            // The store's estimate of a silent server paces the key, or no longer does; a
            // pause it chose after a refusal holds this process too.
            inner.keys.with_existing(key, |state| {
                state.quota.paced_by_fleet(noted.fleet);
                if let Some(wait) = noted.pause {
                    state.quota.close_gate(now, wait);
                    state.queue.news.notify_one();
                }
                held = state.quota.gate_after(now);
            });
        }
        if let Some(wait) = pause {
            // Once per spent window and key: worth seeing at the default level.
            tracing::info!(
                key = %key_digest(key),
                wait_ms = wait.as_millis() as u64,
                too_many,
                stated = info.limit.is_some() || info.remaining.is_some() || info.server_wait().is_some(),
                "pacing: quota spent, pausing the key"
            );
            // A quota stated spent, shared as a learned count, already holds the other
            // processes off until the window's end as the soonest of their answers put it (the
            // count's TTL); a gate would hold them until this process's end, late by up to the
            // grain of a reset stated in whole seconds. A 429, and a silent server's quota
            // estimated spent, close the gate for all.
            if let Some(shared) = inner.shared.as_ref().filter(|_| too_many || !counted) {
                shared.close_gate(key, wait).await;
            }
        }
        too_many.then_some(held)
    }
}

/// What the response to a request on `key` tells the hook: a model learned or changed (it
/// was `from` before), a refusal, a pause. Made only when a hook listens.
fn news(
    key: &str,
    state: &mut super::keys::KeyState,
    now: Duration,
    from: super::QuotaModel,
    status: StatusCode,
    info: &RateLimitInfo,
    pause: Option<Duration>,
) -> Vec<PoliteEvent> {
    let mut events = Vec::new();
    let to = state.quota.model(now);
    if to != from {
        events.push(PoliteEvent::ModelChanged {
            key: key_digest(key),
            from,
            to,
        });
    }
    let refused = matches!(
        status,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    );
    if refused {
        events.push(PoliteEvent::RateLimited {
            key: key_digest(key),
            status: status.as_u16(),
            server_wait: info.server_wait(),
            our_wait: pause,
        });
    }
    if let Some(wait) = pause {
        state.pause_told = true;
        events.push(PoliteEvent::Paused {
            key: key_digest(key),
            wait,
            refused,
        });
    }
    events
}

/// The most a pause for a quota seen spent (no 429) is drawn past the reset: enough to keep
/// processes woken by the same reset from sending in the same millisecond.
const SPENT_SPREAD: Duration = Duration::from_millis(20);

/// `jitter` placed after the wait, never before it.
fn not_before(jitter: Jitter) -> Jitter {
    match jitter {
        Jitter::Symmetric(f) => Jitter::NotBefore(f),
        other => other,
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(reservation) = &mut self.reservation {
            // Handed out, so the request may have reached the server: no refund.
            reservation.sent = true;
            let ticket = reservation.ticket;
            reservation.pacer.keys.with_existing(&reservation.key, |s| {
                s.quota.abandon(ticket);
                // A slot in flight freed: the head of the queue may go now.
                s.queue.news.notify_one();
            });
        }
    }
}

/// A hold on the key's learned budget and on this process's buckets; given back when dropped
/// before its request was sent.
pub(super) struct Reservation {
    pub(super) pacer: Arc<PacerInner>,
    pub(super) key: Box<str>,
    pub(super) ticket: Ticket,
    pub(super) cost: u32,
    /// The content bytes the request declared.
    pub(super) bytes: u64,
    /// Whether a token was taken from the pacer's whole bucket. (One was taken from the key's
    /// own bucket, when it has one, before any reservation exists.)
    pub(super) whole_taken: bool,
    pub(super) sent: bool,
    /// The request's id in a shared store's takes (0 without one).
    pub(super) asker: u128,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.sent {
            Pacer::refund(&self.pacer, self);
        }
    }
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("ticket", &self.ticket)
            .field("cost", &self.cost)
            .finish_non_exhaustive()
    }
}
