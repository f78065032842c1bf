//! The storage trait a lock runs over, and the embedded [`MemoryStore`].
//!
//! Three methods are the whole trait because they are what every store with a real conditional
//! put does atomically: R2 (`onlyIf` etag), Durable Object storage, Deno KV
//! (`atomic().check()`), Redis (SET NX, compare-and-set by script), DynamoDB and SQL
//! (`UPDATE … WHERE version = ?`). There is no delete: R2 has no conditional delete, and a
//! released record keeps the lock's fence counter.

use core::fmt;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Poll, Waker};

use crate::engine::keymap::KeyMap;

/// A record's value and the version the store gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned<V = String> {
    /// The stored text.
    pub value: String,
    /// Opaque to the lock: only compared for equality and handed back to
    /// [`LockStore::replace`].
    pub version: V,
}

/// The store failed: a network error, a timeout, a refusal. Never "exists" or "changed",
/// which are answers (`None`), not errors.
#[derive(Clone)]
pub struct StoreError {
    /// What went wrong, for people.
    pub message: String,
    /// The store's own error value (a JS error, for the binding), passed on as `cause`.
    pub cause: Option<std::rc::Rc<dyn std::any::Any>>,
}

impl StoreError {
    /// A failure described by `message`.
    pub fn new(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            cause: None,
        }
    }
}

impl PartialEq for StoreError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
}

impl fmt::Debug for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreError")
            .field("message", &self.message)
            .finish()
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lock store failed: {}", self.message)
    }
}

impl std::error::Error for StoreError {}

/// A key-value store with a conditional put, single-threaded (one isolate).
///
/// Each method is one atomic store operation. Implementations must not retry a conditional
/// write whose outcome they do not know as if it had failed: an unknown outcome is an error.
#[allow(async_fn_in_trait)] // single-threaded by design: no `Send` bound wanted
pub trait LockStore {
    /// A record's version as this store gives it: a string for most stores; a JS value for
    /// the JS binding, so that versions never cross into wasm and back. Equal versions are
    /// the same write of the same record; a version is never reused for another write.
    type Version: Clone + PartialEq + fmt::Debug;
    /// Writes `value` under `key` only if no record exists. The new version, or `None` if a
    /// record exists.
    async fn create(&self, key: &str, value: &str) -> Result<Option<Self::Version>, StoreError>;
    /// The record under `key`, if any.
    async fn read(&self, key: &str) -> Result<Option<Versioned<Self::Version>>, StoreError>;
    /// Writes `value` under `key` only if the record's version is still `version` (compare and
    /// set). The new version, or `None` if the record changed or is gone.
    async fn replace(
        &self,
        key: &str,
        version: &Self::Version,
        value: &str,
    ) -> Result<Option<Self::Version>, StoreError>;

    /// Whether [`changed`](Self::changed) tells changes. `false` (the default): the lock polls,
    /// with jitter, and never calls `changed`.
    fn tells_changes(&self) -> bool {
        false
    }

    /// Answers `true` once the record under `key` no longer has `version` (`None`: once it
    /// exists), `false` after `ms` — or never, as the lock stops waiting at `ms` anyway. It may
    /// answer `true` spuriously: it is never needed for safety, only to wake the head of a
    /// line once a holder in another isolate lets go, instead of polling. Called only when
    /// [`tells_changes`](Self::tells_changes) says so.
    async fn changed(
        &self,
        key: &str,
        version: Option<&Self::Version>,
        ms: f64,
    ) -> Result<bool, StoreError> {
        let _ = (key, version, ms);
        Ok(true)
    }
}

impl<S: LockStore + ?Sized> LockStore for std::rc::Rc<S> {
    type Version = S::Version;
    async fn create(&self, key: &str, value: &str) -> Result<Option<S::Version>, StoreError> {
        (**self).create(key, value).await
    }
    async fn read(&self, key: &str) -> Result<Option<Versioned<S::Version>>, StoreError> {
        (**self).read(key).await
    }
    async fn replace(
        &self,
        key: &str,
        version: &S::Version,
        value: &str,
    ) -> Result<Option<S::Version>, StoreError> {
        (**self).replace(key, version, value).await
    }
    fn tells_changes(&self) -> bool {
        (**self).tells_changes()
    }
    async fn changed(
        &self,
        key: &str,
        version: Option<&S::Version>,
        ms: f64,
    ) -> Result<bool, StoreError> {
        (**self).changed(key, version, ms).await
    }
}

/// The embedded store: records in this isolate's memory, with exact create-if-absent and
/// compare-and-set semantics. Locks over it exclude only within one isolate — which is what
/// the serializer does already; it is for tests, single-isolate runtimes and as the model every
/// real store must match.
#[derive(Debug, Default)]
pub struct MemoryStore {
    /// Keys to their record's slot, in the crate's one map type (see `keymap.rs`).
    index: RefCell<KeyMap>,
    /// Each record's value and version. Records are never deleted.
    records: RefCell<Vec<(String, u64)>>,
    versions: Cell<u64>,
    /// The tasks waiting in `changed`, woken by any write (spuriously for other keys, which
    /// `changed` allows).
    watchers: RefCell<Vec<Waker>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn slot(&self, key: &str) -> Option<usize> {
        self.index.borrow().get(key).map(|&slot| slot as usize)
    }

    /// The record under `key`, without going through the async trait (for tests).
    pub fn get(&self, key: &str) -> Option<Versioned> {
        let slot = self.slot(key)?;
        self.records
            .borrow()
            .get(slot)
            .map(|(value, version)| Versioned {
                value: value.clone(),
                version: decimal(*version),
            })
    }

    /// Creates the record if none exists: its version, or `None`. The trait's `create`, at once.
    pub fn create_now(&self, key: &str, value: &str) -> Option<String> {
        if self.slot(key).is_some() {
            return None;
        }
        Some(self.put(key, value))
    }

    /// Replaces the record if its version is still `version`: the new version, or `None`. The
    /// trait's `replace`, at once.
    pub fn replace_now(&self, key: &str, version: &str, value: &str) -> Option<String> {
        let slot = self.slot(key)?;
        let current = self.records.borrow().get(slot).map(|(_, v)| *v)?;
        if decimal(current) != version {
            return None;
        }
        Some(self.put(key, value))
    }

    /// Overwrites a record unconditionally (for tests: a corrupt record, another writer).
    pub fn put(&self, key: &str, value: &str) -> String {
        let version = self.versions.get() + 1;
        self.versions.set(version);
        {
            let mut records = self.records.borrow_mut();
            match self.slot(key).and_then(|slot| records.get_mut(slot)) {
                Some(record) => *record = (value.to_owned(), version),
                None => {
                    self.index
                        .borrow_mut()
                        .insert(Rc::from(key), records.len() as u32);
                    records.push((value.to_owned(), version));
                }
            }
        }
        for watcher in self.watchers.take() {
            watcher.wake();
        }
        decimal(version)
    }
}

fn decimal(n: u64) -> String {
    let mut out = String::new();
    crate::engine::decimal::push_decimal(&mut out, n);
    out
}

impl LockStore for MemoryStore {
    type Version = String;

    async fn create(&self, key: &str, value: &str) -> Result<Option<String>, StoreError> {
        Ok(self.create_now(key, value))
    }

    async fn read(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        Ok(self.get(key))
    }

    async fn replace(
        &self,
        key: &str,
        version: &String,
        value: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(self.replace_now(key, version, value))
    }

    fn tells_changes(&self) -> bool {
        true
    }

    /// Answers `true` at the first write after which the record's version differs; never
    /// `false` (it keeps no clock: the lock stops waiting at `ms`).
    async fn changed(
        &self,
        key: &str,
        version: Option<&String>,
        _ms: f64,
    ) -> Result<bool, StoreError> {
        core::future::poll_fn(|cx| {
            if self.get(key).map(|found| found.version).as_ref() != version {
                return Poll::Ready(Ok(true));
            }
            self.watchers.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}
