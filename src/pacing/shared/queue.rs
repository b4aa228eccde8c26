//! What the shared bucket knows of each key's queue: how many requests wait behind the head
//! (the head takes for them too), and a take still in flight when its head was dropped (the
//! next head reads its answer, so the tokens it took are not lost).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use super::{StoreError, StoreTake, TakeAsk};

/// Past this many keys with a call left in flight, the oldest entries are dropped (their
/// tokens stay unused: quota lost, never exceeded).
const ORPHANS_MAX: usize = 1024;

/// A take sent to the store, owned so that it can outlive the head that sent it.
pub(super) type TakeCall = Pin<Box<dyn Future<Output = Result<StoreTake, StoreError>> + Send>>;

/// Requests waiting for their key's turn, per key.
#[derive(Debug, Default)]
pub(super) struct Waiting {
    keys: Mutex<HashMap<Box<str>, u64>>,
}

impl Waiting {
    /// Counts one more request waiting on `key` until the guard is dropped (its turn came, or
    /// it gave up).
    pub(super) fn enter<'a>(&'a self, key: &str) -> WaitingGuard<'a> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        *keys.entry(key.into()).or_default() += 1;
        WaitingGuard {
            waiting: self,
            key: key.into(),
        }
    }

    /// How many requests wait on `key` now.
    pub(super) fn on(&self, key: &str) -> u64 {
        let keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.get(key).copied().unwrap_or(0)
    }
}

/// One request counted as waiting, until dropped.
#[derive(Debug)]
pub(crate) struct WaitingGuard<'a> {
    waiting: &'a Waiting,
    key: Box<str>,
}

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        let mut keys = self.waiting.keys.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = keys.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                keys.remove(&self.key);
            }
        }
    }
}

/// Takes whose head was dropped before the answer came, per key.
#[derive(Default)]
pub(super) struct Orphans {
    keys: Mutex<HashMap<Box<str>, (TakeAsk, TakeCall)>>,
}

impl Orphans {
    /// The take left in flight on `key`, if any, for the head that now holds the turn.
    pub(super) fn adopt(&self, key: &str) -> Option<(TakeAsk, TakeCall)> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.remove(key)
    }

    fn leave(&self, key: &str, ask: TakeAsk, call: TakeCall) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if keys.len() >= ORPHANS_MAX {
            keys.clear();
        }
        keys.insert(key.into(), (ask, call));
    }
}

/// A take the head awaits; dropped before its answer, it is left to the key's next head.
pub(super) struct InFlight<'a> {
    orphans: &'a Orphans,
    key: &'a str,
    ask: TakeAsk,
    call: Option<TakeCall>,
}

impl<'a> InFlight<'a> {
    pub(super) fn new(orphans: &'a Orphans, key: &'a str, ask: TakeAsk, call: TakeCall) -> Self {
        InFlight {
            orphans,
            key,
            ask,
            call: Some(call),
        }
    }
}

impl Future for InFlight<'_> {
    type Output = Result<StoreTake, StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(call) = self.call.as_mut() else {
            panic!("an answered take is not polled again");
        };
        let answer = std::task::ready!(call.as_mut().poll(cx));
        self.call = None;
        Poll::Ready(answer)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            self.orphans.leave(self.key, self.ask, call);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_count_follows_its_guards() {
        let waiting = Waiting::default();
        let (a, b) = (waiting.enter("k"), waiting.enter("k"));
        let other = waiting.enter("j");
        assert_eq!((waiting.on("k"), waiting.on("j")), (2, 1));
        drop(a);
        assert_eq!(waiting.on("k"), 1);
        drop((b, other));
        assert_eq!((waiting.on("k"), waiting.on("j")), (0, 0));
        assert!(waiting.keys.lock().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_take_dropped_before_its_answer_is_adopted_by_the_next_head() {
        let orphans = Orphans::default();
        let ask = TakeAsk {
            cost: 1,
            want: 3,
            give_back: None,
            asker: 0,
            waited: std::time::Duration::ZERO,
        };
        let call: TakeCall = Box::pin(async {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            Ok(StoreTake::Never)
        });
        let first = InFlight::new(&orphans, "k", ask, call);
        // The head gives up before the answer.
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(1), first)
                .await
                .is_err()
        );
        let (adopted_ask, call) = orphans.adopt("k").expect("the take was left in flight");
        assert_eq!(adopted_ask, ask);
        assert!(orphans.adopt("k").is_none());
        let answer = InFlight::new(&orphans, "k", adopted_ask, call).await;
        assert!(matches!(answer, Ok(StoreTake::Never)));
        assert!(orphans.adopt("k").is_none(), "an answered take is not left");
    }
}
