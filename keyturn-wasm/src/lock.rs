//! The lock for JavaScript: [`LockCore`] behind the handle `js/lock/manager.js` drives. The JS
//! makes every store call, timer and wake-up; this only answers "what next" — it calls no user
//! code and no store, so nothing JavaScript throws can unwind through it.
//!
//! A step answers its code; what it carries (the record to write, the version, the call's
//! bound, the time to wake) is its [`StepView`], read by the JS right after the call that
//! answered it, through one getter per field.

use wasm_bindgen::prelude::*;

use keyturn::machine::{LineId, LockCore, Now, Step, Succession, Ticket, Woken};
use keyturn::PlatformRandom;

use crate::interop::{self, RecordFields, StepView};
use crate::wire::lock::{DONE, GIVE_UP, GUARD, LOST, WOKEN};

/// The time as the JS passes it: `now()` (or `Date.now()`) and `performance.now()`.
fn at(wall: f64, mono: f64) -> Now {
    Now { wall, mono }
}

/// One store's locks in this isolate.
#[wasm_bindgen]
#[derive(Debug)]
pub struct LockCoreBinding {
    core: LockCore<JsValue, u32>,
    random: PlatformRandom,
    step: StepView<JsValue>,
    /// The ticket of the last acquisition.
    ticket: f64,
    /// The token's count (after the isolate's id) and `heldUntil` of the last lease asked for.
    token_count: f64,
    held_until: f64,
}

impl LockCoreBinding {
    fn ticket_of(&self, packed: f64) -> Option<Ticket> {
        self.core.unpack(packed)
    }

    /// `step`'s code, kept in the view, with `WOKEN` added when the core has waiters to wake
    /// (so the JS asks [`take_woken`](Self::take_woken) only then).
    fn code(&mut self, step: Step<JsValue>) -> f64 {
        let code = self.step.take(step);
        if self.core.has_woken() {
            code + WOKEN
        } else {
            code
        }
    }
}

#[wasm_bindgen]
impl LockCoreBinding {
    /// No locks yet.
    #[wasm_bindgen(constructor)]
    pub fn new() -> LockCoreBinding {
        LockCoreBinding {
            core: LockCore::new(),
            random: PlatformRandom::default(),
            step: StepView::default(),
            ticket: 0.0,
            token_count: 0.0,
            held_until: 0.0,
        }
    }

    /// Whether the store tells changes (it has `changed`): then a contender watches the
    /// record instead of polling.
    #[wasm_bindgen(js_name = setStoreTellsChanges)]
    pub fn set_store_tells_changes(&mut self, tells: bool) {
        self.core.set_store_tells_changes(tells);
    }

    /// The driver keeps a guard watching a busy line's record across its hand-offs (see
    /// [`take_guard`](Self::take_guard)).
    #[wasm_bindgen(js_name = setLineGuards)]
    pub fn set_line_guards(&mut self, guards: bool) {
        self.core.set_line_guards(guards);
    }

    /// The line of the next guard to start (after [`take_woken`](Self::take_woken) answered
    /// `GUARD`), or -1: `store.changed(record(), version(), ms)` until `wakeAt()` — the name
    /// is in the view's `record` — then [`guarded`](Self::guarded) with the line and the guard's
    /// number, [`ticket`](Self::ticket) now.
    #[wasm_bindgen(js_name = takeGuard)]
    pub fn take_guard(&mut self, wall: f64, mono: f64) -> f64 {
        let Some(guard) = self.core.take_guard(at(wall, mono)) else {
            return -1.0;
        };
        self.ticket = f64::from(guard.number);
        self.step.record = String::from(&*guard.name);
        self.step.version = guard.version;
        self.step.wake_at = guard.until;
        f64::from(guard.line.0)
    }

    /// What came of guard `number` of `line`: `CHANGED`, `WOKE` (its time came unchanged) or
    /// `FAILED`.
    pub fn guarded(&mut self, line: u32, number: u32, kind: f64) {
        self.core
            .guarded(LineId(line), number, interop::answer(kind, None));
    }

    /// The wait of an acquisition given `wait_ms` (`undefined`: the default), in milliseconds.
    #[wasm_bindgen(js_name = waitMs)]
    pub fn wait_ms(wait_ms: Option<f64>) -> f64 {
        interop::lock_options(wait_ms, None, None, None).wait_ms
    }

    /// Starts an acquisition of `name` (its slot `slot`: [`slot_name`](Self::slot_name)) with the options the caller gave (`undefined` for each
    /// left out) — the JS checked that `name` is a well-formed string and the options numbers.
    /// `waiter` is the number the JS holds the acquisition's wake-up under: what
    /// [`take_woken`](Self::take_woken) gives back to wake it; `streak_ms` how
    /// long this name's streaks of local hand-offs may run (a serializer's turns; `undefined`
    /// for a lock's); `concurrency` the name's (`undefined`: 1), which its records carry. The
    /// step's code — the new ticket is [`ticket`](Self::ticket) — or a
    /// refusal code (negative): a bad name or option, nothing queued.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &mut self,
        name: &str,
        slot: u16,
        wait_ms: Option<f64>,
        stale_ms: Option<f64>,
        max_clock_skew_ms: Option<f64>,
        store_timeout_ms: Option<f64>,
        waiter: u32,
        wall: f64,
        mono: f64,
        streak_ms: Option<f64>,
        concurrency: Option<f64>,
    ) -> f64 {
        let options = interop::slot_options(
            wait_ms,
            stale_ms,
            max_clock_skew_ms,
            store_timeout_ms,
            concurrency,
        );
        // A lock's acquisition streaks as the core's locks do; a serializer's turn says its own.
        let streak_ms = streak_ms.unwrap_or(Succession::LOCK.streak_ms);
        let now = at(wall, mono);
        let acquired =
            self.core
                .acquire_slot(name, slot, waiter, options, streak_ms, now, &self.random);
        match acquired {
            Ok((ticket, step)) => {
                self.ticket = ticket.pack();
                self.code(step)
            }
            Err(error) => {
                let error = keyturn::LockError::from(error);
                if let keyturn::LockError::ConcurrencyMismatch { found, .. } = error {
                    self.step.found = f64::from(found);
                }
                interop::acquire_refusal(error)
            }
        }
    }

    /// The key of slot `slot` of the lock `name`: the record its holder writes (`name` itself
    /// for slot 0).
    #[wasm_bindgen(js_name = slotName)]
    pub fn slot_name(name: &str, slot: u16) -> String {
        keyturn::slot_name(name, slot)
    }

    /// Acquisitions of the record `name` in line here: waiting, contending or holding.
    #[wasm_bindgen(js_name = localLine)]
    pub fn local_line(&self, name: &str) -> u32 {
        self.core.local_line(name) as u32
    }

    /// The `concurrency` the last `MISMATCH` step or refusal found.
    pub fn found(&self) -> f64 {
        self.step.found
    }

    /// The ticket of the last acquisition (the number of the last guard, after
    /// [`take_guard`](Self::take_guard)).
    pub fn ticket(&self) -> f64 {
        self.ticket
    }

    /// The answer to a create (`kind` `CREATED`) or replace (`REPLACED`) — the new version, or
    /// `undefined` for none — a wake-up (`WOKE`), a failed call (`FAILED`) or one that did not
    /// answer within its bound (`TIMED_OUT`): the next step's code.
    pub fn answer(
        &mut self,
        ticket: f64,
        kind: f64,
        version: JsValue,
        wall: f64,
        mono: f64,
    ) -> f64 {
        let Some(ticket) = self.ticket_of(ticket) else {
            return GIVE_UP;
        };
        let version = (!version.is_undefined()).then_some(version);
        let step = self.core.step(
            ticket,
            interop::answer(kind, version),
            at(wall, mono),
            &self.random,
        );
        self.code(step)
    }

    /// The answer to a read: the record's version (`undefined` when there was none) and the
    /// fields `JSON.parse` found in its text — each number field its number (`NaN` when it is
    /// there with another type: no rule takes it), each string field its string, `undefined`
    /// where absent. The next step's code.
    #[allow(clippy::too_many_arguments)]
    #[wasm_bindgen(js_name = answerRead)]
    pub fn answer_read(
        &mut self,
        ticket: f64,
        version: JsValue,
        format: Option<f64>,
        state: Option<String>,
        token: Option<String>,
        fence: Option<f64>,
        at_ms: Option<f64>,
        lease: Option<f64>,
        asks: Option<String>,
        n: Option<f64>,
        wall: f64,
        mono: f64,
    ) -> f64 {
        let Some(ticket) = self.ticket_of(ticket) else {
            return GIVE_UP;
        };
        let found = (!version.is_undefined()).then(|| {
            let fields = RecordFields {
                format,
                state,
                token,
                fence,
                at: at_ms,
                lease,
                asks,
                n,
            };
            (version, fields)
        });
        let step = self.core.step(
            ticket,
            interop::read_answer(found),
            at(wall, mono),
            &self.random,
        );
        self.code(step)
    }

    /// Starts a release announcing `followers` acquisitions after the next waiter's (a
    /// serializer's queued works; 0 for a plain lock): a store step's code, or `DONE`.
    pub fn release(&mut self, ticket: f64, wall: f64, mono: f64, followers: u32) -> f64 {
        let Some(ticket) = self.ticket_of(ticket) else {
            return DONE;
        };
        let step = self
            .core
            .release_with(ticket, followers as usize, at(wall, mono), &self.random);
        self.code(step)
    }

    /// Starts a renewal: a store step's code, `HELD` when one is in flight, or `LOST`.
    pub fn renew(&mut self, ticket: f64, wall: f64, mono: f64) -> f64 {
        let Some(ticket) = self.ticket_of(ticket) else {
            return LOST;
        };
        let step = self.core.renew(ticket, at(wall, mono));
        self.code(step)
    }

    /// The view's text: the record the last create or replace step writes — or the name of
    /// the guard [`take_guard`](Self::take_guard) gave, or this isolate's id after
    /// [`isolate_id`](Self::isolate_id).
    pub fn record(&self) -> String {
        self.step.record.clone()
    }

    /// The version the last replace step must find, or the last watch step watches.
    pub fn version(&self) -> JsValue {
        self.step.version.clone()
    }

    /// How long the last store step may take, in milliseconds.
    #[wasm_bindgen(js_name = boundMs)]
    pub fn bound_ms(&self) -> f64 {
        self.step.bound_ms
    }

    /// When the last sleep, wait or watch step ends at the latest (monotonic milliseconds).
    #[wasm_bindgen(js_name = wakeAt)]
    pub fn wake_at(&self) -> f64 {
        self.step.wake_at
    }

    /// When the holder of `ticket` renews next while it works (monotonic milliseconds);
    /// `Infinity` — never — once its lease is lost or released.
    #[wasm_bindgen(js_name = nextRenewal)]
    pub fn next_renewal(&self, ticket: f64, wall: f64, mono: f64) -> f64 {
        self.ticket_of(ticket)
            .and_then(|ticket| self.core.next_renewal(ticket, at(wall, mono)))
            .unwrap_or(f64::INFINITY)
    }

    /// The lease `ticket` holds: its fence (0 if none); its token's count and `heldUntil` are
    /// then [`token_count`](Self::token_count) and [`held_until`](Self::held_until).
    pub fn lease(&mut self, ticket: f64) -> f64 {
        let lease = self
            .ticket_of(ticket)
            .and_then(|ticket| self.core.lease(ticket));
        let Some(lease) = lease else {
            self.token_count = f64::NAN;
            self.held_until = f64::NAN;
            return 0.0;
        };
        self.token_count = interop::token_count(lease.token);
        self.held_until = lease.held_until;
        lease.fence as f64
    }

    /// The count in the token of the last [`lease`](Self::lease): the token is
    /// [`isolate_id`](Self::isolate_id) and this, in 16 hex digits (a string would cost the JS a
    /// copy and a decode for every lock; most never read their token).
    #[wasm_bindgen(js_name = tokenCount)]
    pub fn token_count(&self) -> f64 {
        self.token_count
    }

    /// Puts this isolate's id, the first half of every token it makes (empty before its
    /// first), in the view's text: [`record`](Self::record) (one export returns text).
    #[wasm_bindgen(js_name = isolateId)]
    pub fn isolate_id(&mut self) {
        self.step.record.clear();
        if let Some(id) = self.core.isolate_id() {
            self.step
                .record
                .extend(id.iter().map(|&byte| char::from(byte)));
        }
    }

    /// The `heldUntil` of the last [`lease`](Self::lease), in the wall clock's milliseconds.
    #[wasm_bindgen(js_name = heldUntil)]
    pub fn held_until(&self) -> f64 {
        self.held_until
    }

    /// How long the lease of `ticket` has left at this time, on whichever clock ends it first,
    /// in milliseconds: 0 or less once it has ended, or when `ticket` holds none.
    #[wasm_bindgen(js_name = leaseLeft)]
    pub fn lease_left(&self, ticket: f64, wall: f64, mono: f64) -> f64 {
        self.ticket_of(ticket)
            .and_then(|ticket| self.core.lease(ticket))
            .map_or(0.0, |lease| {
                (lease.held_until - wall).min(lease.ends_at - mono)
            })
    }

    /// Gives up a waiter (its signal aborted), or a holder handed the lease that cannot take it
    /// (`keep`: the record goes to this isolate's next acquisition).
    pub fn leave(&mut self, ticket: f64, keep: bool) {
        if let Some(ticket) = self.ticket_of(ticket) {
            self.core.leave(ticket, keep);
        }
    }

    /// When the shared timer must call [`expire`](Self::expire) (monotonic milliseconds);
    /// `Infinity` for never.
    #[wasm_bindgen(js_name = nextTimer)]
    pub fn next_timer(&mut self) -> f64 {
        self.core.next_timer().unwrap_or(f64::INFINITY)
    }

    /// Ends the waits and leases whose time passed; their waiters come out of
    /// [`take_woken`](Self::take_woken).
    pub fn expire(&mut self, wall: f64, mono: f64) {
        self.core.expire(at(wall, mono));
    }

    /// The number of the next waiter to wake (it then answers `WOKE`), `GUARD` when a guard
    /// is wanted ([`take_guard`](Self::take_guard)), or `undefined`.
    #[wasm_bindgen(js_name = takeWoken)]
    pub fn take_woken(&mut self) -> Option<u32> {
        loop {
            match self.core.take_woken()? {
                Woken::GaveUp(waiter) => return Some(waiter),
                Woken::Guard => return Some(GUARD as u32),
                Woken::Turn(ticket) => {
                    if let Some(&waiter) = self.core.handle(ticket) {
                        return Some(waiter);
                    }
                }
            }
        }
    }

    /// One of this store's lock counters here: the value of `LOCK_STATS[index]` (0 past
    /// them).
    pub fn stat(&self, index: u32) -> f64 {
        interop::lock_stat(&self.core.stats(), index)
    }
}

impl Default for LockCoreBinding {
    fn default() -> Self {
        Self::new()
    }
}
