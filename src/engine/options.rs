//! What a caller may vary, and the checks every front end shares: a serializer's options
//! ([`SerializerOptions`], [`Coalesce`]) and a lock's ([`LockOptions`]). A value out of range is
//! refused here, once, for both front ends.
//!
//! Every duration is one host timers honour: at most [`MAX_TIMEOUT_MS`] (2^31 − 1 ms, the
//! largest delay `setTimeout` takes; Node fires a longer one after 1 ms). A longer deadline,
//! wait, lease, bound or skew is refused, never clamped: a lease the caller thinks is 35 days
//! long must not quietly be 24.

use core::fmt;
use std::rc::Rc;

use super::messages;
use super::slots::MAX_CONCURRENCY;

/// The longest delay a timer takes: the largest `setTimeout` honours (2^31 − 1 ms, ~24.8 days).
/// Every duration an option gives — deadlines, waits, leases, bounds and skews — is at most
/// this.
pub const MAX_TIMEOUT_MS: u32 = i32::MAX as u32;

/// The default deadline of one work: 30 s is over ten times the slowest legitimate run of a
/// handful of store round-trips, and short enough that a stalled dependency holds one key for
/// half a minute rather than until restart.
pub const DEFAULT_TIMEOUT_MS: u32 = 30_000;

/// A `timeoutMs` that is not a finite number in `1..=MAX_TIMEOUT_MS`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeoutOutOfRange(pub f64);

impl fmt::Display for TimeoutOutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&messages::fill(
            messages::TIMEOUT_RANGE,
            &[
                ("what", "timeoutMs"),
                ("max", &MAX_TIMEOUT_MS.to_string()),
                ("value", &self.0.to_string()),
            ],
        ))
    }
}

impl std::error::Error for TimeoutOutOfRange {}

/// Checks a deadline in milliseconds; fractions are allowed, as `setTimeout` allows them.
pub(crate) fn validate_timeout_ms(ms: f64) -> Result<f64, TimeoutOutOfRange> {
    if ms.is_finite() && (1.0..=f64::from(MAX_TIMEOUT_MS)).contains(&ms) {
        Ok(ms)
    } else {
        Err(TimeoutOutOfRange(ms))
    }
}

/// A `maxPending` that is neither a whole number from 1 up nor infinity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaxPendingOutOfRange(pub f64);

impl fmt::Display for MaxPendingOutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&messages::fill(
            messages::MAX_PENDING_RANGE,
            &[("what", "maxPending"), ("value", &self.0.to_string())],
        ))
    }
}

impl std::error::Error for MaxPendingOutOfRange {}

/// Checks a bound on a key's works (queued or running): a whole number ≥ 1, or `+∞` for none.
/// Bounds past what a queue can hold mean no bound.
pub(crate) fn validate_max_pending(max: f64) -> Result<usize, MaxPendingOutOfRange> {
    if max == f64::INFINITY || (max >= 1.0 && max.fract() == 0.0 && max >= usize::MAX as f64) {
        Ok(usize::MAX)
    } else if max >= 1.0 && max.fract() == 0.0 {
        Ok(max as usize)
    } else {
        Err(MaxPendingOutOfRange(max))
    }
}

/// A `concurrency` that is not a whole number from 1 to [`MAX_CONCURRENCY`](crate::MAX_CONCURRENCY).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConcurrencyOutOfRange(pub f64);

impl fmt::Display for ConcurrencyOutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&messages::fill(
            messages::CONCURRENCY_RANGE,
            &[
                ("what", "concurrency"),
                ("max", &MAX_CONCURRENCY.to_string()),
                ("value", &self.0.to_string()),
            ],
        ))
    }
}

impl std::error::Error for ConcurrencyOutOfRange {}

/// Checks how many works of one key may run at once: a whole number from 1 to
/// [`MAX_CONCURRENCY`](crate::MAX_CONCURRENCY).
pub(crate) fn validate_concurrency(n: f64) -> Result<usize, ConcurrencyOutOfRange> {
    if n.fract() == 0.0 && (1.0..=MAX_CONCURRENCY as f64).contains(&n) {
        Ok(n as usize)
    } else {
        Err(ConcurrencyOutOfRange(n))
    }
}

/// The most starts a rate's `limit` allows in one period.
pub const MAX_RATE_LIMIT: u32 = 1000;

/// A pace: at most `limit` works of a key start in any window of `period_ms` milliseconds
/// ([`SerializerOptions::with_rate`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub(crate) limit: u32,
    pub(crate) period_ms: f64,
}

impl Rate {
    /// The most starts of a key in one window.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The window's length, in milliseconds.
    pub fn period_ms(&self) -> f64 {
        self.period_ms
    }
}

/// A `rate` out of range: its `limit` is not a whole number from 1 to [`MAX_RATE_LIMIT`], or
/// its `periodMs` is not a finite number from 1 to [`MAX_TIMEOUT_MS`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateOutOfRange {
    /// `rate.limit`.
    Limit(f64),
    /// `rate.periodMs`.
    PeriodMs(f64),
}

impl fmt::Display for RateOutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (template, what, max, value) = match *self {
            RateOutOfRange::Limit(value) => (
                messages::CONCURRENCY_RANGE,
                "rate.limit",
                MAX_RATE_LIMIT,
                value,
            ),
            RateOutOfRange::PeriodMs(value) => (
                messages::TIMEOUT_RANGE,
                "rate.periodMs",
                MAX_TIMEOUT_MS,
                value,
            ),
        };
        f.write_str(&messages::fill(
            template,
            &[
                ("what", what),
                ("max", &max.to_string()),
                ("value", &value.to_string()),
            ],
        ))
    }
}

impl std::error::Error for RateOutOfRange {}

/// What a serializer may vary, checked: make it with [`SerializerOptions::new`] (and
/// [`with_concurrency`](SerializerOptions::with_concurrency),
/// [`with_rate`](SerializerOptions::with_rate)), or take the default (30 s deadlines, no bound,
/// one work of a key at a time, no pace).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SerializerOptions {
    pub(crate) timeout_ms: f64,
    pub(crate) max_pending: usize,
    pub(crate) concurrency: usize,
    pub(crate) rate: Option<Rate>,
}

/// An option [`SerializerOptions::new`] refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SerializerOptionError {
    /// `timeoutMs` is out of range.
    TimeoutMs(TimeoutOutOfRange),
    /// `maxPending` is out of range.
    MaxPending(MaxPendingOutOfRange),
    /// `concurrency` is out of range.
    Concurrency(ConcurrencyOutOfRange),
    /// `rate` is out of range.
    Rate(RateOutOfRange),
}

impl fmt::Display for SerializerOptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SerializerOptionError::TimeoutMs(error) => error.fmt(f),
            SerializerOptionError::MaxPending(error) => error.fmt(f),
            SerializerOptionError::Concurrency(error) => error.fmt(f),
            SerializerOptionError::Rate(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for SerializerOptionError {}

impl SerializerOptions {
    /// Each work's deadline in milliseconds — a finite number from 1 to [`MAX_TIMEOUT_MS`]
    /// (fractions allowed, as `setTimeout` allows them) — and the most works one key may have
    /// queued or running: a whole number from 1 up, or `f64::INFINITY` for no bound (a bound
    /// past what a queue can hold is no bound).
    ///
    /// # Errors
    /// The first option out of range.
    pub fn new(timeout_ms: f64, max_pending: f64) -> Result<Self, SerializerOptionError> {
        Ok(SerializerOptions {
            timeout_ms: validate_timeout_ms(timeout_ms)
                .map_err(SerializerOptionError::TimeoutMs)?,
            max_pending: validate_max_pending(max_pending)
                .map_err(SerializerOptionError::MaxPending)?,
            concurrency: 1,
            rate: None,
        })
    }

    /// These options with at most `concurrency` works of one key running at once — a whole
    /// number from 1 (the default: one at a time) to [`MAX_CONCURRENCY`](crate::MAX_CONCURRENCY). They start in call
    /// order, each in a slot of its key ([`WorkSignal::slot`](crate::WorkSignal::slot)); `max_pending`, deadlines and
    /// coalescing stay per work.
    ///
    /// # Errors
    /// [`SerializerOptionError::Concurrency`] when it is out of range.
    ///
    /// # Examples
    ///
    /// Two works of a key run at once; the third waits for a slot:
    ///
    /// ```
    /// use std::future::{pending, Future};
    /// use std::pin::pin;
    /// use std::task::{Context, Poll, Waker};
    /// use keyturn::{KeyedSerializer, ManualClock, SerializerOptions};
    ///
    /// let options = SerializerOptions::default().with_concurrency(2.0)?;
    /// let serializer = KeyedSerializer::with_options(options, ManualClock::new());
    /// let mut cx = Context::from_waker(Waker::noop());
    /// let mut first = pin!(serializer.run("tenant-1", |_| pending::<u16>()));
    /// let mut second = Box::pin(serializer.run("tenant-1", |_| pending::<u16>()));
    /// let mut third = pin!(serializer.run("tenant-1", |signal| async move { signal.slot() }));
    /// assert!(first.as_mut().poll(&mut cx).is_pending());
    /// assert!(second.as_mut().poll(&mut cx).is_pending());
    /// assert!(third.as_mut().poll(&mut cx).is_pending(), "two run ahead of it");
    /// assert_eq!(serializer.stats().running, 2);
    ///
    /// drop(second); // its caller gave up: its slot, 1, is free
    /// assert_eq!(third.as_mut().poll(&mut cx), Poll::Ready(Ok(1)));
    /// # Ok::<(), keyturn::SerializerOptionError>(())
    /// ```
    pub fn with_concurrency(self, concurrency: f64) -> Result<Self, SerializerOptionError> {
        Ok(SerializerOptions {
            concurrency: validate_concurrency(concurrency)
                .map_err(SerializerOptionError::Concurrency)?,
            ..self
        })
    }

    /// These options with a pace: at most `limit` works of a key start in any window of
    /// `period_ms` milliseconds (a window sliding over start times, so no burst at a window's
    /// edge lets `2 × limit` through). `limit` is a whole number from 1 to [`MAX_RATE_LIMIT`];
    /// `period_ms` a finite number from 1 to [`MAX_TIMEOUT_MS`].
    ///
    /// A work waits for its pace in line, as it waits for its turn: works start in call order,
    /// once a slot is free (see [`with_concurrency`](Self::with_concurrency)) and the pace
    /// allows; a waiting work's caller may give up on it, `max_pending` bounds the line, and
    /// coalescing calls join a work that has not started. A work's deadline runs from its
    /// start, so a wait for the pace does not eat into it. A key's recent starts outlive its
    /// busy spell: a key called again within the period waits as if it had stayed busy.
    ///
    /// In one isolate, on its monotonic clock. Not a promise about when a work ends: the pace
    /// counts starts, and `concurrency` bounds how many run.
    ///
    /// # Errors
    /// [`SerializerOptionError::Rate`] when `limit` or `period_ms` is out of range.
    ///
    /// # Examples
    ///
    /// Two starts of a key per second: the third waits for the first's second to pass.
    ///
    /// ```
    /// use std::future::Future;
    /// use std::pin::pin;
    /// use std::task::{Context, Poll, Waker};
    /// use keyturn::{KeyedSerializer, ManualClock, SerializerOptions};
    ///
    /// let options = SerializerOptions::default().with_rate(2.0, 1000.0)?;
    /// let clock = ManualClock::new();
    /// let serializer = KeyedSerializer::with_options(options, clock.clone());
    /// let mut cx = Context::from_waker(Waker::noop());
    /// let mut first = pin!(serializer.run("api-key-1", |_| async { 1 }));
    /// let mut second = pin!(serializer.run("api-key-1", |_| async { 2 }));
    /// let mut third = pin!(serializer.run("api-key-1", |_| async { 3 }));
    /// assert_eq!(first.as_mut().poll(&mut cx), Poll::Ready(Ok(1)));
    /// assert_eq!(second.as_mut().poll(&mut cx), Poll::Ready(Ok(2)));
    /// assert!(third.as_mut().poll(&mut cx).is_pending(), "two started this second");
    /// clock.advance(1000.0);
    /// assert_eq!(third.as_mut().poll(&mut cx), Poll::Ready(Ok(3)));
    /// # Ok::<(), keyturn::SerializerOptionError>(())
    /// ```
    pub fn with_rate(self, limit: f64, period_ms: f64) -> Result<Self, SerializerOptionError> {
        let limit_ok = limit.fract() == 0.0 && (1.0..=f64::from(MAX_RATE_LIMIT)).contains(&limit);
        if !limit_ok {
            return Err(SerializerOptionError::Rate(RateOutOfRange::Limit(limit)));
        }
        let period_ms = validate_timeout_ms(period_ms)
            .map_err(|_| SerializerOptionError::Rate(RateOutOfRange::PeriodMs(period_ms)))?;
        Ok(SerializerOptions {
            rate: Some(Rate {
                limit: limit as u32,
                period_ms,
            }),
            ..self
        })
    }

    /// [`new`](Self::new) with the options a caller gave, `None` for each it left out: the
    /// defaults are [`DEFAULT_TIMEOUT_MS`] and no bound.
    ///
    /// # Errors
    /// The first option out of range.
    pub fn given(
        timeout_ms: Option<f64>,
        max_pending: Option<f64>,
    ) -> Result<Self, SerializerOptionError> {
        Self::new(
            timeout_ms.unwrap_or(f64::from(DEFAULT_TIMEOUT_MS)),
            max_pending.unwrap_or(f64::INFINITY),
        )
    }

    /// Each work's deadline, in milliseconds.
    pub fn timeout_ms(&self) -> f64 {
        self.timeout_ms
    }

    /// Most works one key may have queued or running; `usize::MAX` for no bound.
    pub fn max_pending(&self) -> usize {
        self.max_pending
    }

    /// Most works of one key that run at once.
    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// The pace of a key's starts, if any.
    pub fn rate(&self) -> Option<Rate> {
        self.rate
    }

    /// These options with pace `rate` (or none): a serializer over a store keeps its pace in its
    /// records, its core none.
    pub(crate) fn paced_by(self, rate: Option<Rate>) -> Self {
        SerializerOptions { rate, ..self }
    }
}

impl Default for SerializerOptions {
    fn default() -> Self {
        SerializerOptions {
            timeout_ms: f64::from(DEFAULT_TIMEOUT_MS),
            max_pending: usize::MAX,
            concurrency: 1,
            rate: None,
        }
    }
}

/// Whether a call may share a queued work instead of adding one of its own (JS: the call's
/// `coalesce` option; see the crate docs' "Coalescing calls").
///
/// Meant for works that re-decide from a fresh read: one run that starts after the last of
/// several waiting calls decides for all of them. A call joins only the last work of its key,
/// only while that work waits (its deadline not running), only when it coalesces the same way
/// and has the same deadline length — so FIFO holds, and every call is answered by a run that
/// started after it was made.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Coalesce {
    /// Never joins a work, and its own work is never joined (JS: `false` or absent).
    #[default]
    Never,
    /// Joins, and is joined by, calls that coalesce with `Yes` (JS: `true`).
    Yes,
    /// Joins, and is joined by, calls of the group of this name only (JS: a non-empty string):
    /// one key often carries several decisions, and a call stands in only for its own kind.
    Group(Rc<str>),
}

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
    /// same: one whose records say another is refused ([`LockError::ConcurrencyMismatch`](crate::LockError::ConcurrencyMismatch)).
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

/// An option out of range: `waitMs` must be from 0 to [`MAX_TIMEOUT_MS`], `staleMs` above 0 and
/// at most [`MAX_TIMEOUT_MS`], `maxClockSkewMs` from 0 to [`MAX_TIMEOUT_MS`], `storeTimeoutMs`
/// from 1 to [`MAX_TIMEOUT_MS`]: every duration one a host timer honours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptionError {
    /// `waitMs` is negative, NaN, or past [`MAX_TIMEOUT_MS`].
    WaitMs(f64),
    /// `staleMs` is not positive, NaN, or past [`MAX_TIMEOUT_MS`].
    StaleMs(f64),
    /// `maxClockSkewMs` is negative, NaN, or past [`MAX_TIMEOUT_MS`].
    MaxClockSkewMs(f64),
    /// `storeTimeoutMs` is below 1, NaN, or past [`MAX_TIMEOUT_MS`].
    StoreTimeoutMs(f64),
    /// `concurrency` is not a whole number from 1 to
    /// [`MAX_CONCURRENCY`](crate::MAX_CONCURRENCY).
    Concurrency(f64),
    /// A serializer over a store said it means one isolate (`scope: 'isolate'`): a store is
    /// what orders a key across isolates.
    ScopeOverStore,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (template, what, value) = match self {
            OptionError::ScopeOverStore => return f.write_str(messages::SCOPE_OVER_STORE),
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
        if !(0.0..=max).contains(&self.wait_ms) {
            return Err(OptionError::WaitMs(self.wait_ms));
        }
        if !(self.stale_ms > 0.0 && self.stale_ms <= max) {
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
