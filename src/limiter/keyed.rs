//! The keyed table every in-memory algorithm shares: one state per key, one clock reading per
//! check, and amortized sweeps that drop idle keys so memory stays bounded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use std::time::Duration;

use super::Decision;
use crate::time::nanos::duration_nanos;
use crate::time::{Clock, SystemClock};

/// A sweep runs at least this many checks apart, so small tables are not swept on every check.
pub(crate) const MIN_SWEEP_INTERVAL: usize = 1024;

/// One algorithm's rules, applied to one key's state. Times are nanoseconds on the clock.
pub(crate) trait Algorithm: Send + Sync {
    /// What one key remembers.
    type State: Send;

    /// The quota per window, or the bucket's capacity.
    fn limit(&self) -> u64;

    /// The window the quota is measured over (for a bucket: the time to fill or drain it).
    fn window(&self) -> Duration;

    /// The state of a key never seen (or evicted): the whole quota available.
    fn fresh(&self) -> Self::State;

    /// Decides on `cost` units at `now`, updating `state` (only when allowed, apart from
    /// bringing it up to `now`, which never changes a later decision).
    fn decide(&self, state: &mut Self::State, now: u64, cost: u64) -> Decision;

    /// Whether `state` at `now` decides exactly as a fresh state would, so it can be dropped.
    fn is_idle(&self, state: &Self::State, now: u64) -> bool;
}

/// An algorithm's states by key, behind one lock.
pub(crate) struct KeyedStates<A: Algorithm> {
    algorithm: A,
    clock: Arc<dyn Clock>,
    table: Mutex<Table<A::State>>,
}

struct Table<S> {
    states: HashMap<String, S>,
    checks_since_sweep: usize,
    held_after_sweep: usize,
}

impl<A: Algorithm> KeyedStates<A> {
    /// An empty table for `algorithm`, on the system clock.
    pub(crate) fn new(algorithm: A) -> Self {
        Self {
            algorithm,
            clock: Arc::new(SystemClock::new()),
            table: Mutex::new(Table {
                states: HashMap::new(),
                checks_since_sweep: 0,
                held_after_sweep: 0,
            }),
        }
    }

    /// The same algorithm on `clock`, with no keys (states measured on another clock would
    /// be meaningless on this one).
    pub(crate) fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            ..Self::new(self.algorithm)
        }
    }

    /// The same clock with the rules changed by `change`, and no keys (states decided by
    /// other rules would mislead these).
    pub(crate) fn with_rules(mut self, change: impl FnOnce(&mut A)) -> Self {
        change(&mut self.algorithm);
        Self {
            algorithm: self.algorithm,
            clock: self.clock,
            table: Mutex::new(Table {
                states: HashMap::new(),
                checks_since_sweep: 0,
                held_after_sweep: 0,
            }),
        }
    }

    /// The rules this table applies.
    pub(crate) fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// Decides on `cost` units for `key`, reading the clock once.
    pub(crate) fn check(&self, key: &str, cost: u64) -> Decision {
        let mut table = self.lock();
        // Read under the lock, so decisions on one key see time in the order they are made.
        let now = duration_nanos(self.clock.now());
        let decision = match table.states.get_mut(key) {
            Some(state) => {
                let decision = self.algorithm.decide(state, now, cost);
                if self.algorithm.is_idle(state, now) {
                    table.states.remove(key);
                }
                decision
            }
            None => {
                let mut state = self.algorithm.fresh();
                let decision = self.algorithm.decide(&mut state, now, cost);
                // A query, or a request that could not pass, leaves nothing worth keeping.
                if !self.algorithm.is_idle(&state, now) {
                    table.states.insert(key.to_owned(), state);
                }
                decision
            }
        };
        table.checks_since_sweep += 1;
        // Sweeping costs O(keys held) once every max(keys held, MIN) checks: O(1) amortized.
        if table.checks_since_sweep >= table.held_after_sweep.max(MIN_SWEEP_INTERVAL) {
            table
                .states
                .retain(|_, state| !self.algorithm.is_idle(state, now));
            table.checks_since_sweep = 0;
            table.held_after_sweep = table.states.len();
        }
        decision
    }

    /// How many keys hold state now.
    pub(crate) fn keys_held(&self) -> usize {
        self.lock().states.len()
    }

    fn lock(&self) -> MutexGuard<'_, Table<A::State>> {
        // A panic elsewhere cannot leave a table half-written in a way that matters more than
        // refusing every later request would.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The public face every in-memory algorithm shares: `with_clock`, the [`RateLimiter`] impl
/// and `Debug`, for a struct `$name { states: KeyedStates<_> }`.
///
/// [`RateLimiter`]: super::RateLimiter
macro_rules! keyed_limiter {
    ($name:ident) => {
        impl $name {
            /// The same limiter on `clock`, with no keys held (states measured on another clock
            /// would mean nothing on this one).
            pub fn with_clock(self, clock: impl $crate::time::Clock) -> Self {
                Self {
                    states: self.states.with_clock(::std::sync::Arc::new(clock)),
                }
            }
        }

        impl $crate::limiter::RateLimiter for $name {
            fn check(&self, key: &str, cost: u64) -> $crate::limiter::Decision {
                self.states.check(key, cost)
            }

            fn limit(&self) -> u64 {
                $crate::limiter::keyed::Algorithm::limit(self.states.algorithm())
            }

            fn window(&self) -> ::std::time::Duration {
                $crate::limiter::keyed::Algorithm::window(self.states.algorithm())
            }

            fn keys_held(&self) -> usize {
                self.states.keys_held()
            }
        }

        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                use $crate::limiter::RateLimiter as _;
                f.debug_struct(stringify!($name))
                    .field("limit", &self.limit())
                    .field("window", &self.window())
                    .field("keys_held", &self.keys_held())
                    .finish()
            }
        }
    };
}

pub(crate) use keyed_limiter;
