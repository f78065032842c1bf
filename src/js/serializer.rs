//! `createKeyedSerializer` for JavaScript: [`SerializerCore`] over JS jobs.
//!
//! The package's JS (`js/serializer.js`) drives the core and makes every host call itself —
//! promises, `AbortController`, timers, the works — acting on what the core answers; the core
//! never calls into JavaScript. So nothing the host throws can unwind through wasm with Rust
//! state half changed: each export here runs to completion and returns.
//!
//! A queued work is one JS object (its "job": the work, its caller's resolvers, its controller)
//! held in the core's line. Lines are known by id: the JS keeps the key → line map of busy
//! keys, which spares passing the key string into wasm for every work.

use wasm_bindgen::prelude::*;

use super::host::{reflect_set, HostObject};

use super::errors::{
    describe, field, key_error, key_from_js, optional_number, options_object, range_error, spell,
    type_error,
};
use crate::lock::{LockOptions, LOCK_STALE_MS};
use crate::queue::LineId;
use crate::serializer::{
    Abandon, EnqueueError, SerializerCore, SerializerOptionError, SerializerOptions,
    DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS,
};

/// What [`SerializerBinding::enqueue_on`] answers instead of a ticket: the reason nothing was
/// queued.
const REFUSED_QUEUE_FULL: f64 = -1.0;
const REFUSED_TIMEOUT: f64 = -2.0;
const REFUSED_TOO_MANY: f64 = -3.0;
const REFUSED_IDLE_LINE: f64 = -4.0;

/// Bits of what a line change answers: the line went idle; its (new) head waits to be started.
const IDLE: u32 = 1;
const NEXT: u32 = 2;
/// [`SerializerBinding::cancel`]: the work was not waiting (it runs, or is gone).
const NOT_WAITING: u32 = 4;

/// The engine behind one `createKeyedSerializer()`; the package does not export it.
#[wasm_bindgen]
pub struct SerializerBinding {
    core: SerializerCore<JsValue>,
    /// With a store: the lease of a turn, in milliseconds.
    stale_ms: f64,
}

impl core::fmt::Debug for SerializerBinding {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.core.fmt(f)
    }
}

fn option_error(error: SerializerOptionError) -> JsValue {
    match error {
        SerializerOptionError::TimeoutMs(error) => timeout_error("options.timeoutMs", error.0),
        SerializerOptionError::MaxPending(error) => range_error(&[
            "options.maxPending must be a whole number from 1 up, or Infinity, got ",
            &spell(error.0),
        ]),
    }
}

fn timeout_error(what: &str, value: f64) -> JsValue {
    range_error(&[
        what,
        " must be a finite number from 1 to ",
        &spell(f64::from(MAX_TIMEOUT_MS)),
        ", got ",
        &spell(value),
    ])
}

/// The timeout a JS call passed: `NaN` stands for none (the serializer's).
fn own_timeout(timeout_ms: f64) -> Option<f64> {
    (!timeout_ms.is_nan()).then_some(timeout_ms)
}

fn line_change(next: bool, idle: bool) -> u32 {
    (if idle { IDLE } else { 0 }) | (if next { NEXT } else { 0 })
}

#[wasm_bindgen]
impl SerializerBinding {
    /// `options` as given to `createKeyedSerializer` (its `timeoutMs` and `maxPending`; the
    /// JS reads the rest); `shared_timer`: one timer for every deadline (else one per work).
    /// Throws a `TypeError`/`RangeError` naming the option.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue, shared_timer: bool) -> Result<SerializerBinding, JsValue> {
        let (timeout_ms, max_pending, stale_ms) = match options_object(&options, "options")? {
            Some(object) => (
                optional_number(field(&object, "timeoutMs")?, "options.timeoutMs")?,
                optional_number(field(&object, "maxPending")?, "options.maxPending")?,
                optional_number(field(&object, "staleMs")?, "options.staleMs")?,
            ),
            None => (None, None, None),
        };
        // With a store, the lease a turn holds: checked as the lock checks it, in its words.
        let stale_ms = stale_ms.unwrap_or(f64::from(LOCK_STALE_MS));
        LockOptions {
            wait_ms: 0.0,
            stale_ms,
        }
        .validate()
        .map_err(|error| range_error(&["options.", error.message()]))?;
        let options = SerializerOptions::new(
            timeout_ms.unwrap_or(f64::from(DEFAULT_TIMEOUT_MS)),
            max_pending.unwrap_or(f64::INFINITY),
        )
        .map_err(option_error)?;
        Ok(SerializerBinding {
            core: SerializerCore::new(options, shared_timer),
            stale_ms,
        })
    }

    /// The serializer's deadline for works without their own, in milliseconds.
    #[wasm_bindgen(js_name = timeoutMs)]
    pub fn timeout_ms(&self) -> f64 {
        self.core.options().timeout_ms()
    }

    /// With a store: the lease a turn holds, in milliseconds (`options.staleMs`, checked).
    #[wasm_bindgen(js_name = staleMs)]
    pub fn stale_ms(&self) -> f64 {
        self.stale_ms
    }

    /// The bound on a key's works (`Infinity` for none).
    #[wasm_bindgen(js_name = maxPending)]
    pub fn max_pending(&self) -> f64 {
        match self.core.options().max_pending() {
            usize::MAX => f64::INFINITY,
            max => max as f64,
        }
    }

    /// Queues `job` under `key`, which the JS knows is idle, with its own deadline
    /// (`timeout_ms`, `NaN` for the serializer's), and answers the id of the key's new line.
    /// Its head — this job — waits to be started. Throws for a bad key or deadline, having
    /// changed nothing.
    pub fn open(&mut self, key: JsValue, job: JsValue, timeout_ms: f64) -> Result<u32, JsValue> {
        let key = key_from_js(&key, "key")?;
        match self.core.open(&key, job, own_timeout(timeout_ms)) {
            Ok(pushed) => Ok(pushed.line.0),
            Err(EnqueueError::InvalidKey(error)) => Err(key_error("key", error)),
            Err(EnqueueError::InvalidTimeout(error)) => {
                Err(timeout_error("options.timeoutMs", error.0))
            }
            Err(_) => Err(too_many_works()),
        }
    }

    /// Checks `key` as [`open`](Self::open) would, queueing nothing: for a call refused before
    /// it queues (its signal was aborted already), whose bad key must still be reported.
    #[wasm_bindgen(js_name = checkKey)]
    pub fn check_key(key: JsValue) -> Result<(), JsValue> {
        key_from_js(&key, "key").map(|_| ())
    }

    /// Queues `job` behind the works of the busy line `line`: its ticket (a number ≥ 0), or
    /// why nothing was queued (a negative number: the key is at `maxPending`, the deadline is
    /// out of range, too many works, the line is idle).
    #[wasm_bindgen(js_name = enqueueOn)]
    pub fn enqueue_on(&mut self, line: u32, job: JsValue, timeout_ms: f64) -> f64 {
        match self
            .core
            .enqueue_on(LineId(line), job, own_timeout(timeout_ms))
        {
            Ok(ticket) => ticket.pack(),
            Err(EnqueueError::QueueFull { .. }) => REFUSED_QUEUE_FULL,
            Err(EnqueueError::InvalidTimeout(_)) => REFUSED_TIMEOUT,
            Err(EnqueueError::IdleLine) => REFUSED_IDLE_LINE,
            Err(_) => REFUSED_TOO_MANY,
        }
    }

    /// The error for a call's `options.timeoutMs` that is not a number in range.
    #[wasm_bindgen(js_name = timeoutError)]
    pub fn js_timeout_error(value: JsValue) -> JsValue {
        match value.as_f64() {
            Some(value) => timeout_error("options.timeoutMs", value),
            None => wrong_type("options.timeoutMs", "a number or undefined", &value),
        }
    }

    /// The error for a `work` that is not a function.
    #[wasm_bindgen(js_name = workError)]
    pub fn work_error(value: JsValue) -> JsValue {
        wrong_type("work", "a function", &value)
    }

    /// The error for a call's `options` that is not an object.
    #[wasm_bindgen(js_name = optionsError)]
    pub fn options_error(value: JsValue) -> JsValue {
        wrong_type("options", "an object or undefined", &value)
    }

    /// The error for a call's `options.signal` that is not an `AbortSignal`.
    #[wasm_bindgen(js_name = signalError)]
    pub fn signal_error(value: JsValue) -> JsValue {
        wrong_type("options.signal", "an AbortSignal or undefined", &value)
    }

    /// The error for a call's `options.onLateSettle` that is not a function.
    #[wasm_bindgen(js_name = onLateSettleError)]
    pub fn on_late_settle_error(value: JsValue) -> JsValue {
        wrong_type("options.onLateSettle", "a function or undefined", &value)
    }

    /// The error for too many works queued at once.
    #[wasm_bindgen(js_name = tooManyWorks)]
    pub fn too_many_works_error() -> JsValue {
        too_many_works()
    }

    /// The ticket of a line's head (for a job that may be cancelled).
    #[wasm_bindgen(js_name = headTicket)]
    pub fn head_ticket(&self, line: u32) -> f64 {
        self.core
            .head(LineId(line))
            .map_or(-1.0, |ticket| ticket.pack())
    }

    /// Starts the head of `line` at `now` if it waits to be started: answers its job, else
    /// `undefined`. The JS then arms its deadline and calls its work.
    #[wasm_bindgen(js_name = startHead)]
    pub fn start_head(&mut self, line: u32, now: f64) -> JsValue {
        match self.core.start_head(LineId(line), now) {
            Some(started) => started.payload.clone(),
            None => JsValue::UNDEFINED,
        }
    }

    /// The head of `line` left it (its caller's promise settled): answers [`IDLE`] when the
    /// key went idle, [`NEXT`] when a next work waits to be started.
    #[wasm_bindgen(js_name = finishHead)]
    pub fn finish_head(&mut self, line: u32) -> u32 {
        match self.core.finish_head(LineId(line)) {
            Some(released) => line_change(released.next.is_some(), released.idle),
            None => IDLE,
        }
    }

    /// A work (by ticket) left its line — its caller's promise settled — with a timer per
    /// work: answers as [`finish_head`](Self::finish_head) (0 for a work no longer queued).
    #[wasm_bindgen(js_name = finishTicket)]
    pub fn finish_ticket(&mut self, ticket: f64) -> u32 {
        let released = self
            .core
            .unpack(ticket)
            .and_then(|ticket| self.core.finish(ticket));
        released.map_or(0, |released| {
            line_change(released.next.is_some(), released.idle)
        })
    }

    /// Takes a waiting work (by ticket) out of its line: its caller gave up. Answers as
    /// [`finish_head`](Self::finish_head), or [`NOT_WAITING`] when it is not waiting.
    pub fn cancel(&mut self, ticket: f64) -> u32 {
        let Some(ticket) = self.core.unpack(ticket) else {
            return NOT_WAITING;
        };
        if !self.core.is_waiting(ticket) {
            return NOT_WAITING;
        }
        match self.core.finish(ticket) {
            Some(released) => line_change(released.next.is_some(), released.idle),
            None => NOT_WAITING,
        }
    }

    /// Gives up on the running head of `line`: its deadline passed (`aborted` false; with a
    /// timer per work), or its caller's signal aborted. `false` when it is not running.
    pub fn abandon(&mut self, line: u32, aborted: bool) -> bool {
        let why = if aborted {
            Abandon::Aborted
        } else {
            Abandon::TimedOut
        };
        self.core
            .head(LineId(line))
            .is_some_and(|head| self.core.abandon(head, why))
    }

    /// With a shared timer: the job of a running work whose deadline is at or before `now`,
    /// abandoned as timed out; `undefined` when none is. Call until `undefined`.
    #[wasm_bindgen(js_name = expireNext)]
    pub fn expire_next(&mut self, now: f64) -> JsValue {
        let Some(ticket) = self.core.expire(now) else {
            return JsValue::UNDEFINED;
        };
        self.core.payload(ticket).cloned().unwrap_or_default()
    }

    /// With a shared timer: the earliest deadline of a running work (`Infinity` for none).
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&mut self) -> f64 {
        self.core.next_deadline().unwrap_or(f64::INFINITY)
    }

    /// With a shared timer whose arming the host refused: the running work with the earliest
    /// deadline, abandoned (it cannot be bounded), for the JS to fail with the host's error;
    /// `undefined` when none runs.
    #[wasm_bindgen(js_name = abandonEarliest)]
    pub fn abandon_earliest(&mut self) -> JsValue {
        let Some(ticket) = self.core.earliest() else {
            return JsValue::UNDEFINED;
        };
        self.core.abandon(ticket, Abandon::TimedOut);
        self.core.payload(ticket).cloned().unwrap_or_default()
    }

    /// In contextual mode, the job right ahead of a waiting one (whose settlement it waits for).
    #[wasm_bindgen(js_name = jobAhead)]
    pub fn job_ahead(&self, ticket: f64) -> JsValue {
        self.core
            .unpack(ticket)
            .and_then(|ticket| self.core.ahead_of(ticket))
            .and_then(|ahead| self.core.payload(ahead).cloned())
            .unwrap_or_default()
    }

    /// Whether the work of `ticket` is the head of its line.
    #[wasm_bindgen(js_name = isHead)]
    pub fn is_head(&self, ticket: f64) -> bool {
        self.core
            .unpack(ticket)
            .is_some_and(|ticket| self.core.is_head(ticket))
    }

    /// An abandoned work settled after all.
    #[wasm_bindgen(js_name = lateSettled)]
    pub fn late_settled(&mut self) {
        self.core.late_settled();
    }

    /// Works of `line` queued or running (abandoned ones not counted).
    #[wasm_bindgen(js_name = pendingIn)]
    pub fn pending_in(&self, line: u32) -> u32 {
        self.core.pending_in(LineId(line)) as u32
    }

    /// Keys with queued or running work.
    pub fn keys(&self) -> u32 {
        self.core.keys() as u32
    }

    /// `stats()`: counters since creation, and what is live now.
    pub fn stats(&self) -> Result<JsValue, JsValue> {
        let stats = self.core.stats();
        let object: JsValue = HostObject::new().into();
        let fields: [(&str, f64); 8] = [
            ("keys", stats.keys as f64),
            ("running", stats.running as f64),
            ("waiting", stats.waiting as f64),
            ("started", stats.started as f64),
            ("timedOut", stats.timed_out as f64),
            ("aborted", stats.aborted as f64),
            ("refused", stats.refused as f64),
            ("lateSettled", stats.late_settled as f64),
        ];
        for (name, value) in fields {
            reflect_set(&object, &JsValue::from_str(name), &JsValue::from_f64(value))?;
        }
        Ok(object)
    }
}

fn wrong_type(what: &str, expected: &str, value: &JsValue) -> JsValue {
    type_error(&[what, " must be ", expected, ", got ", &describe(value)])
}

fn too_many_works() -> JsValue {
    range_error(&["too many works are queued in this isolate"])
}
