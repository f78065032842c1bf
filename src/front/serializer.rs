//! The keyed serializer for Rust callers: futures over the engine's lines of works. A work's
//! future waits for the engine to start it, runs it beside the engine's timers and store calls,
//! and tells the engine when it ended; every rule is the engine's.

use core::fmt;
use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::ops::DerefMut;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use super::executor::{Executor, Mailbox, NoStore};
use super::lock::LockError;
pub use super::store_serializer::StoreSerializer;
use crate::clock::{Clock, TimerError};
use crate::engine::key::KeyError;
use crate::engine::messages;
use crate::engine::options::{
    validate_timeout_ms, Coalesce, LockOptions, OptionError, SerializerOptions, TimeoutOutOfRange,
};
use crate::engine::random::Random;
use crate::engine::works::{EnqueueError, Stats};
use crate::engine::NoRandom;
use crate::engine::{Entered, Outcome, Ticket, Why};
use crate::store::LockStore;

/// Tells a work that its deadline passed, or that its caller gave up on it, and which of its
/// key's slots it runs in. Cheap to clone; every clone sees the same flag.
#[derive(Debug, Clone, Default)]
pub struct WorkSignal {
    pub(crate) aborted: Rc<Cell<bool>>,
    slot: u16,
}

impl WorkSignal {
    /// The slot of its key the work runs in: 0 … `concurrency` − 1, the lowest free when it
    /// started (always 0 at `concurrency` 1). No two works of one key running at once share
    /// one — over a store ([`StoreSerializer`]), in every isolate: the slot of the turn's lease.
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// Whether the work was abandoned. A work checks this before every write that must not
    /// land late — anything it spawned outside its own future keeps running otherwise.
    pub fn is_aborted(&self) -> bool {
        self.aborted.get()
    }
}

/// Why [`KeyedSerializer::run`] did not return the work's output.
#[derive(Debug, Clone, PartialEq)]
pub enum SerializeError {
    /// The key was refused; nothing was queued.
    InvalidKey(KeyError),
    /// The call's own deadline was out of range; nothing was queued.
    InvalidTimeout(TimeoutOutOfRange),
    /// The key had `max_pending` works queued or running; nothing was queued.
    QueueFull {
        /// The key.
        key: String,
        /// The serializer's bound.
        max_pending: usize,
    },
    /// Too many works are queued under every key together; nothing was queued.
    TooManyWorks,
    /// The call asked to run only if its work could start at once ([`KeyedSerializer::try_run`]),
    /// and it could not; nothing was queued.
    Unavailable {
        /// The key.
        key: String,
        /// How long until the key's pace allows a start, in milliseconds, when nothing else
        /// holds the work up; `None` when a work of the key is ahead of it or no slot is free.
        retry_after_ms: Option<f64>,
    },
    /// Where contexts end (Workers): the work's turn came and its future was not polled to
    /// start it within [`START_GRACE_MS`](crate::engine::START_GRACE_MS) — its request had
    /// ended — so the work behind it gave it up. It never ran.
    NeverStarted {
        /// The key.
        key: String,
    },
    /// The work did not finish within its deadline and was dropped.
    TimedOut {
        /// The key the work ran under.
        key: String,
        /// The deadline it had, in milliseconds.
        timeout_ms: f64,
    },
    /// The work's deadline could not be armed (the platform refused a timer); it did not run.
    Timer(TimerError),
    /// A [`StoreSerializer`]'s store failed while taking the key's lease: the work did not run.
    Lock(LockError),
}

impl fmt::Display for SerializeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SerializeError::InvalidKey(error) => f.write_str(&error.message("key")),
            SerializeError::InvalidTimeout(error) => error.fmt(f),
            SerializeError::QueueFull { key, max_pending } => f.write_str(&messages::fill(
                messages::QUEUE_FULL,
                &[("key", key), ("maxPending", &max_pending.to_string())],
            )),
            SerializeError::TooManyWorks => EnqueueError::TooManyWorks.fmt(f),
            SerializeError::Unavailable { key, .. } => {
                f.write_str(&messages::fill(messages::UNAVAILABLE, &[("key", key)]))
            }
            SerializeError::NeverStarted { key } => {
                f.write_str(&messages::fill(messages::NEVER_STARTED, &[("key", key)]))
            }
            SerializeError::TimedOut { key, timeout_ms } => f.write_str(&messages::fill(
                messages::TIMEOUT,
                &[("key", key), ("timeoutMs", &timeout_ms.to_string())],
            )),
            SerializeError::Timer(error) => error.fmt(f),
            SerializeError::Lock(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for SerializeError {}

/// A serializer's place in its engine: what [`KeyedSerializer`] and [`StoreSerializer`] share.
pub(crate) struct Serial<S: LockStore, C, R> {
    pub(crate) exec: Rc<Executor<S, C, R>>,
    pub(crate) serializer: u32,
    /// It has a `rate`: each start is timed as its work is called.
    pub(crate) paced: bool,
}

impl<S: LockStore + 'static, C: Clock, R: Random> Serial<S, C, R> {
    /// A serializer with `options` in the engine of `exec`, its turns holding leases in its
    /// store as `lease` says.
    pub(crate) fn new(
        exec: Rc<Executor<S, C, R>>,
        options: SerializerOptions,
        lease: Option<LockOptions>,
    ) -> Result<Self, OptionError> {
        let serializer = exec.engine.borrow_mut().add_serializer(options, lease)?;
        let paced = options.rate().is_some();
        Ok(Serial {
            exec,
            serializer,
            paced,
        })
    }

    /// Queues a call (with `if_available`, only if its work can start at once): its handle's
    /// place, or the refusal.
    pub(crate) fn enter(
        &self,
        key: &str,
        handle: Ticket,
        timeout_ms: Option<f64>,
        coalesce: Coalesce,
        if_available: bool,
    ) -> Result<Entered<Ticket>, SerializeError> {
        let serializer = self.serializer;
        let entered = self.exec.event(|engine, now, _| {
            engine.enter(
                serializer,
                key,
                handle,
                timeout_ms,
                coalesce,
                if_available,
                now,
            )
        });
        let entered = entered.map_err(|error| match error {
            EnqueueError::InvalidKey(error) => SerializeError::InvalidKey(error),
            EnqueueError::InvalidTimeout(error) => SerializeError::InvalidTimeout(error),
            EnqueueError::QueueFull { max_pending } => SerializeError::QueueFull {
                key: key.to_owned(),
                max_pending,
            },
            EnqueueError::TooManyWorks | EnqueueError::IdleLine => SerializeError::TooManyWorks,
            EnqueueError::Unavailable { retry_after_ms } => SerializeError::Unavailable {
                key: key.to_owned(),
                retry_after_ms,
            },
        })?;
        if let Entered::Queued(ticket) = entered {
            self.exec.mailbox(handle, |mailbox| {
                mailbox.owner = Some((Some(serializer), ticket))
            });
        }
        Ok(entered)
    }

    /// Runs `work(signal, fence)` in the key's turn, as [`KeyedSerializer::run`] says.
    pub(crate) async fn run<F, Fut>(
        &self,
        key: &str,
        timeout_ms: Option<f64>,
        if_available: bool,
        work: F,
    ) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal, u64) -> Fut,
        Fut: Future,
    {
        let mut place = self.exec.call();
        let handle = place.handle;
        let entered = self.enter(key, handle, timeout_ms, Coalesce::Never, if_available)?;
        let Entered::Queued(ticket) = entered else {
            unreachable!("a call that does not coalesce joins nothing")
        };
        // Dropped before its caller heard, it leaves its line: the drop is its caller's end, so
        // the next work may start.
        let serializer = self.serializer;
        place.give_up = Some(move || {
            self.exec
                .event(|engine, now, random| engine.cancel(serializer, ticket, now, random));
            self.done(ticket);
        });
        // The work's future lives here, pinned, from when its turn starts it.
        let mut running = pin!(None);
        let outcome = {
            let mut slot = running.as_mut();
            let mut turn = Some(Turn::Waiting(move |signal, fence| {
                slot.set(Some(work(signal, fence)));
                let Some(work) = slot.as_pin_mut() else {
                    unreachable!("just started")
                };
                work
            }));
            poll_fn(|cx| Turn::step(&mut turn, self, cx, key, handle, ticket)).await
        };
        // Dropped before its call leaves the line: before the next work starts.
        running.set(None);
        // Its caller heard: it leaves its line, and what it let go is let go before it returns;
        // what its turn left in flight (an acquisition abandoned at its deadline) is not its to
        // wait for.
        place.give_up = None;
        self.exec.disown(handle);
        self.done(ticket);
        self.exec.landed(handle).await;
        outcome
    }

    pub(crate) fn pending(&self) -> usize {
        self.exec.engine.borrow().keys(self.serializer)
    }

    pub(crate) fn pending_for(&self, key: &str) -> usize {
        self.exec.engine.borrow().pending(self.serializer, key)
    }

    pub(crate) fn stats(&self) -> Stats {
        self.exec.engine.borrow().stats(self.serializer)
    }

    /// The caller of the work of `ticket` heard how it ended: it leaves its line.
    pub(crate) fn done(&self, ticket: Ticket) {
        let serializer = self.serializer;
        self.exec
            .event(|engine, now, random| engine.done(serializer, ticket, now, random));
    }
}

/// One call's turn, from its wait to its outcome: the one machine that both a plain call
/// ([`Serial::run`]) and a coalescing run shared by its callers step. `W` starts the work once
/// its turn came, `P` holds it pinned while it runs.
pub(crate) enum Turn<W, P, T> {
    /// Queued: its turn has not come, or it was not polled since.
    Waiting(W),
    /// Its work runs until it settles or is abandoned; with `report`, its outcome goes to the
    /// engine first.
    Running {
        work: Pin<P>,
        signal: WorkSignal,
        report: bool,
    },
    /// Its work settled and its outcome waits for the engine (its lease let go first).
    Settling(T),
}

impl<W, P, T> Turn<W, P, T>
where
    W: FnOnce(WorkSignal, u64) -> Pin<P>,
    P: DerefMut<Target: Future<Output = T>>,
{
    /// Steps `turn`, the call of `handle` (its job `ticket`), as far as it goes: its outcome
    /// (the turn then gone, its work dropped), or pending where it waits (woken through `cx`).
    pub(crate) fn step<S: LockStore + 'static, C: Clock, R: Random>(
        turn: &mut Option<Self>,
        serial: &Serial<S, C, R>,
        cx: &mut Context<'_>,
        key: &str,
        handle: Ticket,
        ticket: Ticket,
    ) -> Poll<Result<T, SerializeError>> {
        let (exec, serializer) = (&*serial.exec, serial.serializer);
        loop {
            match turn.as_mut() {
                // Ended already.
                None => return Poll::Pending,
                Some(Turn::Waiting(_)) => {
                    // Started from its own poll, so its body runs only once every work ahead
                    // of it started; then driven, which arms its deadline's timer in this task
                    // (a timer the platform refuses means the work does not run: the engine
                    // gave it up first).
                    if let Some(Some((_, ticket))) = exec.mailbox(handle, |mailbox| mailbox.owner) {
                        exec.event(|engine, now, random| {
                            engine.start_work(serializer, ticket, now, random)
                        });
                    }
                    let started = ready!(exec.poll(cx, handle, |mailbox| {
                        if let Some(outcome) = mailbox.outcome.take() {
                            return Some(Err(failure(key, outcome, mailbox)));
                        }
                        mailbox.started.take().map(Ok)
                    }));
                    let Some(Turn::Waiting(work)) = turn.take() else {
                        unreachable!("it waits")
                    };
                    let started = started?;
                    // Paced, its start is timed as its work is called: the executor may poll
                    // its task well after the engine started it, which must not open the key's
                    // next window early.
                    if serial.paced {
                        exec.event(|engine, now, _| engine.work_called(serializer, ticket, now));
                    }
                    let signal = WorkSignal {
                        slot: started.slot,
                        ..WorkSignal::default()
                    };
                    *turn = Some(Turn::Running {
                        work: work(signal.clone(), started.fence),
                        signal,
                        report: started.report,
                    });
                }
                Some(Turn::Running {
                    work,
                    signal,
                    report,
                }) => {
                    let report = *report;
                    let Poll::Ready(output) = work.as_mut().poll(cx) else {
                        // Abandoned: `signal` aborted first. A lost lease only aborts `signal`:
                        // the work must stop writing, and goes on to its end.
                        let error = ready!(exec.poll(cx, handle, |mailbox| {
                            let why = mailbox.aborted.take()?;
                            signal.aborted.set(true);
                            if why == Why::LeaseLost {
                                return None;
                            }
                            let outcome = mailbox.outcome.take().unwrap_or(Outcome::Aborted);
                            Some(failure(key, outcome, mailbox))
                        }));
                        *turn = None;
                        return Poll::Ready(Err(error));
                    };
                    *turn = None;
                    if !report {
                        return Poll::Ready(Ok(output));
                    }
                    // Its outcome goes to the engine, which may let its lease go before its
                    // caller hears.
                    exec.event(|engine, now, random| {
                        engine.settled(serializer, ticket, now, random)
                    });
                    *turn = Some(Turn::Settling(output));
                }
                Some(Turn::Settling(_)) => {
                    // What the engine says of it once its lease is let go.
                    let settled = ready!(exec.poll(cx, handle, |mailbox| {
                        Some(match mailbox.outcome.take()? {
                            Outcome::Done | Outcome::Released => Ok(()),
                            outcome => Err(failure(key, outcome, mailbox)),
                        })
                    }));
                    let Some(Turn::Settling(output)) = turn.take() else {
                        unreachable!("it settles")
                    };
                    return Poll::Ready(settled.map(|()| output));
                }
            }
        }
    }
}

/// The error of a call that did not end with its work.
fn failure(key: &str, outcome: Outcome, mailbox: &mut Mailbox) -> SerializeError {
    match outcome {
        Outcome::TimedOut { timeout_ms } => SerializeError::TimedOut {
            key: key.to_owned(),
            timeout_ms,
        },
        Outcome::TimerRefused => SerializeError::Timer(mailbox.timer_refusal()),
        Outcome::NeverStarted => SerializeError::NeverStarted {
            key: key.to_owned(),
        },
        Outcome::NotYet { retry_after_ms } => SerializeError::Unavailable {
            key: key.to_owned(),
            retry_after_ms,
        },
        Outcome::Mismatch { found } => SerializeError::Lock(LockError::ConcurrencyMismatch {
            name: key.to_owned(),
            asked: 0,
            found,
        }),
        _ => SerializeError::Lock(LockError::Store(mailbox.store_error())),
    }
}

/// Runs async work one at a time per key (or N at a time: [`SerializerOptions::with_concurrency`]),
/// each with a deadline — for Rust callers.
///
/// Works under one key never overlap (at most N run at once, each in a slot of its own:
/// [`WorkSignal::slot`]) and start in the order [`run`](Self::run) was called (FIFO, the order
/// the calls were made, not the order anything else happened). Works under different
/// keys run concurrently. An idle key holds no memory.
///
/// A work still running at its deadline is **dropped**: in Rust that really stops it at its next
/// `.await`, unlike JavaScript, where an abandoned promise keeps running. What it does not undo
/// is I/O already sent: a request in flight when the deadline passed can still land after the
/// next work has read the state, so a work checks [`WorkSignal::is_aborted`] before each write
/// it hands to something that outlives it (a spawned task, a request it does not await).
///
/// A bound on a key's works ([`SerializerOptions::new`]) refuses calls past it at once,
/// so a stalled key sheds load instead of queueing without end.
///
/// Single-threaded (`!Send`), like everything on one wasm isolate. See the crate docs for when
/// to use this and when a lock is what is needed.
///
/// # Examples
///
/// On wasm, `KeyedSerializer::new(timeout_ms)` runs on the platform clock. Anywhere, a
/// [`ManualClock`](crate::ManualClock) makes time explicit — here a second work waits for the
/// first, and a third, on another key, does not:
///
/// ```
/// use std::future::Future;
/// use std::pin::pin;
/// use std::task::{Context, Poll, Waker};
/// use keyturn::{KeyedSerializer, ManualClock, SerializeError};
///
/// let clock = ManualClock::new();
/// let serializer = KeyedSerializer::with_clock(50.0, clock.clone())?;
/// let mut cx = Context::from_waker(Waker::noop());
///
/// let mut first = pin!(serializer.run("order-1", |_signal| std::future::pending::<()>()));
/// let mut second = pin!(serializer.run("order-1", |_signal| async { "second" }));
/// let mut other = pin!(serializer.run("order-2", |_signal| async { "other" }));
/// assert!(first.as_mut().poll(&mut cx).is_pending());
/// assert!(second.as_mut().poll(&mut cx).is_pending(), "waits for the first");
/// assert_eq!(other.as_mut().poll(&mut cx), Poll::Ready(Ok("other")));
/// assert_eq!(serializer.pending_for("order-1"), 2);
///
/// clock.advance(50.0); // the first work's deadline passes: it is dropped
/// assert!(matches!(first.as_mut().poll(&mut cx), Poll::Ready(Err(SerializeError::TimedOut { .. }))));
/// assert_eq!(second.as_mut().poll(&mut cx), Poll::Ready(Ok("second")));
/// assert_eq!(serializer.stats().timed_out, 1);
/// # Ok::<(), keyturn::TimeoutOutOfRange>(())
/// ```
pub struct KeyedSerializer<C: Clock> {
    serial: Serial<NoStore, C, NoRandom>,
}

impl<C: Clock> fmt::Debug for KeyedSerializer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedSerializer")
            .field("stats", &self.stats())
            .finish()
    }
}

impl<C: Clock> KeyedSerializer<C> {
    /// A serializer on `clock` whose works each get `timeout_ms` milliseconds, with no bound
    /// on a key's works.
    ///
    /// # Errors
    /// [`TimeoutOutOfRange`] unless `timeout_ms` is a finite number in `1..=MAX_TIMEOUT_MS`.
    pub fn with_clock(timeout_ms: f64, clock: C) -> Result<Self, TimeoutOutOfRange> {
        let options = SerializerOptions {
            timeout_ms: validate_timeout_ms(timeout_ms)?,
            ..SerializerOptions::default()
        };
        Ok(Self::with_options(options, clock))
    }

    /// A serializer on `clock` with `options`.
    pub fn with_options(options: SerializerOptions, clock: C) -> Self {
        let exec = Rc::new(Executor::new(NoStore, clock, NoRandom));
        let Ok(serial) = Serial::new(exec, options, None) else {
            unreachable!("only lease options are refused")
        };
        KeyedSerializer { serial }
    }

    /// Runs `work(signal)` once every work queued earlier under `key` has finished, timed out
    /// or been cancelled, and returns its output — or [`SerializeError::TimedOut`] when it has
    /// not finished within the serializer's deadline after it started, in which case `signal`
    /// is aborted and the work's future is dropped before the next work starts.
    ///
    /// # Cancel safety
    /// Dropping the returned future gives up the turn at once: while it waits, it leaves the
    /// line and nobody waits for it; while its work runs, the work is dropped and the next work
    /// under the key starts. Either counts in [`Stats::aborted`].
    ///
    /// # Errors
    /// A refused call queues nothing: [`SerializeError::InvalidKey`] for an empty key or one
    /// over [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES), [`SerializeError::QueueFull`] when the key
    /// has `max_pending` works already. [`SerializeError::Timer`] when the platform refused the
    /// deadline's timer: the work did not run.
    pub async fn run<F, Fut>(&self, key: &str, work: F) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal) -> Fut,
        Fut: Future,
    {
        self.serial
            .run(key, None, false, |signal, _| work(signal))
            .await
    }

    /// [`run`](Self::run) only if the work can start at once: no work of `key` is ahead of
    /// it, one of its slots is free and its pace allows a start
    /// ([`SerializerOptions::with_rate`]). Otherwise nothing is queued and the call fails at
    /// once with [`SerializeError::Unavailable`] — what an API answers with 429 and
    /// `Retry-After`.
    ///
    /// # Cancel safety
    /// As [`run`](Self::run).
    ///
    /// # Errors
    /// As [`run`](Self::run), and [`SerializeError::Unavailable`] (counted in
    /// [`Stats::unavailable`]) when the work could not start at once.
    pub async fn try_run<F, Fut>(&self, key: &str, work: F) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal) -> Fut,
        Fut: Future,
    {
        self.serial
            .run(key, None, true, |signal, _| work(signal))
            .await
    }

    /// [`run`](Self::run) with this call's own deadline instead of the serializer's.
    ///
    /// # Cancel safety
    /// As [`run`](Self::run).
    ///
    /// # Errors
    /// As [`run`](Self::run), and [`SerializeError::InvalidTimeout`] for a deadline that is not
    /// a finite number from 1 to [`MAX_TIMEOUT_MS`](crate::MAX_TIMEOUT_MS) (nothing queued).
    pub async fn run_with_timeout<F, Fut>(
        &self,
        key: &str,
        timeout_ms: f64,
        work: F,
    ) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal) -> Fut,
        Fut: Future,
    {
        self.serial
            .run(key, Some(timeout_ms), false, |signal, _| work(signal))
            .await
    }

    /// Like [`run`](Self::run), for a work that re-decides from a fresh read: when the key's
    /// last queued work was entered with the same `coalesce` (not [`Coalesce::Never`]), has
    /// not started (its deadline is not running) and has this output type, this call joins it
    /// instead of queueing `work` — `work` is never called, the call adds nothing to
    /// [`pending_for`](Self::pending_for) and is never refused by `max_pending`
    /// ([`Stats::coalesced`] counts it) — and returns a clone of that work's output, or the
    /// same error. Otherwise it queues `work` as [`run`](Self::run) does, for later calls to
    /// join. Works run with the serializer's deadline.
    ///
    /// The run is shared: whichever of its callers is polled drives it, so the work runs while
    /// any of them waits.
    ///
    /// # Cancel safety
    /// Dropping the future takes only this caller out. The run goes on for the callers left;
    /// with its last caller it leaves the line (counted in [`Stats::aborted`]) or, running, is
    /// dropped and the key moves on.
    ///
    /// # Errors
    /// As [`run`](Self::run); a joined caller gets the error its run ended with.
    ///
    /// # Examples
    ///
    /// Two calls wait behind a running work; the second joins the first's run, so only the
    /// first call's work runs, and both get its output:
    ///
    /// ```
    /// use std::future::Future;
    /// use std::pin::pin;
    /// use std::task::{Context, Poll, Waker};
    /// use keyturn::{Coalesce, KeyedSerializer, ManualClock};
    ///
    /// let serializer = KeyedSerializer::with_clock(1000.0, ManualClock::new())?;
    /// let mut cx = Context::from_waker(Waker::noop());
    /// let mut running = Box::pin(serializer.run("doc-1", |_| std::future::pending::<()>()));
    /// assert!(running.as_mut().poll(&mut cx).is_pending());
    ///
    /// let mut first = pin!(serializer.run_coalesced("doc-1", Coalesce::Yes, |_| async { "acl v2" }));
    /// let mut second = pin!(serializer.run_coalesced("doc-1", Coalesce::Yes, |_| async { "never" }));
    /// assert!(first.as_mut().poll(&mut cx).is_pending());
    /// assert!(second.as_mut().poll(&mut cx).is_pending());
    /// assert_eq!(serializer.stats().coalesced, 1);
    ///
    /// drop(running); // its caller gave up: the key moves on
    /// assert_eq!(second.as_mut().poll(&mut cx), Poll::Ready(Ok("acl v2")));
    /// assert_eq!(first.as_mut().poll(&mut cx), Poll::Ready(Ok("acl v2")));
    /// # Ok::<(), keyturn::TimeoutOutOfRange>(())
    /// ```
    pub async fn run_coalesced<F, Fut>(
        &self,
        key: &str,
        coalesce: Coalesce,
        work: F,
    ) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal) -> Fut + 'static,
        Fut: Future + 'static,
        Fut::Output: Clone + 'static,
    {
        self.serial
            .run_coalesced(key, coalesce, |signal, _| work(signal))
            .await
    }

    /// The deadline of works without their own, in milliseconds.
    pub fn timeout_ms(&self) -> f64 {
        self.serial
            .exec
            .engine
            .borrow()
            .options(self.serial.serializer)
            .timeout_ms()
    }

    /// The number of keys with queued or running work.
    pub fn pending(&self) -> usize {
        self.serial.pending()
    }

    /// The number of works queued or running under `key` (what `max_pending` bounds); 0 when
    /// the key is idle.
    pub fn pending_for(&self, key: &str) -> usize {
        self.serial.pending_for(key)
    }

    /// Counters since creation, and what is live now.
    pub fn stats(&self) -> Stats {
        self.serial.stats()
    }
}
