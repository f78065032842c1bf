//! The serializer over a [`LockStore`]: the serializer's guarantee across every isolate sharing
//! the store. A [`KeyedSerializer`] orders the turns here; each turn holds the key's lease as
//! the [`Turns`] machine says — hand-on, renewal, release when last, letting go when idle.

use core::fmt;
use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;

use super::lock::{beside, Lock, LockError, LockManager};
use super::serializer::{KeyedSerializer, SerializeError, WorkSignal};
use crate::clock::Clock;
use crate::engine::key::SERIALIZE_PREFIX;
use crate::engine::options::{Coalesce, LockOptions, OptionError, SerializerOptions};
use crate::engine::random::Random;
use crate::engine::turns::{Acquired, Begin, KeyedTurns, Turns};
use crate::engine::works::Stats;
use crate::store::LockStore;

/// Runs async work one at a time per key across every isolate whose serializer uses the same
/// store, each with a deadline and a fence — for Rust callers.
///
/// Within one isolate it is a [`KeyedSerializer`]: FIFO per key, the same deadlines, bound and
/// counters. Across isolates each turn holds the key's lease in the store (the lock named
/// [`SERIALIZE_PREFIX`](crate::SERIALIZE_PREFIX) + key), so works for one key never overlap
/// anywhere; the work gets the lease's fence, which strictly rises with every turn of the key
/// in every isolate — pass it to the writes it makes.
///
/// With [`SerializerOptions::with_concurrency`] N above 1, at most N works of a key run at once
/// in every isolate: each turn holds one of the key's N slots ([`LockOptions::concurrency`]),
/// its [`WorkSignal::slot`] that slot, its fence rising per slot.
///
/// The deadline covers waiting for the lease and running. While the work runs its lease is
/// renewed every `stale_ms / 3` (a failed renewal is tried again while the lease has time
/// left); if the lease is lost anyway (taken over, or lapsed), the work's [`WorkSignal`] reads
/// aborted. Consecutive works of a key hand the lease on without a store call, in streaks of at
/// most `stale_ms / 4` (at least 100 ms) so other isolates get their turn. When a work
/// finishes with nothing of its key queued behind it here, its lease is freed before `run`
/// returns.
///
/// What it does not guarantee: a `run` future dropped by its caller while its work held the
/// lease leaves the lease to the key's next work here, and — if none comes — held until it
/// goes stale (`stale_ms`), as a crashed holder's would (a drop cannot make a store call).
pub struct StoreSerializer<S: LockStore, C: Clock, R: Random> {
    /// Shared with the turns of coalesced runs, which any of their callers may drive.
    parts: Rc<Parts<S, C, R>>,
}

struct Parts<S: LockStore, C: Clock, R: Random> {
    serializer: KeyedSerializer<C>,
    locks: LockManager<S, C, R>,
    turns: RefCell<KeyedTurns<Lock<S, C, R>>>,
}

impl<S: LockStore, C: Clock, R: Random> fmt::Debug for StoreSerializer<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreSerializer")
            .field("serializer", &self.parts.serializer)
            .field("turns", &self.parts.turns)
            .finish()
    }
}

/// Leaves a turn's lease for the next turn of its key — also when the turn is dropped.
struct HandOn<'a, S: LockStore, C: Clock, R: Random> {
    turns: &'a RefCell<KeyedTurns<Lock<S, C, R>>>,
    key: &'a str,
    lock: Option<Lock<S, C, R>>,
}

impl<S: LockStore, C: Clock, R: Random> Drop for HandOn<'_, S, C, R> {
    fn drop(&mut self) {
        if let Some(lock) = self.lock.take() {
            // One left by an earlier dropped turn is superseded (its record is this one's): a
            // drop cannot release it, so it is dropped, leaving the record to this lease.
            let displaced = self.turns.borrow_mut().ended(self.key, lock);
            drop(displaced);
        }
    }
}

impl<S: LockStore, C: Clock + Clone, R: Random> StoreSerializer<S, C, R> {
    /// A serializer with `options` whose turns hold leases in `locks`' store as `lease` says —
    /// `stale_ms`, `max_clock_skew_ms`, `store_timeout_ms`; a turn waits for its lease until
    /// its deadline, whatever `lease.wait_ms` says — timed by `locks`' clock.
    ///
    /// # Errors
    /// An [`OptionError`] for a lease option out of range.
    pub fn new(
        options: SerializerOptions,
        lease: LockOptions,
        locks: LockManager<S, C, R>,
    ) -> Result<Self, OptionError> {
        // N at a time: each turn holds one of the key's N slots, in every isolate.
        let lease = lease.with_concurrency(options.concurrency() as f64);
        let turns = KeyedTurns::new(lease)?;
        Ok(StoreSerializer {
            parts: Rc::new(Parts {
                serializer: KeyedSerializer::calling_later(options, locks.clock().clone()),
                locks,
                turns: RefCell::new(turns),
            }),
        })
    }
}

impl<S: LockStore, C: Clock, R: Random> StoreSerializer<S, C, R> {
    /// Runs `work(signal, fence)` once every work queued earlier under `key` — in this isolate
    /// and, through the store, in every other — has finished, and returns its output.
    ///
    /// # Cancel safety
    /// As [`KeyedSerializer::run`]: dropping the future gives up the turn at once. A turn
    /// dropped while it held the lease leaves it to the next work of the key here.
    ///
    /// # Errors
    /// Those of [`KeyedSerializer::run`] — [`SerializeError::TimedOut`] also when the lease was
    /// not had within the deadline — and [`SerializeError::Lock`] when the store failed: that
    /// work did not run, and the key moves on.
    pub async fn run<F, Fut>(&self, key: &str, work: F) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal, u64) -> Fut,
        Fut: Future,
    {
        let parts = &*self.parts;
        let outcome = parts
            .serializer
            .run(key, |signal| parts.turn(key, signal, work))
            .await;
        parts.free_if_idle(key).await;
        outcome.and_then(|turn| turn)
    }

    /// [`run`](Self::run) for a work that re-decides from a fresh read: joins the key's last
    /// waiting work in this isolate as [`KeyedSerializer::run_coalesced`] says, and returns a
    /// clone of its output. Coalescing happens in each isolate's own line; every run holds the
    /// key's lease and gets its fence as any work does.
    ///
    /// # Cancel safety
    /// As [`KeyedSerializer::run_coalesced`]: dropping the future takes only this caller out.
    ///
    /// # Errors
    /// As [`run`](Self::run); a joined caller gets the error its run ended with.
    pub async fn run_coalesced<F, Fut>(
        &self,
        key: &str,
        coalesce: Coalesce,
        work: F,
    ) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal, u64) -> Fut + 'static,
        Fut: Future + 'static,
        Fut::Output: Clone + 'static,
        S: 'static,
        C: 'static,
        R: 'static,
    {
        let parts = Rc::clone(&self.parts);
        let turn_key: Rc<str> = Rc::from(key);
        let outcome = self
            .parts
            .serializer
            .run_coalesced(key, coalesce, move |signal| async move {
                parts.turn(&turn_key, signal, work).await
            })
            .await;
        self.parts.free_if_idle(key).await;
        outcome.and_then(|turn| turn)
    }

    /// The number of keys with queued or running work in this isolate.
    pub fn pending(&self) -> usize {
        self.parts.serializer.pending()
    }

    /// The works queued or running under `key` in this isolate.
    pub fn pending_for(&self, key: &str) -> usize {
        self.parts.serializer.pending_for(key)
    }

    /// Counters since creation, and what is live now, in this isolate.
    pub fn stats(&self) -> Stats {
        self.parts.serializer.stats()
    }

    /// The lock manager the leases are held through.
    pub fn locks(&self) -> &LockManager<S, C, R> {
        &self.parts.locks
    }
}

impl<S: LockStore, C: Clock, R: Random> Parts<S, C, R> {
    /// Idle here (its last work abandoned at its deadline, say): the lease left is freed for
    /// the other isolates at once.
    async fn free_if_idle(&self, key: &str) {
        if self.serializer.pending_for(key) == 0 {
            let left = self.turns.borrow_mut().idle(key);
            if let Some(lock) = left {
                let _ = lock.release().await;
            }
        }
    }

    /// One turn, once the key's local turn came: the lease, then the work beside its renewals,
    /// then the lease freed (the key's last turn here) or left for the next.
    async fn turn<F, Fut>(
        &self,
        key: &str,
        signal: WorkSignal,
        work: F,
    ) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal, u64) -> Fut,
        Fut: Future,
    {
        let pending = self.serializer.pending_for(key);
        let timeout_ms = self.serializer.running_timeout(key);
        let begin = self.turns.borrow_mut().begin(key, pending, timeout_ms);
        let name = [SERIALIZE_PREFIX, key].concat();
        let many = begin.options.concurrency > 1.0;
        // The slot the turn before left is handed on as one name's lease is; with none left, a
        // key taken N at a time takes any of its slots.
        let lease = if !many || begin.hand_on.is_some() {
            let Begin {
                options,
                succession,
                hand_on,
            } = begin;
            self.locks
                .acquire_after(&name, options, succession, hand_on)
                .await
        } else {
            self.locks
                .acquire_any(&name, begin.options, begin.succession)
                .await
        }
        .map_err(SerializeError::Lock)?;
        // A turn abandoned meanwhile is dropped here, not resumed: never abandoned now.
        let lock = match Turns::acquired(lease, false) {
            Acquired::Run(lock) => lock,
            Acquired::Release(lock) => {
                let _ = lock.release().await;
                return Err(self.timed_out(key, timeout_ms));
            }
            Acquired::TimeOut | Acquired::Nothing => return Err(self.timed_out(key, timeout_ms)),
        };
        let mut hand_on = HandOn {
            turns: &self.turns,
            key,
            lock: Some(lock),
        };
        self.serializer.called(key);
        let output = {
            let Some(lock) = hand_on.lock.as_ref() else {
                unreachable!("just put there")
            };
            // Its slot is its lease's: unique among the key's turns in every isolate.
            let signal = signal.in_slot_of(lock.slot());
            let mut work = pin!(work(signal.clone(), lock.fence()));
            // Lost: the work must stop writing.
            let renewals = lock.keep_renewed(|| signal.aborted.set(true));
            beside(work.as_mut(), renewals).await
        };
        let (pending, waiting) = (
            self.serializer.pending_for(key),
            self.serializer.waiting_for(key),
        );
        if Turns::<()>::settled(pending, waiting, false) {
            if let Some(lock) = hand_on.lock.take() {
                // A failed release leaves the record to go stale.
                let _ = lock.release().await;
            }
        } else if many {
            // N at a time: a lease of another slot left for the key's next turn is displaced by
            // this one, and freed (as the package's JS does) — not dropped, which would leave
            // that slot held until stale.
            if let Some(lock) = hand_on.lock.take() {
                let displaced = self.turns.borrow_mut().ended(key, lock);
                if let Some(displaced) = displaced {
                    let _ = displaced.release().await;
                }
            }
        }
        Ok(output)
    }

    /// The turn's wait for the lease ended on the lock's clock before the deadline's timer: the
    /// same end, a timeout.
    fn timed_out(&self, key: &str, timeout_ms: f64) -> SerializeError {
        self.serializer.timed_out(key);
        SerializeError::TimedOut {
            key: key.to_owned(),
            timeout_ms,
        }
    }
}

impl From<LockError> for SerializeError {
    fn from(error: LockError) -> Self {
        SerializeError::Lock(error)
    }
}
