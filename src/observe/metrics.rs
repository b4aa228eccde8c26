//! The metrics, through the `metrics` facade (feature `metrics`); names and labels are listed
//! in the [module docs](super).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use metrics::{Gauge, SharedString, counter, gauge, histogram};

use super::QUEUE_KEYS_LABELLED;

/// One key's `key` label, made the first time the key is counted.
#[derive(Debug, Default)]
pub(crate) struct KeyLabel(Option<SharedString>);

/// How many keys of a pacer have a label of their own so far.
#[derive(Debug, Default)]
pub(crate) struct KeyLabels(AtomicUsize);

impl KeyLabel {
    /// The label, made from `digest` while `labels` has room, else `other`.
    pub(crate) fn get(
        &mut self,
        labels: &KeyLabels,
        digest: impl FnOnce() -> String,
    ) -> SharedString {
        self.0
            .get_or_insert_with(|| {
                if labels.0.fetch_add(1, Ordering::Relaxed) < QUEUE_KEYS_LABELLED {
                    SharedString::from(digest())
                } else {
                    labels.0.store(QUEUE_KEYS_LABELLED, Ordering::Relaxed);
                    SharedString::const_str("other")
                }
            })
            .clone()
    }
}

/// A request counted in its key's queue gauge until dropped.
pub(crate) struct QueueGauge(Gauge);

impl QueueGauge {
    pub(crate) fn enter(label: SharedString) -> QueueGauge {
        let gauge = gauge!("reqwest_polite_queue_depth", "key" => label);
        gauge.increment(1.0);
        QueueGauge(gauge)
    }
}

impl Drop for QueueGauge {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// The counters and histograms, one function each.
pub(crate) mod record {
    use super::*;

    /// An attempt through the pacing layer ended in `outcome`.
    pub(crate) fn request(outcome: &'static str) {
        counter!("reqwest_polite_requests_total", "outcome" => outcome).increment(1);
    }

    /// The server refused a request with `status` (429 or 503).
    pub(crate) fn rate_limited(status: u16) {
        let status = if status == 429 { "429" } else { "503" };
        counter!("reqwest_polite_rate_limited_total", "status" => status).increment(1);
    }

    /// A retry for `reason`, held by the pacer or not, after `wait`.
    pub(crate) fn retry(reason: &'static str, held: bool, wait: Duration) {
        counter!("reqwest_polite_retries_total", "reason" => reason).increment(1);
        if held {
            counter!("reqwest_polite_held_retries_total").increment(1);
        }
        histogram!("reqwest_polite_retry_wait_seconds").record(wait.as_secs_f64());
    }

    /// The retry layer gave up for `reason`.
    pub(crate) fn gave_up(reason: &'static str) {
        counter!("reqwest_polite_gave_up_total", "reason" => reason).increment(1);
    }

    /// An attempt waited `wait` for its permit.
    pub(crate) fn pacing_wait(wait: Duration) {
        histogram!("reqwest_polite_pacing_wait_seconds").record(wait.as_secs_f64());
    }
}
