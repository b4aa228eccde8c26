//! The metrics, through the `metrics` facade (feature `metrics`); names and labels are listed
//! in the [module docs](super).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use metrics::{Gauge, Key, Label, Level, Metadata, SharedString, counter, histogram};

use super::QUEUE_KEYS_LABELLED;

/// One key's series on the queue gauge, its key made the first time the key is counted.
#[derive(Debug, Default)]
pub(crate) struct KeyLabel(Option<Key>);

/// How many keys of a pacer have a label of their own so far.
#[derive(Debug, Default)]
pub(crate) struct KeyLabels(AtomicUsize);

const QUEUE_DEPTH: &str = "reqwest_polite_queue_depth";

impl KeyLabel {
    /// The key's queue gauge, labelled with `digest` while `labels` has room, else `other`.
    /// The series' key is made once per key: a request allocates nothing here.
    pub(crate) fn get(&mut self, labels: &KeyLabels, digest: impl FnOnce() -> String) -> Gauge {
        let key = self.0.get_or_insert_with(|| {
            let label = if labels.0.fetch_add(1, Ordering::Relaxed) < QUEUE_KEYS_LABELLED {
                SharedString::from(digest())
            } else {
                labels.0.store(QUEUE_KEYS_LABELLED, Ordering::Relaxed);
                SharedString::const_str("other")
            };
            Key::from_parts(QUEUE_DEPTH, vec![Label::new("key", label)])
        });
        static METADATA: Metadata<'static> =
            Metadata::new(module_path!(), Level::INFO, Some(module_path!()));
        metrics::with_recorder(|recorder| recorder.register_gauge(key, &METADATA))
    }
}

/// A request counted in its key's queue gauge until dropped.
pub(crate) struct QueueGauge(Gauge);

impl QueueGauge {
    pub(crate) fn enter(gauge: Gauge) -> QueueGauge {
        gauge.increment(1.0);
        QueueGauge(gauge)
    }
}

impl Drop for QueueGauge {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// The counters and histograms, one function each. Every label is a literal, so each series'
/// key is a static (no allocation per request).
pub(crate) mod record {
    use super::*;

    /// An attempt through the pacing layer ended in `outcome`.
    pub(crate) fn request(outcome: &'static str) {
        match outcome {
            "success" => {
                counter!("reqwest_polite_requests_total", "outcome" => "success").increment(1)
            }
            "rate_limited" => {
                counter!("reqwest_polite_requests_total", "outcome" => "rate_limited").increment(1)
            }
            "client_error" => {
                counter!("reqwest_polite_requests_total", "outcome" => "client_error").increment(1)
            }
            "server_error" => {
                counter!("reqwest_polite_requests_total", "outcome" => "server_error").increment(1)
            }
            "refused" => {
                counter!("reqwest_polite_requests_total", "outcome" => "refused").increment(1)
            }
            _ => counter!("reqwest_polite_requests_total", "outcome" => "error").increment(1),
        }
    }

    /// The server refused a request with `status` (429 or 503).
    pub(crate) fn rate_limited(status: u16) {
        if status == 429 {
            counter!("reqwest_polite_rate_limited_total", "status" => "429").increment(1);
        } else {
            counter!("reqwest_polite_rate_limited_total", "status" => "503").increment(1);
        }
    }

    /// A retry for `reason`, held by the pacer or not, after `wait`.
    pub(crate) fn retry(reason: &'static str, held: bool, wait: Duration) {
        match reason {
            "rate_limited" => {
                counter!("reqwest_polite_retries_total", "reason" => "rate_limited").increment(1)
            }
            "server_error" => {
                counter!("reqwest_polite_retries_total", "reason" => "server_error").increment(1)
            }
            "timeout" => {
                counter!("reqwest_polite_retries_total", "reason" => "timeout").increment(1)
            }
            _ => counter!("reqwest_polite_retries_total", "reason" => "connection").increment(1),
        }
        if held {
            counter!("reqwest_polite_held_retries_total").increment(1);
        }
        histogram!("reqwest_polite_retry_wait_seconds").record(wait.as_secs_f64());
    }

    /// The retry layer gave up for `reason`.
    pub(crate) fn gave_up(reason: &'static str) {
        match reason {
            "retries_exhausted" => {
                counter!("reqwest_polite_gave_up_total", "reason" => "retries_exhausted")
                    .increment(1)
            }
            "server_wait_too_long" => {
                counter!("reqwest_polite_gave_up_total", "reason" => "server_wait_too_long")
                    .increment(1)
            }
            "deadline" => {
                counter!("reqwest_polite_gave_up_total", "reason" => "deadline").increment(1)
            }
            "budget_exhausted" => {
                counter!("reqwest_polite_gave_up_total", "reason" => "budget_exhausted")
                    .increment(1)
            }
            _ => counter!("reqwest_polite_gave_up_total", "reason" => "body_factory").increment(1),
        }
    }

    /// An attempt waited `wait` for its permit.
    pub(crate) fn pacing_wait(wait: Duration) {
        histogram!("reqwest_polite_pacing_wait_seconds").record(wait.as_secs_f64());
    }
}
