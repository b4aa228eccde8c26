//! A silent server learned by many processes as one. Each process alone would measure its
//! share of the quota, not the quota (fifty processes each admitted a fiftieth of a window),
//! and probe for itself; so while a shared store keeps one estimate for all of them (the
//! store's own model: the admissions of all between two refusals are the quota per window,
//! one probe of all bounds the window, and a shared count paces each window, see
//! `shared/learned_note.lua`), this process's silent model stands aside. The store's answers
//! say when it does; once they stop (the store out of reach), the process learns alone again.

use super::KeyQuota;
use crate::headers::RateLimitInfo;

impl KeyQuota {
    /// Whether the estimate the processes share paces this key (as the store's last answer
    /// said): bare answers are then the store's to learn from, and this process's silent
    /// model and slow start hold nothing back. Turned on, what the process learned alone of
    /// the silence is dropped: it measured a share.
    pub(crate) fn paced_by_fleet(&mut self, fleet: bool) {
        if fleet && !self.fleet {
            self.silence = None;
            self.quiet_admitted = 0;
            self.quiet_since = None;
            self.ramp_since = None;
        }
        self.fleet = fleet;
    }

    /// Whether other processes spend this key's quota too, sharing what they learn through a
    /// store (every process that asks the same store under the same name does): a window's
    /// count then holds their requests as well as ours, and one above ours says nothing of
    /// how the window frees (see `first_answer_of_roll`).
    pub(crate) fn counted_with_others(&mut self, shared: bool) {
        self.counted_with_others = shared;
    }

    /// Whether the response is the shared estimate's to learn from, not this process's: the
    /// store paces the key, and the answer states nothing at all (a `Retry-After` alone is
    /// the server's word on the pause, which this process obeys itself).
    pub(super) fn fleet_learns(&self, info: &RateLimitInfo) -> bool {
        self.fleet && info.retry_after.is_none()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{Admission, KeyQuota, Outcome};
    use crate::headers::RateLimitInfo;

    const MS: Duration = Duration::from_millis(1);

    fn reserved(q: &mut KeyQuota, now: Duration) -> super::super::Ticket {
        match q.try_reserve(now, 1) {
            Admission::Reserved(ticket) => ticket,
            Admission::WaitUntil(t) => panic!("told to wait until {t:?} at {now:?}"),
        }
    }

    /// A process that learned alone, then hears that the fleet's estimate paces the key: its
    /// own silent model (a quota of its share) no longer holds requests back, and a bare 429
    /// pauses nothing here (the store closes the gate for all, with the one pause it chose).
    #[test]
    fn a_key_paced_by_the_fleet_is_not_held_by_its_own_silent_model() {
        let mut q = KeyQuota::new(true);
        let silent = RateLimitInfo::default();
        // Alone: two admitted, the third refused: a quota of 2 (this process's share).
        for i in 0..2 {
            let ticket = reserved(&mut q, MS * (10 * i));
            assert_eq!(
                q.observe(MS * (10 * i + 1), ticket, Outcome::Answered, &silent),
                None
            );
        }
        let refused = reserved(&mut q, MS * 20);
        let pause = q.observe(MS * 21, refused, Outcome::Throttled, &silent);
        assert_eq!(pause, Some(Duration::from_millis(250)));
        q.close_gate(MS * 21, pause.unwrap());
        // Alone, past the pause, one request probes and the others wait for its answer.
        let mut alone = q.clone();
        reserved(&mut alone, MS * 300);
        assert!(matches!(
            alone.try_reserve(MS * 300, 1),
            Admission::WaitUntil(_)
        ));
        // The store's answer: the fleet paces the key. The gate the store closes still holds
        // (the pacer closes it with the store's pause), but the model learned alone is gone.
        q.paced_by_fleet(true);
        // Past the gate, ten requests at once: none is held by a slow start or a share.
        let tickets: Vec<_> = (0..10).map(|_| reserved(&mut q, MS * 300)).collect();
        for (i, &ticket) in tickets.iter().enumerate() {
            let outcome = if i < 9 {
                Outcome::Answered
            } else {
                Outcome::Throttled
            };
            assert_eq!(q.observe(MS * 301, ticket, outcome, &silent), None);
        }
        assert_eq!(q.gate_after(MS * 301), Duration::ZERO);
        assert!(matches!(q.try_reserve(MS * 302, 1), Admission::Reserved(_)));
        // The store out of reach: the process learns alone again, from its next refusal.
        q.paced_by_fleet(false);
        let ticket = reserved(&mut q, MS * 400);
        let pause = q.observe(MS * 401, ticket, Outcome::Throttled, &silent);
        assert!(pause.is_some());
    }
}
