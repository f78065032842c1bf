//! The codes that cross the wasm boundary (the counters' names are `interop`'s, beside their
//! values). One source: the binding answers these, and the build prints them into the
//! package's `constants.js` (`src/bin/constants.rs`), so no code is written twice.
//!
//! An event answers the kind of the first effect it left (`effect::NONE` for none), its fields in
//! the engine's register (`field`); `next()` gives the next one. Each field has one meaning.

// A code only the JavaScript reads is dead to the Rust side on some builds (each module has
// its own exports).
#![allow(dead_code)]

/// Declares a group of codes: one constant each, and the group's table for `constants.js`.
macro_rules! codes {
    ($(#[$doc:meta])* $table:ident { $($(#[$item:meta])* $name:ident = $value:expr,)* }) => {
        $($(#[$item])* pub const $name: f64 = $value;)*
        $(#[$doc])*
        pub const $table: &[(&str, f64)] = &[$((stringify!($name), $value)),*];
    };
}

/// What the host does next: an effect's kind.
pub mod effect {
    codes! {
        /// Effect kinds (`EFFECT_*` in `constants.js`).
        CODES {
            /// No effect (left).
            NONE = 0.0,
            /// A work may start: `HANDLE`, `SERIALIZER`, `LINE`.
            READY = 1.0,
            /// Call a work: `HANDLE`, `SLOT`, `FENCE`, `AT` (its deadline), `REPORT`.
            START = 2.0,
            /// Settle a caller: `HANDLE`, `CODE` (an outcome), and for `HELD` `SLOT`, `FENCE`,
            /// `TOKEN_COUNT`, `HELD_UNTIL`, `TOOK_OVER`; for `RENEWED` `HELD_UNTIL`; for `TIMED_OUT` `MS`; for
            /// `MISMATCH` `FOUND`.
            SETTLE = 3.0,
            /// Abort a running work's signal: `HANDLE`, `CODE` (a why).
            ABORT = 4.0,
            /// Make a store call: `HANDLE` (its call's, or -1), `OP`, `METHOD`, `MS` (a watch's),
            /// `KEY_TOLD`, `RECORD` and `RECORD_LEN` (a write's); the key and the version are
            /// `detail`s.
            STORE = 5.0,
            /// A store call passed its bound: `HANDLE` (its call's, or -1), `OP`, `METHOD`, `MS`.
            FORGET = 6.0,
            /// Abort a lock's signal: `HANDLE`, `CODE` (a why).
            LOCK_LOST = 7.0,
            /// Keep a timer in the call's own context: `HANDLE`, `AT`, `KEEP`, `EARLY` (as
            /// `WAKE`'s).
            ARM = 8.0,
            /// Arm the one timer for all at `AT` (Infinity: clear it), keeping the host alive
            /// (`KEEP`) or not, and not firing before `AT` unless `EARLY`.
            WAKE = 9.0,
        }
    }
}

/// Where each field of an effect is in the register (`FIELD_*`).
pub mod field {
    codes! {
        /// Register indices.
        CODES {
            /// Effects still waiting after this one.
            MORE = 0.0,
            /// The host handle an effect is for (-1: none).
            HANDLE = 1.0,
            /// A serializer's number.
            SERIALIZER = 2.0,
            /// A line's id.
            LINE = 3.0,
            /// A key's (or a lock name's) slot.
            SLOT = 4.0,
            /// A lease's fence.
            FENCE = 5.0,
            /// A time on the monotonic clock (a deadline, a timer's).
            AT = 6.0,
            /// An outcome's or a why's code.
            CODE = 7.0,
            /// A store call's id.
            OP = 8.0,
            /// A store call's method.
            METHOD = 9.0,
            /// A length of time in ms (a deadline's, a bound's, a watch's).
            MS = 10.0,
            /// The concurrency a name is taken at, as found.
            FOUND = 11.0,
            /// The count in a lock's token.
            TOKEN_COUNT = 12.0,
            /// Until when a lease holds, on the wall clock.
            HELD_UNTIL = 13.0,
            /// A work's outcome goes to the engine first (1) or not (0).
            REPORT = 14.0,
            /// The id of what the event made: the entered work's ticket, the new call's.
            ID = 15.0,
            /// The host handle of the work a coalescing call joined (-1: it joined none).
            JOINED = 16.0,
            /// The host handle of the work that left its line, which the engine names no more
            /// (-1: none).
            LEFT = 17.0,
            /// Whether a timer keeps the host alive (1) or only guards (0).
            KEEP = 18.0,
            /// A store call's key is the one `detail(KEY)` last answered (1), or another (0).
            KEY_TOLD = 19.0,
            /// Whether a timer may fire up to a millisecond early (1) or not before its time
            /// (0).
            EARLY = 20.0,
            /// Before this effect is done, the one timer for all starts keeping the host alive
            /// (1) or stops (-1), as a `WAKE` of its time would say; 0: no change.
            ALIVE = 21.0,
            /// Where a store call's record to write is in the module's memory (a byte address),
            /// and its length in bytes (UTF-8): there until the next call into the module.
            RECORD = 22.0,
            RECORD_LEN = 23.0,
            /// A lease just acquired was taken over from a holder found stale (1) or not (0).
            TOOK_OVER = 24.0,
        }
    }
    /// The register's length.
    pub const LEN: usize = 25;
    // A field past the register would be written nowhere (`interop`'s `set` keeps in bounds).
    const _: () = assert!(CODES.len() == LEN);
}

/// How a call ended (`OUTCOME_*`).
pub mod outcome {
    codes! {
        /// Outcome codes.
        CODES {
            DONE = 0.0,
            TIMED_OUT = 1.0,
            ABORTED = 2.0,
            STORE_FAILED = 3.0,
            HELD = 4.0,
            UNAVAILABLE = 5.0,
            MISMATCH = 6.0,
            RENEWED = 7.0,
            NOT_RENEWED = 8.0,
            RELEASED = 9.0,
            TIMER_REFUSED = 10.0,
            NEVER_STARTED = 11.0,
            NOT_YET = 12.0,
        }
    }
}

/// Why a signal aborts (`WHY_*`).
pub mod why {
    codes! {
        /// Why codes: a work's (`TIMED_OUT`, `ABORTED`, `LEASE_LOST`, `TIMER_REFUSED`) and a
        /// lock's (`RELEASED`, `LAPSED`, `TAKEN_OVER`).
        CODES {
            TIMED_OUT = 0.0,
            ABORTED = 1.0,
            LEASE_LOST = 2.0,
            RELEASED = 3.0,
            LAPSED = 4.0,
            TAKEN_OVER = 5.0,
            TIMER_REFUSED = 6.0,
        }
    }
}

/// A store's methods (`METHOD_*`), and their names by code.
pub mod method {
    codes! {
        /// Method codes.
        CODES {
            CREATE = 0.0,
            READ = 1.0,
            REPLACE = 2.0,
            CHANGED = 3.0,
        }
    }
    /// Each method's name, by its code.
    pub const NAMES: [&str; 4] = ["create", "read", "replace", "changed"];
}

/// What happened, for `event(kind, a, b, wall, mono)` (`EVENT_*`).
pub mod event {
    codes! {
        /// Event kinds, with what `a` and `b` are.
        CODES {
            /// A line's next work may start: serializer, line.
            START = 0.0,
            /// A work may start, from its own context: serializer, ticket.
            START_WORK = 1.0,
            /// A work's caller heard: serializer, ticket. The engine names its handle no more.
            DONE = 2.0,
            /// A work that reports settled: serializer, ticket.
            SETTLED = 3.0,
            /// A work's caller gave up: serializer, ticket.
            CANCEL = 4.0,
            /// One caller of a coalescing work left (the last cancels it): serializer, ticket.
            LEAVE = 5.0,
            /// An abandoned work settled after all: serializer.
            LATE_SETTLED = 6.0,
            /// An acquisition's caller gave up: call.
            ABORT = 7.0,
            /// Renew a lock for the handle: lock, handle.
            RENEW = 8.0,
            /// Release a lock for the handle: lock, handle.
            RELEASE = 9.0,
            /// Keep a lock renewed (b = 1) or no longer (b = 0): lock.
            KEEP_RENEWED = 10.0,
            /// A lock's signal is read: lock.
            WATCH = 11.0,
            /// A work's timer fired: serializer, ticket.
            FIRED_WORK = 12.0,
            /// A lock call's timer fired: call.
            FIRED_CALL = 13.0,
            /// Time passed (the shared timer fired).
            TICK = 14.0,
            /// A line's head's caller heard (one work of a key at a time): serializer, line. The
            /// work's handle, let go, in `LEFT`.
            DONE_HEAD = 15.0,
            /// The host refused a timer: a work's (serializer, ticket), a lock call's (-1, call),
            /// or the one timer for all's (-1, -1).
            TIMER_REFUSED = 16.0,
            /// A paced serializer's work was called, at `mono`: serializer, ticket.
            CALLED = 17.0,
        }
    }
}

/// What a store answered, for `answer(op, kind, version, versioned, wall, mono)` (`ANSWER_*`).
pub mod answer {
    codes! {
        /// Answer kinds.
        CODES {
            /// A create: its version, or none when a record exists.
            CREATED = 0.0,
            /// A replace: its version, or none when the version changed.
            REPLACED = 1.0,
            /// A watch: the record changed.
            CHANGED = 2.0,
            /// A watch: its time came unchanged.
            UNCHANGED = 3.0,
            /// The call failed (threw, rejected, answered something else).
            FAILED = 4.0,
            /// A read that found no record (one that found a record is `answerRead`'s).
            READ = 5.0,
        }
    }
}

/// What `query(kind, a, b, key)` asks (`QUERY_*`).
pub mod query {
    codes! {
        /// Query kinds, with what `a`, `b` and `key` are.
        CODES {
            /// The register's address.
            REGISTER = 0.0,
            /// Works of `key` queued or running: serializer.
            PENDING = 1.0,
            /// Keys with works: serializer.
            KEYS = 2.0,
            /// A serializer's counter: serializer, index in `STATS`.
            STAT = 3.0,
            /// The locks' counter: index in `LOCK_STATS`.
            LOCK_STAT = 4.0,
            /// When the engine next needs a tick (monotonic; Infinity for never).
            NEXT_TICK = 5.0,
            /// A serializer's maxPending (Infinity for none): serializer.
            MAX_PENDING = 6.0,
            /// The refusal of a call whose signal aborted before it queued (0: none):
            /// serializer, its timeoutMs (`undefined`: the serializer's), `key`.
            CHECK_CALL = 7.0,
            /// How long an acquisition given waitMs `b` (`undefined`: the default) waits.
            WAIT_MS = 8.0,
            /// The handle of the work right ahead of a waiting work (-1: none): serializer,
            /// ticket.
            AHEAD = 9.0,
            /// Whether a serializer's host says once that it orders keys in one isolate only
            /// (1) or not (0): serializer.
            ONE_ISOLATE = 10.0,
        }
    }
}

/// What `detail(which)` gives (`DETAIL_*`).
pub mod detail {
    codes! {
        /// Detail kinds.
        CODES {
            /// The last STORE effect's key.
            KEY = 1.0,
            /// The last STORE effect's version.
            VERSION = 3.0,
            /// This isolate's id in tokens.
            ISOLATE = 4.0,
        }
    }
}

/// Why a call or an option was refused (`REFUSED_*`): negative, where an effect's kind or an
/// id was expected.
pub mod refused {
    codes! {
        /// Refusal codes.
        CODES {
            QUEUE_FULL = -1.0,
            BAD_TIMEOUT = -2.0,
            TOO_MANY = -3.0,
            KEY_EMPTY = -4.0,
            KEY_TOO_LONG = -5.0,
            BAD_MAX_PENDING = -6.0,
            BAD_CONCURRENCY = -7.0,
            BAD_WAIT = -8.0,
            BAD_STALE = -9.0,
            BAD_SKEW = -10.0,
            BAD_STORE_TIMEOUT = -11.0,
            CONCURRENCY_MISMATCH = -12.0,
            /// A call with `ifAvailable` whose work could not start at once: `MS` is how long
            /// until the pace allows a start, or -1 when a work or a slot holds it up.
            UNAVAILABLE = -13.0,
            BAD_RATE_LIMIT = -14.0,
            BAD_RATE_PERIOD = -15.0,
            SCOPE_OVER_STORE = -17.0,
        }
    }
}
