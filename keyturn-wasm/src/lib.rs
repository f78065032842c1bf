//! The npm package `keyturn`: wasm bindings of the `keyturn` crate's step machines, which the
//! package's JavaScript (`js/`) drives. Not a Rust API: Rust programs depend on `keyturn`.
//!
//! `build.sh` builds two wasm modules from this crate, one per binding (feature `serializer`,
//! feature `lock`), so a page that only serializes never loads the lock's; `src/bin/constants.rs`
//! prints the package's `constants.js`.
//!
//! Rules the bindings keep, because a panic traps the module for every caller in the isolate
//! and a JavaScript exception unwinds through wasm without running Rust destructors:
//! - nothing that comes from JavaScript reaches an `unwrap()`: every value is checked, and a bad
//!   one is answered as a refusal code the JS turns into a `TypeError` or `RangeError`;
//! - no export calls into JavaScript: the package's JS drives the machines and makes every host
//!   call itself (promise, timer, `AbortController`, store call, the work), so nothing the host
//!   throws can meet Rust state half changed. The lock's randomness is the one host call made
//!   from Rust, a `catch` binding that cannot leave state in flux (`keyturn::PlatformRandom`);
//! - every conversion is `interop.rs`'s, and every rule the crate's: the bindings decide nothing.

pub mod wire;

#[cfg(all(target_arch = "wasm32", any(feature = "serializer", feature = "lock")))]
mod engine;
// Natively too, public for its tests (`tests/interop.rs`): its conversions are generic over
// the JS values they carry. Private in the modules, whose size a public one grows. The
// serializer's module uses part of them.
#[cfg(not(target_arch = "wasm32"))]
#[doc(hidden)]
pub mod interop;
#[cfg(all(target_arch = "wasm32", any(feature = "serializer", feature = "lock")))]
#[cfg_attr(not(feature = "lock"), allow(dead_code))]
mod interop;

#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
mod allocator;

/// The modules' allocator (`allocator.rs`). They are single-threaded, so no lock.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: allocator::SizeClasses = allocator::SizeClasses::new();
