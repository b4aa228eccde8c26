//! Early probes of a reset stated in whole seconds: while the key is closed, one request goes
//! alone before the stated (rounded-up) instant, and what it finds narrows where the quota
//! really frees (the `phase` module), how long after a window's first request it freed (a
//! window that begins with its first request: `lag_by`), or how long a moving window lags
//! (`phase::WindowLag`). A probe admitted with fewer left than any answer of its window stated
//! took a unit the window still had, and counts as a refusal.

use std::time::Duration;

use super::phase::NARROW;
use super::{KeyQuota, Left, Outcome, Refill, Ticket};
use crate::headers::RateLimitInfo;

/// A request allowed through the closed gate, alone, before the stated reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EarlyProbe {
    /// Not before this time.
    pub(super) at: Duration,
    /// The reset as stated (rounded up): the quota has freed by then.
    pub(super) latest: Duration,
    /// Within a window an early probe opened: the quota frees one request at a time, as
    /// the last window's requests age out (a moving window), not all at once.
    pub(super) trickle: bool,
    /// Its time came from `lag_by`, not from the phase.
    pub(super) by_lag: bool,
    /// Its time came from the moving window's lag, measured from this send (the window's
    /// first).
    pub(super) anchor: Option<Duration>,
}

impl KeyQuota {
    /// Whether the early probe may go now (it is then out).
    pub(super) fn take_early(&mut self, now: Duration) -> bool {
        match self.early {
            // Alone on the wire: a probe sent beside requests of the old window could reach
            // the server before one of them and be admitted in its place, which would read as
            // the quota freed.
            Some(early) if early.at <= now && self.probe_out.is_none() && self.in_flight() == 0 => {
                self.early = None;
                self.early_out = Some((self.next_serial, early));
                true
            }
            _ => false,
        }
    }

    /// When the head of a gated key looks again: at the early probe's time, or the gate's end
    /// (a response wakes it sooner).
    pub(super) fn gate_wake(&self, now: Duration) -> Duration {
        match self.early {
            Some(early) if early.at > now => early.at.min(self.gate_until),
            _ => self.gate_until,
        }
    }

    /// The answer to an early probe: admitted, the quota has freed and the gate opens for
    /// everyone; refused, or admitted to a unit the window had left (see
    /// [`took_a_unit_left`](Self::took_a_unit_left)), the next probe goes later.
    pub(super) fn early_seen(
        &mut self,
        now: Duration,
        ticket: &mut Ticket,
        early: EarlyProbe,
        outcome: Outcome,
        info: &RateLimitInfo,
    ) {
        let stated_reset = info.reset;
        let outcome = if outcome == Outcome::Answered
            && !early.trickle
            && ticket.epoch == self.epoch
            && self.took_a_unit_left(info)
        {
            tracing::trace!(
                serial = ticket.serial,
                "pacing: the early probe took a unit the window had left; it had not freed"
            );
            Outcome::Throttled
        } else {
            outcome
        };
        // How long after the window's first send the probe went: what a moving window's lag
        // is measured in, whichever rule timed the probe (the phase's probes, before the
        // window is known to move, bound it too). The window the probe tested is this one,
        // or the last one if a roll at the stated reset came before the probe's answer.
        let first_sent = self
            .sends
            .first()
            .or(self.previous_sends.first())
            .map(|f| f.at);
        let lag = early
            .anchor
            .or(first_sent)
            .map(|anchor| ticket.sent.saturating_sub(anchor));
        match (outcome, early.trickle) {
            (Outcome::Answered, false) => {
                if let Some(lag) = lag {
                    self.lag.freed(lag);
                }
                if early.anchor.is_none() {
                    self.phase
                        .freed(early.latest, ticket.sent, now, self.reset_fine);
                }
                if let Some(first) = first_sent {
                    self.window_freed_after(now.saturating_sub(first), stated_reset);
                }
                self.begun_by(now, ticket);
                self.opened_early = true;
                self.gate_until = self.gate_until.min(now);
            }
            (Outcome::Answered, true) => {
                // More of the window has freed: what the answer states is news, not an
                // upper bound on what we knew.
                self.budget = None;
                self.gate_until = self.gate_until.min(now);
            }
            (Outcome::Throttled, false) => {
                if let Some(lag) = lag {
                    self.lag.refused(lag);
                }
                if early.anchor.is_none() {
                    self.phase.refused(early.latest, ticket.sent);
                    if early.by_lag {
                        self.lag_by = None;
                    }
                }
            }
            (Outcome::Throttled, true) => {
                self.early_refused = true;
                // The copy of the last window was refused before any roll said how the
                // window frees: it does not free as the last window's requests age out (a
                // sliding counter frees a little of every one at a time). Taken for a
                // trickle at the next roll, the copy would be tried again at once, and
                // refused again.
                if self.refill == Refill::Unknown && !self.moving {
                    self.refill = Refill::Stated;
                }
            }
        }
    }

    /// Whether an early probe admitted with the answer `info` took a unit the window still
    /// had, not one it freed: the answer states fewer left of the same quota than any answer
    /// of the window before it (the converse of [`Left::rolled_by`]), so the server counted it
    /// in that window. Answers come out of order, so a budget net of the requests in flight can fall
    /// short of what the server has left by those it had already counted; the probe takes
    /// such a unit before the window ends. Taken for the window freed, it would place the
    /// phase (and bound the window by a lag) too early, and the next windows' probes would be
    /// refused. A window that did free states more: a fixed one its whole quota but the probe,
    /// a moving one as many as before (every unit of it spent, it freed the one the probe
    /// took) or more.
    fn took_a_unit_left(&self, info: &RateLimitInfo) -> bool {
        match (self.least_left, Left::stated(info)) {
            (Some(least), Some(left)) => {
                least.same_quota(&left) && left.remaining < least.remaining
            }
            _ => false,
        }
    }

    /// The last window had freed `lag` after its first request went, and the answer that
    /// found it so states the next reset `stated_reset` from now: `lag_by` bounds the window
    /// by it, unless it is under half that reset. A window that begins with its first request
    /// lasts at least half what the new window's first answer states (rounded up by under a
    /// second, for a window of a second or more); a shorter lag is a window on the clock that
    /// our first request found late in its course, and the next one will not free that soon
    /// after its first request.
    pub(super) fn window_freed_after(&mut self, lag: Duration, stated_reset: Option<Duration>) {
        let bounds = stated_reset.is_none_or(|reset| lag.saturating_mul(2) >= reset);
        if bounds {
            self.lag_by = Some(self.lag_by.map_or(lag, |known| known.min(lag)));
        }
        tracing::trace!(
            lag_ms = lag.as_millis() as u64,
            reset_ms = stated_reset.map(|reset| reset.as_millis() as u64),
            bounds,
            "pacing: a window found freed"
        );
    }

    /// A pause of `wait` from `now` on a stated quota: arms the early probe that may end it
    /// sooner.
    pub(super) fn arm_early(&mut self, now: Duration, wait: Duration) {
        self.early = None;
        // A stated window already bounds the reset (it began by the time its first admitted
        // request went); without one, only a probe can tell.
        if !self.coarse || self.window.is_some() || self.early_refused {
            return;
        }
        let mut latest = now.saturating_add(wait);
        if let Some(reset_at) = self.reset_at.filter(|t| *t > now) {
            latest = latest.min(reset_at);
        }
        // The n-th request of this window goes no sooner after its first than the n-th of the
        // last window went after its first: the quota frees as they age out.
        let trickle = self.mirrored().filter(|_| self.opened_early);
        // A moving window frees one window after its first request went: the lag from it,
        // not the phase of the stated reset (which follows our own sends, and drifts).
        let anchor = match self.sends.first() {
            Some(first) if self.moving && trickle.is_none() => Some(first.at),
            _ => None,
        };
        let phased = self.phase.probe_at(latest);
        // Far sooner by the lag: the phase has wrapped past a second.
        let lagged = match (self.lag_by, self.sends.first()) {
            (Some(lag), Some(first)) if trickle.is_none() && anchor.is_none() => {
                Some(first.at.saturating_add(lag)).filter(|at| at.saturating_add(NARROW) < phased)
            }
            _ => None,
        };
        let at = match anchor {
            Some(anchor) => {
                anchor.saturating_add(self.lag.probe_after(latest.saturating_sub(anchor)))
            }
            None => trickle.or(lagged).unwrap_or(phased),
        };
        // The stated instant at the latest: the probe goes ahead of the jittered gate.
        let at = at.min(latest);
        tracing::trace!(
            in_ms = at.saturating_sub(now).as_millis() as u64,
            latest_ms = latest.saturating_sub(now).as_millis() as u64,
            trickle = trickle.is_some(),
            lagged = lagged.is_some(),
            moving = anchor.is_some(),
            "pacing: early probe armed"
        );
        self.early = Some(EarlyProbe {
            at: at.max(now),
            latest,
            trickle: trickle.is_some(),
            by_lag: lagged.is_some(),
            anchor,
        });
    }
}
