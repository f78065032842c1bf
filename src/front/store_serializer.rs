//! The serializer over a [`LockStore`]: a thin handle on a serializer in the engine of its
//! [`LockManager`], whose turns each hold the key's lease.

use core::fmt;
use std::future::Future;
use std::rc::Rc;

use super::lock::{LockError, LockManager};
use super::serializer::{Serial, SerializeError, WorkSignal};
use crate::clock::Clock;
use crate::engine::options::{Coalesce, LockOptions, OptionError, SerializerOptions};
use crate::engine::random::Random;
use crate::engine::works::Stats;
use crate::store::LockStore;

/// Runs async work one at a time per key across every isolate whose serializer uses the same
/// store, each with a deadline and a fence — for Rust callers.
///
/// Within one isolate it is a [`KeyedSerializer`](crate::KeyedSerializer): FIFO per key, the
/// same deadlines, bound and counters. Across isolates each turn holds the key's lease in the
/// store (the lock named [`SERIALIZE_PREFIX`](crate::SERIALIZE_PREFIX) + key), so works for one
/// key never overlap anywhere; the work gets the lease's fence, which strictly rises with every
/// turn of the key in every isolate — pass it to the writes it makes.
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
/// returns; a dropped `run` future may leave it held until stale ([`run`](Self::run)).
pub struct StoreSerializer<S: LockStore, C: Clock, R: Random> {
    serial: Serial<S, C, R>,
    locks: LockManager<S, C, R>,
}

impl<S: LockStore, C: Clock, R: Random> fmt::Debug for StoreSerializer<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreSerializer")
            .field("serializer", &self.serial.serializer)
            .finish()
    }
}

impl<S: LockStore + 'static, C: Clock, R: Random> StoreSerializer<S, C, R> {
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
        let serial = Serial::new(Rc::clone(&locks.exec), options, Some(lease))?;
        Ok(StoreSerializer { serial, locks })
    }

    /// Runs `work(signal, fence)` once every work queued earlier under `key` — in this isolate
    /// and, through the store, in every other — has finished, and returns its output.
    ///
    /// # Cancel safety
    /// As [`KeyedSerializer::run`](crate::KeyedSerializer::run): dropping the future gives up
    /// the turn at once. What it does not guarantee: a turn dropped while its work held the
    /// lease leaves the lease to the key's next work here, and — if none comes — held until it
    /// goes stale (`stale_ms`), as a crashed holder's would (a drop cannot make a store call).
    ///
    /// # Errors
    /// Those of [`KeyedSerializer::run`](crate::KeyedSerializer::run) —
    /// [`SerializeError::TimedOut`] also when the lease was not had within the deadline — and
    /// [`SerializeError::Lock`] when the store failed: that work did not run, and the key moves
    /// on.
    pub async fn run<F, Fut>(&self, key: &str, work: F) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal, u64) -> Fut,
        Fut: Future,
    {
        self.serial.run(key, None, false, work).await
    }

    /// [`run`](Self::run) only if the work can start at once, as
    /// [`KeyedSerializer::try_run`](crate::KeyedSerializer::try_run) says, across isolates: no
    /// work of the key ahead of it in this isolate, a slot free in every isolate, and — with a
    /// rate — the starts the key's lease record carries allowing one when its lease is taken.
    /// It looks once at that record (a store call or two): a lease held by another isolate
    /// refuses it with no `retry_after_ms` — how long that isolate's work runs is not this
    /// one's to know. A refused work never runs.
    ///
    /// # Cancel safety
    /// As [`run`](Self::run).
    ///
    /// # Errors
    /// As [`run`](Self::run), and [`SerializeError::Unavailable`].
    pub async fn try_run<F, Fut>(&self, key: &str, work: F) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal, u64) -> Fut,
        Fut: Future,
    {
        self.serial.run(key, None, true, work).await
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
    ///
    /// [`KeyedSerializer::run_coalesced`]: crate::KeyedSerializer::run_coalesced
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
    {
        self.serial.run_coalesced(key, coalesce, work).await
    }

    /// The number of keys with queued or running work in this isolate.
    pub fn pending(&self) -> usize {
        self.serial.pending()
    }

    /// The works queued or running under `key` in this isolate.
    pub fn pending_for(&self, key: &str) -> usize {
        self.serial.pending_for(key)
    }

    /// Counters since creation, and what is live now, in this isolate.
    pub fn stats(&self) -> Stats {
        self.serial.stats()
    }

    /// The lock manager the leases are held through.
    pub fn locks(&self) -> &LockManager<S, C, R> {
        &self.locks
    }
}

impl From<LockError> for SerializeError {
    fn from(error: LockError) -> Self {
        SerializeError::Lock(error)
    }
}
