//! The platform's clocks, timers and randomness for Rust callers on wasm32, as the [`Clock`]
//! and [`Random`] the serializer and the lock take: `performance.now()`, `Date.now()`,
//! `setTimeout` and `crypto.getRandomValues`, which Cloudflare Workers, browsers, Node and Deno
//! all have.
//!
//! Every host call that can throw goes through a `catch` binding: `setTimeout` throws on
//! Cloudflare Workers past 10 000 active timeouts in one request, and an exception unwinding
//! through wasm would skip Rust's cleanup. A refused timer is a [`TimerError`]; nothing here
//! calls `unwrap_throw`.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use wasm_bindgen::prelude::*;

use crate::clock::{Clock, Sleep, SleepState, TimerError, Waiter};
use crate::engine::options::{LockOptions, TimeoutOutOfRange, MAX_TIMEOUT_MS};
use crate::engine::random::{Random, SeededRandom};
use crate::front::lock::{Lock, LockError, LockManager};
use crate::front::serializer::KeyedSerializer;
use crate::store::LockStore;

#[wasm_bindgen]
extern "C" {
    /// `globalThis`.
    #[wasm_bindgen(thread_local_v2, js_name = globalThis)]
    static GLOBAL_THIS: JsValue;

    /// `Promise.withResolvers()`.
    #[wasm_bindgen(catch, js_namespace = Promise, js_name = withResolvers)]
    fn promise_with_resolvers() -> Result<JsValue, JsValue>;

    #[wasm_bindgen(js_name = Promise)]
    type HostPromise;
    #[wasm_bindgen(method)]
    fn then(this: &HostPromise, reaction: &Closure<dyn FnMut(JsValue)>) -> JsValue;

    #[wasm_bindgen(js_name = Function)]
    type HostFunction;
    #[wasm_bindgen(catch, method, js_name = call)]
    fn call0(this: &HostFunction, this_arg: &JsValue) -> Result<JsValue, JsValue>;

    /// `performance.now()`: monotonic.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;

    /// `Date.now()`.
    #[wasm_bindgen(js_namespace = Date, js_name = now)]
    fn date_now() -> f64;

    /// `Reflect.get(target, key)`: a getter may throw.
    #[wasm_bindgen(catch, js_namespace = Reflect, js_name = get)]
    fn reflect_get(target: &JsValue, key: &JsValue) -> Result<JsValue, JsValue>;

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
fn thrown_message(error: &JsValue) -> String {
    let message = reflect_get(error, &JsValue::from_str("message")).ok();
    if let Some(message) = message.and_then(|message| message.as_string()) {
        return message;
    }
    error
        .as_string()
        .unwrap_or_else(|| String::from("a non-error value was thrown"))
}

/// The platform clock on wasm32: `performance.now()` and `setTimeout`. What a
/// [`KeyedSerializer`] times its deadlines by.
///
/// `performance.now()` rather than `Date.now()`: it does not jump when the wall clock is set.
/// Its sleeps are `setTimeout`s cleared when dropped; a timer the platform refuses (Cloudflare
/// Workers allows 10 000 active timeouts per request) is a [`TimerError`], never a trap. On
/// Workers a waiter is woken through its own request ([`Clock::waiter`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct PlatformClock;

impl Clock for PlatformClock {
    fn now_ms(&self) -> f64 {
        performance_now()
    }
    fn sleep(&self, ms: f64) -> Result<Sleep, TimerError> {
        TimerSleep::arm(ms)
    }
    fn waiter(&self) -> Option<Box<dyn Waiter>> {
        waiter_on_workers()
    }
    fn contexts_end(&self) -> bool {
        on_workers()
    }
}

thread_local! {
    /// Whether this isolate is Cloudflare Workers' (`navigator.userAgent`), once looked up.
    static ON_WORKERS: Cell<Option<bool>> = const { Cell::new(None) };
}

fn on_workers() -> bool {
    ON_WORKERS.with(|cached| {
        *cached.get().get_or_insert_with(|| {
            let key = |name: &str| JsValue::from_str(name);
            GLOBAL_THIS
                .with(|global| reflect_get(global, &key("navigator")))
                .ok()
                .filter(JsValue::is_object)
                .and_then(|navigator| reflect_get(&navigator, &key("userAgent")).ok())
                .and_then(|agent| agent.as_string())
                .is_some_and(|agent| agent == "Cloudflare-Workers")
        })
    })
}

/// On Cloudflare Workers, how a waiter is woken: a promise whose reaction — registered now, in
/// the waiter's own request — wakes the waiter's task, so that it runs on in its own request
/// (workerd ties I/O to the request a callback belongs to, and a waker called from another
/// request would poll the waiter there); and a timer of the waiter's own for as long as timers
/// go, so that workerd does not cancel its request as hung. Elsewhere `None`.
fn waiter_on_workers() -> Option<Box<dyn Waiter>> {
    if !on_workers() {
        return None;
    }
    let target: Rc<RefCell<Option<Waker>>> = Rc::default();
    let spent = Rc::new(Cell::new(false));
    let (woken, used) = (target.clone(), spent.clone());
    let reaction = Closure::<dyn FnMut(JsValue)>::new(move |_: JsValue| {
        used.set(true);
        let waker = woken.borrow_mut().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    });
    let resolvers = promise_with_resolvers().ok()?;
    let promise: HostPromise = reflect_get(&resolvers, &JsValue::from_str("promise"))
        .ok()?
        .unchecked_into();
    let resolve: HostFunction = reflect_get(&resolvers, &JsValue::from_str("resolve"))
        .ok()?
        .unchecked_into();
    promise.then(&reaction);
    // A refused timer (past workerd's quota) leaves the wake-up, which is what matters most.
    let timer = TimerSleep::arm(f64::from(MAX_TIMEOUT_MS)).ok();
    Some(Box::new(ContextWaiter {
        waker: function_waker(resolve),
        target,
        spent,
        _reaction: reaction,
        _timer: timer,
    }))
}

/// A waiter woken through its own request's promise reaction (see [`waiter_on_workers`]).
struct ContextWaiter {
    /// What the one ending the turn wakes: the promise's `resolve`.
    waker: Waker,
    /// The waiter's own task waker, which the reaction wakes.
    target: Rc<RefCell<Option<Waker>>>,
    spent: Rc<Cell<bool>>,
    _reaction: Closure<dyn FnMut(JsValue)>,
    _timer: Option<Sleep>,
}

impl Waiter for ContextWaiter {
    fn waker_for(&self, cx: &Context<'_>) -> Waker {
        *self.target.borrow_mut() = Some(cx.waker().clone());
        self.waker.clone()
    }
    fn is_spent(&self) -> bool {
        self.spent.get()
    }
}

/// A waker that calls a JS function (a promise's `resolve`). wasm32 without atomics has one
/// thread, so an `Rc` behind the waker is never shared across threads.
fn function_waker(resolve: HostFunction) -> Waker {
    use std::task::{RawWaker, RawWakerVTable};
    fn call(data: *const ()) {
        // SAFETY: `data` is an `Rc<HostFunction>` kept alive by the waker being woken.
        let function = unsafe { &*data.cast::<HostFunction>() };
        let _ = function.call0(&JsValue::UNDEFINED);
    }
    unsafe fn clone(data: *const ()) -> RawWaker {
        // SAFETY: `data` came from `Rc::into_raw` and is still owned by a live waker.
        unsafe { Rc::increment_strong_count(data.cast::<HostFunction>()) };
        RawWaker::new(data, &VTABLE)
    }
    unsafe fn wake(data: *const ()) {
        call(data);
        // SAFETY: waking by value consumes this waker's count.
        drop(unsafe { Rc::from_raw(data.cast::<HostFunction>()) });
    }
    unsafe fn wake_by_ref(data: *const ()) {
        call(data);
    }
    unsafe fn drop_waker(data: *const ()) {
        // SAFETY: dropping gives this waker's count back.
        drop(unsafe { Rc::from_raw(data.cast::<HostFunction>()) });
    }
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);
    let data = Rc::into_raw(Rc::new(resolve)).cast::<()>();
    // SAFETY: the vtable's functions uphold the RawWaker contract for an `Rc<HostFunction>`.
    unsafe { Waker::from_raw(RawWaker::new(data, &VTABLE)) }
}

/// Wall-clock time on wasm32: `Date.now()` (epoch milliseconds) and `setTimeout`. The clock
/// a [`LockManager`] needs: lock records carry times that other isolates compare with their own
/// clocks, which `performance.now()` (per-isolate origin) is not. Sleeps and waiters as
/// [`PlatformClock`]'s.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now_ms(&self) -> f64 {
        date_now()
    }
    fn monotonic_ms(&self) -> f64 {
        performance_now()
    }
    fn sleep(&self, ms: f64) -> Result<Sleep, TimerError> {
        TimerSleep::arm(ms)
    }
    fn waiter(&self) -> Option<Box<dyn Waiter>> {
        waiter_on_workers()
    }
    fn contexts_end(&self) -> bool {
        on_workers()
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

/// Seeded from `crypto.getRandomValues` (Workers, browsers, Node and Deno all have it; never
/// `Math.random`): what a [`LockManager`] draws its isolate's id and its jitter from.
///
/// Each value draws 8 bytes from the platform's crypto once, at its first use, and serves a
/// [`SeededRandom`] sequence from there: the id (the first half of every token, and what its
/// asks carry) must differ between isolates, not be secret — a record shows its token to
/// whoever reads it — and jitter only spreads polls. A refused draw (never seen) seeds from the
/// time instead, never a trap.
#[derive(Default)]
pub struct PlatformRandom {
    /// The sequence, once drawn (taken out while it serves: not a `OnceCell`, whose reentrant
    /// init panics, a path each module would carry).
    seeded: std::cell::Cell<Option<SeededRandom>>,
}

impl core::fmt::Debug for PlatformRandom {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("PlatformRandom")
    }
}

impl Random for PlatformRandom {
    fn fill(&self, bytes: &mut [u8]) {
        let seeded = self.seeded.take().unwrap_or_else(|| {
            let mut seed = [0u8; 8];
            if get_random_values(&mut seed).is_err() {
                // Never seen (every runtime this runs on has crypto), but not a reason to
                // trap: the time, which differs between isolates too.
                seed = date_now().to_bits().to_le_bytes();
            }
            SeededRandom::new(u64::from_le_bytes(seed))
        });
        seeded.fill(bytes);
        self.seeded.set(Some(seeded));
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
/// # Cancel safety
/// As [`LockManager::acquire`].
///
/// # Errors
/// As [`LockManager::acquire`].
pub async fn acquire_lock<S: LockStore + 'static>(
    store: S,
    name: &str,
    options: LockOptions,
) -> Result<Option<Lock<S, WallClock, PlatformRandom>>, LockError> {
    LockManager::new(store, WallClock, PlatformRandom::default())
        .acquire(name, options)
        .await
}
