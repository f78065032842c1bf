//! The keyed serializer: async work for one key runs one at a time, each with a deadline.
//!
//! Two front ends share the [`KeyedQueue`]: [`KeyedSerializer`] for Rust callers (futures,
//! cancelled by drop) and the JavaScript binding, which drives [`SerializerCore`] — the same
//! queue plus one list of running works in deadline order, so one timer serves them all.

use core::fmt;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::clock::Clock;
use crate::key::{validate_key, KeyError};
use crate::queue::{KeyedQueue, LineId, Lines, Pushed, Ticket};

/// The default deadline of one work, as the seed: 30 s is over ten times the slowest legitimate
/// run of a handful of store round-trips, and short enough that a stalled dependency holds one
/// key for half a minute rather than until restart.
pub const DEFAULT_TIMEOUT_MS: u32 = 30_000;

/// The longest deadline accepted: the largest delay `setTimeout` honours (2^31 - 1 ms, ~24.8 days).
pub const MAX_TIMEOUT_MS: u32 = i32::MAX as u32;

/// A `timeoutMs` that is not a finite number in `1..=MAX_TIMEOUT_MS`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeoutOutOfRange(pub f64);

impl fmt::Display for TimeoutOutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "timeoutMs must be a finite number from 1 to {MAX_TIMEOUT_MS}, got {}",
            self.0
        )
    }
}

impl std::error::Error for TimeoutOutOfRange {}

/// Checks a deadline in milliseconds; fractions are allowed, as `setTimeout` allows them.
pub fn validate_timeout_ms(ms: f64) -> Result<f64, TimeoutOutOfRange> {
    if ms.is_finite() && (1.0..=f64::from(MAX_TIMEOUT_MS)).contains(&ms) {
        Ok(ms)
    } else {
        Err(TimeoutOutOfRange(ms))
    }
}

/// The message of a timeout, word for word the seed's, so logs and tests keep matching.
pub fn timeout_message(key: &str, timeout_ms: f64) -> String {
    format!(
        "serialized work for {key} timed out after {timeout_ms} ms: released, the next notification re-decides"
    )
}

// ---------------------------------------------------------------------------------------------
// The core the JavaScript binding drives.

enum State {
    Queued,
    Running(Run),
    /// Past its deadline: no longer timed, still the head until its caller has been told.
    Expired,
}

struct Job<P> {
    payload: P,
    state: State,
}

#[derive(Clone, Copy)]
struct Run {
    deadline: f64,
    prev: Option<Ticket>,
    next: Option<Ticket>,
}

/// A work that left its key's line.
#[derive(Debug)]
pub struct Released<P> {
    /// What was submitted with it.
    pub payload: P,
    /// The work whose turn has now come, if another waited for the key.
    pub next: Option<Ticket>,
    /// Whether the key went idle (its [`LineId`] is free for reuse).
    pub idle: bool,
}

/// Per-key FIFO of works and the deadlines of the running ones, with no I/O of its own.
///
/// The caller starts works ([`start`](Self::start)) when their turn comes, reports when the
/// head of a key is done ([`finish_head`](Self::finish_head)) and runs one timer for
/// [`next_deadline`](Self::next_deadline), calling [`expire`](Self::expire) when it fires. All
/// deadlines are start time plus one timeout, so the running list in start order is also in
/// deadline order: starting, finishing and expiring are O(1) per work, nothing is re-sorted.
pub struct SerializerCore<P> {
    queue: Lines<Job<P>>,
    timeout_ms: f64,
    oldest: Option<Ticket>,
    newest: Option<Ticket>,
}

impl<P> fmt::Debug for SerializerCore<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SerializerCore")
            .field("timeout_ms", &self.timeout_ms)
            .field("queue", &self.queue)
            .finish()
    }
}

impl<P> SerializerCore<P> {
    /// A core whose works each get `timeout_ms` (already validated) to settle.
    pub fn new(timeout_ms: f64) -> Self {
        SerializerCore {
            queue: Lines::new(),
            timeout_ms,
            oldest: None,
            newest: None,
        }
    }

    /// The deadline every work gets, in milliseconds.
    pub fn timeout_ms(&self) -> f64 {
        self.timeout_ms
    }

    /// Opens a line for `key` — which the caller knows is idle: the core keeps no key index,
    /// its caller does (the JS binding, in a JS `Map`) — with this work as its head. Its turn
    /// has come: the caller must [`start`](Self::start) it.
    ///
    /// # Errors
    /// The key is empty or too long; nothing was queued.
    pub fn open(&mut self, key: &str, payload: P) -> Result<Pushed, KeyError> {
        validate_key(key)?;
        Ok(self.queue.open(
            key,
            Job {
                payload,
                state: State::Queued,
            },
        ))
    }

    /// Queues a work behind the others of a busy key, known by its line; `None` (nothing
    /// queued) if that line is idle.
    pub fn submit_on(&mut self, line: LineId, payload: P) -> Option<Ticket> {
        self.queue.push_on(
            line,
            Job {
                payload,
                state: State::Queued,
            },
        )
    }

    /// Marks the work whose turn has come as running from `now`, and hands back its payload.
    /// `None` if the ticket is stale, not the head of its key, or already started.
    pub fn start(&mut self, ticket: Ticket, now: f64) -> Option<&mut P> {
        if !self.queue.is_head(ticket) {
            return None;
        }
        let newest = self.newest;
        let job = self.queue.get_mut(ticket)?;
        if !matches!(job.state, State::Queued) {
            return None;
        }
        job.state = State::Running(Run {
            deadline: now + self.timeout_ms,
            prev: newest,
            next: None,
        });
        match newest {
            Some(newest) => self.run_mut(newest).next = Some(ticket),
            None => self.oldest = Some(ticket),
        }
        self.newest = Some(ticket);
        self.queue.get_mut(ticket).map(|job| &mut job.payload)
    }

    fn run_mut(&mut self, ticket: Ticket) -> &mut Run {
        match self.queue.get_mut(ticket).map(|job| &mut job.state) {
            Some(State::Running(run)) => run,
            _ => unreachable!("running list names a job that is not running"),
        }
    }

    fn unlink(&mut self, run: Run) {
        match run.prev {
            Some(prev) => self.run_mut(prev).next = run.next,
            None => self.oldest = run.next,
        }
        match run.next {
            Some(next) => self.run_mut(next).prev = run.prev,
            None => self.newest = run.prev,
        }
    }

    /// The head of a busy key is done — it settled, or its caller was told it timed out: it
    /// leaves the line and the next work's turn comes. `None` when the line is idle.
    pub fn finish_head(&mut self, line: LineId) -> Option<Released<P>> {
        let head = self.queue.head(line)?;
        self.finish(head)
    }

    /// The head of a busy key's line.
    pub fn head(&self, line: LineId) -> Option<Ticket> {
        self.queue.head(line)
    }

    /// The work queued right behind `ticket`, if any.
    pub fn next_in_line(&self, ticket: Ticket) -> Option<Ticket> {
        self.queue.next_in_line(ticket)
    }

    /// Like [`finish_head`](Self::finish_head) for any work by ticket; a work that never started
    /// just leaves the line. `None` for a stale ticket.
    pub fn finish(&mut self, ticket: Ticket) -> Option<Released<P>> {
        if let State::Running(run) = self.queue.get(ticket)?.state {
            self.unlink(run);
        }
        let removed = self.queue.remove(ticket)?;
        Some(Released {
            payload: removed.payload.payload,
            next: removed.next,
            idle: removed.idle,
        })
    }

    /// Every running work whose deadline is at or before `now`, oldest first. They stop being
    /// timed but stay the heads of their keys until [`finish`](Self::finish)ed, so the caller
    /// can abort them and tell their callers first.
    pub fn expire(&mut self, now: f64) -> Vec<Ticket> {
        let mut expired = Vec::new();
        while let Some(oldest) = self.oldest {
            let run = *self.run_mut(oldest);
            if run.deadline > now {
                break;
            }
            self.unlink(run);
            if let Some(job) = self.queue.get_mut(oldest) {
                job.state = State::Expired;
            }
            expired.push(oldest);
        }
        expired
    }

    /// The deadline of a running work.
    pub fn deadline(&self, ticket: Ticket) -> Option<f64> {
        match self.queue.get(ticket)?.state {
            State::Running(run) => Some(run.deadline),
            _ => None,
        }
    }

    /// Whether a work has passed its deadline (and has not been finished yet).
    pub fn is_expired(&self, ticket: Ticket) -> bool {
        self.queue
            .get(ticket)
            .is_some_and(|job| matches!(job.state, State::Expired))
    }

    /// The earliest deadline of a running work, if any runs.
    pub fn next_deadline(&self) -> Option<f64> {
        match self.queue.get(self.oldest?)?.state {
            State::Running(run) => Some(run.deadline),
            _ => None,
        }
    }

    /// The key a queued or running work waits under.
    pub fn key(&self, ticket: Ticket) -> Option<&Rc<str>> {
        self.queue.key(ticket)
    }

    /// The payload of a queued or running work.
    pub fn payload_mut(&mut self, ticket: Ticket) -> Option<&mut P> {
        self.queue.get_mut(ticket).map(|job| &mut job.payload)
    }

    /// The number of keys with queued or running work.
    pub fn pending(&self) -> usize {
        self.queue.keys()
    }

    /// The number of works queued or running, under every key.
    pub fn works(&self) -> usize {
        self.queue.len()
    }
}

// ---------------------------------------------------------------------------------------------
// The Rust front end.

/// Tells a work that its deadline passed. Cheap to clone; every clone sees the same flag.
#[derive(Debug, Clone, Default)]
pub struct WorkSignal {
    aborted: Rc<Cell<bool>>,
}

impl WorkSignal {
    /// Whether the work's deadline has passed. A work checks this before every write that must
    /// not land late — anything it spawned outside its own future keeps running otherwise.
    pub fn is_aborted(&self) -> bool {
        self.aborted.get()
    }
}

/// Why [`KeyedSerializer::run`] did not return the work's output.
#[derive(Debug, Clone, PartialEq)]
pub enum SerializeError {
    /// The key was refused; nothing was queued.
    InvalidKey(KeyError),
    /// The work did not finish within the deadline and was dropped.
    TimedOut {
        /// The key the work ran under.
        key: String,
        /// The deadline it had, in milliseconds.
        timeout_ms: f64,
    },
}

impl fmt::Display for SerializeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SerializeError::InvalidKey(error) => write!(f, "key {error}"),
            SerializeError::TimedOut { key, timeout_ms } => {
                f.write_str(&timeout_message(key, *timeout_ms))
            }
        }
    }
}

impl std::error::Error for SerializeError {}

#[derive(Default)]
struct Turn {
    waker: Option<Waker>,
}

/// Runs async work one at a time per key, each with a deadline — for Rust callers.
///
/// Works under one key never overlap and start in the order [`run`](Self::run) was called (FIFO,
/// the order the calls were made, not the order anything else happened). Works under different
/// keys run concurrently. An idle key holds no memory.
///
/// A work still running at its deadline is **dropped**: in Rust that really stops it at its next
/// `.await`, unlike JavaScript, where an abandoned promise keeps running. What it does not undo
/// is I/O already sent: a request in flight when the deadline passed can still land after the
/// next work has read the state, so a work checks [`WorkSignal::is_aborted`] before each write
/// it hands to something that outlives it (a spawned task, a request it does not await).
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
///
/// clock.advance(50.0); // the first work's deadline passes: it is dropped
/// assert!(matches!(first.as_mut().poll(&mut cx), Poll::Ready(Err(SerializeError::TimedOut { .. }))));
/// assert_eq!(second.as_mut().poll(&mut cx), Poll::Ready(Ok("second")));
/// # Ok::<(), keyturn::TimeoutOutOfRange>(())
/// ```
pub struct KeyedSerializer<C: Clock> {
    queue: Rc<RefCell<KeyedQueue<Turn>>>,
    timeout_ms: f64,
    clock: C,
}

impl<C: Clock> fmt::Debug for KeyedSerializer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedSerializer")
            .field("timeout_ms", &self.timeout_ms)
            .field("pending", &self.pending())
            .finish()
    }
}

#[cfg(target_arch = "wasm32")]
impl KeyedSerializer<crate::clock::PlatformClock> {
    /// A serializer on the platform clock whose works each get `timeout_ms` milliseconds.
    ///
    /// # Errors
    /// [`TimeoutOutOfRange`] unless `timeout_ms` is a finite number in `1..=MAX_TIMEOUT_MS`.
    pub fn new(timeout_ms: f64) -> Result<Self, TimeoutOutOfRange> {
        Self::with_clock(timeout_ms, crate::clock::PlatformClock)
    }
}

impl<C: Clock> KeyedSerializer<C> {
    /// A serializer on `clock` whose works each get `timeout_ms` milliseconds.
    ///
    /// # Errors
    /// [`TimeoutOutOfRange`] unless `timeout_ms` is a finite number in `1..=MAX_TIMEOUT_MS`.
    pub fn with_clock(timeout_ms: f64, clock: C) -> Result<Self, TimeoutOutOfRange> {
        Ok(KeyedSerializer {
            queue: Rc::new(RefCell::new(KeyedQueue::new())),
            timeout_ms: validate_timeout_ms(timeout_ms)?,
            clock,
        })
    }

    /// Runs `work(signal)` once every work queued earlier under `key` has finished, timed out
    /// or been cancelled, and returns its output — or [`SerializeError::TimedOut`] when it has
    /// not finished `timeout_ms` after it started, in which case `signal` is aborted and the
    /// work's future is dropped before the next work starts.
    ///
    /// # Cancel safety
    /// Dropping the returned future gives up the turn at once: while it waits, it leaves the
    /// line and nobody waits for it; while its work runs, the work is dropped and the next work
    /// under the key starts.
    ///
    /// # Errors
    /// [`SerializeError::InvalidKey`] for an empty key or one over
    /// [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES); nothing is queued.
    pub async fn run<F, Fut>(&self, key: &str, work: F) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal) -> Fut,
        Fut: Future,
    {
        validate_key(key).map_err(SerializeError::InvalidKey)?;
        let ticket = self.queue.borrow_mut().push(key, Turn::default()).ticket;
        let _turn = TurnGuard {
            queue: &self.queue,
            ticket,
        };
        WaitTurn {
            queue: &self.queue,
            ticket,
        }
        .await;
        let signal = WorkSignal::default();
        let outcome = {
            let work = pin!(work(signal.clone()));
            FirstOf {
                work,
                deadline: self.clock.sleep(self.timeout_ms),
            }
            .await
        };
        outcome.ok_or_else(|| {
            signal.aborted.set(true);
            SerializeError::TimedOut {
                key: key.to_owned(),
                timeout_ms: self.timeout_ms,
            }
        })
    }

    /// The number of keys with queued or running work.
    pub fn pending(&self) -> usize {
        self.queue.borrow().keys()
    }
}

/// Leaves the line when dropped — after the work finished, timed out, or was cancelled — and
/// wakes whoever's turn it now is.
struct TurnGuard<'a> {
    queue: &'a RefCell<KeyedQueue<Turn>>,
    ticket: Ticket,
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        let waker = {
            let mut queue = self.queue.borrow_mut();
            let next = queue.remove(self.ticket).and_then(|removed| removed.next);
            next.and_then(|next| queue.get_mut(next))
                .and_then(|turn| turn.waker.take())
        };
        // Woken outside the borrow: a waker may poll, and a poll borrows the queue.
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

struct WaitTurn<'a> {
    queue: &'a RefCell<KeyedQueue<Turn>>,
    ticket: Ticket,
}

impl Future for WaitTurn<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut queue = self.queue.borrow_mut();
        if queue.is_head(self.ticket) {
            return Poll::Ready(());
        }
        if let Some(turn) = queue.get_mut(self.ticket) {
            turn.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// The work's output, or `None` once the deadline has passed first.
struct FirstOf<'a, W: Future> {
    work: Pin<&'a mut W>,
    deadline: crate::clock::Sleep,
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
