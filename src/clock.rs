//! Time, injected: the platform's clocks and timers on wasm (`PlatformClock`, `WallClock`), a
//! [`ManualClock`] in tests.
//!
//! Nothing here busy-waits: on Cloudflare Workers the clock moves only across I/O, so the only
//! way to let time pass is a timer.

use core::fmt;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// A sleep in progress, as returned by [`Clock::sleep`]. Dropping it cancels it (and clears
/// its platform timer).
pub type Sleep = Pin<Box<dyn Future<Output = ()>>>;

/// The platform refused a timer (`setTimeout` threw: on Cloudflare Workers past 10 000 active
/// timeouts in one request, for one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerError {
    /// What the platform said.
    pub message: String,
}

impl fmt::Display for TimerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the platform refused a timer: {}", self.message)
    }
}

impl std::error::Error for TimerError {}

/// A source of time and of sleeps. On wasm, `PlatformClock` (`performance.now()`, a monotonic
/// clock) and `WallClock` (`Date.now()`, epoch milliseconds, for lock records that other
/// isolates compare) with `setTimeout`; in tests, a [`ManualClock`].
pub trait Clock {
    /// Milliseconds on this clock: what sleeps are measured on, and — for a lock's manager —
    /// what records carry (epoch milliseconds, compared across isolates).
    fn now_ms(&self) -> f64;
    /// Milliseconds on a clock that never goes back and no clock step moves (its origin is its
    /// own): what a lock times watched records and its own lease by. The default is
    /// [`now_ms`](Clock::now_ms), for a clock that is monotonic already; `WallClock` answers
    /// `performance.now()`.
    fn monotonic_ms(&self) -> f64 {
        self.now_ms()
    }
    /// A future that completes once `ms` milliseconds have passed on this clock.
    ///
    /// # Errors
    /// The platform refused the timer; nothing is armed.
    fn sleep(&self, ms: f64) -> Result<Sleep, TimerError>;
    /// How a waiter about to wait for another's turn is woken. `None`, the default: its task's
    /// own waker, woken directly by whoever ends the turn. A platform that runs each request in
    /// a context of its own answers a [`Waiter`] that routes the wake-up through the waiter's
    /// own context (`PlatformClock` and `WallClock` do on Cloudflare Workers).
    fn waiter(&self) -> Option<Box<dyn Waiter>> {
        None
    }
    /// Whether the platform ends a request's timers and I/O with the request, waiting calls
    /// included (`PlatformClock` and `WallClock` on Cloudflare Workers): then a waiting work's
    /// own context also watches the deadlines of the works ahead of it, so a work whose request
    /// ended cannot hold its key. `false`, the default.
    fn contexts_end(&self) -> bool {
        false
    }
}

/// How a waiter is woken where that must happen in the waiter's own context: see
/// [`Clock::waiter`]. Dropping it lets go of whatever it holds for the wait.
pub trait Waiter {
    /// The waker to hand to whoever ends the turn; waking it ends up waking `cx`'s waker (set
    /// again at every poll).
    fn waker_for(&self, cx: &Context<'_>) -> Waker;
    /// Whether it has woken: it wakes once, and a waiter that must wait again asks for another.
    fn is_spent(&self) -> bool;
}

/// A waiting task's waker for one poll: the clock's [`Waiter`]'s where it has one (asked for
/// again once spent), else the task's own. Asked for outside any borrow of the line waited in.
#[derive(Default)]
pub(crate) struct WakeRoute(Option<Box<dyn Waiter>>);

impl WakeRoute {
    pub(crate) fn waker(&mut self, clock: &(impl Clock + ?Sized), cx: &Context<'_>) -> Waker {
        if self.0.as_ref().is_none_or(|waiter| waiter.is_spent()) {
            self.0 = clock.waiter();
        }
        match &self.0 {
            Some(waiter) => waiter.waker_for(cx),
            None => cx.waker().clone(),
        }
    }
}

impl<C: Clock + ?Sized> Clock for Rc<C> {
    fn now_ms(&self) -> f64 {
        (**self).now_ms()
    }
    fn monotonic_ms(&self) -> f64 {
        (**self).monotonic_ms()
    }
    fn sleep(&self, ms: f64) -> Result<Sleep, TimerError> {
        (**self).sleep(ms)
    }
    fn waiter(&self) -> Option<Box<dyn Waiter>> {
        (**self).waiter()
    }
}

/// A clock that moves only when told to; sleeps complete when [`ManualClock::advance`] passes
/// their end. For deterministic tests of anything that takes a [`Clock`].
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    inner: Rc<RefCell<ManualInner>>,
}

#[derive(Debug, Default)]
struct ManualInner {
    now: f64,
    sleepers: Vec<(f64, Rc<RefCell<SleepState>>)>,
}

/// Whether a sleep has ended, and whom to wake when it does: shared by a sleep future and
/// whatever ends it (a manual clock's `advance`, a platform timer's callback).
#[derive(Debug, Default)]
pub(crate) struct SleepState {
    pub(crate) done: bool,
    waker: Option<Waker>,
}

impl SleepState {
    /// Ends the sleep; answers whom to wake (outside any borrow: a waker may poll).
    pub(crate) fn end(&mut self) -> Option<Waker> {
        self.done = true;
        self.waker.take()
    }

    /// A sleep future's poll.
    pub(crate) fn poll(&mut self, cx: &Context<'_>) -> Poll<()> {
        if self.done {
            Poll::Ready(())
        } else {
            self.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

impl ManualClock {
    /// A clock at time 0 with no sleepers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves time forward by `ms` and wakes every sleep that has ended.
    pub fn advance(&self, ms: f64) {
        let woken: Vec<Waker> = {
            let mut inner = self.inner.borrow_mut();
            inner.now += ms;
            let now = inner.now;
            let mut woken = Vec::new();
            inner.sleepers.retain(|(end, state)| {
                let mut state = state.borrow_mut();
                if state.done {
                    return false;
                }
                if *end > now {
                    return true;
                }
                woken.extend(state.end());
                false
            });
            woken
        };
        woken.into_iter().for_each(Waker::wake);
    }

    /// A sleep of `ms` on this clock: [`Clock::sleep`], which never fails here.
    pub fn after(&self, ms: f64) -> Sleep {
        let state = Rc::new(RefCell::new(SleepState::default()));
        let mut inner = self.inner.borrow_mut();
        if ms <= 0.0 {
            state.borrow_mut().done = true;
        } else {
            let end = inner.now + ms;
            inner.sleepers.push((end, state.clone()));
        }
        Box::pin(ManualSleep { state })
    }

    /// How many sleeps are still waiting: not ended, and not dropped.
    pub fn sleepers(&self) -> usize {
        self.inner
            .borrow()
            .sleepers
            .iter()
            .filter(|(_, state)| !state.borrow().done)
            .count()
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> f64 {
        self.inner.borrow().now
    }
    fn sleep(&self, ms: f64) -> Result<Sleep, TimerError> {
        Ok(self.after(ms))
    }
}

struct ManualSleep {
    state: Rc<RefCell<SleepState>>,
}

impl Drop for ManualSleep {
    fn drop(&mut self) {
        // A dropped sleep waits for nothing; the next `advance` forgets it.
        self.state.borrow_mut().done = true;
    }
}

impl Future for ManualSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.state.borrow_mut().poll(cx)
    }
}
