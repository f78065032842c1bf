//! The codes that cross the wasm boundary, and the names the package's JavaScript gives the
//! counters. One source: the bindings answer these, and the build prints them into the
//! package's `constants.js` (`src/bin/constants.rs`), so no code is written twice.

// A code only the JavaScript reads is dead to the Rust side on some builds (each module has one
// binding).
#![allow(dead_code)]

/// Declares a group of codes: one constant each, and the group's table for `constants.js`.
macro_rules! codes {
    ($(#[$doc:meta])* $table:ident: $ty:ty { $($(#[$item:meta])* $name:ident = $value:expr,)* }) => {
        $($(#[$item])* pub const $name: $ty = $value;)*
        $(#[$doc])*
        pub const $table: &[(&str, f64)] = &[$((stringify!($name), $value as f64)),*];
    };
}

/// The serializer binding's answers (`src/serializer.rs`, `js/serializer/`).
pub mod serializer {
    codes! {
        /// Why a call or a serializer was refused (a negative number where a line or ticket
        /// was expected), and what a line change says (bits).
        CODES: f64 {
            /// The key has `maxPending` works queued or running.
            QUEUE_FULL = -1.0,
            /// A deadline (`timeoutMs`) is out of range.
            BAD_TIMEOUT = -2.0,
            /// Every slot of the queue is taken.
            TOO_MANY = -3.0,
            /// The line named is idle (a driver's stale id: a bug).
            IDLE_LINE = -4.0,
            /// The key is empty.
            KEY_EMPTY = -5.0,
            /// The key is over `MAX_KEY_BYTES` in UTF-8.
            KEY_TOO_LONG = -6.0,
            /// The serializer's `maxPending` is out of range.
            BAD_MAX_PENDING = -7.0,
            /// The serializer's `concurrency` is out of range.
            BAD_CONCURRENCY = -8.0,
            /// A line change: the key went idle.
            IDLE = 1.0,
            /// A line change: its (new) head waits to be started.
            NEXT = 2.0,
            /// A caller gave up on a waiting work: it left its line (with the change's bits).
            LEFT = 4.0,
            /// A caller gave up on a running work: it is abandoned.
            ABANDONED = 8.0,
        }
    }

    /// `stats()`'s fields, in the order the binding answers their values.
    pub const STATS: [&str; 9] = [
        "keys",
        "running",
        "waiting",
        "started",
        "timedOut",
        "aborted",
        "refused",
        "lateSettled",
        "coalesced",
    ];
}

/// The lock binding's steps and answers (`src/lock.rs`, `js/lock/`).
pub mod lock {
    codes! {
        /// A step the lock core asks its driver for, what the driver answers, and why an
        /// acquisition was refused (negative).
        CODES: f64 {
            /// `store.create(name, record())`, bounded by `boundMs()`.
            CREATE = 0.0,
            /// `store.read(name)`, bounded by `boundMs()`.
            READ = 1.0,
            /// `store.replace(name, version(), record())`, bounded by `boundMs()`.
            REPLACE = 2.0,
            /// Pause until `wakeAt()`, then answer `WOKE`.
            SLEEP = 3.0,
            /// Wait in line until woken, or `wakeAt()` at the latest, then answer `WOKE`.
            WAIT = 4.0,
            /// The lease is held.
            HELD = 5.0,
            /// A release is done.
            DONE = 6.0,
            /// The lease is lost.
            LOST = 7.0,
            /// The wait is over and nothing is held.
            GIVE_UP = 8.0,
            /// A store call failed and was not found to have applied: report its error.
            ERROR = 9.0,
            /// `store.changed(name, version(), ms)` until `wakeAt()` at the latest, then answer
            /// `WOKE` (changed or not), or `FAILED` if it failed.
            WATCH = 10.0,
            /// The record says the name is taken `found()` at a time, not as asked: nothing
            /// was written, nothing is held.
            MISMATCH = 11.0,
            /// Answer: a create took (its version given) or found a record (none given).
            CREATED = 0.0,
            /// Answer: a replace took (its version given) or found the record changed.
            REPLACED = 1.0,
            /// Answer: a sleep or wait ended.
            WOKE = 2.0,
            /// Answer: the store call failed.
            FAILED = 3.0,
            /// Answer: the store call did not answer within its bound.
            TIMED_OUT = 4.0,
            /// Answer: a watch ended because the store said the record changed.
            CHANGED = 5.0,
            /// Added to a step's code when the core has waiters to wake: ask `takeWoken`.
            WOKEN = 64.0,
            /// What `takeWoken` answers when a line wants a guard (no waiter has this number:
            /// the JS numbers its waiters from 0 up).
            GUARD = 4294967295.0,
            /// Refused: the name is empty.
            NAME_EMPTY = -5.0,
            /// Refused: the name is over `MAX_KEY_BYTES` in UTF-8.
            NAME_TOO_LONG = -6.0,
            /// Refused: `waitMs` is out of range.
            BAD_WAIT = -8.0,
            /// Refused: `staleMs` is out of range.
            BAD_STALE = -9.0,
            /// Refused: `maxClockSkewMs` is out of range.
            BAD_SKEW = -10.0,
            /// Refused: `storeTimeoutMs` is out of range.
            BAD_STORE_TIMEOUT = -11.0,
            /// Refused: `concurrency` is out of range.
            BAD_CONCURRENCY = -12.0,
            /// Refused: acquisitions of the name here take it `found()` at a time, not as
            /// asked.
            CONCURRENCY_MISMATCH = -13.0,
        }
    }

    /// The store method of each store step, by code: `STORE_METHODS[CREATE]` is `"create"`.
    pub const STORE_METHODS: [&str; 3] = ["create", "read", "replace"];

    /// `lockStats(store)`'s fields, in the order the binding answers their values.
    pub const STATS: [&str; 12] = [
        "held",
        "waiting",
        "acquisitions",
        "handOffs",
        "takeovers",
        "storeCalls",
        "storeFailures",
        "storeTimeouts",
        "readBacksApplied",
        "watches",
        "wakeUps",
        "pollsSaved",
    ];
}

/// What the serializer over a store does with a turn's lease (`src/serializer.rs`'s turns).
pub mod turns {
    codes! {
        /// What to do with a turn's lease.
        CODES: f64 {
            /// Nothing to do.
            NONE = 0.0,
            /// Run the work with the lease.
            RUN = 1.0,
            /// Release the lease (nobody here is left to hand it to).
            RELEASE = 2.0,
            /// The wait for the lease ended first: the turn timed out.
            TIME_OUT = 3.0,
            /// Release the lease before the turn's caller hears: it was the key's last turn.
            RELEASE_FIRST = 4.0,
        }
    }
}
