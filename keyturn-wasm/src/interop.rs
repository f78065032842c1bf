//! The one conversion between the engine's typed values and what crosses the wasm boundary:
//! an effect into its kind and the register's fields, a refusal into its code, a store's answer
//! into the engine's. Every code is [`wire`](crate::wire)'s; every rule the `keyturn` crate's —
//! nothing here decides.

use keyturn::engine::{
    Answer, Effect, EnqueueError, Held, Lost, Method, Outcome, Refusal, StoreCall, Why,
};
use keyturn::{
    KeyError, LockOptions, LockStats, OptionError, RateOutOfRange, SerializerOptionError, Stats,
};

use crate::wire::{answer, effect, field, method, outcome, refused, why};

/// An effect's fields, where the JS reads them right after the call that answered it.
pub type Register = [f64; field::LEN];

/// What an effect carries besides numbers: a store call's key (none before the first), record
/// (kept here while the JS reads it from the module's memory) and version; and the key last
/// handed to the JS, which keeps it (a lock's store calls are of one key, and a string out of
/// the module costs a crossing and its decoding).
#[derive(Debug)]
pub struct Details<V> {
    pub key: Option<std::rc::Rc<str>>,
    pub record: String,
    pub version: Option<V>,
    pub told: Option<std::rc::Rc<str>>,
}

impl<V> Default for Details<V> {
    fn default() -> Self {
        Details {
            key: None,
            record: String::new(),
            version: None,
            told: None,
        }
    }
}

/// Sets the register's field `at` (one past the register is written nowhere: see `field::LEN`).
pub fn set(register: &mut Register, at: f64, value: f64) {
    if let Some(slot) = register.get_mut(at as usize) {
        *slot = value;
    }
}

/// Puts `effect` in the register (and its strings in `details`): its kind. `more`: effects
/// still waiting after it.
pub fn load<V>(
    register: &mut Register,
    details: &mut Details<V>,
    effect: Option<Effect<V, u32>>,
    more: bool,
) -> f64 {
    let Some(effect) = effect else {
        return effect::NONE;
    };
    set(register, field::MORE, if more { 1.0 } else { 0.0 });
    let handle = |handle: Option<u32>| handle.map_or(-1.0, f64::from);
    if !LOCKS {
        // A module without locks has no store: none of their effects and outcomes, nor the
        // code to load them (nor to drop them: such an effect never comes).
        let lock_only = match &effect {
            Effect::Store { .. } | Effect::Forget { .. } | Effect::LockLost { .. } => true,
            Effect::Settle { outcome, .. } => lock_only(outcome),
            _ => false,
        };
        if lock_only {
            core::mem::forget(effect);
            return effect::NONE;
        }
    }
    match effect {
        Effect::Ready {
            serializer,
            line,
            handle: h,
        } => {
            set(register, field::HANDLE, f64::from(h));
            set(register, field::SERIALIZER, f64::from(serializer));
            set(register, field::LINE, f64::from(line.0));
            effect::READY
        }
        Effect::Start {
            handle: h,
            slot,
            fence,
            deadline,
            report,
        } => {
            set(register, field::HANDLE, f64::from(h));
            set(register, field::SLOT, f64::from(slot));
            set(register, field::FENCE, fence as f64);
            set(register, field::AT, deadline);
            set(register, field::REPORT, if report { 1.0 } else { 0.0 });
            effect::START
        }
        Effect::Settle { handle: h, outcome } => {
            set(register, field::HANDLE, f64::from(h));
            let code = match outcome {
                Outcome::Done => outcome::DONE,
                Outcome::TimedOut { timeout_ms } => {
                    set(register, field::MS, timeout_ms);
                    outcome::TIMED_OUT
                }
                Outcome::Aborted => outcome::ABORTED,
                Outcome::StoreFailed => outcome::STORE_FAILED,
                Outcome::Held(Held {
                    slot,
                    fence,
                    token_count,
                    held_until,
                    took_over,
                }) => {
                    set(register, field::SLOT, f64::from(slot));
                    set(register, field::FENCE, fence as f64);
                    set(register, field::TOKEN_COUNT, token_count as f64);
                    set(register, field::HELD_UNTIL, held_until);
                    set(register, field::TOOK_OVER, f64::from(u8::from(took_over)));
                    outcome::HELD
                }
                Outcome::Unavailable => outcome::UNAVAILABLE,
                Outcome::Mismatch { found } => {
                    set(register, field::FOUND, f64::from(found));
                    outcome::MISMATCH
                }
                Outcome::Renewed { held_until } => {
                    set(register, field::HELD_UNTIL, held_until);
                    outcome::RENEWED
                }
                Outcome::NotRenewed => outcome::NOT_RENEWED,
                Outcome::Released => outcome::RELEASED,
                Outcome::TimerRefused => outcome::TIMER_REFUSED,
                Outcome::NeverStarted => outcome::NEVER_STARTED,
                Outcome::NotYet { retry_after_ms } => {
                    set(register, field::MS, retry_after_ms.unwrap_or(-1.0));
                    outcome::NOT_YET
                }
            };
            set(register, field::CODE, code);
            effect::SETTLE
        }
        Effect::Abort { handle: h, why } => {
            set(register, field::HANDLE, f64::from(h));
            set(register, field::CODE, why_code(why));
            effect::ABORT
        }
        Effect::Store {
            op,
            owner,
            key,
            call,
        } => {
            set(register, field::HANDLE, handle(owner));
            set(register, field::OP, op.pack());
            set(register, field::METHOD, method_code(call.method()));
            let told = details
                .told
                .as_ref()
                .is_some_and(|told| std::rc::Rc::ptr_eq(told, &key) || **told == *key);
            set(register, field::KEY_TOLD, if told { 1.0 } else { 0.0 });
            details.key = Some(key);
            match call {
                StoreCall::Create { value } => details.record = value,
                StoreCall::Read => {}
                StoreCall::Replace { version, value } => {
                    details.record = value;
                    details.version = Some(version);
                }
                StoreCall::Changed { version, ms } => {
                    details.version = Some(version);
                    set(register, field::MS, ms);
                }
            }
            // The record to write, where the JS reads it in the module's memory: no crossing.
            set(
                register,
                field::RECORD,
                details.record.as_ptr() as usize as f64,
            );
            set(register, field::RECORD_LEN, details.record.len() as f64);
            effect::STORE
        }
        Effect::Forget {
            op,
            owner,
            method,
            bound_ms,
        } => {
            set(register, field::HANDLE, handle(owner));
            set(register, field::OP, op.pack());
            set(register, field::METHOD, method_code(method));
            set(register, field::MS, bound_ms);
            effect::FORGET
        }
        Effect::LockLost { handle: h, why } => {
            set(register, field::HANDLE, f64::from(h));
            set(register, field::CODE, lost_code(why));
            effect::LOCK_LOST
        }
        Effect::Wake { at, keep, early } => {
            set(register, field::AT, at);
            set(register, field::KEEP, if keep { 1.0 } else { 0.0 });
            set(register, field::EARLY, if early { 1.0 } else { 0.0 });
            effect::WAKE
        }
        Effect::Arm {
            handle: h,
            at,
            keep,
            early,
        } => {
            set(register, field::HANDLE, f64::from(h));
            set(register, field::AT, at);
            set(register, field::KEEP, if keep { 1.0 } else { 0.0 });
            set(register, field::EARLY, if early { 1.0 } else { 0.0 });
            effect::ARM
        }
    }
}

/// Whether the module has locks (and serializers over a store); natively, for the tests, it has.
const LOCKS: bool = cfg!(any(not(target_arch = "wasm32"), feature = "lock"));

/// An outcome only a lock call (or a turn over a store) ends with.
fn lock_only(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Outcome::StoreFailed
            | Outcome::Held(_)
            | Outcome::Unavailable
            | Outcome::Mismatch { .. }
            | Outcome::Renewed { .. }
            | Outcome::NotRenewed
            | Outcome::Released
    )
}

fn why_code(why: Why) -> f64 {
    match why {
        Why::TimedOut => why::TIMED_OUT,
        Why::Aborted => why::ABORTED,
        Why::LeaseLost => why::LEASE_LOST,
        Why::TimerRefused => why::TIMER_REFUSED,
    }
}

fn lost_code(lost: Lost) -> f64 {
    match lost {
        Lost::Released => why::RELEASED,
        Lost::Lapsed => why::LAPSED,
        Lost::TakenOver => why::TAKEN_OVER,
    }
}

fn method_code(method: Method) -> f64 {
    match method {
        Method::Create => method::CREATE,
        Method::Read => method::READ,
        Method::Replace => method::REPLACE,
        Method::Changed => method::CHANGED,
    }
}

/// What a store answered (`kind`, with a version where it has one), as the engine takes it.
pub fn answer<V>(kind: f64, version: Option<V>) -> Answer<V> {
    if kind == answer::CREATED {
        Answer::Created(version)
    } else if kind == answer::REPLACED {
        Answer::Replaced(version)
    } else if kind == answer::CHANGED {
        Answer::Changed
    } else if kind == answer::UNCHANGED {
        Answer::Woke
    } else {
        // `FAILED`, or a kind the JS never sends: a failed call.
        Answer::Failed
    }
}

/// A lock's options as the JS gives them: `undefined` for each it left out.
pub fn lock_options(
    wait_ms: Option<f64>,
    stale_ms: Option<f64>,
    max_clock_skew_ms: Option<f64>,
    store_timeout_ms: Option<f64>,
    concurrency: Option<f64>,
) -> LockOptions {
    let options = LockOptions::given(wait_ms, stale_ms, max_clock_skew_ms, store_timeout_ms);
    concurrency.map_or(options, |n| options.with_concurrency(n))
}

/// The code of a lock option out of range.
pub fn option_refusal(error: OptionError) -> f64 {
    match error {
        OptionError::WaitMs(_) => refused::BAD_WAIT,
        OptionError::StaleMs(_) => refused::BAD_STALE,
        OptionError::MaxClockSkewMs(_) => refused::BAD_SKEW,
        OptionError::StoreTimeoutMs(_) => refused::BAD_STORE_TIMEOUT,
        OptionError::Concurrency(_) => refused::BAD_CONCURRENCY,
        OptionError::ScopeOverStore => refused::SCOPE_OVER_STORE,
    }
}

/// The code of a key (or name) refused.
pub fn key_refusal(error: KeyError) -> f64 {
    match error {
        KeyError::Empty => refused::KEY_EMPTY,
        KeyError::TooLong(_) => refused::KEY_TOO_LONG,
    }
}

/// The code of an acquisition refused before it started (a mismatch's `found` is the
/// register's).
pub fn acquire_refusal(error: Refusal) -> f64 {
    match error {
        Refusal::InvalidName(error) => key_refusal(error),
        Refusal::InvalidOption(error) => option_refusal(error),
        Refusal::ConcurrencyMismatch { .. } => refused::CONCURRENCY_MISMATCH,
    }
}

/// The code of a serializer option out of range.
pub fn serializer_refusal(error: SerializerOptionError) -> f64 {
    match error {
        SerializerOptionError::TimeoutMs(_) => refused::BAD_TIMEOUT,
        SerializerOptionError::MaxPending(_) => refused::BAD_MAX_PENDING,
        SerializerOptionError::Concurrency(_) => refused::BAD_CONCURRENCY,
        SerializerOptionError::Rate(RateOutOfRange::Limit(_)) => refused::BAD_RATE_LIMIT,
        SerializerOptionError::Rate(RateOutOfRange::PeriodMs(_)) => refused::BAD_RATE_PERIOD,
    }
}

/// The code of a call refused before it queued.
pub fn enqueue_refusal(error: EnqueueError) -> f64 {
    match error {
        EnqueueError::InvalidKey(error) => key_refusal(error),
        EnqueueError::InvalidTimeout(_) => refused::BAD_TIMEOUT,
        EnqueueError::QueueFull { .. } => refused::QUEUE_FULL,
        EnqueueError::TooManyWorks | EnqueueError::IdleLine => refused::TOO_MANY,
        EnqueueError::Unavailable { .. } => refused::UNAVAILABLE,
    }
}

/// Declares a kind of counters once: their names in JavaScript by index (`constants.js` prints
/// them), and the counter at an index (NaN past the last) — one list, so the two keep one order.
macro_rules! counters {
    ($(#[$doc:meta])* $names:ident, $at:ident($stats:ty) { $($name:literal: $field:ident,)* }) => {
        $(#[$doc])*
        #[cfg_attr(target_arch = "wasm32", allow(dead_code))] // Read by `constants.rs`.
        pub const $names: &[&str] = &[$($name),*];
        /// The counter at `index` in the list above.
        pub fn $at(stats: &$stats, index: f64) -> f64 {
            let values = [$(stats.$field as u64),*];
            values.get(index as usize).map_or(f64::NAN, |&value| value as f64)
        }
    };
}

counters! {
    /// `stats()`'s fields.
    STATS, stat(Stats) {
        "keys": keys,
        "running": running,
        "waiting": waiting,
        "started": started,
        "timedOut": timed_out,
        "aborted": aborted,
        "refused": refused,
        "lateSettled": late_settled,
        "coalesced": coalesced,
        "paced": paced,
        "unavailable": unavailable,
    }
}

counters! {
    /// `lockStats(store)`'s fields.
    LOCK_STATS, lock_stat(LockStats) {
        "held": held,
        "waiting": waiting,
        "acquisitions": acquisitions,
        "handOffs": hand_offs,
        "takeovers": takeovers,
        "storeCalls": store_calls,
        "storeFailures": store_failures,
        "storeTimeouts": store_timeouts,
        "readBacksApplied": read_backs_applied,
        "watches": watches,
        "wakeUps": wake_ups,
        "pollsSaved": polls_saved,
    }
}
