//! The lock for JavaScript: [`LockCore`] behind a handle the package's `lock.js` drives. The
//! JS makes every store call, timer and wake-up; this module only answers "what next" — it
//! calls no user code and no store, so nothing JavaScript throws can unwind through it.
//!
//! A step's details (the record to write, the version, until when to sleep, the new ticket)
//! are left in the handle's outbox and read by the JS right after the call that made them:
//! the core runs no JavaScript in between, so nothing can overwrite them first.

use wasm_bindgen::prelude::*;

use super::options::{lock_options as options, refusal};
use crate::key::KeyError;
use crate::lock::core::{Answer, LockCore, Now, Step, Succession, Woken};
use crate::lock::LockError;
use crate::platform::PlatformRandom;
use crate::queue::Ticket;
use crate::record::Record;
use crate::wire::lock::{
    BAD_STALE, CREATE, CREATED, DONE, ERROR, FAILED, FREE_STATE, GIVE_UP, HELD, HELD_STATE, LOST,
    NAME_EMPTY, NAME_TOO_LONG, READ, REPLACE, REPLACED, SLEEP, TIMED_OUT, WAIT, WOKE,
};

/// The time as the JS passes it: `now()` (or `Date.now()`) and `performance.now()`.
fn at(wall: f64, mono: f64) -> Now {
    Now { wall, mono }
}

/// One store's locks in this isolate.
#[wasm_bindgen]
#[derive(Debug)]
pub struct LockCoreBinding {
    core: LockCore<JsValue, JsValue>,
    random: PlatformRandom,
    value: String,
    version: JsValue,
    until: f64,
    left: f64,
    ticket: f64,
}

impl LockCoreBinding {
    fn ticket(&self, packed: f64) -> Option<Ticket> {
        self.core.unpack(packed)
    }

    /// Leaves a step's details in the outbox; its code for the JS.
    fn emit(&mut self, step: Step<JsValue>) -> f64 {
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
            Step::Failed => ERROR,
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
            left: f64::NAN,
            ticket: 0.0,
        }
    }

    /// Starts an acquisition of `name`, waiting up to `wait_ms` for a lease of `stale_ms`, with
    /// `max_clock_skew_ms` and `store_timeout_ms` (`NaN`: the default) — the JS checked that
    /// `name` is a well-formed string and the options numbers. `waiter` is what
    /// [`LockCoreBinding::take_woken`] gives back to wake it; `streak_ms` how long this name's
    /// streaks of local hand-offs may run (a serializer's turns: [`Succession::serialized`];
    /// `NaN` for a lock's). The step's code — the new ticket is in the outbox
    /// ([`LockCoreBinding::last_ticket`]) — or a refusal code (negative): a bad name or option,
    /// nothing queued.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &mut self,
        name: &str,
        wait_ms: f64,
        stale_ms: f64,
        max_clock_skew_ms: f64,
        store_timeout_ms: f64,
        waiter: JsValue,
        wall: f64,
        mono: f64,
        streak_ms: f64,
    ) -> f64 {
        let options = options(wait_ms, stale_ms, max_clock_skew_ms, store_timeout_ms);
        let streak_ms = if streak_ms.is_nan() {
            Succession::LOCK.streak_ms
        } else {
            streak_ms
        };
        match self.core.acquire_with(
            name,
            waiter,
            options,
            streak_ms,
            at(wall, mono),
            &self.random,
        ) {
            Ok((ticket, step)) => {
                self.ticket = ticket.pack();
                self.emit(step)
            }
            Err(LockError::InvalidName(KeyError::Empty)) => NAME_EMPTY,
            Err(LockError::InvalidName(KeyError::TooLong(_))) => NAME_TOO_LONG,
            Err(LockError::InvalidOption(error)) => refusal(error),
            // Nothing else refuses an acquisition before it starts.
            Err(_) => BAD_STALE,
        }
    }

    /// When the holder of `ticket` renews next while it works (see
    /// [`LockCore::next_renewal`]); `NaN` once its lease is lost or released.
    #[wasm_bindgen(js_name = nextRenewal)]
    pub fn next_renewal(&self, ticket: f64, wall: f64, mono: f64) -> f64 {
        self.ticket(ticket)
            .and_then(|ticket| self.core.next_renewal(ticket, at(wall, mono)))
            .unwrap_or(f64::NAN)
    }

    /// The answer to a create (`kind` `CREATED`) or replace (`REPLACED`) — `version` a string or
    /// `undefined` for none — a wake-up (`WOKE`), a failed call (`FAILED`) or one that did not
    /// answer within its bound (`TIMED_OUT`); the next step's code.
    pub fn step(&mut self, ticket: f64, kind: f64, version: JsValue, wall: f64, mono: f64) -> f64 {
        let Some(ticket) = self.ticket(ticket) else {
            return GIVE_UP;
        };
        let found = (!version.is_undefined()).then_some(version);
        let answer = if kind == CREATED {
            Answer::Created(found)
        } else if kind == REPLACED {
            Answer::Replaced(found)
        } else if kind == WOKE {
            Answer::Woke
        } else if kind == TIMED_OUT {
            Answer::TimedOut
        } else {
            // `FAILED`, or a kind the JS never sends: a failed call.
            debug_assert_eq!(kind, FAILED);
            Answer::Failed
        };
        let step = self.core.step(ticket, answer, at(wall, mono), &self.random);
        self.emit(step)
    }

    /// The answer to a read: `version` `undefined` when there was no record; else the fields
    /// `JSON.parse` found in its value, as the JS passes them — numbers (`NaN` where the field
    /// was absent or not a number; `lease` -1 where absent, and `NaN` where it is not a number of
    /// 0 or more), `state` as a number (`HELD_STATE` for "held", `FREE_STATE` for "free", `NaN`
    /// for anything else) and `token` (`undefined` where absent or not a string).
    #[allow(clippy::too_many_arguments)]
    #[wasm_bindgen(js_name = stepRead)]
    pub fn step_read(
        &mut self,
        ticket: f64,
        version: JsValue,
        format: f64,
        state: f64,
        token: Option<String>,
        fence: f64,
        at_ms: f64,
        lease: f64,
        wall: f64,
        mono: f64,
    ) -> f64 {
        let Some(ticket) = self.ticket(ticket) else {
            return GIVE_UP;
        };
        let found = (!version.is_undefined()).then(|| {
            let state = if state == HELD_STATE {
                "held"
            } else if state == FREE_STATE {
                "free"
            } else {
                ""
            };
            let record = Record::from_fields(
                Some(format),
                Some(state),
                token,
                Some(fence),
                Some(at_ms),
                (lease != -1.0).then_some(lease),
            );
            (version, record)
        });
        let step = self
            .core
            .step(ticket, Answer::Read(found), at(wall, mono), &self.random);
        self.emit(step)
    }

    /// Starts a release announcing `followers` acquisitions after the next waiter's (a
    /// serializer's queued works; 0 for a plain lock): a store step to make, or `DONE`.
    pub fn release(&mut self, ticket: f64, wall: f64, mono: f64, followers: u32) -> f64 {
        let Some(ticket) = self.ticket(ticket) else {
            return DONE;
        };
        let step = self
            .core
            .release_with(ticket, followers as usize, at(wall, mono), &self.random);
        self.emit(step)
    }

    /// Starts a renewal: a store step to make, `HELD` when one is in flight, or `LOST`.
    pub fn renew(&mut self, ticket: f64, wall: f64, mono: f64) -> f64 {
        let Some(ticket) = self.ticket(ticket) else {
            return LOST;
        };
        let step = self.core.renew(ticket, at(wall, mono));
        self.emit(step)
    }

    /// One of the counters of this store's locks here (see [`LockCore::stats`]): the value of
    /// `wire::lock::STATS[index]`; `NaN` past them.
    pub fn stat(&self, index: u32) -> f64 {
        self.core
            .stats()
            .values()
            .get(index as usize)
            .copied()
            .unwrap_or(f64::NAN)
    }

    /// Gives up a waiter (its signal aborted), or a holder handed the lease that cannot take it
    /// (`keep`: the record goes to this isolate's next acquisition).
    pub fn leave(&mut self, ticket: f64, keep: bool) {
        if let Some(ticket) = self.ticket(ticket) {
            self.core.leave(ticket, keep);
        }
    }

    /// The record to write, of the last `CREATE` or `REPLACE`; the token, of the last `lease`.
    pub fn value(&self) -> String {
        self.value.clone()
    }

    /// The version of the last `REPLACE`.
    pub fn version(&self) -> JsValue {
        self.version.clone()
    }

    /// Until when, of the last `SLEEP` or `WAIT` (monotonic); `heldUntil`, of the last `lease`.
    pub fn until(&self) -> f64 {
        self.until
    }

    /// The ticket of the last `acquire`.
    #[wasm_bindgen(js_name = lastTicket)]
    pub fn last_ticket(&self) -> f64 {
        self.ticket
    }

    /// The lease `ticket` holds: its fence (0 if none) — and, in the outbox, its token
    /// ([`LockCoreBinding::value`]), its `heldUntil` ([`LockCoreBinding::until`]) and how long it
    /// has left at this time on whichever clock ends it first ([`LockCoreBinding::left`]: 0 or
    /// less once ended, `NaN` if none, or if the times are `NaN`).
    pub fn lease(&mut self, ticket: f64, wall: f64, mono: f64) -> f64 {
        let lease = self
            .ticket(ticket)
            .and_then(|ticket| self.core.lease(ticket));
        let Some(lease) = lease else {
            self.value.clear();
            self.until = f64::NAN;
            self.left = f64::NAN;
            return 0.0;
        };
        let fence = lease.fence as f64;
        let left = (lease.held_until - wall).min(lease.ends_at - mono);
        let (token, held_until) = (lease.token.to_owned(), lease.held_until);
        self.value = token;
        self.until = held_until;
        self.left = left;
        fence
    }

    /// How long the lease of the last [`LockCoreBinding::lease`] has left.
    pub fn left(&self) -> f64 {
        self.left
    }

    /// When the shared timer must call [`LockCoreBinding::expire`]; `NaN` for never.
    #[wasm_bindgen(js_name = nextTimer)]
    pub fn next_timer(&mut self) -> f64 {
        self.core.next_timer().unwrap_or(f64::NAN)
    }

    /// Ends the waits and leases whose time passed; their waiters come out of `takeWoken`.
    pub fn expire(&mut self, wall: f64, mono: f64) {
        self.core.expire(at(wall, mono));
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
