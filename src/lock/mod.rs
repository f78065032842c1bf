//! A lease lock over any [`LockStore`](crate::store::LockStore): the lock file of `board-lock.ts`
//! (a board's write lock: exclusive create, stale takeover, token release) as a record in a store with a conditional put, with fencing, renewable leases and a
//! local FIFO.
//!
//! The conditional create is the decision: two contenders that both see no record cannot both
//! create it. A record older than `staleMs` is a holder that died, and is taken over — by one
//! compare-and-set on the version that was read, so a rival's fresh record is never lost (the
//! file lock's `rm` could lose one). Only the holder's token releases a record, again by CAS, so a
//! late release after a takeover changes nothing. Every acquisition raises the record's fence, to
//! at least its clock's ([`FENCES_PER_MS`]).
//!
//! Every rule lives in one step machine, [`LockCore`] (`core.rs`), which makes no call of any
//! kind: [`LockManager`] (`manager.rs`) drives it for Rust callers, the JS package's `lock.js`
//! for JavaScript ones, each making the store calls, sleeps and wake-ups it asks for.
//!
//! Within one isolate, contenders for a name queue in FIFO order and only the head talks to the
//! store; a release hands the lease to the next local waiter with one CAS that bumps the fence
//! and reserves fences for the waiters behind (up to [`MAX_BATCH`]), so the hand-offs after it
//! need no store call. Streaks of local hand-offs end after [`MAX_LOCAL_STREAK_MS`], so other
//! isolates get their turn.
//!
//! A lease runs `staleMs` from its record's `at`; [`Lock::renew`] moves it to now with one CAS.
//! A holder that neither renews nor releases holds the lock until its lease ends, here as in
//! other isolates: then it has lost it, and the next contender takes the record over. Protected
//! writes carry [`Lock::fence`] so the resource refuses a holder that lost its lease. A record
//! carries the lease its holder promised itself; a taker takes it over once it is older than
//! that lease plus `maxClockSkewMs` by the taker's clock, or once the taker has watched it stay
//! unchanged for that lease on its monotonic clock — which needs no clock agreement. A write
//! whose answer was lost is read back; a store call that does not answer within
//! `storeTimeoutMs` has failed.

use ::core::fmt;
pub(crate) mod core;
mod manager;

pub(crate) use self::core::Succession;
pub use self::core::{LockStats, FENCES_PER_MS};
pub(crate) use self::manager::beside;
pub use self::manager::{Lock, LockManager};

use crate::clock::{TimerError, MAX_TIMEOUT_MS};
use crate::key::KeyError;
use crate::messages;
use crate::serializer::{validate_concurrency, ConcurrencyOutOfRange};
use crate::store::StoreError;

/// How long one acquisition waits for a live holder before answering nothing, as `board-lock.ts`.
pub const LOCK_WAIT_MS: u32 = 100;

/// The age past which a held record is abandoned and taken over, as `board-lock.ts`.
pub const LOCK_STALE_MS: u32 = 2_000;

/// How many abandoned records one acquisition takes over before it stops trying, as
/// `board-lock.ts`.
pub(crate) const TAKEOVERS: u32 = 2;

/// How long a name may pass from hand to hand within one isolate before its record is freed for
/// other isolates: `board-lock.ts`'s whole wait, so a remote contender that arrived at the start of a
/// streak still finds the record free before its default wait is over.
pub const MAX_LOCAL_STREAK_MS: f64 = LOCK_WAIT_MS as f64;

/// Most fences one hand-off CAS reserves for the local waiters in line behind it.
pub(crate) const MAX_BATCH: usize = 64;

/// The longest pause between attempts: a release by another isolate is seen within this.
pub(crate) const MAX_POLL_MS: f64 = 25.0;

/// What a caller may vary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LockOptions {
    /// How long to wait for a live holder, in milliseconds; 0 tries once.
    pub wait_ms: f64,
    /// The lease this holder promises itself, in milliseconds: its record is abandoned once it
    /// is that old (or a taker's own `stale_ms`, if longer) and taken over.
    pub stale_ms: f64,
    /// How far apart isolates' wall clocks may be, in milliseconds: a held record is taken over
    /// by its age only once older than its lease plus this. 0, the default, is
    /// `board-lock.ts`'s rule (clocks agree). Whatever the clocks say, a record watched
    /// unchanged for its lease on this isolate's monotonic clock is taken over.
    pub max_clock_skew_ms: f64,
    /// The bound on one store call, in milliseconds: a call not answered by then has failed,
    /// its outcome unknown. `None`, the default: `stale_ms`.
    pub store_timeout_ms: Option<f64>,
    /// How many holders the name has at once — its slots, each a record of its own
    /// ([`slot_name`](crate::slot_name)): a whole number from 1 (the default: a mutex) to
    /// [`MAX_CONCURRENCY`](crate::MAX_CONCURRENCY). Every acquisition of a name must give the
    /// same: one whose records say another is refused ([`LockError::ConcurrencyMismatch`]).
    pub concurrency: f64,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            wait_ms: f64::from(LOCK_WAIT_MS),
            stale_ms: f64::from(LOCK_STALE_MS),
            max_clock_skew_ms: 0.0,
            store_timeout_ms: None,
            concurrency: 1.0,
        }
    }
}

/// An option out of range: `waitMs` must be a finite number ≥ 0, `staleMs` finite and > 0,
/// `maxClockSkewMs` from 0 to [`MAX_TIMEOUT_MS`], `storeTimeoutMs` from 1 to
/// [`MAX_TIMEOUT_MS`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptionError {
    /// `waitMs` is negative, NaN or infinite.
    WaitMs(f64),
    /// `staleMs` is not positive, or NaN or infinite.
    StaleMs(f64),
    /// `maxClockSkewMs` is negative, NaN, or past [`MAX_TIMEOUT_MS`].
    MaxClockSkewMs(f64),
    /// `storeTimeoutMs` is below 1, NaN, or past [`MAX_TIMEOUT_MS`].
    StoreTimeoutMs(f64),
    /// `concurrency` is not a whole number from 1 to
    /// [`MAX_CONCURRENCY`](crate::MAX_CONCURRENCY).
    Concurrency(f64),
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (template, what, value) = match self {
            // The serializer's error for the same rule says it.
            OptionError::Concurrency(value) => return ConcurrencyOutOfRange(*value).fmt(f),
            OptionError::WaitMs(value) => (messages::WAIT_RANGE, "waitMs", value),
            OptionError::StaleMs(value) => (messages::STALE_RANGE, "staleMs", value),
            OptionError::MaxClockSkewMs(value) => (messages::SKEW_RANGE, "maxClockSkewMs", value),
            OptionError::StoreTimeoutMs(value) => {
                (messages::TIMEOUT_RANGE, "storeTimeoutMs", value)
            }
        };
        f.write_str(&messages::fill(
            template,
            &[
                ("what", what),
                ("value", &value.to_string()),
                ("max", &MAX_TIMEOUT_MS.to_string()),
            ],
        ))
    }
}

impl std::error::Error for OptionError {}

impl LockOptions {
    /// The options a caller gave, `None` for each it left out: the defaults are
    /// [`LOCK_WAIT_MS`], [`LOCK_STALE_MS`], no clock skew allowed, and a bound of one lease on
    /// each store call. Not checked: see [`validate`](Self::validate).
    pub fn given(
        wait_ms: Option<f64>,
        stale_ms: Option<f64>,
        max_clock_skew_ms: Option<f64>,
        store_timeout_ms: Option<f64>,
    ) -> Self {
        let default = LockOptions::default();
        LockOptions {
            wait_ms: wait_ms.unwrap_or(default.wait_ms),
            stale_ms: stale_ms.unwrap_or(default.stale_ms),
            max_clock_skew_ms: max_clock_skew_ms.unwrap_or(default.max_clock_skew_ms),
            store_timeout_ms,
            concurrency: default.concurrency,
        }
    }

    /// These options with `concurrency` holders of a name at once (not checked: see
    /// [`validate`](Self::validate)).
    pub fn with_concurrency(self, concurrency: f64) -> Self {
        LockOptions {
            concurrency,
            ..self
        }
    }

    /// The name's slots: [`concurrency`](Self::concurrency) as a count, once validated.
    pub(crate) fn slots(&self) -> u16 {
        self.concurrency as u16
    }

    /// Checks the options.
    pub fn validate(self) -> Result<Self, OptionError> {
        let max = f64::from(MAX_TIMEOUT_MS);
        if !(self.wait_ms.is_finite() && self.wait_ms >= 0.0) {
            return Err(OptionError::WaitMs(self.wait_ms));
        }
        if !(self.stale_ms.is_finite() && self.stale_ms > 0.0) {
            return Err(OptionError::StaleMs(self.stale_ms));
        }
        if !(0.0..=max).contains(&self.max_clock_skew_ms) {
            return Err(OptionError::MaxClockSkewMs(self.max_clock_skew_ms));
        }
        validate_concurrency(self.concurrency)
            .map_err(|ConcurrencyOutOfRange(n)| OptionError::Concurrency(n))?;
        match self.store_timeout_ms {
            Some(ms) if !(1.0..=max).contains(&ms) => Err(OptionError::StoreTimeoutMs(ms)),
            _ => Ok(self),
        }
    }

    /// The bound on one store call: `store_timeout_ms`, or the lease.
    pub fn store_timeout(&self) -> f64 {
        self.store_timeout_ms.unwrap_or(self.stale_ms)
    }
}

/// Why an acquisition or a release failed. A live holder is not an error: that is `Ok(None)`.
#[derive(Debug, Clone, PartialEq)]
pub enum LockError {
    /// The name was refused; nothing was asked of the store.
    InvalidName(KeyError),
    /// An option was out of range; nothing was asked of the store.
    InvalidOption(OptionError),
    /// The store failed. An acquisition that fails holds nothing; a release that fails may have
    /// left the record held (it then goes stale and is taken over).
    Store(StoreError),
    /// The platform refused a timer for a wait; the acquisition holds nothing.
    Timer(TimerError),
    /// A live holder kept the name for the whole wait ([`LockManager::with_lock`]; an
    /// acquisition answers `None` instead).
    Unavailable {
        /// The lock's name.
        name: String,
        /// How long it waited, in milliseconds.
        wait_ms: f64,
    },
    /// The name is taken `found` at a time — as a record of it says, or an acquisition of it
    /// in this isolate — and this acquisition asked for `asked`: nothing was written.
    ConcurrencyMismatch {
        /// The lock's name.
        name: String,
        /// The acquisition's `concurrency`.
        asked: u16,
        /// The name's, as found.
        found: u16,
    },
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::InvalidName(error) => f.write_str(&error.message("lock name")),
            LockError::InvalidOption(error) => error.fmt(f),
            LockError::Store(error) => error.fmt(f),
            LockError::Timer(error) => error.fmt(f),
            LockError::Unavailable { name, wait_ms } => f.write_str(&messages::fill(
                messages::LOCK_UNAVAILABLE,
                &[("key", name), ("waitMs", &wait_ms.to_string())],
            )),
            LockError::ConcurrencyMismatch { name, asked, found } => f.write_str(&messages::fill(
                messages::CONCURRENCY_MISMATCH,
                &[
                    ("name", name),
                    ("asked", &asked.to_string()),
                    ("found", &found.to_string()),
                ],
            )),
        }
    }
}

impl std::error::Error for LockError {}

impl From<TimerError> for LockError {
    fn from(error: TimerError) -> Self {
        LockError::Timer(error)
    }
}

impl From<StoreError> for LockError {
    fn from(error: StoreError) -> Self {
        LockError::Store(error)
    }
}
