//! The Rust driver of [`LockCore`]: it makes the store calls and sleeps the core asks for, as
//! futures, and wakes waiters the core names.

use core::fmt;
use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::clock::{Clock, Sleep, TimerError, WakeRoute};
use crate::engine::key::KeyError;
use crate::engine::leases::{
    Answer, Guard, LockCore, LockStats, Now, Refusal, Step, Succession, Woken,
};
use crate::engine::messages;
use crate::engine::options::{LockOptions, OptionError};
use crate::engine::queue::{LineId, Ticket};
use crate::engine::random::Random;
use crate::engine::record::Record;
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

/// How a waiter is woken: the core names it, the driver sets the flag and wakes its task.
#[derive(Default)]
struct Slot {
    woken: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Slot {
    fn wake(&self) {
        self.woken.set(true);
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }
}

struct Inner<S: LockStore, C, R> {
    store: S,
    clock: C,
    random: R,
    core: RefCell<LockCore<S::Version, Rc<Slot>>>,
    /// The task running [`LockManager::watch_for_asks`], woken when a line wants a guard.
    guards: RefCell<Option<Waker>>,
}

impl<S: LockStore, C: Clock, R: Random> Inner<S, C, R> {
    /// The time on both clocks a lease needs.
    fn now(&self) -> Now {
        Now {
            wall: self.clock.now_ms(),
            mono: self.clock.monotonic_ms(),
        }
    }

    /// One step of the core, then the waiters it named woken. The clocks are read outside the
    /// core's borrow.
    fn with_core<T>(&self, f: impl FnOnce(&mut LockCore<S::Version, Rc<Slot>>, Now, &R) -> T) -> T {
        let now = self.now();
        let out = f(&mut self.core.borrow_mut(), now, &self.random);
        loop {
            let woken = self.core.borrow_mut().take_woken();
            match woken {
                None => return out,
                Some(Woken::GaveUp(slot)) => slot.wake(),
                Some(Woken::Guard) => {
                    if let Some(waker) = self.guards.borrow_mut().take() {
                        waker.wake();
                    }
                }
                Some(Woken::Turn(ticket)) => {
                    let slot = self.core.borrow().handle(ticket).cloned();
                    if let Some(slot) = slot {
                        slot.wake();
                    }
                }
            }
        }
    }

    /// A sleep until `until` on the monotonic clock.
    fn sleep_until(&self, until: f64) -> Result<Sleep, LockError> {
        let ms = (until - self.clock.monotonic_ms()).max(0.0);
        Ok(self.clock.sleep(ms)?)
    }

    /// Makes the store calls the core asks for, from `step` on, each feeding its answer back,
    /// until the core asks for something else: that step, and the error of the first call that
    /// failed (what [`Step::Failed`] reports).
    async fn exchange(
        &self,
        name: &str,
        ticket: Ticket,
        mut step: Step<S::Version>,
    ) -> (Step<S::Version>, Option<StoreError>) {
        let mut failure = None;
        loop {
            if step.bound_ms().is_none() {
                return (step, failure);
            }
            let (answer, error) = self.call(name, step).await;
            if let Some(error) = error {
                failure.get_or_insert(error);
            }
            step = self.with_core(|core, now, random| core.step(ticket, answer, now, random));
        }
    }

    /// Makes the store call of `step` (one of the three), bounded as it says: past its bound,
    /// the call is dropped and counts as failed, its outcome unknown. A clock that refuses the
    /// timer leaves the call unbounded.
    async fn call(
        &self,
        name: &str,
        step: Step<S::Version>,
    ) -> (Answer<S::Version>, Option<StoreError>) {
        let bound = step.bound_ms().unwrap_or_default();
        let method = match step {
            Step::Create { .. } => "create",
            Step::Read { .. } => "read",
            _ => "replace",
        };
        let call = async {
            match step {
                Step::Create { value, .. } => {
                    self.store.create(name, &value).await.map(Answer::Created)
                }
                Step::Read { .. } => self.store.read(name).await.map(|found| {
                    Answer::Read(found.map(|found| {
                        let record = Record::decode(&found.value);
                        (found.version, record)
                    }))
                }),
                Step::Replace { version, value, .. } => self
                    .store
                    .replace(name, &version, &value)
                    .await
                    .map(Answer::Replaced),
                _ => Ok(Answer::Woke),
            }
        };
        match bounded(call, self.clock.sleep(bound).ok()).await {
            Some(Ok(answer)) => (answer, None),
            Some(Err(error)) => (Answer::Failed, Some(error)),
            None => {
                let message = messages::fill(
                    messages::STORE_TIMED_OUT,
                    &[("method", method), ("storeTimeoutMs", &bound.to_string())],
                );
                (Answer::TimedOut, Some(StoreError::new(message)))
            }
        }
    }
}

/// `call`'s output, or `None` once `limit` ends first (then `call` is dropped).
async fn bounded<F: Future>(call: F, limit: Option<Sleep>) -> Option<F::Output> {
    let Some(mut limit) = limit else {
        return Some(call.await);
    };
    let mut call = pin!(call);
    poll_fn(|cx| {
        if let Poll::Ready(output) = call.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        if limit.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await
}

/// Acquires and releases locks over one store, queueing this isolate's contenders per name.
///
/// Use one manager per store per isolate: contenders queue only with those of their manager.
pub struct LockManager<S: LockStore, C: Clock, R: Random> {
    inner: Rc<Inner<S, C, R>>,
}

impl<S: LockStore, C: Clock, R: Random> fmt::Debug for LockManager<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockManager")
            .field("core", &self.inner.core)
            .finish()
    }
}

impl<S: LockStore, C: Clock, R: Random> Clone for LockManager<S, C, R> {
    fn clone(&self) -> Self {
        LockManager {
            inner: self.inner.clone(),
        }
    }
}

/// Leaves the line when an acquisition is dropped before it ends.
struct Leave<'a, S: LockStore, C: Clock, R: Random> {
    inner: &'a Inner<S, C, R>,
    ticket: Ticket,
    armed: bool,
}

impl<S: LockStore, C: Clock, R: Random> Drop for Leave<'_, S, C, R> {
    fn drop(&mut self) {
        if self.armed {
            let ticket = self.ticket;
            self.inner.with_core(|core, _, _| core.leave(ticket, true));
        }
    }
}

/// The other waits of an acquisition of a name taken N at a time, ended once one slot is had
/// (see [`LockManager::acquire`]).
#[derive(Default)]
struct Race {
    over: Cell<bool>,
    wakers: RefCell<Vec<Waker>>,
}

impl Race {
    fn end(&self) {
        self.over.set(true);
        for waker in self.wakers.borrow_mut().drain(..) {
            waker.wake();
        }
    }

    /// `wait`'s output, or `None` once the race is over (then `wait` is dropped).
    async fn or<F: Future>(race: Option<&Race>, wait: F) -> Option<F::Output> {
        let Some(race) = race else {
            return Some(wait.await);
        };
        let mut wait = pin!(wait);
        poll_fn(|cx| {
            if race.over.get() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(output) = wait.as_mut().poll(cx) {
                return Poll::Ready(Some(output));
            }
            race.wakers.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

/// Polls `work` to its end, and `side` beside it until `side` ends first (a lease's renewals
/// beside the work that holds it): `work`'s output.
pub(crate) async fn beside<W: Future>(
    mut work: Pin<&mut W>,
    side: impl Future<Output = ()>,
) -> W::Output {
    let mut side = pin!(side);
    let mut running = true;
    poll_fn(|cx| {
        if let Poll::Ready(output) = work.as_mut().poll(cx) {
            return Poll::Ready(output);
        }
        if running && side.as_mut().poll(cx).is_ready() {
            running = false;
        }
        Poll::Pending
    })
    .await
}

/// Waits until the core names this waiter or `sleep` ends. Where the platform wakes waiters
/// through their own context ([`Clock::waiter`]), another holder's release wakes this one there.
async fn wait_turn(slot: &Slot, mut sleep: Sleep, clock: &impl Clock) {
    let mut route = WakeRoute::default();
    poll_fn(|cx: &mut Context<'_>| {
        if slot.woken.replace(false) {
            return Poll::Ready(());
        }
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        *slot.waker.borrow_mut() = Some(route.waker(clock, cx));
        Poll::Pending
    })
    .await;
}

impl<S: LockStore, C: Clock, R: Random> LockManager<S, C, R> {
    /// A manager over `store`, timing with `clock` — epoch milliseconds, as
    /// `clock::WallClock` on wasm: record times are compared across isolates — and drawing
    /// tokens and jitter from `random` (the platform's crypto in production, never a
    /// predictable generator).
    pub fn new(store: S, clock: C, random: R) -> Self {
        let tells_changes = store.tells_changes();
        LockManager {
            inner: Rc::new(Inner {
                store,
                clock,
                random,
                core: RefCell::new({
                    let mut core = LockCore::new();
                    core.set_store_tells_changes(tells_changes);
                    core
                }),
                guards: RefCell::new(None),
            }),
        }
    }

    /// Watches the records of busy lines for other isolates' asks, for as long as it is polled:
    /// run it beside the work of a program whose keys are busy (spawned on its executor), over
    /// a store that tells changes ([`LockStore::tells_changes`]). It never ends.
    ///
    /// A line's holders hand the lease on with no store call from the fences its last write
    /// reserved. While this runs, one watch per busy line (a *guard*, kept across the line's
    /// hand-offs) tells the line when another isolate asks for the name, so those hand-offs go
    /// on for as long as the batch is young and nobody asked; without it, for at most
    /// `MAX_POLL_MS` after each write — as long as a remote waiter that polls waits anyway —
    /// so a busy key costs a write each time that runs out. The package's JavaScript keeps
    /// guards always.
    ///
    /// # Cancel safety
    /// Dropping it stops the guards: their watches are dropped, and lines go back to the
    /// bound without them.
    pub async fn watch_for_asks(&self) {
        type Watch<'a, V> = Pin<Box<dyn Future<Output = (LineId, u32, Answer<V>)> + 'a>>;
        struct Enabled<'a, S: LockStore, C, R>(&'a Inner<S, C, R>);
        impl<S: LockStore, C, R> Drop for Enabled<'_, S, C, R> {
            fn drop(&mut self) {
                self.0.core.borrow_mut().set_line_guards(false);
                self.0.guards.borrow_mut().take();
            }
        }
        let inner = &*self.inner;
        inner.core.borrow_mut().set_line_guards(true);
        let _enabled = Enabled(inner);
        let mut watches: Vec<Watch<'_, S::Version>> = Vec::new();
        poll_fn(|cx| {
            loop {
                while let Some(Guard {
                    line,
                    number,
                    name,
                    version,
                    until,
                }) = inner.with_core(|core, now, _| core.take_guard(now))
                {
                    watches.push(Box::pin(async move {
                        let ms = (until - inner.clock.monotonic_ms()).max(0.0);
                        let watch = inner.store.changed(&name, Some(&version), ms);
                        let answer = match bounded(watch, inner.clock.sleep(ms).ok()).await {
                            Some(Err(_)) => Answer::Failed,
                            Some(Ok(true)) => Answer::Changed,
                            _ => Answer::Woke,
                        };
                        (line, number, answer)
                    }));
                }
                let mut answered = false;
                watches.retain_mut(|watch| match watch.as_mut().poll(cx) {
                    Poll::Ready((line, number, answer)) => {
                        inner.with_core(|core, _, _| core.guarded(line, number, answer));
                        answered = true;
                        false
                    }
                    Poll::Pending => true,
                });
                if !answered {
                    // Woken when a line next wants a guard (an answer's own waker wakes it too).
                    *inner.guards.borrow_mut() = Some(cx.waker().clone());
                    return Poll::<()>::Pending;
                }
            }
        })
        .await;
    }

    /// Store calls made so far by this manager's acquisitions, renewals and releases.
    pub fn store_calls(&self) -> u64 {
        self.inner.core.borrow().store_calls()
    }

    /// What this manager's locks did, and what is live now: names held and acquisitions
    /// waiting; since it was made, acquisitions (and hand-offs among them), takeovers, store
    /// calls, failures, timeouts, failed writes a read-back found applied, and the waits on the
    /// store's `changed` (watches, wake-ups, the polls they saved).
    pub fn stats(&self) -> LockStats {
        self.inner.core.borrow().stats()
    }

    /// Local contenders waiting or holding, for `name`.
    pub fn local_line(&self, name: &str) -> usize {
        self.inner.core.borrow().local_line(name)
    }

    /// The store this manager's locks live in.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// The clock this manager's locks are timed by.
    pub fn clock(&self) -> &C {
        &self.inner.clock
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
        if options.concurrency == 1.0 {
            return self
                .acquire_after(name, options, Succession::LOCK, None)
                .await;
        }
        self.acquire_any(name, options, Succession::LOCK).await
    }

    /// One of the slots of a name taken `options.concurrency` at a time, as
    /// [`acquire`](Self::acquire) says.
    pub(crate) async fn acquire_any(
        &self,
        name: &str,
        options: LockOptions,
        succession: Succession,
    ) -> Result<Option<Lock<S, C, R>>, LockError> {
        let until = self.inner.clock.monotonic_ms() + options.wait_ms;
        let once = LockOptions {
            wait_ms: 0.0,
            ..options
        };
        // Slot 0 first, always: the core checks the options there, and the name's concurrency
        // against its line here.
        let lock = self
            .acquire_slot(name, 0, once, succession, None, None)
            .await?;
        if lock.is_some() {
            return Ok(lock);
        }
        let n = options.slots();
        for slot in 1..n {
            if self.local_line(&crate::slot_name(name, slot)) > 0 {
                continue;
            }
            let lock = self
                .acquire_slot(name, slot, once, succession, None, None)
                .await?;
            if lock.is_some() {
                return Ok(lock);
            }
        }
        let rest = LockOptions {
            wait_ms: (until - self.inner.clock.monotonic_ms()).max(0.0),
            ..options
        };
        let race = Race::default();
        type Wait<'a, L> = Pin<Box<dyn Future<Output = Result<Option<L>, LockError>> + 'a>>;
        let mut waits: Vec<Option<Wait<'_, Lock<S, C, R>>>> = (0..n)
            .map(|slot| {
                let wait = self.acquire_slot(name, slot, rest, succession, None, Some(&race));
                Some(Box::pin(wait) as Wait<'_, _>)
            })
            .collect();
        let mut outcome = Ok(None);
        let mut late = Vec::new();
        // Every wait is polled to its end: once the race is over the others end at their next
        // step, finishing a store call in flight (a slot it took is released).
        poll_fn(|cx| {
            let mut running = false;
            for wait in &mut waits {
                let Some(future) = wait else {
                    continue;
                };
                match future.as_mut().poll(cx) {
                    Poll::Pending => running = true,
                    Poll::Ready(result) => {
                        *wait = None;
                        match result {
                            Ok(Some(lock)) if !race.over.get() => {
                                race.end();
                                outcome = Ok(Some(lock));
                            }
                            // Taken as the race ended: given back below.
                            Ok(Some(lock)) => late.push(lock),
                            Ok(None) => {}
                            Err(error) => {
                                if !race.over.get() {
                                    race.end();
                                    outcome = Err(error);
                                }
                            }
                        }
                    }
                }
            }
            if running {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
        for lock in late {
            let _ = lock.release().await;
        }
        outcome
    }

    /// [`acquire`](Self::acquire) for a serializer's turn: `succession` announces the works
    /// queued behind it, and `previous` — the lease the turn before holds, if any — is released
    /// only once this acquisition is in line, so the lease passes to it without a store call.
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire); dropped while `previous` is being released, that release
    /// is cut short as [`Lock::release`]'s would be.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire). A failed release of `previous` is not reported: the
    /// acquisition waits for that record to go stale, as for any holder's.
    pub async fn acquire_after(
        &self,
        name: &str,
        options: LockOptions,
        succession: Succession,
        previous: Option<Lock<S, C, R>>,
    ) -> Result<Option<Lock<S, C, R>>, LockError> {
        let slot = previous.as_ref().map_or(0, Lock::slot);
        self.acquire_slot(name, slot, options, succession, previous, None)
            .await
    }

    /// [`acquire_after`](Self::acquire_after) for slot `slot` of the name; in `race`, ended
    /// (holding nothing) at its next step once the race is over.
    async fn acquire_slot(
        &self,
        name: &str,
        slot_number: u16,
        options: LockOptions,
        succession: Succession,
        previous: Option<Lock<S, C, R>>,
        race: Option<&Race>,
    ) -> Result<Option<Lock<S, C, R>>, LockError> {
        let inner = &*self.inner;
        let slot = Rc::new(Slot::default());
        let handle = slot.clone();
        let (ticket, mut step, key) = inner.with_core(|core, now, random| {
            let streak_ms = succession.streak_ms;
            let (ticket, step) =
                core.acquire_slot(name, slot_number, handle, options, streak_ms, now, random)?;
            Ok::<_, LockError>((ticket, step, core.key(ticket)))
        })?;
        // The record's key, as the core's line shares it (no copy); a ticket that already left
        // at its first step makes no store call.
        let key = key.unwrap_or_else(|| Rc::from(name));
        let mut leave = Leave {
            inner,
            ticket,
            armed: true,
        };
        if let Some(previous) = previous {
            // A hand-off wakes this acquisition's slot: its wait below ends at once.
            let _ = previous.release_with(succession.followers).await;
        }
        let mut failure = None;
        loop {
            let answer = match step {
                Step::Held => {
                    leave.armed = false;
                    let lock = Lock::new(self.inner.clone(), (name, key), slot_number, ticket);
                    if race.is_some_and(|race| race.over.get()) {
                        // Another slot was had meanwhile: this one is given back.
                        let _ = lock.release().await;
                        return Ok(None);
                    }
                    return Ok(Some(lock));
                }
                Step::GiveUp | Step::Done | Step::Lost => {
                    leave.armed = false;
                    return Ok(None);
                }
                Step::Failed => {
                    leave.armed = false;
                    return Err(LockError::Store(failure.unwrap_or_else(unreported)));
                }
                Step::Mismatch { found } => {
                    leave.armed = false;
                    return Err(LockError::ConcurrencyMismatch {
                        name: name.to_owned(),
                        asked: options.slots(),
                        found,
                    });
                }
                // The race is over: out of the line (`leave`), nothing held.
                _ if race.is_some_and(|race| race.over.get()) => return Ok(None),
                Step::Sleep { until } => {
                    let sleep = inner.sleep_until(until)?;
                    let Some(()) = Race::or(race, sleep).await else {
                        return Ok(None);
                    };
                    Answer::Woke
                }
                Step::Wait { until } => {
                    let wait = wait_turn(&slot, inner.sleep_until(until)?, &inner.clock);
                    let Some(()) = Race::or(race, wait).await else {
                        return Ok(None);
                    };
                    Answer::Woke
                }
                Step::Watch { version, until } => {
                    let ms = (until - inner.clock.monotonic_ms()).max(0.0);
                    let watch = inner.store.changed(&key, Some(&version), ms);
                    // Changed, or `until` came: either way the core reads again. A failed
                    // watch is not reported; the acquisition polls from then on.
                    let bounded = bounded(watch, Some(inner.sleep_until(until)?));
                    let Some(answer) = Race::or(race, bounded).await else {
                        return Ok(None);
                    };
                    match answer {
                        Some(Err(_)) => Answer::Failed,
                        Some(Ok(true)) => Answer::Changed,
                        _ => Answer::Woke,
                    }
                }
                call => {
                    (step, failure) = inner.exchange(&key, ticket, call).await;
                    continue;
                }
            };
            step = inner.with_core(|core, now, random| core.step(ticket, answer, now, random));
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
    /// Dropping the future drops the lock unreleased: its record stays held until its lease
    /// ends, as a crashed holder's would.
    ///
    /// # Errors
    /// [`LockError::Unavailable`] when a live holder kept the name for `wait_ms`; the errors of
    /// [`LockManager::acquire`]; a failed release.
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
        let output = {
            let mut work = pin!(f(&lock));
            beside(work.as_mut(), lock.keep_renewed(|| {})).await
        };
        lock.release().await?;
        Ok(output)
    }
}

/// A held lock. Release it with [`Lock::release`]; dropping it unreleased leaves the record held
/// until its lease ends (as a crashed holder would) and lets the next local waiter contend.
pub struct Lock<S: LockStore, C: Clock, R: Random> {
    name: String,
    /// The record it holds: the name's, or its slot's.
    key: Rc<str>,
    slot: u16,
    token: String,
    fence: u64,
    held_until: Cell<f64>,
    ticket: Ticket,
    /// Released: the core has forgotten this ticket.
    done: Cell<bool>,
    /// Found lost by a renewal: never renewed again (a release still frees an unchanged record).
    lost: Cell<bool>,
    inner: Rc<Inner<S, C, R>>,
}

impl<S: LockStore, C: Clock, R: Random> fmt::Debug for Lock<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name)
            .field("fence", &self.fence)
            .field("held_until", &self.held_until.get())
            .field("done", &self.done.get())
            .field("lost", &self.lost.get())
            .finish()
    }
}

/// The error of a [`Step::Failed`] whose call left none (never, with the drivers here).
fn unreported() -> StoreError {
    StoreError::new("a store call failed")
}

/// Settles a renewal whose future was dropped mid-call: its outcome is unknown, so the lease's
/// next write reads the record first.
struct SettleRenewal<'a, S: LockStore, C: Clock, R: Random> {
    lock: &'a Lock<S, C, R>,
    armed: bool,
}

impl<S: LockStore, C: Clock, R: Random> Drop for SettleRenewal<'_, S, C, R> {
    fn drop(&mut self) {
        if self.armed {
            let ticket = self.lock.ticket;
            self.lock
                .inner
                .with_core(|core, _, _| core.renewal_abandoned(ticket));
        }
    }
}

impl<S: LockStore, C: Clock, R: Random> Lock<S, C, R> {
    fn new(
        inner: Rc<Inner<S, C, R>>,
        (name, key): (&str, Rc<str>),
        slot: u16,
        ticket: Ticket,
    ) -> Self {
        let (token, fence, held_until) = inner
            .core
            .borrow()
            .lease(ticket)
            .map(|lease| (lease.token.to_owned(), lease.fence, lease.held_until))
            .unwrap_or_default();
        Lock {
            name: name.to_owned(),
            key,
            slot,
            token,
            fence,
            held_until: Cell::new(held_until),
            ticket,
            done: Cell::new(false),
            lost: Cell::new(false),
            inner,
        }
    }

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
        let now = self.inner.now();
        !self.done.get() && !self.lost.get() && self.inner.core.borrow().holds(self.ticket, now)
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
        if self.done.get() || self.lost.get() {
            return Ok(false);
        }
        let ticket = self.ticket;
        let mut step = self.inner.with_core(|core, now, _| core.renew(ticket, now));
        if step.bound_ms().is_some() {
            let mut settle = SettleRenewal {
                lock: self,
                armed: true,
            };
            let (next, failure) = self.inner.exchange(&self.key, ticket, step).await;
            settle.armed = false;
            if let Step::Failed = next {
                return Err(LockError::Store(failure.unwrap_or_else(unreported)));
            }
            step = next;
        }
        match step {
            Step::Held => {
                let held_until = self
                    .inner
                    .core
                    .borrow()
                    .lease(ticket)
                    .map(|lease| lease.held_until);
                if let Some(held_until) = held_until {
                    self.held_until.set(held_until);
                }
                Ok(true)
            }
            _ => {
                self.lost.set(true);
                Ok(false)
            }
        }
    }

    /// When this holder renews next while it works (see [`LockCore::next_renewal`]); `None` once
    /// the lease is lost or released.
    fn next_renewal(&self) -> Option<f64> {
        if self.done.get() || self.lost.get() {
            return None;
        }
        let now = self.inner.now();
        self.inner.core.borrow().next_renewal(self.ticket, now)
    }

    /// Renews the lease while its holder works (polled beside the work, dropped when it ends),
    /// at the times the core says, until the lease is lost: then `lost` runs. A timer the
    /// platform refuses ends the renewals; the lease then runs its course.
    pub(crate) async fn keep_renewed(&self, lost: impl FnOnce()) {
        loop {
            let Some(at) = self.next_renewal() else {
                lost();
                return;
            };
            let Ok(pause) = self.inner.sleep_until(at) else {
                return;
            };
            pause.await;
            // Renewed, lost or failed: the core's next answer says what follows.
            let _ = self.renew().await;
        }
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
        self.release_with(0).await
    }

    /// [`release`](Self::release) announcing `followers` acquisitions after the next waiter's
    /// (a serializer's turns).
    pub(crate) async fn release_with(&self, followers: usize) -> Result<(), LockError> {
        if self.done.replace(true) {
            return Ok(());
        }
        let ticket = self.ticket;
        let step = self
            .inner
            .with_core(|core, now, random| core.release_with(ticket, followers, now, random));
        if step.bound_ms().is_some() {
            let mut leave = Leave {
                inner: &self.inner,
                ticket,
                armed: true,
            };
            let (step, failure) = self.inner.exchange(&self.key, ticket, step).await;
            leave.armed = false;
            if let Step::Failed = step {
                return Err(LockError::Store(failure.unwrap_or_else(unreported)));
            }
        }
        Ok(())
    }

    /// The store the lock lives in.
    pub fn store(&self) -> &S {
        &self.inner.store
    }
}

impl<S: LockStore, C: Clock, R: Random> Drop for Lock<S, C, R> {
    fn drop(&mut self) {
        if !self.done.get() {
            let ticket = self.ticket;
            self.inner.with_core(|core, _, _| core.leave(ticket, false));
        }
    }
}
