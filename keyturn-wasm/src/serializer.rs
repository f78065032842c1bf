//! `createKeyedSerializer`'s engine: [`SerializerCore`] over JS jobs and, with a store, the
//! [`Turns`] of its leases — the handle `js/serializer/` drives.
//!
//! The JS makes every host call itself — promises, `AbortController`, timers, the works, the
//! lock module's acquisitions — on what this answers, and builds every error from the codes of
//! [`wire`](crate::wire) and the crate's texts. Each export runs to completion and returns;
//! none calls into JavaScript.
//!
//! A queued work is one JS object (its job), which the core knows by the number the JS holds it
//! under (its `slot`: the JS keeps the objects, so that nothing of them is left in wasm when an
//! instance fails). Lines are known by id: the JS keeps the key → line map of busy keys, which
//! spares passing the key into wasm per work.
//! The same id is the slot of the key's lease in the turns: unique among busy keys, and the
//! key's lease is taken before its line goes idle.

use wasm_bindgen::prelude::*;

use keyturn::machine::{Abandon, EnqueueError, LineId, SerializerCore, Ticket, Turns};
use keyturn::{validate_key, Coalesce, LockOptions, SerializerOptionError, SerializerOptions};

use crate::interop;
use crate::wire::serializer::IDLE;
use crate::wire::turns::{NONE, RELEASE_FIRST};

/// The group a JS call coalesces in: none (`undefined`: `coalesce` false or absent), `true`
/// (`""`: a group name is never empty), or the named group.
fn coalesce_of(group: Option<String>) -> Coalesce {
    match group {
        None => Coalesce::Never,
        Some(name) if name.is_empty() => Coalesce::Yes,
        Some(name) => Coalesce::Group(name.into()),
    }
}

/// A serializer's options as the caller gave them, `None` for each it left out.
fn options(
    timeout_ms: Option<f64>,
    max_pending: Option<f64>,
    concurrency: Option<f64>,
) -> Result<SerializerOptions, SerializerOptionError> {
    let options = SerializerOptions::given(timeout_ms, max_pending)?;
    concurrency.map_or(Ok(options), |n| options.with_concurrency(n))
}

/// What the last [`SerializerBinding::begin_turn`] answered besides the lease to hand on.
#[derive(Debug, Default)]
struct TurnView {
    followers: u32,
    streak_ms: f64,
    wait_ms: f64,
}

/// The engine behind one `createKeyedSerializer()`; the package does not export it.
#[wasm_bindgen]
pub struct SerializerBinding {
    core: SerializerCore<u32>,
    /// With a store: the leases its turns left for the next turn of their key.
    turns: Option<Turns<JsValue>>,
    /// The deadline of the work [`start_next`](Self::start_next) last started.
    deadline: f64,
    /// The slot of the work last started.
    slot: u16,
    turn: TurnView,
}

impl core::fmt::Debug for SerializerBinding {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.core.fmt(f)
    }
}

impl SerializerBinding {
    fn ticket_of(&self, packed: f64) -> Option<Ticket> {
        self.core.unpack(packed)
    }

    /// Whether the work of `ticket` no longer runs for its caller: abandoned (its deadline
    /// passed, or its caller gave up on it), or out of its line already.
    fn given_up(&self, ticket: f64) -> bool {
        self.ticket_of(ticket)
            .is_none_or(|ticket| self.core.is_abandoned(ticket))
    }
}

#[wasm_bindgen]
impl SerializerBinding {
    /// Checks a serializer's `timeoutMs`, `maxPending` and `concurrency` as the caller gave
    /// them (numbers or `undefined`: the JS checked their types): 0, or the refusal code of the
    /// first out of range.
    #[wasm_bindgen(js_name = checkOptions)]
    pub fn check_options(
        timeout_ms: Option<f64>,
        max_pending: Option<f64>,
        concurrency: Option<f64>,
    ) -> f64 {
        match options(timeout_ms, max_pending, concurrency) {
            Ok(_) => 0.0,
            Err(error) => interop::serializer_refusal(error),
        }
    }

    /// Checks the lease options of a serializer over a store as the caller gave them: 0, or
    /// the lock's refusal code for the first out of range.
    #[wasm_bindgen(js_name = checkLease)]
    pub fn check_lease(
        stale_ms: Option<f64>,
        max_clock_skew_ms: Option<f64>,
        store_timeout_ms: Option<f64>,
    ) -> f64 {
        match Turns::<()>::new(lease(stale_ms, max_clock_skew_ms, store_timeout_ms)) {
            Ok(_) => 0.0,
            Err(error) => interop::option_refusal(error),
        }
    }

    /// Checks a call refused before it queues (its signal had aborted), whose bad arguments
    /// must still be reported: 0, or the refusal code of its key or deadline.
    #[wasm_bindgen(js_name = checkCall)]
    pub fn check_call(key: &str, timeout_ms: Option<f64>) -> f64 {
        if let Err(error) = validate_key(key) {
            return interop::enqueue_refusal(EnqueueError::InvalidKey(error));
        }
        match timeout_ms.map(|ms| options(Some(ms), None, None)) {
            Some(Err(error)) => interop::serializer_refusal(error),
            _ => 0.0,
        }
    }

    /// A serializer with options [`check_options`](Self::check_options) took (others fall back
    /// to the defaults); `shared_timer`: one timer for every deadline (else one per work);
    /// `leased`: its turns hold the key's lease in a store, with the lease options
    /// [`check_lease`](Self::check_lease) took — a work is then called once its lease is held
    /// ([`called`](Self::called)), else as soon as it starts.
    #[wasm_bindgen(constructor)]
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        timeout_ms: Option<f64>,
        max_pending: Option<f64>,
        concurrency: Option<f64>,
        shared_timer: bool,
        leased: bool,
        stale_ms: Option<f64>,
        max_clock_skew_ms: Option<f64>,
        store_timeout_ms: Option<f64>,
    ) -> SerializerBinding {
        let options = options(timeout_ms, max_pending, concurrency).unwrap_or_default();
        let turns = leased
            .then(|| Turns::new(lease(stale_ms, max_clock_skew_ms, store_timeout_ms)).ok())
            .flatten();
        SerializerBinding {
            core: SerializerCore::new(options, shared_timer, !leased),
            turns,
            deadline: f64::INFINITY,
            slot: 0,
            turn: TurnView::default(),
        }
    }

    /// Most works of one key that run at once.
    pub fn concurrency(&self) -> u32 {
        self.core.concurrency() as u32
    }

    /// The bound on a key's works (`Infinity` for none), for `SerializedQueueFull`.
    #[wasm_bindgen(js_name = maxPending)]
    pub fn max_pending(&self) -> f64 {
        match self.core.options().max_pending() {
            usize::MAX => f64::INFINITY,
            max => max as f64,
        }
    }

    /// Queues the job held as `job` under `key`, which the JS knows is idle, with its own deadline
    /// (`undefined` for the serializer's), joinable by calls of its coalescing `group` (see
    /// `coalesce_of`): the id of the key's new line (≥ 0), whose head — this job — waits to be
    /// started; or a refusal code (negative), nothing queued.
    pub fn open(
        &mut self,
        key: &str,
        job: u32,
        timeout_ms: Option<f64>,
        group: Option<String>,
    ) -> f64 {
        match self.core.open(key, job, timeout_ms, coalesce_of(group)) {
            Ok(pushed) => f64::from(pushed.line.0),
            Err(error) => interop::enqueue_refusal(error),
        }
    }

    /// Queues the job held as `job` behind the works of the busy line `line`, as
    /// [`open`](Self::open): its
    /// ticket (≥ 0), or a refusal code (negative), nothing queued. Whether its turn came at
    /// once (fewer than `concurrency` works ahead of it): [`turn_came`](Self::turn_came).
    #[wasm_bindgen(js_name = enqueueOn)]
    pub fn enqueue_on(
        &mut self,
        line: u32,
        job: u32,
        timeout_ms: Option<f64>,
        group: Option<String>,
    ) -> f64 {
        match self
            .core
            .enqueue_on(LineId(line), job, timeout_ms, coalesce_of(group))
        {
            Ok(ticket) => ticket.pack(),
            Err(error) => interop::enqueue_refusal(error),
        }
    }

    /// A call coalescing in `group` (`""` for `true`) under the busy line `line`, with its own
    /// deadline (`undefined` for the serializer's): the number of the job it joined (now one more
    /// caller's),
    /// or `undefined` when it joins none — it then queues with
    /// [`enqueue_on`](Self::enqueue_on), which refuses a bad deadline.
    pub fn join(&mut self, line: u32, group: String, timeout_ms: Option<f64>) -> Option<u32> {
        let coalesce = coalesce_of(Some(group));
        let ticket = self.core.join(LineId(line), &coalesce, timeout_ms).ok()??;
        self.core.payload(ticket).copied()
    }

    /// One caller of a job (by ticket) left it: `true` while others remain (the job stays),
    /// `false` when it was the last — the JS then gives up on the job
    /// ([`give_up`](Self::give_up)).
    pub fn leave(&mut self, ticket: f64) -> bool {
        self.ticket_of(ticket)
            .is_some_and(|ticket| self.core.leave(ticket))
    }

    /// The ticket of a line's head.
    #[wasm_bindgen(js_name = headTicket)]
    pub fn head_ticket(&self, line: u32) -> f64 {
        self.core
            .head(LineId(line))
            .map_or(-1.0, |ticket| ticket.pack())
    }

    /// Whether the turn of a queued job (by ticket) has come: fewer than `concurrency` works
    /// are ahead of it.
    #[wasm_bindgen(js_name = turnCame)]
    pub fn turn_came(&self, ticket: f64) -> bool {
        self.ticket_of(ticket)
            .is_some_and(|ticket| self.core.turn_has_come(ticket))
    }

    /// Starts the next work of `line` at `now` if its turn has come: answers its job's number,
    /// whose deadline is then [`deadline`](Self::deadline) and slot [`slot`](Self::slot); else
    /// `undefined`. The JS then arms its deadline's timer and calls its work.
    #[wasm_bindgen(js_name = startNext)]
    pub fn start_next(&mut self, line: u32, now: f64) -> Option<u32> {
        let started = self.core.start_next(LineId(line), now)?;
        self.deadline = started.deadline;
        self.slot = started.slot;
        Some(*started.payload)
    }

    /// The deadline of the work [`start_next`](Self::start_next) last started.
    pub fn deadline(&self) -> f64 {
        self.deadline
    }

    /// The slot of the work last started (0 … `concurrency` − 1).
    pub fn slot(&self) -> u32 {
        u32::from(self.slot)
    }

    /// Starts the work of `ticket` if it is its line's next to start and its turn has come
    /// (with a timer per work: no deadline is ordered): answers how long its deadline's timer
    /// runs, in milliseconds, its slot then [`slot`](Self::slot); `undefined` when it did not
    /// start.
    #[wasm_bindgen(js_name = startTicket)]
    pub fn start_ticket(&mut self, ticket: f64) -> Option<f64> {
        let ticket = self.ticket_of(ticket)?;
        let started = self.core.start(ticket, 0.0)?;
        self.slot = started.slot;
        Some(started.timeout_ms)
    }

    /// Whether a job (by ticket) may start now: its turn has come and every job ahead of it
    /// has started.
    #[wasm_bindgen(js_name = mayStart)]
    pub fn may_start(&self, ticket: f64) -> bool {
        self.ticket_of(ticket)
            .is_some_and(|ticket| self.core.may_start(ticket))
    }

    /// Whether a job (by ticket) still waits in its line: queued, not started.
    pub fn waits(&self, ticket: f64) -> bool {
        self.ticket_of(ticket)
            .is_some_and(|ticket| self.core.is_waiting(ticket))
    }

    /// The head of `line` left it (its caller's promise settled; at `concurrency` 1): answers
    /// `IDLE` when the key went idle, `NEXT` when a next work waits to be started.
    #[wasm_bindgen(js_name = finishHead)]
    pub fn finish_head(&mut self, line: u32) -> u32 {
        self.core
            .finish_head(LineId(line))
            .map_or(IDLE as u32, |released| interop::line_change(&released))
    }

    /// A started work (by ticket) left its line — its caller's promise settled — with a timer
    /// per work: answers as [`finish_head`](Self::finish_head); `undefined` for a work that
    /// never started (it left its line waiting, and nothing of it is left to finish).
    #[wasm_bindgen(js_name = finishTicket)]
    pub fn finish_ticket(&mut self, ticket: f64) -> Option<u32> {
        let ticket = self.ticket_of(ticket)?;
        if !self.core.has_started(ticket) {
            return None;
        }
        self.core
            .finish(ticket)
            .map(|released| interop::line_change(&released))
    }

    /// The caller of a work (by ticket) gave up on it — its signal aborted, or a coalescing
    /// work's last caller left: `LEFT` with the line's change when it was waiting (it left its
    /// line), `ABANDONED` when it was running, 0 when neither.
    #[wasm_bindgen(js_name = giveUp)]
    pub fn give_up(&mut self, ticket: f64) -> u32 {
        self.ticket_of(ticket)
            .map_or(0, |ticket| interop::gave_up(self.core.give_up(ticket)))
    }

    /// The deadline of a running work (by ticket) passed — its own timer's, or its lease
    /// wait's: abandoned as timed out. Whether it was running.
    #[wasm_bindgen(js_name = timeOut)]
    pub fn time_out(&mut self, ticket: f64) -> bool {
        self.ticket_of(ticket)
            .is_some_and(|ticket| self.core.abandon(ticket, Abandon::TimedOut))
    }

    /// With a shared timer: the number of the job of a running work whose deadline is at or before `now`,
    /// abandoned as timed out; `undefined` when none is. Call until `undefined`.
    #[wasm_bindgen(js_name = expireNext)]
    pub fn expire_next(&mut self, now: f64) -> Option<u32> {
        let ticket = self.core.expire(now)?;
        self.core.payload(ticket).copied()
    }

    /// With a shared timer: the earliest deadline of a running work (`Infinity` for none).
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&mut self) -> f64 {
        self.core.next_deadline().unwrap_or(f64::INFINITY)
    }

    /// With a shared timer whose arming the host refused: the running work with the earliest
    /// deadline, abandoned (it cannot be bounded), for the JS to fail with the host's error (its
    /// job's number);
    /// `undefined` when none runs.
    #[wasm_bindgen(js_name = abandonEarliest)]
    pub fn abandon_earliest(&mut self) -> Option<u32> {
        let ticket = self.core.earliest()?;
        self.core.abandon(ticket, Abandon::TimedOut);
        self.core.payload(ticket).copied()
    }

    /// With a timer per work, the number of the job right ahead of a waiting one (whose
    /// settlement it waits for); `undefined` for none — it is the head, or not in its line.
    #[wasm_bindgen(js_name = jobAhead)]
    pub fn job_ahead(&self, ticket: f64) -> Option<u32> {
        let ahead = self.core.ahead_of(self.ticket_of(ticket)?)?;
        self.core.payload(ahead).copied()
    }

    /// A queued or running work's deadline length, in milliseconds: its own or the
    /// serializer's; `undefined` for a work no longer in its line.
    #[wasm_bindgen(js_name = timeoutOf)]
    pub fn timeout_of(&self, ticket: f64) -> Option<f64> {
        self.core.timeout_of(self.ticket_of(ticket)?)
    }

    /// A running job (by ticket) had its work called (with a store: once its lease is held).
    pub fn called(&mut self, ticket: f64) {
        if let Some(ticket) = self.ticket_of(ticket) {
            self.core.called(ticket);
        }
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
        interop::serializer_stats(&self.core.stats())
    }

    // ---- the turns of a serializer over a store ----

    /// The running work of `ticket` starts its turn: answers the lease to hand on once its
    /// acquisition is in line (`undefined` for none), announcing
    /// [`turn_followers`](Self::turn_followers); the acquisition waits
    /// [`turn_wait_ms`](Self::turn_wait_ms) with streaks of
    /// [`turn_streak_ms`](Self::turn_streak_ms).
    #[wasm_bindgen(js_name = beginTurn)]
    pub fn begin_turn(&mut self, ticket: f64) -> JsValue {
        let Some(ticket) = self.ticket_of(ticket) else {
            return JsValue::UNDEFINED;
        };
        let (Some(line), Some(timeout_ms)) =
            (self.core.line_of(ticket), self.core.timeout_of(ticket))
        else {
            return JsValue::UNDEFINED;
        };
        let pending = self.core.pending_in(line);
        let Some(turns) = self.turns.as_mut() else {
            return JsValue::UNDEFINED;
        };
        let begin = turns.begin(line.0, pending, timeout_ms);
        self.turn = TurnView {
            followers: begin.succession.followers as u32,
            streak_ms: begin.succession.streak_ms,
            wait_ms: begin.options.wait_ms,
        };
        begin.hand_on.unwrap_or_default()
    }

    /// The acquisitions the last [`begin_turn`](Self::begin_turn)'s hand-on announces.
    #[wasm_bindgen(js_name = turnFollowers)]
    pub fn turn_followers(&self) -> u32 {
        self.turn.followers
    }

    /// How long the last [`begin_turn`](Self::begin_turn)'s acquisition waits, in milliseconds.
    #[wasm_bindgen(js_name = turnWaitMs)]
    pub fn turn_wait_ms(&self) -> f64 {
        self.turn.wait_ms
    }

    /// The streak bound of the last [`begin_turn`](Self::begin_turn)'s acquisition.
    #[wasm_bindgen(js_name = turnStreakMs)]
    pub fn turn_streak_ms(&self) -> f64 {
        self.turn.streak_ms
    }

    /// The turn of `ticket`'s work ended its acquisition, `held`: with a lease. `RUN`,
    /// `RELEASE` (the work was given up on meanwhile: release the lease), `TIME_OUT`, or
    /// `NONE`.
    #[wasm_bindgen(js_name = turnAcquired)]
    pub fn turn_acquired(&self, ticket: f64, held: bool) -> f64 {
        interop::acquired(&Turns::acquired(held.then_some(()), self.given_up(ticket)))
    }

    /// The work of `ticket` settled: `RELEASE_FIRST` (its lease, before its caller hears:
    /// nothing of its key is queued behind it here) or `NONE`.
    #[wasm_bindgen(js_name = turnSettled)]
    pub fn turn_settled(&self, ticket: f64) -> f64 {
        let line = self
            .ticket_of(ticket)
            .and_then(|ticket| self.core.line_of(ticket));
        let pending = line.map_or(0, |line| self.core.pending_in(line));
        let waiting = line.is_some_and(|line| self.core.waiting_in(line));
        if Turns::<()>::settled(pending, waiting, self.given_up(ticket)) {
            RELEASE_FIRST
        } else {
            NONE
        }
    }

    /// A turn of the key of `line` ended still holding `lease`: kept for the next turn.
    /// Answers a lease to release (`undefined` for none).
    #[wasm_bindgen(js_name = turnEnded)]
    pub fn turn_ended(&mut self, line: u32, lease: JsValue) -> JsValue {
        self.turns
            .as_mut()
            .and_then(|turns| turns.ended(line, lease))
            .unwrap_or_default()
    }

    /// The key of `line` went idle: the lease its turns left, to release (`undefined` for
    /// none).
    #[wasm_bindgen(js_name = turnIdle)]
    pub fn turn_idle(&mut self, line: u32) -> JsValue {
        self.turns
            .as_mut()
            .and_then(|turns| turns.idle(line))
            .unwrap_or_default()
    }
}

/// A serializer's lease options as the caller gave them.
fn lease(
    stale_ms: Option<f64>,
    max_clock_skew_ms: Option<f64>,
    store_timeout_ms: Option<f64>,
) -> LockOptions {
    interop::lock_options(None, stale_ms, max_clock_skew_ms, store_timeout_ms)
}
