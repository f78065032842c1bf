//! The platform's clocks, timers and randomness for Rust callers on wasm, as the [`Clock`] and
//! [`Random`] the core takes.
//!
//! Every host call that can throw goes through a `catch` binding: `setTimeout` throws on
//! Cloudflare Workers past 10 000 active timeouts in one request, and an exception unwinding
//! through wasm would skip Rust's cleanup. A refused timer is a [`TimerError`]; nothing here
//! calls `unwrap_throw`.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use wasm_bindgen::prelude::*;

use crate::clock::{Clock, Sleep, SleepState, TimerError};
use crate::lock::{Lock, LockError, LockManager, LockOptions};
use crate::random::{Pool, Random};
use crate::serializer::{KeyedSerializer, TimeoutOutOfRange, MAX_TIMEOUT_MS};
use crate::store::LockStore;

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`: monotonic, present in Workers, browsers, Node and Deno.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;

    /// `crypto.getRandomValues(bytes)`: Workers, browsers, Node and Deno.
    #[wasm_bindgen(catch, js_namespace = crypto, js_name = getRandomValues)]
    fn get_random_values(bytes: &mut [u8]) -> Result<(), JsValue>;

    /// The global `setTimeout` (never `window`'s: Workers and Node have no window).
    #[wasm_bindgen(catch, js_name = setTimeout)]
    fn set_timeout(handler: &JsValue, ms: f64) -> Result<JsValue, JsValue>;

    #[wasm_bindgen(catch, js_name = clearTimeout)]
    fn clear_timeout(handle: &JsValue) -> Result<(), JsValue>;
}

/// A delay for `setTimeout` that is never 0 (a timer fires in a later task, never early) and
/// never past what timers honour.
fn timer_delay(ms: f64) -> f64 {
    let ms = ms.ceil();
    if ms.is_nan() || ms < 1.0 {
        1.0
    } else {
        ms.min(f64::from(MAX_TIMEOUT_MS))
    }
}

/// What a thrown JS value says, for an error message.
pub(crate) fn thrown_message(error: &JsValue) -> String {
    let message = super::host::reflect_get(error, &JsValue::from_str("message")).ok();
    if let Some(message) = message.and_then(|message| message.as_string()) {
        return message;
    }
    error
        .as_string()
        .unwrap_or_else(|| String::from("a non-error value was thrown"))
}

/// The platform clock on wasm32: `performance.now()` and `setTimeout`.
///
/// `performance.now()` rather than `Date.now()`: it does not jump when the wall clock is set.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlatformClock;

impl Clock for PlatformClock {
    fn now_ms(&self) -> f64 {
        performance_now()
    }
    fn sleep(&self, ms: f64) -> Result<Sleep, TimerError> {
        TimerSleep::arm(ms)
    }
}

/// Wall-clock time on wasm32: `Date.now()` (epoch milliseconds) and `setTimeout`. The clock
/// a [`LockManager`](crate::LockManager) needs: lock records carry times that other isolates
/// compare with their own clocks, which `performance.now()` (per-isolate origin) is not.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now_ms(&self) -> f64 {
        super::host::date_now()
    }
    fn sleep(&self, ms: f64) -> Result<Sleep, TimerError> {
        TimerSleep::arm(ms)
    }
}

/// One `setTimeout`, cleared when the future is dropped, so no timer outlives its sleep.
struct TimerSleep {
    state: Rc<RefCell<SleepState>>,
    handle: JsValue,
    _callback: Closure<dyn FnMut()>,
}

impl TimerSleep {
    fn arm(ms: f64) -> Result<Sleep, TimerError> {
        let state = Rc::new(RefCell::new(SleepState::default()));
        let fired = state.clone();
        let callback = Closure::<dyn FnMut()>::new(move || {
            let waker = fired.borrow_mut().end();
            if let Some(waker) = waker {
                waker.wake();
            }
        });
        let handle =
            set_timeout(callback.as_ref().unchecked_ref(), timer_delay(ms)).map_err(|error| {
                TimerError {
                    message: thrown_message(&error),
                }
            })?;
        Ok(Box::pin(TimerSleep {
            state,
            handle,
            _callback: callback,
        }))
    }
}

impl Drop for TimerSleep {
    fn drop(&mut self) {
        if !self.state.borrow().done {
            // A clearTimeout that throws leaves a timer that fires into a dropped closure,
            // which wasm-bindgen turns into a no-op; nothing to do about it here.
            let _ = clear_timeout(&self.handle);
        }
    }
}

impl Future for TimerSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.state.borrow_mut().poll(cx)
    }
}

/// `crypto.getRandomValues`: Workers, browsers, Node and Deno all have it. Never `Math.random`.
/// Each value keeps its own pool of drawn bytes (no thread-local: the modules are
/// single-threaded, and a thread-local's machinery is wasm of its own).
pub struct PlatformRandom {
    pool: RefCell<Pool>,
    /// Blocks the platform refused, for the fallback's seed.
    fallbacks: std::cell::Cell<u64>,
}

impl Default for PlatformRandom {
    fn default() -> Self {
        PlatformRandom {
            pool: RefCell::new(Pool::new()),
            fallbacks: std::cell::Cell::new(0),
        }
    }
}

impl core::fmt::Debug for PlatformRandom {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("PlatformRandom")
    }
}

impl Random for PlatformRandom {
    fn fill(&self, bytes: &mut [u8]) {
        self.pool.borrow_mut().take(bytes, |block| {
            if get_random_values(block).is_err() {
                // Never seen (every runtime this runs on has crypto, and a block is far under
                // its 64 KiB limit), but not a reason to trap: bytes that are at least distinct
                // per call (the time and a count), so two tokens never collide.
                let count = self.fallbacks.get() + 1;
                self.fallbacks.set(count);
                let seed =
                    super::host::date_now().to_bits() ^ count.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                crate::random::SeededRandom::new(seed).fill(block);
            }
        });
    }
}

impl KeyedSerializer<PlatformClock> {
    /// A serializer on the platform clock whose works each get `timeout_ms` milliseconds.
    ///
    /// # Errors
    /// [`TimeoutOutOfRange`] unless `timeout_ms` is a finite number in `1..=MAX_TIMEOUT_MS`.
    pub fn new(timeout_ms: f64) -> Result<Self, TimeoutOutOfRange> {
        Self::with_clock(timeout_ms, PlatformClock)
    }
}

/// Takes the lock `name` in `store` once, on the platform's wall clock and crypto, with no local
/// queue (each call is its own contender). For many acquisitions over one store, keep one
/// [`LockManager`] instead: its contenders queue locally and hand the lock on.
///
/// # Errors
/// As [`LockManager::acquire`].
pub async fn acquire_lock<S: LockStore>(
    store: S,
    name: &str,
    options: LockOptions,
) -> Result<Option<Lock<S, WallClock, PlatformRandom>>, LockError> {
    LockManager::new(store, WallClock, PlatformRandom::default())
        .acquire(name, options)
        .await
}
