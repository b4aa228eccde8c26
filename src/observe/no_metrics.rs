//! Without the `metrics` feature: the same calls, doing nothing (they compile away).

use std::time::Duration;

/// One key's `key` label (nothing to hold without metrics).
#[derive(Debug, Default)]
pub(crate) struct KeyLabel(());

/// How many keys have a label (none without metrics).
#[derive(Debug, Default)]
pub(crate) struct KeyLabels(());

/// A key's series on the queue gauge (none without metrics).
pub(crate) struct Series;

impl KeyLabel {
    #[inline]
    pub(crate) fn get(&mut self, _labels: &KeyLabels, _digest: impl FnOnce() -> String) -> Series {
        Series
    }
}

/// A request counted in its key's queue gauge (nothing without metrics).
pub(crate) struct QueueGauge;

impl QueueGauge {
    #[inline]
    pub(crate) fn enter(_series: Series) -> QueueGauge {
        QueueGauge
    }
}

/// The counters and histograms, doing nothing.
pub(crate) mod record {
    use super::Duration;

    #[inline]
    pub(crate) fn request(_outcome: &'static str) {}
    #[inline]
    pub(crate) fn rate_limited(_status: u16) {}
    #[inline]
    pub(crate) fn retry(_reason: &'static str, _held: bool, _wait: Duration) {}
    #[inline]
    pub(crate) fn gave_up(_reason: &'static str) {}
    #[inline]
    pub(crate) fn pacing_wait(_wait: Duration) {}
}
