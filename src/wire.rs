//! What the crate and the npm package's JavaScript must agree on: the codes that cross the wasm
//! boundary, and the texts of errors. One source: the bindings and the Rust errors use these,
//! and the package build writes them into `constants.js` (`examples/js_constants.rs` includes
//! this very file), so no code or text is written twice.
//!
//! Self-contained on purpose (nothing from `crate::`): the example includes it by path.

// A code or text only the JavaScript uses is dead to the Rust side.
#![allow(dead_code)]

/// Declares a group of codes: one constant each, and the group's table for `constants.js`.
macro_rules! codes {
    ($(#[$doc:meta])* $table:ident: $ty:ty { $($(#[$item:meta])* $name:ident = $value:expr,)* }) => {
        $($(#[$item])* pub const $name: $ty = $value;)*
        $(#[$doc])*
        pub const $table: &[(&str, f64)] = &[$((stringify!($name), $value as f64)),*];
    };
}

/// The serializer binding's answers (`src/js/serializer.rs`, `js/serializer/`).
pub mod serializer {
    codes! {
        /// Why a call was refused (a negative number where a line or ticket was expected), and
        /// what a line change says (bits).
        CODES: f64 {
            /// The key has `maxPending` works queued or running.
            QUEUE_FULL = -1.0,
            /// The call's own deadline is out of range.
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
            /// A line change: the key went idle.
            IDLE = 1.0,
            /// A line change: its (new) head waits to be started.
            NEXT = 2.0,
            /// A cancel found the work not waiting (it runs, or is gone).
            NOT_WAITING = 4.0,
        }
    }

    /// `stats()`'s fields, in the order `SerializerBinding::stats` answers their values
    /// (`Stats::values`).
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

/// The lock binding's steps and answers (`src/js/lock.rs`, `js/lock/`).
pub mod lock {
    codes! {
        /// A step the lock core asks its driver for, what the driver answers, and why an
        /// acquisition was refused (negative).
        CODES: f64 {
            /// `store.create(name, value)`.
            CREATE = 0.0,
            /// `store.read(name)`.
            READ = 1.0,
            /// `store.replace(name, version, value)`.
            REPLACE = 2.0,
            /// Pause until `until()`, then answer `WOKE`.
            SLEEP = 3.0,
            /// Wait in line until woken, or `until()` at the latest, then answer `WOKE`.
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
            /// A read record's `state`, as the JS passes it: "held".
            HELD_STATE = 1.0,
            /// ... "free" (anything else: `NaN`).
            FREE_STATE = 0.0,
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
        }
    }

    /// The store method of each store step, by code: `STORE_METHODS[CREATE]` is `"create"`.
    pub const STORE_METHODS: [&str; 3] = ["create", "read", "replace"];

    /// `lockStats(store)`'s fields, in the order `LockStats::values` answers them.
    pub const STATS: [&str; 9] = [
        "held",
        "waiting",
        "acquisitions",
        "handOffs",
        "takeovers",
        "storeCalls",
        "storeFailures",
        "storeTimeouts",
        "readBacksApplied",
    ];
}

/// The serializer over a store's steps (`src/serializer/turns.rs`).
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

/// Error texts, as templates: `{name}` stands for the value of `name` ([`fill`]).
pub mod messages {
    /// A work abandoned at its deadline: word for word the reference's text, so logs and tests
    /// that match it keep matching.
    pub const TIMEOUT: &str = "serialized work for {key} timed out after {timeoutMs} ms: released, the next notification re-decides";
    /// A call refused because its key has `maxPending` works queued or running.
    pub const QUEUE_FULL: &str =
        "serialized work for {key} refused: {maxPending} works are queued or running for it already";
    /// A live holder kept a lock's name for the whole wait.
    pub const LOCK_UNAVAILABLE: &str =
        "lock {key} was held by a live holder for the whole wait of {waitMs} ms";
    /// The wasm instance trapped: every call of it fails from then on.
    pub const INSTANCE_FAILED: &str = "keyturn's wasm instance failed ({reason}); serializers and locks made before this fail with this error, new ones get a fresh instance";
    /// An argument of the wrong type.
    pub const WRONG_TYPE: &str = "{what} must be {expected}, got {actual}";
    /// An empty key or lock name.
    pub const KEY_EMPTY: &str = "{what} must be a non-empty string, got \"\"";
    /// A key or lock name over the limit.
    pub const KEY_TOO_LONG: &str =
        "{what} is {bytes} bytes long in UTF-8; at most {max} are allowed";
    /// A key or lock name that is not well-formed UTF-16.
    pub const KEY_LONE_SURROGATE: &str =
        "{what} must be well-formed Unicode (it has a lone surrogate)";
    /// A deadline out of range.
    pub const TIMEOUT_RANGE: &str = "{what} must be a finite number from 1 to {max}, got {value}";
    /// A bound on a key's works out of range.
    pub const MAX_PENDING_RANGE: &str =
        "{what} must be a whole number from 1 up, or Infinity, got {value}";
    /// A lock's wait out of range.
    pub const WAIT_RANGE: &str =
        "{what} must be a finite number of milliseconds, 0 or more, got {value}";
    /// A clock skew out of range.
    pub const SKEW_RANGE: &str =
        "{what} must be a finite number of milliseconds from 0 to {max}, got {value}";
    /// A store call that did not answer within its bound.
    pub const STORE_TIMED_OUT: &str =
        "store.{method} did not answer within {storeTimeoutMs} ms (its outcome is unknown)";
    /// A lease length out of range.
    pub const STALE_RANGE: &str =
        "{what} must be a finite number of milliseconds, more than 0, got {value}";
    /// Every slot of a queue is taken.
    pub const TOO_MANY_WORKS: &str = "too many works are queued in this isolate";
    /// An option name the call does not know.
    pub const UNKNOWN_OPTION: &str = "{what} has no option {name}: did you mean {closest}?";
    /// A store that is a Workers KV namespace.
    pub const STORE_IS_KV: &str = "{what} is a Workers KV namespace, which has no conditional put and is eventually consistent: a lock over it would let two holders in at once. Use a store with a conditional put: a Durable Object, R2, Redis or Deno KV.";
    /// A Durable Object stub where its namespace is expected.
    pub const STORE_IS_STUB: &str = "{what} is a Durable Object stub, not a namespace: pass the binding itself (env.LOCKS), and the store routes each lock name to its own object";
    /// A Durable Object namespace whose objects do not answer RPC.
    pub const STORE_NO_RPC: &str = "the Durable Object namespace's objects have no RPC method {method}: the store calls LockDurableObject over RPC, which needs compatibility_date 2024-04-03 or later in wrangler.toml, and the worker must export LockDurableObject";
    /// A store without one of its three methods.
    pub const STORE_METHOD_MISSING: &str =
        "{what}.{method} must be a function (a store has create, read and replace)";
    /// A store call that threw or rejected.
    pub const STORE_FAILED: &str = "store.{method} failed: {message}";
    /// A store call that answered something that is not a store's answer.
    pub const STORE_WRONG_ANSWER: &str = "store.{method} answered a {actual}, not {expected}";
    /// A serializer's turn whose lease the store refused to renew.
    pub const TURN_LEASE_LOST: &str =
        "the lease of key {key} was lost (the store refused a renewal)";
    /// A lock's signal: released.
    pub const LOCK_RELEASED: &str = "the lease on lock {name} was released";
    /// A lock's signal: taken over, or past its end.
    pub const LOCK_LOST: &str =
        "the lease on lock {name} was lost: taken over, or past its heldUntil";
    /// A lock's signal: its end passed unrenewed.
    pub const LOCK_LAPSED: &str = "the lease on lock {name} passed its heldUntil unrenewed";

    /// Every template, by the name `constants.js` gives it.
    pub const ALL: &[(&str, &str)] = &[
        ("timeout", TIMEOUT),
        ("queueFull", QUEUE_FULL),
        ("lockUnavailable", LOCK_UNAVAILABLE),
        ("instanceFailed", INSTANCE_FAILED),
        ("wrongType", WRONG_TYPE),
        ("keyEmpty", KEY_EMPTY),
        ("keyTooLong", KEY_TOO_LONG),
        ("keyLoneSurrogate", KEY_LONE_SURROGATE),
        ("timeoutRange", TIMEOUT_RANGE),
        ("maxPendingRange", MAX_PENDING_RANGE),
        ("waitRange", WAIT_RANGE),
        ("staleRange", STALE_RANGE),
        ("skewRange", SKEW_RANGE),
        ("storeTimedOut", STORE_TIMED_OUT),
        ("tooManyWorks", TOO_MANY_WORKS),
        ("unknownOption", UNKNOWN_OPTION),
        ("storeIsKv", STORE_IS_KV),
        ("storeIsStub", STORE_IS_STUB),
        ("storeNoRpc", STORE_NO_RPC),
        ("storeMethodMissing", STORE_METHOD_MISSING),
        ("storeFailed", STORE_FAILED),
        ("storeWrongAnswer", STORE_WRONG_ANSWER),
        ("turnLeaseLost", TURN_LEASE_LOST),
        ("lockReleased", LOCK_RELEASED),
        ("lockLost", LOCK_LOST),
        ("lockLapsed", LOCK_LAPSED),
    ];

    /// `template` with each `{name}` replaced by its value; an unknown `{name}` stays as it is.
    /// JavaScript's `fill` in `constants.js` does the same.
    pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
        let mut out = String::with_capacity(template.len() + 32);
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let value = after.find('}').and_then(|close| {
                values
                    .iter()
                    .find(|(name, _)| *name == &after[..close])
                    .map(|(_, value)| (close, *value))
            });
            match value {
                Some((close, value)) => {
                    out.push_str(value);
                    rest = &after[close + 1..];
                }
                None => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    #[cfg(test)]
    mod tests {
        use super::{fill, TIMEOUT};

        #[test]
        fn fills_known_names_and_keeps_the_rest() {
            assert_eq!(
                fill(TIMEOUT, &[("key", "k"), ("timeoutMs", "40")]),
                "serialized work for k timed out after 40 ms: released, the next notification re-decides"
            );
            assert_eq!(
                fill("{a} and {b}", &[("a", "1"), ("b", "{a}")]),
                "1 and {a}"
            );
            assert_eq!(fill("{unknown} {a", &[("a", "1")]), "{unknown} {a");
            assert_eq!(fill("", &[]), "");
        }
    }
}
