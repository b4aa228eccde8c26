//! A read-only view of one key's learned quota, for [`Pacer::snapshot`](crate::pacing::Pacer::snapshot).

use std::time::Duration;

use super::KeyQuota;
use crate::pacing::snapshot::QuotaModel;

/// What the learned quota holds at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LearnedView {
    pub(crate) model: QuotaModel,
    pub(crate) probing: bool,
    pub(crate) remaining: Option<u64>,
    pub(crate) reset_in: Option<Duration>,
    pub(crate) opens_in: Option<Duration>,
    pub(crate) in_flight: u64,
}

impl KeyQuota {
    /// The model this key paces to and where it stands at `now`.
    pub(crate) fn snapshot(&self, now: Duration) -> LearnedView {
        let model = self.model(now);
        let reset_in = self
            .reset_at
            .filter(|reset| *reset > now)
            .map(|reset| reset - now);
        let opens_in = if self.gate_until > now {
            Some(self.gate_until - now)
        } else if self.budget == Some(0) {
            reset_in
        } else {
            None
        };
        LearnedView {
            model,
            probing: self.probe_out.is_some()
                || self.probe_next
                || self.early_out.is_some()
                || self.early.is_some(),
            remaining: self.budget,
            reset_in,
            opens_in,
            in_flight: self.in_flight(),
        }
    }

    /// The quota this key paces to at `now`, as far as the server's answers tell.
    pub(crate) fn model(&self, now: Duration) -> QuotaModel {
        if self.limit.is_some() || self.budget.is_some() {
            return QuotaModel::Stated {
                quota: self.limit,
                window: self.window,
            };
        }
        match self.silence.as_deref() {
            Some(silence) => QuotaModel::Inferred {
                quota: silence.quota(now),
                window: silence.estimated_window(),
                settled: silence.settled(),
            },
            None => QuotaModel::Unknown,
        }
    }

    /// Whether the reservation `serial` went alone, to find something out (a probe).
    pub(crate) fn is_probe(&self, serial: u64) -> bool {
        self.probe_out.is_some_and(|(s, _)| s == serial)
            || self.early_out.is_some_and(|(s, _)| s == serial)
    }
}
