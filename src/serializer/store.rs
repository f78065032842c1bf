//! The serializer over a [`LockStore`]: the seed's guarantee across every isolate sharing the
//! store, built on the lock's core — each turn holds the key's lease (the lock named
//! [`SERIALIZE_PREFIX`] + key), renewed while its work runs, and consecutive turns in one isolate
//! pass it on without a store call.

use core::fmt;
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;

use super::{KeyedSerializer, SerializeError, SerializerOptions, Stats, WorkSignal};
use crate::clock::Clock;
use crate::key::SERIALIZE_PREFIX;
use crate::lock::{beside, Lock, LockError, LockManager, LockOptions, OptionError, Succession};
use crate::random::Random;
use crate::store::LockStore;

/// Leases a finished or abandoned turn left for the next work of its key, by key.
type Handed<S, C, R> = Rc<RefCell<HashMap<String, Lock<S, C, R>>>>;

/// Runs async work one at a time per key across every isolate whose serializer uses the same
/// store, each with a deadline and a fence — for Rust callers.
///
/// Within one isolate it is a [`KeyedSerializer`]: FIFO per key, the same deadlines, bound and
/// counters. Across isolates each turn holds the key's lease in the store, so works for one key
/// never overlap anywhere; the work gets the lease's fence, which strictly rises with every
/// turn of the key in every isolate — pass it to the writes it makes.
///
/// The deadline covers waiting for the lease and running. While the work runs its lease is
/// renewed every `stale_ms / 3`; if a renewal is refused (the lease was lost anyway), the work's
/// [`WorkSignal`] reads aborted. Consecutive works of a key hand the lease on without a store
/// call, in streaks bounded by [`Succession::serialized`] so other isolates get their turn.
///
/// A work dropped at its deadline leaves its lease to the next work of the key in this
/// isolate, or — none queued — [`run`](Self::run) frees it before it returns the timeout. What
/// it does not guarantee: a `run` future dropped by its caller while its work held the lease
/// leaves the lease held until it goes stale (`stale_ms`) unless another work of the key comes
/// here first, as a crashed holder's would (a drop cannot make a store call).
pub struct StoreSerializer<S: LockStore, C: Clock, R: Random> {
    serializer: KeyedSerializer<C>,
    locks: LockManager<S, C, R>,
    stale_ms: f64,
    handed: Handed<S, C, R>,
}

impl<S: LockStore, C: Clock, R: Random> fmt::Debug for StoreSerializer<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreSerializer")
            .field("serializer", &self.serializer)
            .field("stale_ms", &self.stale_ms)
            .finish()
    }
}

/// Puts a turn's lease where the next work of its key finds it — also when the turn is dropped.
struct HandOn<'a, S: LockStore, C: Clock, R: Random> {
    handed: &'a Handed<S, C, R>,
    key: &'a str,
    lock: Option<Lock<S, C, R>>,
}

impl<S: LockStore, C: Clock, R: Random> Drop for HandOn<'_, S, C, R> {
    fn drop(&mut self) {
        if let Some(lock) = self.lock.take() {
            // One left by an earlier dropped turn is superseded (its record is this one's).
            self.handed.borrow_mut().insert(self.key.to_owned(), lock);
        }
    }
}

impl<S: LockStore, C: Clock + Clone, R: Random> StoreSerializer<S, C, R> {
    /// A serializer with `options` whose turns hold leases of `stale_ms` in `locks`' store,
    /// timed by `locks`' clock.
    ///
    /// # Errors
    /// [`OptionError::StaleMs`] unless `stale_ms` is finite and above 0.
    pub fn new(
        options: SerializerOptions,
        stale_ms: f64,
        locks: LockManager<S, C, R>,
    ) -> Result<Self, OptionError> {
        LockOptions {
            wait_ms: 0.0,
            stale_ms,
        }
        .validate()?;
        Ok(StoreSerializer {
            serializer: KeyedSerializer::with_options(options, locks.clock().clone()),
            locks,
            stale_ms,
            handed: Rc::default(),
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
        let timeout_ms = self.serializer.timeout_ms();
        let outcome = self
            .serializer
            .run(key, |signal| self.turn(key, timeout_ms, signal, work))
            .await;
        if matches!(outcome, Err(SerializeError::TimedOut { .. })) {
            self.let_go(key).await;
        }
        outcome.and_then(|turn| turn)
    }

    /// After a turn dropped at its deadline: its lease, if no work of the key here is left to
    /// take it over, is freed for the other isolates at once.
    async fn let_go(&self, key: &str) {
        if self.serializer.pending_for(key) > 0 {
            return;
        }
        let lock = self.handed.borrow_mut().remove(key);
        if let Some(lock) = lock {
            let _ = lock.release_with(0).await;
        }
    }

    /// One turn, once the key's local turn came: the lease, then the work, then the hand-on.
    async fn turn<F, Fut>(
        &self,
        key: &str,
        timeout_ms: f64,
        signal: WorkSignal,
        work: F,
    ) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal, u64) -> Fut,
        Fut: Future,
    {
        let name = format!("{SERIALIZE_PREFIX}{key}");
        // This turn counts itself: those behind it are announced.
        let followers = self.serializer.pending_for(key).saturating_sub(1);
        let succession = Succession::serialized(followers, self.stale_ms);
        let previous = self.handed.borrow_mut().remove(key);
        let options = LockOptions {
            wait_ms: timeout_ms,
            stale_ms: self.stale_ms,
        };
        let lock = self
            .locks
            .acquire_after(&name, options, succession, previous)
            .await
            .map_err(SerializeError::Lock)?;
        let Some(lock) = lock else {
            // The wait ended on the lock's clock before the deadline's timer: the same end.
            return Err(SerializeError::TimedOut {
                key: key.to_owned(),
                timeout_ms,
            });
        };
        let mut hand_on = HandOn {
            handed: &self.handed,
            key,
            lock: Some(lock),
        };
        let output = {
            let Some(lock) = hand_on.lock.as_ref() else {
                unreachable!("just put there")
            };
            let mut work = pin!(work(signal.clone(), lock.fence()));
            let renewals = async {
                loop {
                    let Ok(pause) = self.locks.clock().sleep(self.stale_ms / 3.0) else {
                        return;
                    };
                    pause.await;
                    match lock.renew().await {
                        Ok(true) => {}
                        // Lost: the work must stop writing.
                        Ok(false) => {
                            signal.aborted.set(true);
                            return;
                        }
                        // A failed renewal is tried again next period.
                        Err(_) => {}
                    }
                }
            };
            beside(work.as_mut(), renewals).await
        };
        // Others queued here: the next takes the lease over when its turn comes. Else it is
        // freed for the other isolates (a failed release leaves it to go stale).
        if self.serializer.pending_for(key) <= 1 {
            if let Some(lock) = hand_on.lock.take() {
                let _ = lock.release_with(0).await;
            }
        }
        Ok(output)
    }

    /// The number of keys with queued or running work in this isolate.
    pub fn pending(&self) -> usize {
        self.serializer.pending()
    }

    /// The works queued or running under `key` in this isolate.
    pub fn pending_for(&self, key: &str) -> usize {
        self.serializer.pending_for(key)
    }

    /// Counters since creation, and what is live now, in this isolate.
    pub fn stats(&self) -> Stats {
        self.serializer.stats()
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
