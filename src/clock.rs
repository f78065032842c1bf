//! Time, injected: the platform's monotonic clock and timers on wasm, a [`ManualClock`] in tests.
//!
//! Nothing here busy-waits: on Cloudflare Workers the clock moves only across I/O, so the only
//! way to let time pass is a timer.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// A sleep in progress, as returned by [`Clock::sleep`].
pub type Sleep = Pin<Box<dyn Future<Output = ()>>>;

/// A source of time and of sleeps.
pub trait Clock {
    /// Milliseconds on a clock that never goes back (its origin is the clock's own).
    fn now_ms(&self) -> f64;
    /// A future that completes once `ms` milliseconds have passed on this clock.
    fn sleep(&self, ms: f64) -> Sleep;
}

impl<C: Clock + ?Sized> Clock for Rc<C> {
    fn now_ms(&self) -> f64 {
        (**self).now_ms()
    }
    fn sleep(&self, ms: f64) -> Sleep {
        (**self).sleep(ms)
    }
}

/// The platform clock on wasm32: `performance.now()` and `setTimeout` through gloo-timers.
///
/// `performance.now()` rather than `Date.now()`: it does not jump when the wall clock is set.
#[cfg(target_arch = "wasm32")]
#[derive(Debug, Clone, Copy, Default)]
pub struct PlatformClock;

#[cfg(target_arch = "wasm32")]
impl Clock for PlatformClock {
    fn now_ms(&self) -> f64 {
        crate::js::sys::performance_now()
    }
    fn sleep(&self, ms: f64) -> Sleep {
        Box::pin(gloo_timers::future::TimeoutFuture::new(
            crate::js::sys::timer_delay(ms),
        ))
    }
}

/// Wall-clock time on wasm32: `Date.now()` (epoch milliseconds) and gloo-timers sleeps. The
/// clock a [`LockManager`](crate::LockManager) needs: lock records carry times that other
/// isolates compare with their own clocks, which `performance.now()` (per-isolate origin) is not.
#[cfg(target_arch = "wasm32")]
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

#[cfg(target_arch = "wasm32")]
impl Clock for WallClock {
    fn now_ms(&self) -> f64 {
        js_sys::Date::now()
    }
    fn sleep(&self, ms: f64) -> Sleep {
        PlatformClock.sleep(ms)
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

#[derive(Debug, Default)]
struct SleepState {
    done: bool,
    waker: Option<Waker>,
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
                state.done = true;
                woken.extend(state.waker.take());
                false
            });
            woken
        };
        woken.into_iter().for_each(Waker::wake);
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
    fn sleep(&self, ms: f64) -> Sleep {
        let state = Rc::new(RefCell::new(SleepState::default()));
        let mut inner = self.inner.borrow_mut();
        let end = inner.now + ms.max(0.0);
        if ms <= 0.0 {
            state.borrow_mut().done = true;
        } else {
            inner.sleepers.push((end, state.clone()));
        }
        Box::pin(ManualSleep { state })
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
        let mut state = self.state.borrow_mut();
        if state.done {
            Poll::Ready(())
        } else {
            state.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}
