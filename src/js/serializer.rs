//! `createKeyedSerializer`'s engine: [`SerializerCore`] over JS jobs.
//!
//! The package's JS (`js/serializer/`) drives the core and makes every host call itself —
//! promises, `AbortController`, timers, the works — acting on what the core answers, and builds
//! every error from the codes here and the texts in `constants.js`. Each export runs to
//! completion and returns; none calls into JavaScript.
//!
//! A queued work is one JS object (its job) held in the core's line. Lines are known by id: the
//! JS keeps the key → line map of busy keys, which spares passing the key into wasm per work.

use wasm_bindgen::prelude::*;

use crate::key::{validate_key, KeyError};
use crate::queue::LineId;
use crate::serializer::{
    Abandon, Coalesce, EnqueueError, SerializerCore, SerializerOptionError, SerializerOptions,
};
use crate::wire::serializer::{
    BAD_MAX_PENDING, BAD_TIMEOUT, IDLE, IDLE_LINE, KEY_EMPTY, KEY_TOO_LONG, NEXT, NOT_WAITING,
    QUEUE_FULL, TOO_MANY,
};

/// The engine behind one `createKeyedSerializer()`; the package does not export it.
#[wasm_bindgen]
pub struct SerializerBinding {
    core: SerializerCore<JsValue>,
}

impl core::fmt::Debug for SerializerBinding {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.core.fmt(f)
    }
}

/// The timeout a JS call passed: `NaN` stands for none (the serializer's).
fn own_timeout(timeout_ms: f64) -> Option<f64> {
    (!timeout_ms.is_nan()).then_some(timeout_ms)
}

/// The group a JS call coalesces in: none (`undefined`: `coalesce` false or absent), `true`
/// (`""`: a group name is never empty), or the named group.
fn coalesce_of(group: Option<String>) -> Coalesce {
    match group {
        None => Coalesce::Never,
        Some(name) if name.is_empty() => Coalesce::Yes,
        Some(name) => Coalesce::Group(name.into()),
    }
}

fn line_change(next: bool, idle: bool) -> u32 {
    (if idle { IDLE as u32 } else { 0 }) | (if next { NEXT as u32 } else { 0 })
}

fn refusal(error: EnqueueError) -> f64 {
    match error {
        EnqueueError::QueueFull { .. } => QUEUE_FULL,
        EnqueueError::InvalidTimeout(_) => BAD_TIMEOUT,
        EnqueueError::InvalidKey(KeyError::Empty) => KEY_EMPTY,
        EnqueueError::InvalidKey(KeyError::TooLong(_)) => KEY_TOO_LONG,
        EnqueueError::TooManyWorks => TOO_MANY,
        EnqueueError::IdleLine => IDLE_LINE,
    }
}

#[wasm_bindgen]
impl SerializerBinding {
    /// Checks a serializer's `timeoutMs` and `maxPending` (numbers: the JS checked their
    /// types): 0, or the refusal code of the first out of range.
    #[wasm_bindgen(js_name = checkOptions)]
    pub fn check_options(timeout_ms: f64, max_pending: f64) -> f64 {
        match SerializerOptions::new(timeout_ms, max_pending) {
            Ok(_) => 0.0,
            Err(SerializerOptionError::TimeoutMs(_)) => BAD_TIMEOUT,
            Err(SerializerOptionError::MaxPending(_)) => BAD_MAX_PENDING,
        }
    }

    /// A serializer with options [`check_options`](Self::check_options) took (others fall back
    /// to the defaults); `shared_timer`: one timer for every deadline (else one per work);
    /// `calls_at_start`: works are called as soon as they start (else the JS says when, with
    /// [`called`](Self::called): with a store, once the lease is held).
    #[wasm_bindgen(constructor)]
    pub fn new(
        timeout_ms: f64,
        max_pending: f64,
        shared_timer: bool,
        calls_at_start: bool,
    ) -> SerializerBinding {
        let options = SerializerOptions::new(timeout_ms, max_pending).unwrap_or_default();
        SerializerBinding {
            core: SerializerCore::new(options, shared_timer, calls_at_start),
        }
    }

    /// The running head of `line` had its work called.
    pub fn called(&mut self, line: u32) {
        self.core.called(LineId(line));
    }

    /// The serializer's deadline for works without their own, in milliseconds.
    #[wasm_bindgen(js_name = timeoutMs)]
    pub fn timeout_ms(&self) -> f64 {
        self.core.options().timeout_ms()
    }

    /// The bound on a key's works (`Infinity` for none).
    #[wasm_bindgen(js_name = maxPending)]
    pub fn max_pending(&self) -> f64 {
        match self.core.options().max_pending() {
            usize::MAX => f64::INFINITY,
            max => max as f64,
        }
    }

    /// Checks `key` as [`open`](Self::open) would, queueing nothing: 0, or its refusal code
    /// (for a call refused before it queues, whose bad key must still be reported).
    #[wasm_bindgen(js_name = checkKey)]
    pub fn check_key(key: &str) -> f64 {
        match validate_key(key) {
            Ok(()) => 0.0,
            Err(error) => refusal(EnqueueError::InvalidKey(error)),
        }
    }

    /// Queues `job` under `key`, which the JS knows is idle, with its own deadline
    /// (`timeout_ms`, `NaN` for the serializer's), joinable by calls of its coalescing `group`
    /// (see `coalesce_of`): the id of the key's new line (≥ 0), whose head — this job — waits
    /// to be started; or a refusal code (negative), nothing queued.
    pub fn open(&mut self, key: &str, job: JsValue, timeout_ms: f64, group: Option<String>) -> f64 {
        match self
            .core
            .open(key, job, own_timeout(timeout_ms), coalesce_of(group))
        {
            Ok(pushed) => f64::from(pushed.line.0),
            Err(error) => refusal(error),
        }
    }

    /// Queues `job` behind the works of the busy line `line`, as [`open`](Self::open): its
    /// ticket (≥ 0), or a refusal code (negative), nothing queued.
    #[wasm_bindgen(js_name = enqueueOn)]
    pub fn enqueue_on(
        &mut self,
        line: u32,
        job: JsValue,
        timeout_ms: f64,
        group: Option<String>,
    ) -> f64 {
        match self.core.enqueue_on(
            LineId(line),
            job,
            own_timeout(timeout_ms),
            coalesce_of(group),
        ) {
            Ok(ticket) => ticket.pack(),
            Err(error) => refusal(error),
        }
    }

    /// A call coalescing in `group` (`""` for `true`) under the busy line `line`, with its own
    /// deadline or `NaN`: the job it joined (now one more caller's), `undefined` when it joins
    /// none (it queues with [`enqueue_on`](Self::enqueue_on)), or a refusal code (a number).
    pub fn join(&mut self, line: u32, group: String, timeout_ms: f64) -> JsValue {
        let coalesce = coalesce_of(Some(group));
        match self
            .core
            .join(LineId(line), &coalesce, own_timeout(timeout_ms))
        {
            Ok(Some(ticket)) => self.core.payload(ticket).cloned().unwrap_or_default(),
            Ok(None) => JsValue::UNDEFINED,
            Err(error) => JsValue::from_f64(refusal(error)),
        }
    }

    /// One caller of a job (by ticket) left it: `true` while others remain (the job stays),
    /// `false` when it was the last — the JS then cancels or abandons the job.
    pub fn leave(&mut self, ticket: f64) -> bool {
        self.core
            .unpack(ticket)
            .is_some_and(|ticket| self.core.leave(ticket))
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

    /// Starts the work of `ticket` if it is the head of its line and waits to be started (with
    /// a timer per work: no deadline is ordered). Whether it started.
    #[wasm_bindgen(js_name = startTicket)]
    pub fn start_ticket(&mut self, ticket: f64) -> bool {
        let head = self
            .core
            .unpack(ticket)
            .filter(|&ticket| self.core.is_head(ticket))
            .and_then(|ticket| self.core.line_of(ticket));
        head.is_some_and(|line| self.core.start_head(line, 0.0).is_some())
    }

    /// The head of `line` left it (its caller's promise settled): answers `IDLE` when the key
    /// went idle, `NEXT` when a next work waits to be started.
    #[wasm_bindgen(js_name = finishHead)]
    pub fn finish_head(&mut self, line: u32) -> u32 {
        match self.core.finish_head(LineId(line)) {
            Some(released) => line_change(released.next.is_some(), released.idle),
            None => IDLE as u32,
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
    /// [`finish_head`](Self::finish_head), or `NOT_WAITING` when it is not waiting.
    pub fn cancel(&mut self, ticket: f64) -> u32 {
        let not_waiting = NOT_WAITING as u32;
        let Some(ticket) = self.core.unpack(ticket) else {
            return not_waiting;
        };
        if !self.core.is_waiting(ticket) {
            return not_waiting;
        }
        match self.core.finish(ticket) {
            Some(released) => line_change(released.next.is_some(), released.idle),
            None => not_waiting,
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

    /// With a timer per work, the job right ahead of a waiting one (whose settlement it waits
    /// for).
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

    /// `stats()`'s values, in the order of `constants.js`'s `STATS`.
    pub fn stats(&self) -> Vec<f64> {
        self.core.stats().values().to_vec()
    }
}
