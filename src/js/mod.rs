//! The JavaScript binding: the only code that touches js-sys, web-sys and wasm-bindgen.
//!
//! Rules it keeps, because a panic traps the module for every caller in the isolate and a
//! JavaScript exception unwinds through wasm without running Rust destructors:
//! - nothing that comes from JavaScript reaches an `unwrap()`: every value is checked and a bad
//!   one becomes a `TypeError` or `RangeError` naming the argument;
//! - no `RefCell` borrow is held across a call into JavaScript (a work, a resolve function, an
//!   abort listener can all call back in), so re-entrant calls always find the state free.

pub mod errors;
#[cfg(feature = "js-lock")]
pub mod lock;
#[cfg(feature = "js-serializer")]
pub mod serializer;
pub(crate) mod sys;
