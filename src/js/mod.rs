//! The JavaScript binding: the only code that touches js-sys, web-sys and wasm-bindgen.
//!
//! Rules it keeps, because a panic traps the module for every caller in the isolate and a
//! JavaScript exception unwinds through wasm without running Rust destructors:
//! - nothing that comes from JavaScript reaches an `unwrap()`: every value is checked and a bad
//!   one becomes a `TypeError` or `RangeError` naming the argument;
//! - every call into the host that can throw is a `catch` binding, made with no Rust state
//!   half changed — or, better, not made from Rust at all: the package's JS drives the cores
//!   and makes the host calls itself;
//! - no `RefCell` borrow is held across a call into JavaScript.

pub mod errors;
pub mod host;
#[cfg(feature = "js-lock")]
pub mod lock;
pub mod platform;
#[cfg(feature = "js-serializer")]
pub mod serializer;
