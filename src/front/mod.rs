//! The Rust front end: futures over the engine, for Rust callers.

mod coalesced;
mod executor;
pub(crate) mod lock;
pub(crate) mod serializer;
mod store_serializer;
