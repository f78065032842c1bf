//! The keyed serializer: async work for one key runs one at a time, each with a deadline.
//!
//! [`SerializerCore`] is the step machine both front ends drive: [`KeyedSerializer`] here, for
//! Rust callers (futures, cancelled by drop), and the JavaScript binding (promises). Over a
//! store, [`Turns`] is the machine of how turns hold the key's lease, driven by
//! [`StoreSerializer`] and the package's JS.

use ::core::fmt;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::coalesced::{BoxedWork, Coalesced, SharedRun};
pub use super::store_serializer::StoreSerializer;
use crate::clock::{Clock, Sleep, TimerError, WakeRoute};
use crate::engine::key::KeyError;
use crate::engine::keymap::KeyMap;
use crate::engine::messages;
use crate::engine::options::{validate_timeout_ms, Coalesce, SerializerOptions, TimeoutOutOfRange};
use crate::engine::queue::{LineId, Ticket};
pub(crate) use crate::engine::works::{Abandon, EnqueueError, SerializerCore, Stats};

/// Tells a work that its deadline passed, or that its caller gave up on it, and which of its
/// key's slots it runs in. Cheap to clone; every clone sees the same flag.
#[derive(Debug, Clone, Default)]
pub struct WorkSignal {
    pub(super) aborted: Rc<Cell<bool>>,
    slot: u16,
}

impl WorkSignal {
    pub(super) fn in_slot(slot: u16) -> Self {
        WorkSignal {
            aborted: Rc::default(),
            slot,
        }
    }

    /// The slot of its key the work runs in: 0 … `concurrency` − 1, the lowest free when it
    /// started (always 0 at `concurrency` 1). No two works of one key running at once share
    /// one — over a store ([`StoreSerializer`]), in every isolate: the slot of the turn's lease.
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// The same signal, saying slot `slot` (a turn over a store runs in its lease's).
    pub(crate) fn in_slot_of(&self, slot: u16) -> Self {
        WorkSignal {
            aborted: self.aborted.clone(),
            slot,
        }
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
    Lock(crate::front::lock::LockError),
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

impl SerializeError {
    fn refused(key: &str, error: EnqueueError) -> Self {
        match error {
            EnqueueError::InvalidKey(error) => SerializeError::InvalidKey(error),
            EnqueueError::InvalidTimeout(error) => SerializeError::InvalidTimeout(error),
            EnqueueError::QueueFull { max_pending } => SerializeError::QueueFull {
                key: key.to_owned(),
                max_pending,
            },
            EnqueueError::TooManyWorks | EnqueueError::IdleLine => SerializeError::TooManyWorks,
        }
    }
}

/// A coalescing call's place: its work's ticket, and the run it shares.
type Joined<T> = (Ticket, Rc<SharedRun<T>>);

#[derive(Default)]
pub(super) struct Turn {
    pub(super) waker: Option<Waker>,
    /// A coalescing work's run, which joining calls share (a `SharedRun` of its output type).
    shared: Option<Rc<dyn Any>>,
}

pub(super) struct Front {
    pub(super) core: SerializerCore<Turn>,
    /// Busy keys and their lines.
    index: KeyMap,
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
    pub(super) front: Rc<RefCell<Front>>,
    pub(super) clock: C,
}

impl<C: Clock> fmt::Debug for KeyedSerializer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedSerializer")
            .field("core", &self.front.borrow().core)
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
        Self::with_core(SerializerCore::new(options, false, true), clock)
    }

    /// A serializer whose `work` is its caller's own first step (a [`StoreSerializer`]'s
    /// turn), which says when the caller's work is called: [`called`](Self::called).
    pub(crate) fn calling_later(options: SerializerOptions, clock: C) -> Self {
        Self::with_core(SerializerCore::new(options, false, false), clock)
    }

    fn with_core(core: SerializerCore<Turn>, clock: C) -> Self {
        KeyedSerializer {
            front: Rc::new(RefCell::new(Front {
                core,
                index: KeyMap::default(),
            })),
            clock,
        }
    }

    /// The running work of `key` ended at its deadline by another clock than this serializer's
    /// timer (a [`StoreSerializer`]'s wait for the lease): it counts as timed out.
    pub(crate) fn timed_out(&self, key: &str) {
        let mut front = self.front.borrow_mut();
        let Front { core, index } = &mut *front;
        if let Some(head) = index.get(key).and_then(|&line| core.head(LineId(line))) {
            core.abandon(head, Abandon::TimedOut);
        }
    }

    /// The deadline length of the running work of `key`, in milliseconds (0 when none runs).
    pub(crate) fn running_timeout(&self, key: &str) -> f64 {
        let front = self.front.borrow();
        let Front { core, index } = &*front;
        index
            .get(key)
            .and_then(|&line| core.head(LineId(line)))
            .and_then(|head| core.timeout_of(head))
            .unwrap_or_default()
    }

    /// The running work of `key` had its caller's work called (see
    /// [`calling_later`](Self::calling_later)).
    pub(crate) fn called(&self, key: &str) {
        let mut front = self.front.borrow_mut();
        let Front { core, index } = &mut *front;
        if let Some(head) = index.get(key).and_then(|&line| core.head(LineId(line))) {
            core.called(head);
        }
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
        self.run_inner(key, None, work).await
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
        self.run_inner(key, Some(timeout_ms), work).await
    }

    async fn run_inner<F, Fut>(
        &self,
        key: &str,
        timeout_ms: Option<f64>,
        work: F,
    ) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal) -> Fut,
        Fut: Future,
    {
        let ticket = self.enqueue(key, timeout_ms, Turn::default(), Coalesce::Never)?;
        let mut turn = TurnGuard {
            front: &self.front,
            key,
            ticket,
            running: false,
        };
        WaitTurn {
            front: &self.front,
            ticket,
            clock: &self.clock,
            route: WakeRoute::default(),
        }
        .await;
        let (timeout_ms, slot) = start(&self.front, ticket, self.clock.now_ms());
        let deadline = match self.clock.sleep(timeout_ms) {
            Ok(deadline) => deadline,
            // Left as settled (not cancelled): the guard just finishes it.
            Err(error) => return Err(SerializeError::Timer(error)),
        };
        turn.running = true;
        let signal = WorkSignal::in_slot(slot);
        let outcome = {
            let work = pin!(work(signal.clone()));
            FirstOf { work, deadline }.await
        };
        // The work's future is dropped by now; the guard moves the key on after this.
        turn.running = false;
        outcome.ok_or_else(|| {
            signal.aborted.set(true);
            self.front
                .borrow_mut()
                .core
                .abandon(ticket, Abandon::TimedOut);
            SerializeError::TimedOut {
                key: key.to_owned(),
                timeout_ms,
            }
        })
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
        let (ticket, run) = self.enter_coalesced(key, coalesce, work)?;
        Coalesced::new(self, key, ticket, run).await
    }

    /// Joins the key's last work, or queues `work` as a run others may join.
    fn enter_coalesced<F, Fut>(
        &self,
        key: &str,
        coalesce: Coalesce,
        work: F,
    ) -> Result<Joined<Fut::Output>, SerializeError>
    where
        F: FnOnce(WorkSignal) -> Fut + 'static,
        Fut: Future + 'static,
        Fut::Output: 'static,
    {
        {
            let mut front = self.front.borrow_mut();
            let Front { core, index } = &mut *front;
            if let Some(&line) = index.get(key) {
                // Only a run of this output type can answer this call.
                let run = core
                    .last(LineId(line))
                    .and_then(|last| core.payload(last))
                    .and_then(|turn| turn.shared.as_ref())
                    .and_then(SharedRun::of);
                if let Some(run) = run {
                    let joined = core
                        .join(LineId(line), &coalesce, None)
                        .map_err(|error| SerializeError::refused(key, error))?;
                    if let Some(ticket) = joined {
                        return Ok((ticket, run));
                    }
                }
            }
        }
        let boxed: BoxedWork<Fut::Output> = Box::new(move |signal| Box::pin(work(signal)));
        let run = SharedRun::new(boxed);
        let turn = Turn {
            waker: None,
            shared: Some(Rc::clone(&run) as Rc<dyn Any>),
        };
        let ticket = self.enqueue(key, None, turn, coalesce)?;
        Ok((ticket, run))
    }

    /// [`leave_line`] for this serializer.
    pub(super) fn leave_line(&self, key: &str, ticket: Ticket) {
        leave_line(&self.front, key, ticket);
    }

    fn enqueue(
        &self,
        key: &str,
        timeout_ms: Option<f64>,
        turn: Turn,
        coalesce: Coalesce,
    ) -> Result<Ticket, SerializeError> {
        let mut front = self.front.borrow_mut();
        let Front { core, index } = &mut *front;
        let queued = match index.get(key) {
            Some(&line) => core.enqueue_on(LineId(line), turn, timeout_ms, coalesce),
            None => core.open(key, turn, timeout_ms, coalesce).map(|pushed| {
                index.insert(Rc::from(key), pushed.line.0);
                pushed.ticket
            }),
        };
        queued.map_err(|error| SerializeError::refused(key, error))
    }

    /// The deadline of works without their own, in milliseconds.
    pub fn timeout_ms(&self) -> f64 {
        self.front.borrow().core.options().timeout_ms()
    }

    /// The number of keys with queued or running work.
    pub fn pending(&self) -> usize {
        self.front.borrow().core.keys()
    }

    /// The number of works queued or running under `key` (what `max_pending` bounds); 0 when
    /// the key is idle.
    pub fn pending_for(&self, key: &str) -> usize {
        let front = self.front.borrow();
        front
            .index
            .get(key)
            .map_or(0, |&line| front.core.pending_in(LineId(line)))
    }

    /// Whether a work under `key` has not started yet.
    pub(crate) fn waiting_for(&self, key: &str) -> bool {
        let front = self.front.borrow();
        front
            .index
            .get(key)
            .is_some_and(|&line| front.core.waiting_in(LineId(line)))
    }

    /// Counters since creation, and what is live now.
    pub fn stats(&self) -> Stats {
        self.front.borrow().core.stats()
    }
}

/// Leaves the line when dropped — after the work finished, timed out, or was cancelled — and
/// wakes whoever's turn it now is.
struct TurnGuard<'a> {
    front: &'a RefCell<Front>,
    key: &'a str,
    ticket: Ticket,
    /// The work is in flight: a drop now cancels it.
    running: bool,
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        if self.running {
            self.front
                .borrow_mut()
                .core
                .abandon(self.ticket, Abandon::Aborted);
        }
        leave_line(self.front, self.key, self.ticket);
    }
}

/// Starts the work of `ticket`, whose turn has come and which is its line's next to start
/// ([`WaitTurn`]), at `now`: its deadline's length and its slot. The line's next work, if its
/// turn has come too, is woken to start after it.
pub(super) fn start(front: &RefCell<Front>, ticket: Ticket, now: f64) -> (f64, u16) {
    let (started, line) = {
        let mut front = front.borrow_mut();
        let started = front
            .core
            .start(ticket, now)
            .map_or((0.0, 0), |started| (started.timeout_ms, started.slot));
        (started, front.core.line_of(ticket))
    };
    wake_next(front, line);
    started
}

/// A work left its line (settled, cancelled or dropped): a key gone idle leaves the index, and
/// the caller whose work may start now is woken.
fn leave_line(front: &RefCell<Front>, key: &str, ticket: Ticket) {
    let line = {
        let mut front = front.borrow_mut();
        let Front { core, index } = &mut *front;
        let line = core.line_of(ticket);
        match core.finish(ticket) {
            Some(released) if released.idle => {
                index.remove(key);
                None
            }
            _ => line,
        }
    };
    wake_next(front, line);
}

/// Wakes the caller of `line`'s next work to start, if its turn has come and it waits for it —
/// outside the borrow: a waker may poll, and a poll borrows.
fn wake_next(front: &RefCell<Front>, line: Option<LineId>) {
    let waker = {
        let mut front = front.borrow_mut();
        let core = &mut front.core;
        line.and_then(|line| core.startable(line))
            .and_then(|next| core.payload_mut(next))
            .and_then(|turn| turn.waker.take())
    };
    if let Some(waker) = waker {
        waker.wake();
    }
}

struct WaitTurn<'a, C: Clock> {
    front: &'a RefCell<Front>,
    ticket: Ticket,
    clock: &'a C,
    /// Through the platform's own context where it has one (see [`Clock::waiter`]).
    route: WakeRoute,
}

impl<C: Clock> Future for WaitTurn<'_, C> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.front.borrow().core.may_start(self.ticket) {
            return Poll::Ready(());
        }
        let this = &mut *self;
        let waker = this.route.waker(this.clock, cx);
        if let Some(turn) = self.front.borrow_mut().core.payload_mut(self.ticket) {
            turn.waker = Some(waker);
        }
        Poll::Pending
    }
}

/// The work's output, or `None` once the deadline has passed first.
struct FirstOf<'a, W: Future> {
    work: Pin<&'a mut W>,
    deadline: Sleep,
}

impl<W: Future> Future for FirstOf<'_, W> {
    type Output = Option<W::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(output) = self.work.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}
