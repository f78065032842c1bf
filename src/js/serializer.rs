//! `createKeyedSerializer` for JavaScript: [`SerializerCore`] over JS promises.
//!
//! How one work travels, and why it is cheap (see `js/api.js` for the JS half):
//! - `serialize` makes the caller's promise and hands its resolve/reject to Rust, which queues
//!   them in the key's line. The key → line index of busy keys is a JS `Map` on the JS side: a
//!   lookup there is cheaper than passing the string into wasm and hashing it again, and the
//!   wasm carries no hash table (4.6 KB). The first work of a busy period passes the key
//!   (validated here) and gets its line's id; later works pass only the id.
//! - `serialize` attaches the line's `advance` function (one per busy key, not per work) to the
//!   caller's promise, so the key moves on when that promise settles: a work's settlement feeds
//!   the promise directly (`run.then(resolve, reject)`, no closure) and a timeout rejects it.
//! - A work starts from a batch drained in one microtask (an idle key) or in `advance` (a busy
//!   key, already a later microtask), with an AbortController made on the JS side.
//! - One gloo-timers timer, armed for the earliest deadline, serves every running work.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use js_sys::Function;
use wasm_bindgen::prelude::*;
use web_sys::AbortController;

use super::errors::{
    describe, field, key_error, key_from_js, optional_function, optional_number, options_object,
    range_error, spell, type_error,
};
use super::sys::{arm_timer, performance_now};
use crate::queue::{LineId, Ticket};
use crate::serializer::{validate_timeout_ms, SerializerCore, DEFAULT_TIMEOUT_MS};

#[wasm_bindgen]
extern "C" {
    /// A function called through the hot-path bindings below.
    #[derive(Clone)]
    type Callable;
    // Called without wasm-bindgen's `catch` wrapper (a closure and an `apply` per call):
    // resolve/reject functions never throw, and the host's functions catch everything.
    #[wasm_bindgen(method, js_name = call)]
    fn call_start(
        this: &Callable,
        context: &JsValue,
        work: &JsValue,
        resolve: &Callable,
        reject: &Callable,
        on_late: &JsValue,
    ) -> JsValue;
    #[wasm_bindgen(method, js_name = call)]
    fn call1(this: &Callable, context: &JsValue, value: &JsValue) -> JsValue;
    #[wasm_bindgen(method, js_name = call)]
    fn call2(this: &Callable, context: &JsValue, first: &JsValue, second: &JsValue) -> JsValue;
}

/// One work's JavaScript side: what to call, whom to tell, and how to abort it. Plain JS
/// values (`undefined` when spent or absent) rather than `Option`s: one slab slot is read per
/// work, and the smaller it is the fewer cache lines a busy isolate touches.
struct JsJob {
    work: JsValue,
    resolve: JsValue,
    /// Lent out (taken and put back) while the work starts, never cloned: a clone of a JS
    /// value costs a slot in wasm-bindgen's externref table.
    reject: JsValue,
    on_late_settle: JsValue,
    /// `undefined` until started, and after a synchronous settlement.
    controller: JsValue,
}

/// The functions the package's static JS gives the core (see `js/api.js`); none throws.
struct Host {
    /// `start(work, resolve, reject, onLateSettle)`: calls `work(signal)` with a new
    /// AbortController's signal, feeds its outcome to resolve/reject, reports a late settlement
    /// of an aborted work to `onLateSettle`, and returns the controller — or `undefined` when
    /// the work settled synchronously and there is nothing left to abort, so the controller
    /// dies young instead of living until the key advances.
    start: Callable,
    /// `schedule()`: queues one microtask that calls `drain()`.
    schedule: Function,
    /// `timeout(key, timeoutMs)`: a `SerializedWorkTimeout`.
    timeout: Callable,
    /// `contextual`: true on Cloudflare Workers (see [`Shared::contextual`]).
    contextual: bool,
}

struct Shared {
    core: RefCell<SerializerCore<JsJob>>,
    host: Host,
    /// Idle-key works entered since the last drain, in entry order.
    ready: RefCell<Vec<Ticket>>,
    drain_queued: Cell<bool>,
    timer_armed: Cell<bool>,
}

impl Shared {
    /// On Cloudflare Workers each request runs in its own I/O context: I/O a work starts in
    /// another request's context is cancelled when that request ends, and so are its timers.
    /// So there every work is started by a promise reaction its own caller registered (the JS
    /// side: on the previous work's promise, or a microtask for an idle key) and gets its own
    /// deadline timer, armed in its own context — the seed's shape, which workerd runs
    /// correctly. Elsewhere one shared timer and direct starts are cheaper.
    fn contextual(&self) -> bool {
        self.host.contextual
    }
}

/// The engine behind one `createKeyedSerializer()`; the package does not export it.
#[wasm_bindgen]
pub struct KeyedSerializerCore {
    shared: Rc<Shared>,
}

impl core::fmt::Debug for KeyedSerializerCore {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyedSerializerCore")
            .field("core", &self.shared.core)
            .finish()
    }
}

fn host_function(host: &js_sys::Object, name: &str) -> Result<Function, JsValue> {
    optional_function(field(host, name)?, name)?
        .ok_or_else(|| type_error(&["host.", name, " is missing"]))
}

#[wasm_bindgen]
impl KeyedSerializerCore {
    /// `options` as given to `createKeyedSerializer`; `host` from the package's static JS.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue, host: JsValue) -> Result<KeyedSerializerCore, JsValue> {
        let timeout_ms = match options_object(&options, "options")? {
            Some(object) => optional_number(field(&object, "timeoutMs")?, "options.timeoutMs")?,
            None => None,
        }
        .unwrap_or(f64::from(DEFAULT_TIMEOUT_MS));
        let timeout_ms = validate_timeout_ms(timeout_ms).map_err(|_| {
            range_error(&[
                "options.timeoutMs must be a finite number from 1 to 2147483647, got ",
                &spell(timeout_ms),
            ])
        })?;
        let host = options_object(&host, "host")?
            .ok_or_else(|| type_error(&["host must be an object"]))?;
        let host = Host {
            start: host_function(&host, "start")?.unchecked_into(),
            schedule: host_function(&host, "schedule")?,
            timeout: host_function(&host, "timeout")?.unchecked_into(),
            contextual: field(&host, "contextual")?.is_truthy(),
        };
        Ok(KeyedSerializerCore {
            shared: Rc::new(Shared {
                core: RefCell::new(SerializerCore::new(timeout_ms)),
                host,
                ready: RefCell::new(Vec::new()),
                drain_queued: Cell::new(false),
                timer_armed: Cell::new(false),
            }),
        })
    }

    /// Queues `work` under `key`, which the caller knows is idle (it keeps the key → line map
    /// of busy keys), and returns the id of the key's new line, for
    /// [`enqueue_on`](Self::enqueue_on) and [`advance`](Self::advance). Throws (so the caller's
    /// promise rejects) on bad arguments, having changed nothing.
    pub fn enqueue(
        &self,
        key: JsValue,
        work: JsValue,
        options: JsValue,
        resolve: JsValue,
        reject: JsValue,
    ) -> Result<u32, JsValue> {
        let key = key_from_js(&key, "key")?;
        let job = job_from_js(work, &options, resolve, reject)?;
        let shared = &self.shared;
        let opened = shared.core.borrow_mut().open(&key, job);
        let pushed = opened.map_err(|error| key_error("key", error))?;
        if !shared.contextual() {
            shared.ready.borrow_mut().push(pushed.ticket);
            if !shared.drain_queued.replace(true) {
                let _ = shared.host.schedule.call0(&JsValue::UNDEFINED);
            }
        }
        Ok(pushed.line.0)
    }

    /// Queues `work` behind the works of a busy key, by its line id. Returns `false`, having
    /// queued nothing, when that line is idle; throws on bad arguments.
    #[wasm_bindgen(js_name = enqueueOn)]
    pub fn enqueue_on(
        &self,
        line: u32,
        work: JsValue,
        resolve: JsValue,
        reject: JsValue,
    ) -> Result<bool, JsValue> {
        self.enqueue_on_with(line, work, JsValue::UNDEFINED, resolve, reject)
    }

    /// [`enqueue_on`](Self::enqueue_on) with `options`. Two entries rather than one, because
    /// every JS value passed in costs a slot in the externref table, and most calls have none.
    #[wasm_bindgen(js_name = enqueueOnWith)]
    pub fn enqueue_on_with(
        &self,
        line: u32,
        work: JsValue,
        options: JsValue,
        resolve: JsValue,
        reject: JsValue,
    ) -> Result<bool, JsValue> {
        let job = job_from_js(work, &options, resolve, reject)?;
        Ok(self
            .shared
            .core
            .borrow_mut()
            .submit_on(LineId(line), job)
            .is_some())
    }

    /// Starts the idle-key works entered before this microtask, in entry order. `now` is
    /// `performance.now()`, read on the JS side, where it costs no crossing.
    pub fn drain(&self, now: f64) {
        self.shared.drain_queued.set(false);
        let ready = std::mem::take(&mut *self.shared.ready.borrow_mut());
        for ticket in ready {
            start(&self.shared, ticket, now);
        }
    }

    /// The head work of a line is done — its caller promise settled: the next work starts.
    /// Returns whether the key went idle, so the JS side forgets the line id.
    pub fn advance(&self, line: u32, now: f64) -> bool {
        let released = self.shared.core.borrow_mut().finish_head(LineId(line));
        let Some(released) = released else {
            return false;
        };
        if let Some(next) = released.next {
            start(&self.shared, next, now);
        }
        released.idle
    }

    /// Starts the head of a line if it has not started: on Workers, an idle key's first work,
    /// from a microtask its caller queued.
    #[wasm_bindgen(js_name = startHead)]
    pub fn start_head(&self, line: u32, now: f64) {
        let head = self.shared.core.borrow().head(LineId(line));
        if let Some(head) = head {
            start(&self.shared, head, now);
        }
    }

    /// On Workers, from the reaction a work registered on its own promise: if nobody waits
    /// behind the head, it is finished and the key goes idle (returns true). If somebody
    /// waits, their reaction (in their own context) finishes it and starts them.
    #[wasm_bindgen(js_name = finishIfLast)]
    pub fn finish_if_last(&self, line: u32) -> bool {
        let mut core = self.shared.core.borrow_mut();
        let Some(head) = core.head(LineId(line)) else {
            return false;
        };
        if core.next_in_line(head).is_some() {
            return false;
        }
        core.finish(head).is_some_and(|released| released.idle)
    }

    /// Keys with queued or running work.
    pub fn pending(&self) -> u32 {
        self.shared.core.borrow().pending() as u32
    }
}

/// A work and its caller's resolve/reject from JS, checked.
#[inline(never)]
fn job_from_js(
    work: JsValue,
    options: &JsValue,
    resolve: JsValue,
    reject: JsValue,
) -> Result<JsJob, JsValue> {
    if !work.is_function() {
        return Err(type_error(&[
            "work must be a function, got ",
            &describe(&work),
        ]));
    }
    let on_late_settle = match options_object(options, "options")? {
        Some(object) => optional_function(field(&object, "onLateSettle")?, "options.onLateSettle")?
            .map_or(JsValue::UNDEFINED, JsValue::from),
        None => JsValue::UNDEFINED,
    };
    Ok(JsJob {
        work,
        resolve,
        reject,
        on_late_settle,
        controller: JsValue::UNDEFINED,
    })
}

/// Starts the work whose turn came at `now`: its deadline, then `work(signal)` via the host.
fn start(shared: &Rc<Shared>, ticket: Ticket, now: f64) {
    let (work, resolve, reject, on_late_settle) = {
        let mut core = shared.core.borrow_mut();
        let Some(job) = core.start(ticket, now) else {
            return;
        };
        let take = std::mem::take::<JsValue>;
        (
            take(&mut job.work),
            take(&mut job.resolve),
            take(&mut job.reject),
            take(&mut job.on_late_settle),
        )
    };
    if shared.contextual() {
        // Its own timer, in its own request's context (which lives while its caller waits).
        schedule_expiry(shared, Some(ticket), shared.core.borrow().timeout_ms());
    } else if !shared.timer_armed.replace(true) {
        // Nothing else runs (the timer is armed while anything does): this deadline is first.
        schedule_expiry(shared, None, shared.core.borrow().timeout_ms());
    }
    let controller = shared.host.start.call_start(
        &JsValue::UNDEFINED,
        &work,
        resolve.unchecked_ref(),
        reject.unchecked_ref(),
        &on_late_settle,
    );
    // The job is still the head: it leaves only through `advance`, a later microtask.
    if let Some(job) = shared.core.borrow_mut().payload_mut(ticket) {
        job.controller = controller;
        job.reject = reject;
    }
}

/// Arms a deadline timer: the shared one (`work` is `None`), or on Workers one work's own, armed
/// in its own context. One closure type for both, so the wasm carries one copy of the timer
/// machinery. A timer can fire a little before the clock reads the deadline: the shared one
/// re-arms in `expire`; a work's own is armed again here for what is left.
fn schedule_expiry(shared: &Rc<Shared>, work: Option<Ticket>, delay_ms: f64) {
    let weak: Weak<Shared> = Rc::downgrade(shared);
    arm_timer(delay_ms, move || {
        let Some(shared) = weak.upgrade() else { return };
        if work.is_none() {
            shared.timer_armed.set(false);
        }
        expire(&shared);
        let left = work.and_then(|ticket| shared.core.borrow().deadline(ticket));
        if let Some(deadline) = left {
            schedule_expiry(&shared, work, deadline - performance_now());
        }
    });
}

/// The timer fired: abort and reject every work past its deadline (their keys advance when
/// those rejections land), and re-arm for the earliest deadline left.
fn expire(shared: &Rc<Shared>) {
    let now = performance_now();
    let expired = shared.core.borrow_mut().expire(now);
    let timeout_ms = JsValue::from(shared.core.borrow().timeout_ms());
    for ticket in expired {
        let taken = {
            let mut core = shared.core.borrow_mut();
            let key = core.key(ticket).map(|key| JsValue::from_str(key));
            let job = core.payload_mut(ticket);
            let take = std::mem::take::<JsValue>;
            key.zip(job.map(|job| (take(&mut job.controller), take(&mut job.reject))))
        };
        let Some((key, (controller, reject))) = taken else {
            continue;
        };
        if reject.is_undefined() {
            continue; // never: a running job's reject is back in place before any timer fires
        }
        // As the seed: abort first (listeners run now), then reject the caller. A work that
        // settled synchronously left no controller (and cannot be past its deadline anyway).
        if let Some(controller) = controller.dyn_ref::<AbortController>() {
            controller.abort();
        }
        let error = shared
            .host
            .timeout
            .call2(&JsValue::UNDEFINED, &key, &timeout_ms);
        reject
            .unchecked_ref::<Callable>()
            .call1(&JsValue::UNDEFINED, &error);
    }
    let next = shared.core.borrow().next_deadline();
    if let (Some(deadline), false) = (next, shared.contextual()) {
        if !shared.timer_armed.replace(true) {
            schedule_expiry(shared, None, deadline - performance_now());
        }
    }
}
