//! Fair turns inside one quota: partitions that draw on one shared quota entry (see the
//! `scope` module) take turns at its queue, so one tenant's burst does not starve the others.
//!
//! Each partition of a shared quota has a lane: a semaphore with as many places as the
//! partition's weight (1 unless [`PacerBuilder::turn_weights`] says otherwise). A request
//! takes a place in its partition's lane (first come, first served within the partition),
//! then queues at the quota entry, which serves in arrival order. So the quota's queue never
//! holds more than `weight` requests of one partition: when a partition's request is served,
//! its next one joins the queue behind every other partition's waiting request. That is
//! weighted round-robin: in each round a partition of weight `w` is served up to `w` times.
//! A partition that paces on its own quota has no lane, and pays nothing for it.
//!
//! [`PacerBuilder::turn_weights`]: super::PacerBuilder::turn_weights

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::config::PacingMode;
use super::error::PacingError;
use super::key::key_digest;
use super::pacer::Pacer;

/// The weight of a partition, from its key.
pub(crate) type Weights = Arc<dyn Fn(&str) -> u32 + Send + Sync>;

/// The lanes of the partitions that share a quota.
#[derive(Default)]
pub(crate) struct Lanes {
    lanes: Mutex<HashMap<Box<str>, Arc<Semaphore>>>,
    weights: Option<Weights>,
}

impl Lanes {
    pub(crate) fn new(weights: Option<Weights>) -> Lanes {
        Lanes {
            lanes: Mutex::default(),
            weights,
        }
    }

    /// The lane of `partition` (made when new, with the partition's weight, at least 1).
    fn lane(&self, partition: &str) -> Arc<Semaphore> {
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(lane) = lanes.get(partition) {
            return lane.clone();
        }
        let weight = self.weights.as_ref().map_or(1, |w| w(partition).max(1));
        let lane = Arc::new(Semaphore::new(weight as usize));
        lanes.insert(partition.into(), lane.clone());
        lane
    }

    /// Drops the lanes nobody holds or waits in.
    pub(crate) fn prune(&self) {
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        lanes.retain(|_, lane| Arc::strong_count(lane) > 1);
    }

    pub(crate) fn len(&self) -> usize {
        self.lanes.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl std::fmt::Debug for Lanes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes")
            .field("lanes", &self.len())
            .field("weighted", &self.weights.is_some())
            .finish()
    }
}

impl Pacer {
    /// A place in `partition`'s lane, for a request that draws on a shared quota; waits no
    /// longer than `mode` allows, counted from `started`.
    pub(super) async fn take_lane(
        &self,
        partition: &str,
        started: Duration,
        mode: PacingMode,
    ) -> Result<OwnedSemaphorePermit, PacingError> {
        let lane = self.inner.lanes.lane(partition);
        let place = match lane.clone().try_acquire_owned() {
            Ok(place) => Ok(place),
            Err(_) => match mode {
                PacingMode::Wait { max_wait } => {
                    let waited = self.inner.clock.now().saturating_sub(started);
                    let left = max_wait.saturating_sub(waited);
                    match tokio::time::timeout(left, lane.acquire_owned()).await {
                        Ok(place) => place,
                        Err(_) => {
                            tracing::debug!(key = %key_digest(partition), "pacing: rejected, lane too long");
                            let now = self.inner.clock.now();
                            return Err(PacingError::WaitTooLong {
                                wait: now.saturating_sub(started),
                                max_wait,
                                server_wait: None,
                            });
                        }
                    }
                }
                PacingMode::FailFast => lane.acquire_owned().await,
            },
        };
        Ok(place.expect("a lane is never closed"))
    }
}

#[cfg(test)]
mod tests;
