//! The lock for JavaScript: [`LockCore`] behind a handle the package's `lock.js` drives. The
//! JS makes every store call, timer and wake-up; this module only answers "what next" — it
//! calls no user code and no store, so nothing JavaScript throws can unwind through it.
//!
//! A step's details (the record to write, the version, until when to sleep, the new ticket)
//! are left in the handle's outbox and read by the JS right after the call that made them:
//! the core runs no JavaScript in between, so nothing can overwrite them first.

use wasm_bindgen::prelude::*;

use super::errors::{range_error, type_error};
use super::platform::PlatformRandom;
use crate::lock::{Answer, LockCore, LockError, LockOptions, Step, Succession, Woken};
use crate::queue::Ticket;
use crate::record::Record;

/// Step codes, as `lock.js` names them.
const CREATE: u8 = 0;
const READ: u8 = 1;
const REPLACE: u8 = 2;
const SLEEP: u8 = 3;
const WAIT: u8 = 4;
const HELD: u8 = 5;
const DONE: u8 = 6;
const LOST: u8 = 7;
const GIVE_UP: u8 = 8;

/// Answer kinds for [`LockCoreBinding::step`].
const CREATED: u8 = 0;
const REPLACED: u8 = 1;
const WOKE: u8 = 2;
const FAILED: u8 = 3;

/// One store's locks in this isolate.
#[wasm_bindgen]
#[derive(Debug)]
pub struct LockCoreBinding {
    core: LockCore<JsValue, JsValue>,
    random: PlatformRandom,
    value: String,
    version: JsValue,
    until: f64,
    ticket: f64,
}

impl LockCoreBinding {
    fn ticket(&self, packed: f64) -> Option<Ticket> {
        self.core.unpack(packed)
    }

    /// Leaves a step's details in the outbox; its code for the JS.
    fn emit(&mut self, step: Step<JsValue>) -> u8 {
        match step {
            Step::Create { value } => {
                self.value = value;
                CREATE
            }
            Step::Read => READ,
            Step::Replace { version, value } => {
                self.value = value;
                self.version = version;
                REPLACE
            }
            Step::Sleep { until } => {
                self.until = until;
                SLEEP
            }
            Step::Wait { until } => {
                self.until = until;
                WAIT
            }
            Step::Held => HELD,
            Step::Done => DONE,
            Step::Lost => LOST,
            Step::GiveUp => GIVE_UP,
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
            value: String::new(),
            version: JsValue::UNDEFINED,
            until: 0.0,
            ticket: 0.0,
        }
    }

    /// Starts an acquisition of `name`, waiting up to `wait_ms` for a lease of `stale_ms` (the
    /// JS checked that `name` is a well-formed string and the options numbers; the name's rules
    /// and the options' ranges are checked here). `waiter` is what
    /// [`LockCoreBinding::take_woken`] gives back to wake it; `serialized`: a serializer's turn,
    /// whose streaks of local hand-offs are longer (see [`Succession::serialized`]). The step's
    /// code; the new ticket is in the outbox
    /// ([`LockCoreBinding::last_ticket`]).
    pub fn acquire(
        &mut self,
        name: &str,
        wait_ms: f64,
        stale_ms: f64,
        waiter: JsValue,
        now: f64,
        serialized: bool,
    ) -> Result<u8, JsValue> {
        let lock_options = LockOptions { wait_ms, stale_ms };
        let succession = if serialized {
            Succession::serialized(0, stale_ms)
        } else {
            Succession::LOCK
        };
        match self.core.acquire_with(
            name,
            waiter,
            lock_options,
            succession.streak_ms,
            now,
            &self.random,
        ) {
            Ok((ticket, step)) => {
                self.ticket = ticket.pack();
                Ok(self.emit(step))
            }
            // The crate's own wording (`OptionError`), named as the JS caller wrote it.
            Err(LockError::InvalidOption(error)) => {
                Err(range_error(&["options.", error.message()]))
            }
            Err(LockError::InvalidName(error)) => Err(super::errors::key_error("name", error)),
            Err(_) => Err(type_error(&["the lock could not start"])),
        }
    }

    /// The answer to a create (`kind` 0) or replace (1) — `version` a string or `undefined` for
    /// none — a wake-up (2) or a failed call (3); the next step's code.
    pub fn step(&mut self, ticket: f64, kind: u8, version: JsValue, now: f64) -> u8 {
        let Some(ticket) = self.ticket(ticket) else {
            return GIVE_UP;
        };
        let found = (!version.is_undefined()).then_some(version);
        let answer = match kind {
            CREATED => Answer::Created(found),
            REPLACED => Answer::Replaced(found),
            WOKE => Answer::Woke,
            FAILED => Answer::Failed,
            // A kind the JS never sends: treated as a failed call, which holds nothing.
            _ => Answer::Failed,
        };
        let step = self.core.step(ticket, answer, now, &self.random);
        self.emit(step)
    }

    /// The answer to a read: `version` `undefined` when there was no record; else the fields
    /// `JSON.parse` found in its value, as the JS passes them — numbers (`NaN` where the field
    /// was absent or not a number) and strings (`undefined` where absent or not a string).
    #[allow(clippy::too_many_arguments)]
    #[wasm_bindgen(js_name = stepRead)]
    pub fn step_read(
        &mut self,
        ticket: f64,
        version: JsValue,
        format: f64,
        state: Option<String>,
        token: Option<String>,
        fence: f64,
        at: f64,
        now: f64,
    ) -> u8 {
        let Some(ticket) = self.ticket(ticket) else {
            return GIVE_UP;
        };
        let found = (!version.is_undefined()).then(|| {
            let record =
                Record::from_fields(Some(format), state.as_deref(), token, Some(fence), Some(at));
            (version, record)
        });
        let step = self
            .core
            .step(ticket, Answer::Read(found), now, &self.random);
        self.emit(step)
    }

    /// Starts a release announcing `followers` acquisitions after the next waiter's (a
    /// serializer's queued works; 0 for a plain lock): `REPLACE` to make, or `DONE`.
    pub fn release(&mut self, ticket: f64, now: f64, followers: u32) -> u8 {
        let Some(ticket) = self.ticket(ticket) else {
            return DONE;
        };
        let step = self
            .core
            .release_with(ticket, followers as usize, now, &self.random);
        self.emit(step)
    }

    /// Starts a renewal: `REPLACE` to make, `HELD` when one is in flight, or `LOST`.
    pub fn renew(&mut self, ticket: f64, now: f64) -> u8 {
        let Some(ticket) = self.ticket(ticket) else {
            return LOST;
        };
        let step = self.core.renew(ticket, now);
        self.emit(step)
    }

    /// Gives up a waiter (its signal aborted), or a holder handed the lease that cannot take it
    /// (`keep`: the record goes to this isolate's next acquisition).
    pub fn leave(&mut self, ticket: f64, keep: bool) {
        if let Some(ticket) = self.ticket(ticket) {
            self.core.leave(ticket, keep);
        }
    }

    /// The record to write, of the last `CREATE` or `REPLACE`.
    pub fn value(&self) -> String {
        self.value.clone()
    }

    /// The version of the last `REPLACE`.
    pub fn version(&self) -> JsValue {
        self.version.clone()
    }

    /// Until when, of the last `SLEEP` or `WAIT`.
    pub fn until(&self) -> f64 {
        self.until
    }

    /// The ticket of the last `acquire`.
    #[wasm_bindgen(js_name = lastTicket)]
    pub fn last_ticket(&self) -> f64 {
        self.ticket
    }

    /// The token of the lease `ticket` holds.
    pub fn token(&self, ticket: f64) -> String {
        self.ticket(ticket)
            .and_then(|ticket| self.core.lease(ticket))
            .map(|lease| lease.token.to_owned())
            .unwrap_or_default()
    }

    /// The fence of the lease `ticket` holds; 0 if none.
    pub fn fence(&self, ticket: f64) -> f64 {
        self.ticket(ticket)
            .and_then(|ticket| self.core.lease(ticket))
            .map_or(0.0, |lease| lease.fence as f64)
    }

    /// The end of the lease `ticket` holds; `NaN` if none.
    #[wasm_bindgen(js_name = heldUntil)]
    pub fn held_until(&self, ticket: f64) -> f64 {
        self.ticket(ticket)
            .and_then(|ticket| self.core.lease(ticket))
            .map_or(f64::NAN, |lease| lease.held_until)
    }

    /// When the shared timer must call [`LockCoreBinding::expire`]; `NaN` for never.
    #[wasm_bindgen(js_name = nextTimer)]
    pub fn next_timer(&mut self) -> f64 {
        self.core.next_timer().unwrap_or(f64::NAN)
    }

    /// Ends the waits and leases whose time passed; their waiters come out of `takeWoken`.
    pub fn expire(&mut self, now: f64) {
        self.core.expire(now);
    }

    /// The next waiter to wake (it then calls `step` with a wake-up), or `undefined`.
    #[wasm_bindgen(js_name = takeWoken)]
    pub fn take_woken(&mut self) -> JsValue {
        loop {
            match self.core.take_woken() {
                None => return JsValue::UNDEFINED,
                Some(Woken::GaveUp(waiter)) => return waiter,
                Some(Woken::Turn(ticket)) => {
                    if let Some(waiter) = self.core.handle(ticket) {
                        return waiter.clone();
                    }
                }
            }
        }
    }
}

impl Default for LockCoreBinding {
    fn default() -> Self {
        Self::new()
    }
}
