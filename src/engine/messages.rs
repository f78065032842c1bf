//! Error texts, as templates: `{name}` stands for the value of `name` ([`fill`]). One source:
//! the Rust errors fill them, and the npm package's JavaScript builds its errors from the same
//! templates (its build prints [`ALL`] into the package), so no text is written twice.

/// A work abandoned at its deadline: word for word the text of `keyed-serializer.js` (the
/// per-key serializer keyturn is a drop-in for), so logs and tests
/// that match it keep matching.
pub const TIMEOUT: &str = "serialized work for {key} timed out after {timeoutMs} ms: released, the next notification re-decides";
/// A call refused because its key has `maxPending` works queued or running.
pub const QUEUE_FULL: &str =
    "serialized work for {key} refused: {maxPending} works are queued or running for it already";
/// A live holder kept a lock's name for the whole wait.
pub const LOCK_UNAVAILABLE: &str =
    "lock {key} was held by a live holder for the whole wait of {waitMs} ms";
/// A call with `ifAvailable` whose work could not start at once.
pub const UNAVAILABLE: &str = "serialized work for {key} could not start at once, as ifAvailable asked: a work of the key is ahead of it, no slot is free, or its pace allows no start yet";
/// Where contexts end: a work whose caller's context had ended by the time its turn came.
pub const NEVER_STARTED: &str = "serialized work for {key} never started: its turn came after the request that called it had ended (await the call, or keep the request alive with ctx.waitUntil)";
/// The wasm instance trapped: every call of it fails from then on.
pub const INSTANCE_FAILED: &str = "keyturn's wasm instance failed ({reason}); serializers and locks made before this fail with this error, new ones get a fresh instance";
/// An argument of the wrong type.
pub const WRONG_TYPE: &str = "{what} must be {expected}, got {actual}";
/// An empty key or lock name.
pub const KEY_EMPTY: &str = "{what} must be a non-empty string, got \"\"";
/// A key or lock name over the limit.
pub const KEY_TOO_LONG: &str = "{what} is {bytes} bytes long in UTF-8; at most {max} are allowed";
/// A key or lock name that is not well-formed UTF-16.
pub const KEY_LONE_SURROGATE: &str = "{what} must be well-formed Unicode (it has a lone surrogate)";
/// A deadline out of range.
pub const TIMEOUT_RANGE: &str = "{what} must be a finite number from 1 to {max}, got {value}";
/// A bound on a key's works out of range.
pub const MAX_PENDING_RANGE: &str =
    "{what} must be a whole number from 1 up, or Infinity, got {value}";
/// A `concurrency` out of range.
pub const CONCURRENCY_RANGE: &str = "{what} must be a whole number from 1 to {max}, got {value}";
/// A lock name acquired with a `concurrency` other than its records' (or its holders' here).
pub const CONCURRENCY_MISMATCH: &str = "lock {name} is taken {found} at a time (its records say so, or its holders here), but this acquisition asked for {asked} at a time: a name keeps one concurrency, so use another name for another";
/// A lock's wait out of range.
pub const WAIT_RANGE: &str =
    "{what} must be a finite number of milliseconds from 0 to {max}, got {value}";
/// A clock skew out of range.
pub const SKEW_RANGE: &str =
    "{what} must be a finite number of milliseconds from 0 to {max}, got {value}";
/// A store call that did not answer within its bound.
pub const STORE_TIMED_OUT: &str =
    "store.{method} did not answer within {storeTimeoutMs} ms (its outcome is unknown)";
/// A lease length out of range.
pub const STALE_RANGE: &str =
    "{what} must be a finite number of milliseconds, more than 0 and at most {max}, got {value}";
/// Every slot of a queue is taken.
pub const TOO_MANY_WORKS: &str = "too many works are queued in this isolate";
/// An option name the call does not know; `{also}` is empty, or what the call's options are.
pub const UNKNOWN_OPTION: &str = "{what} has no option {name}: did you mean {closest}?{also}";
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
pub const TURN_LEASE_LOST: &str = "the lease of key {key} was lost (the store refused a renewal)";
/// A lock's signal: released.
pub const LOCK_RELEASED: &str = "the lease on lock {name} was released";
/// A lock's signal: taken over, or past its end.
pub const LOCK_LOST: &str = "the lease on lock {name} was lost: taken over, or past its heldUntil";
/// A lock's signal: its end passed unrenewed.
pub const LOCK_LAPSED: &str = "the lease on lock {name} passed its heldUntil unrenewed";
/// A serializer without a store on Workers, at its first call (unless `scope: 'isolate'`).
pub const ONE_ISOLATE: &str = "a serializer without a store orders each key within one isolate only, and a Worker runs in many: concurrent requests served by other isolates interleave. Pass a store to order keys across isolates, e.g. createKeyedSerializer({ store: new DurableObjectStore(env.LOCKS) }); or, if one isolate is what you mean, say so with createKeyedSerializer({ scope: 'isolate' })";
/// A serializer given a `scope` other than `'isolate'`.
pub const SCOPE_VALUE: &str = "{what} must be 'isolate' or undefined, got {value}";
/// A serializer over a store given `scope: 'isolate'`.
pub const SCOPE_OVER_STORE: &str = "scope: 'isolate' says a serializer orders keys within one isolate, and a store orders them across isolates: pass one or the other";

/// Every template, by the name `constants.js` gives it.
pub const ALL: &[(&str, &str)] = &[
    ("oneIsolate", ONE_ISOLATE),
    ("scopeValue", SCOPE_VALUE),
    ("scopeOverStore", SCOPE_OVER_STORE),
    ("timeout", TIMEOUT),
    ("queueFull", QUEUE_FULL),
    ("lockUnavailable", LOCK_UNAVAILABLE),
    ("unavailable", UNAVAILABLE),
    ("neverStarted", NEVER_STARTED),
    ("instanceFailed", INSTANCE_FAILED),
    ("wrongType", WRONG_TYPE),
    ("keyEmpty", KEY_EMPTY),
    ("keyTooLong", KEY_TOO_LONG),
    ("keyLoneSurrogate", KEY_LONE_SURROGATE),
    ("timeoutRange", TIMEOUT_RANGE),
    ("maxPendingRange", MAX_PENDING_RANGE),
    ("concurrencyRange", CONCURRENCY_RANGE),
    ("concurrencyMismatch", CONCURRENCY_MISMATCH),
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
