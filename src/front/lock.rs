//! The lease lock for Rust callers: an acquisition, a renewal and a release each wait for what
//! the engine says of them.

use core::fmt;
use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;

use super::executor::Executor;
use crate::clock::{Clock, TimerError};
use crate::engine::key::KeyError;
use crate::engine::leases::{LockStats, Refusal};
use crate::engine::messages;
use crate::engine::options::{LockOptions, OptionError};
use crate::engine::random::Random;
use crate::engine::{Engine, Now, Outcome, Ticket};
use crate::store::{LockStore, StoreError};

/// Why an acquisition or a release failed. A live holder is not an error: that is `Ok(None)`.
#[derive(Debug, Clone, PartialEq)]
pub enum LockError {
    /// The name was refused; nothing was asked of the store.
    InvalidName(KeyError),
    /// An option was out of range; nothing was asked of the store.
    InvalidOption(OptionError),
    /// The store failed. An acquisition that fails holds nothing; a release that fails may have
    /// left the record held (it then goes stale and is taken over).
    Store(StoreError),
    /// The platform refused a timer for a wait; the acquisition holds nothing.
    Timer(TimerError),
    /// A live holder kept the name for the whole wait ([`LockManager::with_lock`]; an
    /// acquisition answers `None` instead).
    Unavailable {
        /// The lock's name.
        name: String,
        /// How long it waited, in milliseconds.
        wait_ms: f64,
    },
    /// The name is taken `found` at a time — as a record of it says, or an acquisition of it
    /// in this isolate — and this acquisition asked for `asked`: nothing was written.
    ConcurrencyMismatch {
        /// The lock's name.
        name: String,
        /// The acquisition's `concurrency`.
        asked: u16,
        /// The name's, as found.
        found: u16,
    },
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::InvalidName(error) => f.write_str(&error.message("lock name")),
            LockError::InvalidOption(error) => error.fmt(f),
            LockError::Store(error) => error.fmt(f),
            LockError::Timer(error) => error.fmt(f),
            LockError::Unavailable { name, wait_ms } => f.write_str(&messages::fill(
                messages::LOCK_UNAVAILABLE,
                &[("key", name), ("waitMs", &wait_ms.to_string())],
            )),
            LockError::ConcurrencyMismatch { name, asked, found } => f.write_str(&messages::fill(
                messages::CONCURRENCY_MISMATCH,
                &[
                    ("name", name),
                    ("asked", &asked.to_string()),
                    ("found", &found.to_string()),
                ],
            )),
        }
    }
}

impl std::error::Error for LockError {}

impl From<TimerError> for LockError {
    fn from(error: TimerError) -> Self {
        LockError::Timer(error)
    }
}

impl From<Refusal> for LockError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::InvalidName(error) => LockError::InvalidName(error),
            Refusal::InvalidOption(error) => LockError::InvalidOption(error),
            Refusal::ConcurrencyMismatch { name, asked, found } => {
                LockError::ConcurrencyMismatch { name, asked, found }
            }
        }
    }
}

impl From<StoreError> for LockError {
    fn from(error: StoreError) -> Self {
        LockError::Store(error)
    }
}

/// Acquires and releases locks over one store, queueing this isolate's contenders per name.
///
/// Use one manager per store per isolate: contenders queue only with those of their manager.
pub struct LockManager<S: LockStore, C: Clock, R: Random> {
    pub(crate) exec: Rc<Executor<S, C, R>>,
}

impl<S: LockStore, C: Clock, R: Random> fmt::Debug for LockManager<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockManager")
            .field("engine", &self.exec.engine)
            .finish()
    }
}

impl<S: LockStore, C: Clock, R: Random> Clone for LockManager<S, C, R> {
    fn clone(&self) -> Self {
        LockManager {
            exec: Rc::clone(&self.exec),
        }
    }
}

/// Waits for how the lock call of `handle` ended.
async fn outcome<S: LockStore + 'static, C: Clock, R: Random>(
    exec: &Executor<S, C, R>,
    handle: Ticket,
) -> Result<Outcome, LockError> {
    poll_fn(|cx| {
        exec.poll(cx, handle, |mailbox| {
            Some(match mailbox.outcome.take()? {
                Outcome::StoreFailed => Err(LockError::Store(mailbox.store_error())),
                Outcome::TimerRefused => Err(LockError::Timer(mailbox.timer_refusal())),
                outcome => Ok(outcome),
            })
        })
    })
    .await
}

impl<S: LockStore + 'static, C: Clock, R: Random> LockManager<S, C, R> {
    /// A manager over `store`, timing with `clock` — epoch milliseconds, as
    /// `clock::WallClock` on wasm: record times are compared across isolates — and drawing
    /// tokens and jitter from `random` (the platform's crypto in production, never a
    /// predictable generator).
    pub fn new(store: S, clock: C, random: R) -> Self {
        LockManager {
            exec: Rc::new(Executor::new(store, clock, random)),
        }
    }

    /// Watches the records of busy lines for other isolates' asks, for as long as it is polled
    /// (it never ends): run it beside the work of a program whose keys are busy (spawned on its
    /// executor), over a store that tells changes ([`LockStore::tells_changes`]).
    ///
    /// A busy line's holders hand the lease on with no store call. While this runs, one watch
    /// per busy line (a *guard*) tells the line when another isolate asks for the name, so
    /// those hand-offs go on while the batch is young and nobody asked; without it, for at most
    /// `MAX_POLL_MS` after each write, so a busy key costs a write each time that runs out.
    /// Every future of this manager drives the guards while it is polled; this one drives them
    /// while nothing else is.
    ///
    /// # Cancel safety
    /// Dropping it stops nothing: guards go on whenever another future of the manager is polled.
    pub async fn watch_for_asks(&self) {
        poll_fn(|cx| {
            self.exec.drive_unowned(cx);
            Poll::<()>::Pending
        })
        .await;
    }

    /// Store calls made so far by this manager's acquisitions, renewals and releases.
    pub fn store_calls(&self) -> u64 {
        self.stats().store_calls
    }

    /// What this manager's locks did since it was made, and what is live now.
    pub fn stats(&self) -> LockStats {
        self.exec.engine.borrow().lock_stats()
    }

    /// Local contenders waiting or holding, for `name`.
    pub fn local_line(&self, name: &str) -> usize {
        self.exec.engine.borrow().local_line(name)
    }

    /// The store this manager's locks live in.
    pub fn store(&self) -> &S {
        &self.exec.store
    }

    /// The clock this manager's locks are timed by.
    pub fn clock(&self) -> &C {
        &self.exec.clock
    }

    /// Takes the lock `name`, or answers `None` when a live holder kept it for the whole
    /// `wait_ms`. Local contenders are served first come, first served.
    ///
    /// With `options.concurrency` N above 1 it takes one of the name's N slots ([`Lock::slot`]),
    /// each a record of its own ([`slot_name`](crate::slot_name)) with its own fences, lease
    /// and waiters' order: first each slot with nobody in line for it here, from slot 0 up,
    /// once with no wait (an idle name costs one create, as a mutex); none taken, it waits for
    /// every slot at once until `wait_ms` is over and takes the first it gets — the other waits
    /// end, a store call of theirs in flight finishing first and a slot one of them took
    /// meanwhile released before this answers. The npm package's `acquireLock` does the same.
    ///
    /// # Cancel safety
    /// Dropping the future gives up: a waiter leaves the local line (one that had been handed
    /// the lock leaves the record to this isolate's next acquisition, which takes it with one
    /// CAS); a head that was talking to the store holds nothing unless its create or CAS had
    /// already succeeded, in which case the record stays held until stale — as if the holder
    /// had crashed.
    ///
    /// # Errors
    /// A bad name or option (nothing asked of the store), a store failure — never reported as
    /// a busy lock — or a refused timer; the acquisition then holds nothing.
    /// [`LockError::ConcurrencyMismatch`] when the name is taken with another `concurrency`
    /// (nothing written).
    pub async fn acquire(
        &self,
        name: &str,
        options: LockOptions,
    ) -> Result<Option<Lock<S, C, R>>, LockError> {
        let exec = &*self.exec;
        let mut waiting = exec.call();
        let handle = waiting.handle;
        let call =
            exec.event(|engine, now, random| engine.acquire(name, options, handle, now, random))?;
        // Its caller gone before it heard, the acquisition is given up.
        waiting.give_up = Some(move || {
            exec.event(|engine, now, random| engine.abort(call, now, random));
        });
        exec.mailbox(handle, |mailbox| mailbox.owner = Some((None, call)));
        let outcome = outcome(exec, handle).await;
        // An acquisition with an outcome is nobody's to give up.
        waiting.give_up = None;
        match outcome? {
            Outcome::Held(held) => {
                // The mailbox is the lock's now (its renewals, its loss).
                std::mem::forget(waiting);
                let token = exec.engine.borrow().token(call).unwrap_or_default();
                Ok(Some(Lock {
                    manager: self.clone(),
                    name: name.to_owned(),
                    call,
                    handle,
                    slot: held.slot,
                    token,
                    fence: held.fence,
                    held_until: Cell::new(held.held_until),
                }))
            }
            Outcome::Mismatch { found } => Err(LockError::ConcurrencyMismatch {
                name: name.to_owned(),
                asked: options.slots(),
                found,
            }),
            // Unavailable: live holders kept the name for the whole wait.
            _ => Ok(None),
        }
    }

    /// Acquires `name`, runs `f` with the lock (an async closure, `async |lock| …`, which may
    /// hold the lock across its awaits), renewing the lease while it runs, and releases the lock
    /// when it completes, answering its output.
    ///
    /// The lease is renewed every `stale_ms / 3`; a renewal that fails (a store error) is tried
    /// again at the next tick while the lease has time left, and renewal stops once the lease
    /// is lost — taken over, or past [`Lock::held_until`] — which `f` can learn from
    /// [`Lock::is_held`]. The lock is released even when `f`'s output is an error of its own.
    ///
    /// # Cancel safety
    /// Dropping the future drops the lock unreleased, with what that leaves ([`Lock`]).
    ///
    /// The work's output is `with_lock`'s once it ran, whatever the release answers: a release
    /// that fails leaves the record held until its lease ends, and the next holder takes it
    /// over then — an error here would lead a caller whose work succeeded to run it twice.
    ///
    /// # Errors
    /// [`LockError::Unavailable`] when a live holder kept the name for `wait_ms`; the errors of
    /// [`LockManager::acquire`].
    pub async fn with_lock<T, F>(
        &self,
        name: &str,
        options: LockOptions,
        f: F,
    ) -> Result<T, LockError>
    where
        F: AsyncFnOnce(&Lock<S, C, R>) -> T,
    {
        let Some(lock) = self.acquire(name, options).await? else {
            return Err(LockError::Unavailable {
                name: name.to_owned(),
                wait_ms: options.wait_ms,
            });
        };
        let keep_renewed = |keep| {
            let call = lock.call;
            self.exec
                .event(|engine, now, _| engine.keep_renewed(call, keep, now));
        };
        keep_renewed(true);
        let output = {
            let mut work = pin!(f(&lock));
            poll_fn(|cx| {
                let output = work.as_mut().poll(cx);
                if output.is_pending() {
                    // Its renewals, on the lock's own timer.
                    self.exec.drive(cx, lock.handle);
                }
                output
            })
            .await
        };
        keep_renewed(false);
        let _ = lock.release().await;
        Ok(output)
    }
}

/// A held lock. Release it with [`Lock::release`]; dropping it unreleased leaves the record held
/// until its lease ends (as a crashed holder would) and lets the next local waiter contend.
pub struct Lock<S: LockStore + 'static, C: Clock, R: Random> {
    manager: LockManager<S, C, R>,
    name: String,
    /// The engine's name for it (its acquisition's).
    call: Ticket,
    /// Its mailbox: its renewals' timer, its loss.
    handle: Ticket,
    slot: u16,
    token: String,
    fence: u64,
    held_until: Cell<f64>,
}

impl<S: LockStore, C: Clock, R: Random> fmt::Debug for Lock<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name)
            .field("fence", &self.fence)
            .field("held_until", &self.held_until.get())
            .finish()
    }
}

impl<S: LockStore + 'static, C: Clock, R: Random> Lock<S, C, R> {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which of its name's `concurrency` slots this holder has: 0 … N − 1 (0 for a name taken
    /// one at a time). Its fence rises with every acquisition of this slot.
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// The token in the record while this lock is held (128 random bits, hex). Acquisitions
    /// handed on within one batch share it; the fence is unique to each.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Strictly greater than the fence of every earlier acquisition of this name, across
    /// releases and takeovers: a protected resource refuses writes with a lower one. At least
    /// the acquirer's clock in microseconds ([`FENCES_PER_MS`](crate::FENCES_PER_MS)) when it
    /// wrote the record, so that fences stay above every earlier one even after the store lost
    /// the record — once the clocks moved on by more than `max_clock_skew_ms` since the last
    /// acquisition before the loss. A fence handed on from a batch reserved earlier may be below
    /// the clock's at the time; it is still above every fence before it.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// Until when (epoch milliseconds on the manager's clock) nobody may take this lease over:
    /// the record's time plus `stale_ms`, moved by each [`Lock::renew`]. From then on other
    /// isolates may take it over, and so may the waiters in this one.
    pub fn held_until(&self) -> f64 {
        self.held_until.get()
    }

    /// Whether this holder still has the lease: not released, not found lost by a renewal,
    /// and not past its end — [`Lock::held_until`] on the manager's clock, or its lease length
    /// since its record was written on the monotonic one.
    pub fn is_held(&self) -> bool {
        let exec = &self.manager.exec;
        exec.engine.borrow().holds(self.call, exec.now())
    }

    /// Moves the lease to `now + stale_ms` with one CAS on this holder's record, keeping token
    /// and fence: `true` when done, `false` once the lease is lost — taken over, released, or
    /// past [`Lock::held_until`] (then with no store call). A lost lease is lost for good.
    ///
    /// # Cancel safety
    /// Dropping the future mid-call leaves the lease as it was before; as the CAS may have
    /// landed, the lease's next write (a renewal, the release) reads the record first.
    ///
    /// # Errors
    /// The store failed: the lease runs to its old end.
    pub async fn renew(&self) -> Result<bool, LockError> {
        match self.ask(Engine::renew).await? {
            Outcome::Renewed { held_until } => {
                self.held_until.set(held_until);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Asks the engine `event` of this lock, with a mailbox for its answer: how it ended.
    async fn ask(
        &self,
        event: impl FnOnce(&mut Engine<S::Version, Ticket>, Ticket, Ticket, Now, &R),
    ) -> Result<Outcome, LockError> {
        let exec = &*self.manager.exec;
        let asking = exec.call::<fn()>();
        let (call, handle) = (self.call, asking.handle);
        exec.event(|engine, now, random| event(engine, call, handle, now, random));
        outcome(exec, handle).await
    }

    /// Gives the lock back, if the record still carries this holder's token: to the next local
    /// waiter — from this lock's batch with no store call, or with one CAS that raises the fence
    /// and reserves fences for the waiters behind — or, with none waiting (or the streak over),
    /// by freeing the record. Releasing twice, or after a takeover, changes nothing.
    ///
    /// # Cancel safety
    /// Dropping the future after the store call began leaves the local line without handing
    /// on: the record stays as the call left it, and goes stale if still held.
    ///
    /// # Errors
    /// The store failed; the record may still be held by this token and goes stale.
    pub async fn release(&self) -> Result<(), LockError> {
        // (Released already, its id names nothing: the engine answers at once.)
        self.ask(Engine::release).await.map(drop)
    }

    /// The store the lock lives in.
    pub fn store(&self) -> &S {
        &self.manager.exec.store
    }
}

impl<S: LockStore + 'static, C: Clock, R: Random> Drop for Lock<S, C, R> {
    fn drop(&mut self) {
        let (exec, call) = (&self.manager.exec, self.call);
        // (Released, its id names nothing: this changes nothing.)
        exec.event(|engine, now, random| engine.drop_lock(call, now, random));
        exec.close(self.handle);
    }
}
