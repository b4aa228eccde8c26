use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

use super::key::key_digest;
use super::pacer::PacerInner;
use crate::headers::RateLimitInfo;

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
    /// pauses the key, a stated quota is adopted.
    pub async fn finish(mut self, status: StatusCode, info: &RateLimitInfo) {
        let Some(mut reservation) = self.reservation.take() else {
            return;
        };
        reservation.sent = true;
        let inner = &reservation.pacer;
        let too_many = status == StatusCode::TOO_MANY_REQUESTS;
        let pause = if inner.learn {
            let now = inner.clock.now();
            let key = &reservation.key;
            inner
                .learned
                .observe(key, now, reservation.epoch, too_many, info)
        } else {
            inner.learned.abandon(&reservation.key);
            None
        };
        if let Some(wait) = pause {
            // Once per spent window and key: worth seeing at the default level.
            tracing::info!(
                key = %key_digest(&reservation.key),
                wait_ms = wait.as_millis() as u64,
                too_many,
                "pacing: quota spent, pausing the key"
            );
            if let Some(shared) = &inner.shared {
                shared.close_gate(&reservation.key, wait).await;
            }
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(reservation) = &mut self.reservation {
            // Handed out, so the request may have reached the server: no refund.
            reservation.sent = true;
            reservation.pacer.learned.abandon(&reservation.key);
        }
    }
}

/// A hold on the learned budget; given back when dropped before its request was sent.
pub(super) struct Reservation {
    pub(super) pacer: Arc<PacerInner>,
    pub(super) key: String,
    pub(super) epoch: u64,
    pub(super) cost: u32,
    pub(super) sent: bool,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.sent {
            self.pacer
                .learned
                .cancel(&self.key, self.epoch, u64::from(self.cost));
        }
    }
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("epoch", &self.epoch)
            .field("cost", &self.cost)
            .finish_non_exhaustive()
    }
}
