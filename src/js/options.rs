//! Lock options as both bindings take them from JavaScript: the lock's (`acquire`) and the
//! serializer's turns (`checkLease`) check them by one rule and refuse them by one code.

use crate::lock::{LockOptions, OptionError};
use crate::wire::lock::{BAD_SKEW, BAD_STALE, BAD_STORE_TIMEOUT, BAD_WAIT};

/// Lock options as the JS passes them (numbers it checked are numbers); `store_timeout_ms`
/// `NaN` for the default.
pub(crate) fn lock_options(
    wait_ms: f64,
    stale_ms: f64,
    max_clock_skew_ms: f64,
    store_timeout_ms: f64,
) -> LockOptions {
    LockOptions {
        wait_ms,
        stale_ms,
        max_clock_skew_ms,
        store_timeout_ms: (!store_timeout_ms.is_nan()).then_some(store_timeout_ms),
    }
}

/// The refusal code of an option the core refused.
pub(crate) fn refusal(error: OptionError) -> f64 {
    match error {
        OptionError::WaitMs(_) => BAD_WAIT,
        OptionError::StaleMs(_) => BAD_STALE,
        OptionError::MaxClockSkewMs(_) => BAD_SKEW,
        OptionError::StoreTimeoutMs(_) => BAD_STORE_TIMEOUT,
    }
}
