//! The serializer over a store's turns for JavaScript: the crate's [`Turns`] machine behind a
//! handle the package's `js/serializer/leased.js` drives. It lives in the serializer's module:
//! what to do with a turn's lease is the serializer's rule; the leases themselves are the lock
//! module's objects, held here as JS values.

use wasm_bindgen::prelude::*;

use super::options::{lock_options, refusal};
use crate::serializer::Turns;

/// The serializer over a store's turns ([`Turns`]): the leases left between turns, by the id of
/// their key's line (the JS's `line.id`: unique among busy keys, and the key's lease is taken
/// before it goes idle), as
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
    /// Checks the turns' lease options (numbers; `store_timeout_ms` `NaN` for the default): 0,
    /// or the lock binding's refusal code for the first out of range.
    #[wasm_bindgen(js_name = checkLease)]
    pub fn check_lease(stale_ms: f64, max_clock_skew_ms: f64, store_timeout_ms: f64) -> f64 {
        match lock_options(0.0, stale_ms, max_clock_skew_ms, store_timeout_ms).validate() {
            Ok(_) => 0.0,
            Err(error) => refusal(error),
        }
    }

    /// For turns whose leases run `stale_ms` ([`TurnsBinding::check_lease`] took it).
    #[wasm_bindgen(constructor)]
    pub fn new(stale_ms: f64) -> TurnsBinding {
        TurnsBinding {
            turns: Turns::new(stale_ms),
            followers: 0,
            streak_ms: f64::NAN,
        }
    }

    /// A turn of the key of `line` starts with `pending` works of the key here: the lease to
    /// hand on once
    /// its acquisition is in line (`undefined` for none), announcing `followers()`; the
    /// acquisition's streak bound is `streakMs()`.
    pub fn begin(&mut self, line: u32, pending: u32) -> JsValue {
        let begin = self.turns.begin(line, pending as usize);
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

    /// A turn of the key of `line` ended still holding `lease`: kept for the next turn. Answers
    /// a lease to
    /// release (`undefined` for none).
    pub fn ended(&mut self, line: u32, lease: JsValue) -> JsValue {
        self.turns.ended(line, lease).unwrap_or_default()
    }

    /// The key of `line` went idle: the lease left, to release (`undefined` for none).
    pub fn idle(&mut self, line: u32) -> JsValue {
        self.turns.idle(line).unwrap_or_default()
    }
}
