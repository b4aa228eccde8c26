//! Turns between the files of one test binary. When each file was its own test binary, cargo
//! ran the binaries one after another, so a test only ever ran beside tests of its own file. A
//! test that measures real time, or loads the machine, takes its file's turn to keep it so: any
//! number of tests of the file holding the turn may run; another file's tests wait until the
//! last of them is done.
//!
//! Waiting polls every few milliseconds: simple, and nothing here needs to be quick or fair
//! (libtest hands out tests in name order, so a file's tests come together).

use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::Duration;

/// The file holding the turn, and how many of its tests hold it.
static HOLDER: Mutex<Option<(&'static str, usize)>> = Mutex::new(None);
const POLL: Duration = Duration::from_millis(5);

/// A test's share of its file's turn; the turn passes on when the file's last share is dropped
/// (a failing test's too, as it unwinds).
#[must_use = "the turn ends when this is dropped"]
pub struct Turn(());

impl Turn {
    fn try_take(file: &'static str) -> Option<Turn> {
        let mut holder = HOLDER.lock().unwrap_or_else(PoisonError::into_inner);
        match &mut *holder {
            None => *holder = Some((file, 1)),
            Some((held, shares)) if *held == file => *shares += 1,
            Some(_) => return None,
        }
        Some(Turn(()))
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut holder = HOLDER.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, shares)) = &mut *holder {
            *shares -= 1;
            if *shares == 0 {
                *holder = None;
            }
        }
    }
}

/// Waits for the turn of `file` (pass `module_path!()`).
pub async fn take_turn(file: &'static str) -> Turn {
    loop {
        if let Some(turn) = Turn::try_take(file) {
            return turn;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// [`take_turn`] for a test that is not async.
pub fn take_turn_blocking(file: &'static str) -> Turn {
    loop {
        if let Some(turn) = Turn::try_take(file) {
            return turn;
        }
        thread::sleep(POLL);
    }
}
