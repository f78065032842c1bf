//! # keyturn — one turn per key
//!
//! Async work for one key runs one at a time, with a deadline that really aborts it — inside one
//! isolate with the serializer, and across every isolate sharing a store with the lock or the
//! serializer over a store.
//!
//! ## Which one to use
//! - [`KeyedSerializer`] (JS: `createKeyedSerializer`) orders work **within one isolate**: works
//!   for one key never overlap and start in the order they were entered; different keys run
//!   concurrently. It decides nothing across isolates, processes or machines. With
//!   [`SerializerOptions::with_concurrency`] (JS: `{ concurrency }`) up to N works of a key run
//!   at once, still started in call order, each in a slot ([`WorkSignal::slot`]).
//! - [`LockManager`] (JS: `acquireLock`) excludes **across isolates** through a store with a
//!   conditional put ([`LockStore`]): a lease with takeover of dead holders and a fence that
//!   rises with every acquisition. It costs store round trips; within one isolate its
//!   contenders queue locally and hand the lease on.
//! - [`StoreSerializer`] (JS: `createKeyedSerializer({ store })`) is the serializer across
//!   isolates: each turn holds the key's lease in the store, renewed while it runs, and gets its
//!   fence; consecutive turns in one isolate pass the lease on without a store call.
//! - For a work that re-decides from a fresh read, [`KeyedSerializer::run_coalesced`] and
//!   [`StoreSerializer::run_coalesced`] (JS: `{ coalesce: true }`) let a call join the key's
//!   last waiting work of its [`Coalesce`] group: one run answers a burst, each caller getting a
//!   clone of its output.
//!
//! ## What it guarantees, and what it does not
//! - Per-key FIFO in the order calls were made, not the order the events behind them happened:
//!   a decision is order-proof only when the work re-reads the state it decides on.
//! - A work past its deadline is abandoned: its caller gets a timeout error, its signal is
//!   aborted and the key moves on. In JavaScript the abandoned promise cannot be stopped, so a
//!   write already sent can land late; `onLateSettle` reports when it settles. In Rust the work
//!   future is dropped, which stops it at its next `.await`.
//! - A caller may give up: in JavaScript its `signal` takes a waiting work out of the line at
//!   once, or abandons a running one; in Rust dropping the `run` future does the same. A bound
//!   per key ([`SerializerOptions`]) refuses calls past it at once instead of queueing them.
//! - A lock is a lease: it runs `staleMs` from its record's time and [`Lock::renew`] moves it
//!   ([`LockManager::with_lock`] renews while its work runs). A holder whose lease ran out can be
//!   taken over while it still works, so protected writes carry [`Lock::fence`] and the
//!   resource refuses older ones. A record is taken over once older than its lease plus
//!   `max_clock_skew_ms` by the taker's clock, or once watched unchanged for its lease on the
//!   taker's monotonic clock ([`LockOptions`]).
//! - Single-threaded: one wasm instance per isolate, nothing here is `Send`.
//! - Nothing the host throws unwinds through Rust: the JavaScript bindings' cores never call
//!   into JavaScript, and the platform calls Rust makes on wasm (timers, crypto) are `catch`
//!   bindings — a refused timer is a [`TimerError`], not a trap.
//!
//! ## When not to use it
//! - The serializer without a store to order work across isolates: a Cloudflare Worker runs
//!   many isolates, so a serializer in one does not see requests handled by another. Give it a
//!   store ([`StoreSerializer`]), or use the lock.
//! - The lock over a store without a conditional put (Workers KV): it would not exclude anyone.
//! - Either for CPU-bound work: a turn is only as fair as the awaits inside it.
//!
//! ## Time, randomness and stores
//! Everything takes its [`Clock`] and [`Random`]: on wasm32, `PlatformClock` (monotonic, for
//! the serializer's deadlines), `WallClock` (epoch milliseconds, for lock records other isolates
//! read) and `PlatformRandom` (the platform's crypto), with `acquire_lock` for a one-off lock;
//! anywhere, [`ManualClock`] and [`SeededRandom`] make a test deterministic. A store is any
//! [`LockStore`]: three async methods, each one atomic operation; [`MemoryStore`] is the
//! embedded one and the model every real store must match.
//!
//! The crate implements two small reference implementations: `keyed-serializer.js` (a per-key
//! serializer with a deadline, whose order, timeout error and late-settle rule the serializer
//! keeps) and `board-lock.ts` (a lock file with exclusive create, stale takeover and token
//! release, which the lock keeps over a store's conditional put).

#![deny(missing_docs, missing_debug_implementations)]

mod clock;
pub mod engine;
mod front;
mod store;

/// The platform's clocks, timers and randomness on wasm32.
#[cfg(target_arch = "wasm32")]
mod platform;

pub use clock::{Clock, ManualClock, Sleep, TimerError, Waiter};
pub use engine::key::{
    slot_name, validate_key, validate_name, KeyError, MAX_KEY_BYTES, SERIALIZE_PREFIX, SLOT_PREFIX,
};
pub use engine::leases::{LockStats, FENCES_PER_MS};
pub use engine::options::{
    Coalesce, ConcurrencyOutOfRange, LockOptions, MaxPendingOutOfRange, OptionError, Rate,
    RateOutOfRange, SerializerOptionError, SerializerOptions, TimeoutOutOfRange,
    DEFAULT_TIMEOUT_MS, LOCK_STALE_MS, LOCK_WAIT_MS, MAX_LOCAL_STREAK_MS, MAX_RATE_LIMIT,
    MAX_TIMEOUT_MS,
};
pub use engine::random::{Random, SeededRandom};
pub use engine::slots::MAX_CONCURRENCY;
pub use engine::works::Stats;
pub use front::lock::{Lock, LockError, LockManager};
pub use front::serializer::{KeyedSerializer, SerializeError, StoreSerializer, WorkSignal};
#[cfg(target_arch = "wasm32")]
pub use platform::{acquire_lock, PlatformClock, PlatformRandom, WallClock};
pub use store::{LockStore, MemoryStore, StoreError, Versioned};
