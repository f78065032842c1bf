//! The step machines every front end drives, for a driver of your own.
//!
//! Each rule of keyturn lives once, in a machine that makes no call of any kind — no store, no
//! clock (the time is an argument), no timer, no host code. A driver tells it what happened
//! and does what it answers:
//!
//! - [`LockCore`]: the lease lock over one store in one isolate. It answers a [`Step`] — a store
//!   call with the record to write and the call's bound, a sleep or a wait with the time to come
//!   back, or an outcome — and takes each call's [`Answer`]. [`LockManager`](crate::LockManager)
//!   drives it with futures.
//! - [`SerializerCore`]: per-key lines of works, their deadlines ([`Started::deadline`]) and
//!   counters. [`KeyedSerializer`](crate::KeyedSerializer) drives it with futures.
//! - [`Turns`]: how a serializer's turns over a store hold the key's lease, beside a
//!   `LockCore`. [`StoreSerializer`](crate::StoreSerializer) drives both.
//!
//! The npm package's bindings (the `keyturn-wasm` crate of this repository) drive the same
//! machines from JavaScript, so the two front ends cannot drift: `tests/decisions.json` is run
//! by both. A driver only executes: every default, bound and deadline comes from a machine.
//!
//! What this does not promise: these types follow what their drivers need, and may change in
//! any release before 1.0 without a major version; the rest of the crate's API is the stable
//! one.

pub use crate::engine::asks::{Ask, AskId, Asks, ASK_ID_LEN, MAX_ASKS, OFFER_MS};
pub use crate::engine::leases::{
    Answer, Guard, LeaseView, LockCore, Now, Refusal, Step, Succession, Woken,
};
pub use crate::engine::queue::{LineId, Pushed, Ticket, MAX_ENTRIES};
pub use crate::engine::record::{NotARecord, Record, FORMAT, MAX_FENCE};
pub use crate::engine::turns::{Acquired, Begin, Turns};
pub use crate::engine::works::{Abandon, EnqueueError, GaveUp, Released, SerializerCore, Started};

/// The texts of keyturn's errors: the Rust errors fill them, and the npm package builds its
/// errors from them.
pub mod messages {
    pub use crate::engine::messages::*;
}
