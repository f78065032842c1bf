//! The npm package's bindings: what its JavaScript calls. Not a Rust API.
//!
//! Rules they keep, because a panic traps the module for every caller in the isolate and a
//! JavaScript exception unwinds through wasm without running Rust destructors:
//! - nothing that comes from JavaScript reaches an `unwrap()`: every value is checked, and a bad
//!   one is answered as a refusal code the JS turns into a `TypeError` or `RangeError`;
//! - no export calls into JavaScript: the package's JS drives the cores and makes every host
//!   call itself (promise, timer, `AbortController`, store call, the work), so nothing the host
//!   throws can meet Rust state half changed. The lock's randomness is the one host call made
//!   from Rust, a `catch` binding that cannot leave state in flux (`PlatformRandom`).

#[cfg(feature = "js-lock")]
mod lock;
#[cfg(any(feature = "js-lock", feature = "js-serializer"))]
mod options;
#[cfg(feature = "js-serializer")]
mod serializer;
#[cfg(feature = "js-serializer")]
mod turns;
