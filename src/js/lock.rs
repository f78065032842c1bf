//! The lock for JavaScript: [`LockCore`] behind a handle the package's `lock.js` drives. The
//! JS makes every store call, timer and wake-up; this module only answers "what next" — it
//! calls no user code and no store, so nothing JavaScript throws can unwind through it.
//!
//! A step's details (the record to write, the version, until when to sleep, the new ticket)
//! are left in the handle's outbox and read by the JS right after the call that made them:
//! the core runs no JavaScript in between, so nothing can overwrite them first.

use wasm_bindgen::prelude::*;

use crate::key::KeyError;
use crate::lock::core::{Answer, LockCore, Step, Succession, Woken};
use crate::lock::{LockError, LockOptions, OptionError};
use crate::platform::PlatformRandom;
use crate::queue::Ticket;
use crate::record::Record;
use crate::serializer::Turns;
use crate::wire::lock::{
    BAD_STALE, BAD_WAIT, CREATE, CREATED, DONE, GIVE_UP, HELD, LOST, NAME_EMPTY, NAME_TOO_LONG,
    READ, REPLACE, REPLACED, SLEEP, WAIT, WOKE,
};

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
    /// JS checked that `name` is a well-formed string and the options numbers). `waiter` is what
    /// [`LockCoreBinding::take_woken`] gives back to wake it; `streak_ms` how long this name's
    /// streaks of local hand-offs may run (a serializer's turns: [`Succession::serialized`];
    /// `NaN` for a lock's). The step's code — the new ticket is in the outbox
    /// ([`LockCoreBinding::last_ticket`]) — or a refusal code (negative): a bad name or option,
    /// nothing queued.
    pub fn acquire(
        &mut self,
        name: &str,
        wait_ms: f64,
        stale_ms: f64,
        waiter: JsValue,
        now: f64,
        streak_ms: f64,
    ) -> f64 {
        let options = LockOptions { wait_ms, stale_ms };
        let streak_ms = if streak_ms.is_nan() {
            Succession::LOCK.streak_ms
        } else {
            streak_ms
        };
        match self
            .core
            .acquire_with(name, waiter, options, streak_ms, now, &self.random)
        {
            Ok((ticket, step)) => {
                self.ticket = ticket.pack();
                self.emit(step)
            }
            Err(LockError::InvalidName(KeyError::Empty)) => NAME_EMPTY,
            Err(LockError::InvalidName(KeyError::TooLong(_))) => NAME_TOO_LONG,
            Err(LockError::InvalidOption(OptionError::WaitMs(_))) => BAD_WAIT,
            // Nothing else refuses an acquisition before it starts.
            Err(_) => BAD_STALE,
        }
    }

    /// Checks a lease length (a serializer's `staleMs`, a number): 0, or `BAD_STALE`.
    #[wasm_bindgen(js_name = checkStale)]
    pub fn check_stale(stale_ms: f64) -> f64 {
        let options = LockOptions {
            wait_ms: 0.0,
            stale_ms,
        };
        match options.validate() {
            Ok(_) => 0.0,
            Err(_) => BAD_STALE,
        }
    }

    /// When the holder of `ticket` renews next while it works (see
    /// [`LockCore::next_renewal`]); `NaN` once its lease is lost or released.
    #[wasm_bindgen(js_name = nextRenewal)]
    pub fn next_renewal(&self, ticket: f64, now: f64) -> f64 {
        self.ticket(ticket)
            .and_then(|ticket| self.core.next_renewal(ticket, now))
            .unwrap_or(f64::NAN)
    }

    /// The answer to a create (`kind` 0) or replace (1) — `version` a string or `undefined` for
    /// none — a wake-up (2) or a failed call (3); the next step's code.
    pub fn step(&mut self, ticket: f64, kind: f64, version: JsValue, now: f64) -> f64 {
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
        } else {
            // `FAILED`, or a kind the JS never sends: a failed call, which holds nothing.
            Answer::Failed
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
    ) -> f64 {
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
    pub fn release(&mut self, ticket: f64, now: f64, followers: u32) -> f64 {
        let Some(ticket) = self.ticket(ticket) else {
            return DONE;
        };
        let step = self
            .core
            .release_with(ticket, followers as usize, now, &self.random);
        self.emit(step)
    }

    /// Starts a renewal: `REPLACE` to make, `HELD` when one is in flight, or `LOST`.
    pub fn renew(&mut self, ticket: f64, now: f64) -> f64 {
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

/// The serializer over a store's turns ([`Turns`]): the leases left between turns, by key, as
/// the package's `js/serializer/leased.js` drives it. The lease handles are its JS lock objects.
#[wasm_bindgen]
#[derive(Debug)]
pub struct TurnsBinding {
    turns: Turns<JsValue>,
    followers: u32,
    streak_ms: f64,
}

#[wasm_bindgen]
impl TurnsBinding {
    /// For turns whose leases run `stale_ms` ([`LockCoreBinding::check_stale`] took it).
    #[wasm_bindgen(constructor)]
    pub fn new(stale_ms: f64) -> TurnsBinding {
        TurnsBinding {
            turns: Turns::new(stale_ms),
            followers: 0,
            streak_ms: f64::NAN,
        }
    }

    /// A turn of `key` starts with `pending` works of the key here: the lease to hand on once
    /// its acquisition is in line (`undefined` for none), announcing `followers()`; the
    /// acquisition's streak bound is `streakMs()`.
    pub fn begin(&mut self, key: &str, pending: u32) -> JsValue {
        let begin = self.turns.begin(key, pending as usize);
        self.followers = begin.succession.followers as u32;
        self.streak_ms = begin.succession.streak_ms;
        begin.hand_on.unwrap_or_default()
    }

    /// The followers the last `begin` announces.
    pub fn followers(&self) -> u32 {
        self.followers
    }

    /// The streak bound of the last `begin`'s acquisition.
    #[wasm_bindgen(js_name = streakMs)]
    pub fn streak_ms(&self) -> f64 {
        self.streak_ms
    }

    /// A turn's acquisition ended (`held`: with a lease), `abandoned` or not meanwhile: `RUN`,
    /// `RELEASE` (the lease), `TIME_OUT`, or `NONE`.
    pub fn acquired(held: bool, abandoned: bool) -> f64 {
        use crate::serializer::Acquired;
        use crate::wire::turns::{NONE, RELEASE, RUN, TIME_OUT};
        match Turns::acquired(held.then_some(()), abandoned) {
            Acquired::Run(()) => RUN,
            Acquired::Release(()) => RELEASE,
            Acquired::TimeOut => TIME_OUT,
            Acquired::Nothing => NONE,
        }
    }

    /// A turn's work settled with `pending` works of its key here: `RELEASE_FIRST` (the lease,
    /// before its caller hears) or `NONE`.
    pub fn settled(pending: u32, abandoned: bool) -> f64 {
        use crate::wire::turns::{NONE, RELEASE_FIRST};
        if Turns::<()>::settled(pending as usize, abandoned) {
            RELEASE_FIRST
        } else {
            NONE
        }
    }

    /// A turn of `key` ended still holding `lease`: kept for the next turn. Answers a lease to
    /// release (`undefined` for none).
    pub fn ended(&mut self, key: &str, lease: JsValue) -> JsValue {
        self.turns.ended(key, lease).unwrap_or_default()
    }

    /// `key` went idle: the lease left, to release (`undefined` for none).
    pub fn idle(&mut self, key: &str) -> JsValue {
        self.turns.idle(key).unwrap_or_default()
    }
}
