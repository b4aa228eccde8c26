//! A stated window's rolls: when the window we know has ended (our roll, its budget guessed
//! until its first answer), when an answer shows the server rolled under our requests (a
//! window begun by that answer), and how a window refills (whole, or slot by slot as a sliding
//! log's requests age out, whose pace the next window's requests copy).

use std::time::Duration;

use super::phase::GRAIN;
use super::{KeyQuota, Outcome, Sent, Ticket};
use crate::headers::RateLimitInfo;

/// What an answer stated is left of the governing quota, and of which quota (its size and
/// window, as stated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Left {
    pub(super) limit: Option<u64>,
    pub(super) window: Option<Duration>,
    pub(super) remaining: u64,
}

impl Left {
    pub(super) fn stated(info: &RateLimitInfo) -> Option<Left> {
        Some(Left {
            limit: info.limit,
            window: info.window,
            remaining: info.remaining?,
        })
    }

    /// `later`, stated by the answer to a request sent after this was stated, leaves as many
    /// or more of the same quota: the request was counted in a later window. (A request the
    /// server does not count leaves as many too; the window taken to begin with it then ends
    /// by the reset the server states all the same.)
    pub(super) fn rolled_by(&self, later: &Left) -> bool {
        self.same_quota(later) && later.remaining >= self.remaining
    }

    /// `other` speaks of the same quota (limit and window).
    pub(super) fn same_quota(&self, other: &Left) -> bool {
        self.limit == other.limit && self.window == other.window
    }
}

/// The end of the window holding `now`, for windows of length `window` the last of which
/// ended at `reset_at` (at the earliest at `earliest`, for a reset rounded up): whole windows
/// that passed while nobody asked are skipped.
pub(super) fn end_of_window_holding(
    now: Duration,
    reset_at: Duration,
    earliest: Duration,
    window: Duration,
) -> Duration {
    let behind = now.saturating_sub(earliest).as_nanos() / window.as_nanos();
    let windows = u32::try_from(behind.saturating_add(1)).unwrap_or(u32::MAX);
    reset_at.saturating_add(window.saturating_mul(windows))
}

/// A window's end from what was `known` and a new `stated` bound: servers round resets up, so
/// each statement bounds the true end from above, and the earliest bound of a window that has
/// not ended is the tightest.
pub(super) fn tightest_reset(known: Option<Duration>, stated: Duration, now: Duration) -> Duration {
    match known {
        Some(known) if known > now => known.min(stated),
        _ => stated,
    }
}

/// How a stated window frees its quota, as the first answer after a roll shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Refill {
    /// Not seen yet: the first request after each roll goes alone, and its answer tells.
    #[default]
    Unknown,
    /// All at once at the reset (a fixed window): the budget is the whole quota again.
    Whole,
    /// One slot at a time, one window after the request that spent it (a moving window, a
    /// sliding log): the reset speaks of the next slot only. Each request goes alone at the
    /// time the last window's went (see [`KeyQuota::mirrored`]), and its answer tells what is
    /// left.
    Trickle,
    /// A request sent at the last window's pace was refused: the quota frees otherwise (a
    /// bucket refilling at its own rate). The reset the server states rules.
    Stated,
}

/// The first reset a window's answers stated: when that answer came, the end it stated, the
/// fewest left stated since, and whether an answer since stated more than that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FirstReset {
    at: Duration,
    end: Duration,
    least: u64,
    rose: bool,
}

/// Whether a key's `moving` rests on [`KeyQuota::reset_moved`]'s sign alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum ResetSign {
    /// The sign has not told the key moving (or another sign did too).
    #[default]
    Unread,
    /// The key is taken for a moving window by the sign alone.
    Holds,
    /// A refusal came while it held: the sign is not read again.
    Refuted,
}

impl KeyQuota {
    /// When the next request of a trickling window may go: the n-th request of a window goes
    /// no sooner after the window's first than the n-th of the last window went after its
    /// first. None when the last window had no n-th.
    pub(super) fn mirrored(&self) -> Option<Duration> {
        let (first, start) = (self.previous_sends.first()?, self.sends.first()?);
        let nth = self.previous_sends.get(self.sends.len())?;
        // Measured from when the server had counted a request to the window's first send (when
        // it had not yet), so that the server's own queueing cannot make the copy run ahead.
        // Until the window is known to move, every request is taken as counted by its answer:
        // a window that frees otherwise (a sliding counter) is refused on this copy, and a copy
        // that runs late costs time, not a 429.
        let counted = |sent: &Sent| {
            if self.moving {
                sent.counted()
            } else {
                sent.answered
            }
        };
        Some(counted(start).saturating_add(counted(nth).saturating_sub(first.at)))
    }

    /// The end of a moving window whose answer states `stated`: no sooner than one lag after
    /// the window's first send. While the last window's slots are still freeing one by one,
    /// the reset an answer states is when the next of them frees, rounded up to a whole
    /// second; taken for the window's end, it rolled the window in the middle of its sends
    /// whenever the second fell there (the window's start drifts past the clock's seconds by
    /// a few milliseconds a window), split it in two, and the edges of both were refused from
    /// then on.
    /// Once the window has sent as many as the last one, a reset it states is its own.
    pub(super) fn moving_end(&self, stated: Duration) -> Duration {
        let mid_window = self.sends.len() < self.previous_sends.len();
        match (self.moving && mid_window, self.sends.first(), self.lag_by) {
            (true, Some(first), Some(lag)) => stated.max(first.at.saturating_add(lag)),
            _ => stated,
        }
    }

    /// How many other requests were answered while `ticket`'s was out: the server may have
    /// counted them after it stated what `ticket`'s answer says is left (its threads answer
    /// out of order), and they are no longer in flight.
    pub(super) fn answered_while_out(&self, ticket: Ticket) -> u64 {
        let outstanding = |serial: u64| self.out.iter().any(|(s, _)| *s == serial);
        self.sends
            .iter()
            .chain(self.previous_sends.iter())
            .filter(|sent| {
                sent.serial != ticket.serial
                    && sent.answered > sent.at
                    && sent.answered >= ticket.sent
                    && !outstanding(sent.serial)
            })
            .count() as u64
    }

    /// Starts a new window: what was learned of the last one's end, its sends and its early
    /// probe belong to it. The caller sets the new window's budget and reset.
    fn begin_window(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        self.epoch_first_answer = None;
        self.least_left = None;
        self.recount = false;
        self.previous_sends = std::mem::take(&mut self.sends);
        self.early = None;
        self.opened_early = false;
        self.early_refused = false;
        self.first_reset = None;
        self.span.window_ended();
    }

    /// Whether this answer shows a moving window by its reset: a later answer of the window,
    /// with no more left than any before it, states a reset that ends more than half a grain
    /// after the first answer's did, beyond the time between the two answers. A fixed
    /// window's answers state one end, rounded up (so at most the time between them apart);
    /// one that rolls under our requests states more left first. A moving window's reset is
    /// when the oldest request it counts ages out, and that moves on with every slot freed.
    /// So a moving window whose windows went as bursts shows itself, where the other sign
    /// (more left than before, yet not the whole quota) never comes: each burst takes the
    /// slots as the last one's age out, and nothing frees in between. Flask-Limiter's moving
    /// window of 8 per 1 s: its first answers after a burst of ours stated the reset of the
    /// last burst's slots, taken for the window's end, a second too soon; early probes then
    /// searched the phase of that second every window (15 and 19 × 429 in two of six jobs).
    /// A stated sliding window counter gives the sign too, at its clock's edge, with nothing
    /// left: the key is held moving by it only until a refusal
    /// ([`reset_sign_refused`](Self::reset_sign_refused)).
    pub(super) fn reset_moved(&mut self, now: Duration, ticket: &Ticket, info: &RateLimitInfo) {
        if self.moving
            || self.reset_sign == ResetSign::Refuted
            || !self.coarse
            || !self.opened_early
            || ticket.epoch != self.epoch
            || self.paced_interval().is_some()
        {
            return;
        }
        let (Some(reset), Some(left)) = (info.reset, info.remaining) else {
            return;
        };
        let end = now.saturating_add(reset);
        let Some(first) = self.first_reset.as_mut() else {
            self.first_reset = Some(FirstReset {
                at: now,
                end,
                least: left,
                rose: false,
            });
            return;
        };
        if left > first.least {
            first.rose = true;
        }
        first.least = first.least.min(left);
        let beyond = first
            .end
            .saturating_add(now.saturating_sub(first.at))
            .saturating_add(GRAIN / 2);
        if !first.rose && end > beyond {
            tracing::trace!(
                serial = ticket.serial,
                moved_ms = end.saturating_sub(first.end).as_millis() as u64,
                "pacing: the stated reset moved on within the window (moving)"
            );
            self.moving = true;
            self.reset_sign = ResetSign::Holds;
        }
    }

    /// A refusal while the key is taken for a moving window by the reset's sign alone: the
    /// sign misled (a sliding window counter's reset moves on a whole window at its clock's
    /// edge with nothing left, and its quota does not free as a moving window's; taken for
    /// one for good, its early probes went by the lag of a window that does not trickle, and
    /// were refused in every window). The key is no longer taken for moving, and the sign is
    /// not read again for it: a moving window it missed costs what it cost before the sign.
    pub(super) fn reset_sign_refused(&mut self) {
        if self.reset_sign == ResetSign::Holds {
            tracing::trace!("pacing: refused while moving by the reset's sign alone: taken back");
            self.moving = false;
            self.reset_sign = ResetSign::Refuted;
        }
    }

    /// The answer to `ticket` shows the server counted it in a later window than an answer
    /// received before it went (see [`Left::rolled_by`]): starts that window, begun by this
    /// request. An early probe's answer is [`early_seen`](Self::early_seen)'s; within a window
    /// an early probe opened, the quota is known to free one request at a time.
    pub(super) fn rolled_under(
        &mut self,
        now: Duration,
        ticket: &mut Ticket,
        outcome: Outcome,
        info: &RateLimitInfo,
    ) {
        let rolled = match (ticket.seen, Left::stated(info)) {
            (Some(seen), Some(left)) => seen.rolled_by(&left),
            _ => false,
        };
        if rolled
            && outcome == Outcome::Answered
            && ticket.epoch == self.epoch
            && self.opened_early
            && let (Some(seen), Some(left), Some(limit)) =
                (ticket.seen, Left::stated(info), info.limit.or(self.limit))
            && left.remaining > seen.remaining
            && left.remaining.saturating_add(1) < limit
            && self.paced_interval().is_none()
        {
            // More left than an answer before this request went, within a window an early
            // probe opened, yet not the whole quota: slots free one by one. (A quota paced as
            // it frees shows this at every unit: its pace already fits.)
            tracing::trace!(
                serial = ticket.serial,
                seen = seen.remaining,
                left = left.remaining,
                "pacing: the window frees slot by slot (moving)"
            );
            self.moving = true;
            if self.reset_sign == ResetSign::Holds {
                self.reset_sign = ResetSign::Unread;
            }
        }
        if !rolled
            || outcome != Outcome::Answered
            || ticket.epoch != self.epoch
            || self.opened_early
        {
            return;
        }
        if self.refill == Refill::Whole && !self.moving && self.window.is_some() {
            // A stated fixed window rolled while ours was open: the server keeps its windows
            // to a clock of its own (a window that begins with our first request, or a log
            // that frees as our own requests age out, does not roll under our requests).
            self.clock.confirm();
        }
        // Answers that came after this request went and stated fewer left than it had seen
        // may be the new window's, taken for the old one's (answers come out of order): its
        // count net of the requests in flight leaves them out. The next request then goes
        // alone, and its answer counts again. (A server whose count never moves shows none.)
        let recount = match (self.least_left, ticket.seen) {
            (Some(least), Some(seen)) => least.remaining < seen.remaining,
            _ => false,
        };
        self.begun_by(now, ticket);
        if recount {
            tracing::trace!(
                serial = ticket.serial,
                "pacing: answers of the new window may have come first; the next goes alone"
            );
            self.recount = true;
            self.probe_next = true;
        }
    }

    /// Starts a window begun by `ticket`'s request, answered at `now`: its answer is the new
    /// window's first news. What the older answers said of the last window's end and budget
    /// is theirs.
    ///
    /// A roll at the stated reset may have come between the request and its answer (an early
    /// probe goes just before the stated instant): the last window's sends are then the ones
    /// that roll kept, less this request, and any sent since follow it in its window. Taken
    /// from the empty window the roll began, the copy of the last window had nothing to copy:
    /// the next probe went by the moving window's lag from this request alone, found the rest
    /// of the last window aged out a second later, and a held sliding log of 20 per 2 s was
    /// split into two half windows, 10 × 429 a window from then on (the grid's "held log
    /// 20/2s x" at about 1 % of seeds).
    pub(super) fn begun_by(&mut self, now: Duration, ticket: &mut Ticket) {
        let before_roll = self
            .previous_sends
            .iter()
            .position(|sent| sent.serial == ticket.serial);
        let (kept, since) = match before_roll {
            Some(at) => {
                self.previous_sends.remove(at);
                (
                    Some(std::mem::take(&mut self.previous_sends)),
                    std::mem::take(&mut self.sends),
                )
            }
            None => {
                self.sends.retain(|sent| sent.serial != ticket.serial);
                (None, Vec::new())
            }
        };
        self.clock.begun_elsewhere();
        self.begin_window();
        if let Some(kept) = kept {
            self.previous_sends = kept;
        }
        self.sends.push(Sent {
            serial: ticket.serial,
            at: ticket.sent,
            due: ticket.sent,
            answered: now,
            alone: true,
        });
        self.sends.extend(since);
        self.reset_at = None;
        self.budget = None;
        ticket.epoch = self.epoch;
    }

    /// When the known window has ended, starts the next one with the full stated quota.
    pub(super) fn roll(&mut self, now: Duration) {
        let Some(reset_at) = self.reset_at else {
            return;
        };
        if reset_at > now {
            return;
        }
        // Requests still on their way that went close enough to the window's end (the
        // longest round trip lately, and the grain of a rounded-up reset) may reach the server
        // after it rolled and be counted in the new window: they are taken off until its
        // first answer states its count.
        let slack = if self.coarse { GRAIN } else { Duration::ZERO };
        let cutoff = reset_at.saturating_sub(slack + self.longest_trip);
        let straddling = self.out.iter().filter(|(_, sent)| *sent >= cutoff).count() as u64;
        self.clock.rolled(reset_at, now, self.window);
        self.begin_window();
        self.span_roll(reset_at);
        self.budget = match self.paced_interval() {
            // A paced quota comes back a unit at a time, not whole: its pace says when the
            // next request goes, and that request's answer what else is left.
            Some(_) => Some(0),
            None => self.limit.map(|limit| limit.saturating_sub(straddling)),
        };
        self.straddled = straddling;
        // Whether the window came back whole is for its first answer to say: a moving window
        // whose requests all went at once looks whole once, and trickles the next time.
        self.probe_next = true;
        self.budget_guessed = true;
        self.reset_at = match (self.limit, self.window) {
            (Some(_), Some(window)) if !window.is_zero() => {
                // Skip whole windows that passed while nobody asked. A reset stated in whole
                // seconds is rounded up: the window may have ended up to a grain before
                // `reset_at`, and the next one may then have ended too by `now` (counted
                // from `reset_at` alone, a request a few ms after the true end of that next
                // window would be put in a fresh one, and refused).
                let slack = if self.coarse { GRAIN } else { Duration::ZERO };
                let earliest = reset_at.saturating_sub(slack);
                let projected = end_of_window_holding(now, reset_at, earliest, window);
                if self.coarse {
                    // The window holding `now` ends within a window from now.
                    Some(projected.min(now.saturating_add(window)))
                } else {
                    Some(projected)
                }
            }
            _ => None,
        };
    }

    /// Where the window holding an answer ends, from the reset it states: the earliest bound
    /// of the window is the tightest, a moving window's spent reset is its oldest slot's, and
    /// the first answer after our own roll is weighed against the end the roll projected
    /// (the `clock` module).
    pub(super) fn bound_end(&mut self, now: Duration, info: &RateLimitInfo) {
        // A trickling window's answers state when its next slot frees, not when it ends:
        // the window ends one window after its first request, as projected at its roll.
        let next_slot_only =
            self.refill == Refill::Trickle && self.reset_at.is_some_and(|t| t > now);
        if let Some(reset) = info
            .reset
            .filter(|_| self.moving && info.remaining == Some(0))
        {
            // A moving window spent: the reset is when its oldest slot frees (rounded up).
            // What earlier answers bounded was the last window's slots.
            self.reset_at = Some(self.moving_end(now.saturating_add(reset)));
        } else if let Some(reset) = info.reset.filter(|_| !next_slot_only) {
            // Servers round resets up to whole seconds, so each response bounds the true
            // reset from above: the earliest bound of the window is the tightest.
            let mut stated = now.saturating_add(reset);
            // The window began by the time its first admitted request was answered.
            if let (Some(first), Some(window)) = (self.epoch_first_answer, self.window) {
                stated = stated.min(first.saturating_add(window));
                // A window rounded up ends sooner, as its answers bounded it (`span`).
                stated = self.span_end(first, stated).max(now);
            }
            let end = if self.budget_guessed {
                // The first answer after our roll: the end it bounds is late by the first
                // request's way back, and the end the roll projected (the last window's
                // plus the window) holds for windows on the clock, so the earlier rules.
                // A window that begins with its first request (express-rate-limit's) began
                // with this one: once a window begun at a projection earlier than its own
                // bound refuses its first request, the answer's bound rules (`clock`).
                let whole = self.refill == Refill::Whole && !self.moving;
                self.clock.end(stated, whole, now)
            } else {
                let end = tightest_reset(self.reset_at, stated, now);
                if Some(end) != self.reset_at {
                    self.clock.own_end();
                }
                end
            };
            self.reset_at = Some(self.moving_end(end));
        }
    }

    /// The first answer of a window we rolled: more counted in it than went since (and near
    /// the end of the last) means the last window's requests still count (a sliding log).
    ///
    /// Not where other processes spend the quota too: their requests count in the window, so
    /// more counted than ours is no news of how it frees, and how it freed before stands.
    /// Read as a sliding log's, it kept the end this process's roll projected (the last
    /// window's plus a window) over the stated reset, and that end was early whenever another
    /// process began the window (real express-rate-limit, a fixed window from its first
    /// request, as four processes: each process drew a 429 at a window's end 9-83 ms early,
    /// `acceptance-2026-12-08-express-draft8-4proc-traced.txt`).
    pub(super) fn first_answer_of_roll(&mut self, now: Duration, info: &RateLimitInfo) {
        let (Some(limit), Some(remaining)) = (self.limit, info.remaining) else {
            return;
        };
        let ours = (self.sends.len() as u64).saturating_add(self.straddled);
        let counted_beyond_ours = limit.saturating_sub(remaining) > ours;
        self.refill = if self.refill == Refill::Stated {
            Refill::Stated
        } else if counted_beyond_ours && self.counted_with_others {
            self.refill
        } else if counted_beyond_ours {
            Refill::Trickle
        } else {
            Refill::Whole
        };
        if self.refill == Refill::Whole
            && self.coarse
            && self.window.is_none()
            && !self.moving
            && let Some(first) = self.previous_sends.first()
        {
            // The last window had freed by now, this long after its first request went: a
            // bound on a window that begins with its first request, finer than the phase of a
            // reset rounded up past a second (such a window, begun just past a whole second,
            // is stated to end nearly two later).
            self.window_freed_after(now.saturating_sub(first.at), info.reset);
        }
    }
}
