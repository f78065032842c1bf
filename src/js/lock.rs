//! `acquireLock` for JavaScript: [`LockManager`] over a store that is any JS object with the
//! three async methods, the platform's crypto and timers, and `Date.now` (or `options.now`).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use js_sys::{Function, Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{future_to_promise, JsFuture};

use super::errors::{
    describe, field, key_from_js, optional_function, optional_number, options_object, range_error,
    type_error,
};
use crate::clock::{Clock, PlatformClock, Sleep};
use crate::lock::{
    FirstCall, FirstOutcome, Lock, LockError, LockManager, LockOptions, OptionError, ReleaseWrite,
};
use crate::queue::KeyHash;
use crate::random::PlatformRandom;
use crate::store::{LockStore, StoreError, Versioned};

/// A JS object with `create`, `read` and `replace`, each returning a value or a promise.
#[derive(Debug)]
pub struct JsStore {
    object: JsValue,
    create: Function,
    read: Function,
    replace: Function,
}

impl JsStore {
    /// The store `value`, checked: an object with the three methods. A Workers KV namespace is
    /// recognised and refused, saying why.
    pub fn from_js(value: JsValue) -> Result<JsStore, JsValue> {
        if !value.is_object() {
            return Err(type_error(&[
                "store must be an object with create, read and replace methods, got ",
                &describe(&value),
            ]));
        }
        let object: &Object = value.unchecked_ref();
        let method = |name: &str| -> Result<Option<Function>, JsValue> {
            Ok(field(object, name)?.dyn_into::<Function>().ok())
        };
        let (create, read, replace) = (method("create")?, method("read")?, method("replace")?);
        if create.is_none()
            && read.is_none()
            && method("getWithMetadata")?.is_some()
            && method("list")?.is_some()
        {
            return Err(type_error(&[
                "store is a Workers KV namespace, which has no conditional put and is eventually consistent: a lock over it \
                 would let two holders in at once. Use a store with a conditional put: a Durable Object, R2, Redis or Deno KV.",
            ]));
        }
        match (create, read, replace) {
            (Some(create), Some(read), Some(replace)) => Ok(JsStore {
                object: value,
                create,
                read,
                replace,
            }),
            (create, read, _) => {
                let missing = if create.is_none() {
                    "create"
                } else if read.is_none() {
                    "read"
                } else {
                    "replace"
                };
                Err(type_error(&[
                    "store.",
                    missing,
                    " must be a function (a store has create, read and replace)",
                ]))
            }
        }
    }

    async fn call(
        &self,
        method: &Function,
        name: &str,
        args: &[&JsValue],
    ) -> Result<JsValue, StoreError> {
        JsFuture::from(self.start(method, args))
            .await
            .map_err(|error| failure(name, error))
    }

    /// Calls `method`; its answer as a promise (rejected if it threw).
    fn start(&self, method: &Function, args: &[&JsValue]) -> Promise {
        let called = match args {
            [a] => method.call1(&self.object, a),
            [a, b] => method.call2(&self.object, a, b),
            [a, b, c] => method.call3(&self.object, a, b, c),
            _ => Err(JsValue::UNDEFINED),
        };
        match called {
            Ok(value) => Promise::resolve(&value),
            Err(error) => Promise::reject(&error),
        }
    }
}

/// A create's or CAS's settled answer, as the store trait has it.
fn answered(method: &str, answer: JsValue, failed: bool) -> Result<Option<String>, StoreError> {
    if failed {
        Err(failure(method, answer))
    } else {
        version(method, answer)
    }
}

fn failure(method: &str, error: JsValue) -> StoreError {
    let detail = error
        .dyn_ref::<js_sys::Error>()
        .map(|error| String::from(error.message()))
        .or_else(|| error.as_string())
        .unwrap_or_else(|| describe(&error));
    let mut message = String::from("store.");
    message.push_str(method);
    message.push_str(" failed: ");
    message.push_str(&detail);
    StoreError {
        message,
        cause: Some(Rc::new(error)),
    }
}

fn wrong_answer(method: &str, expected: &str, value: &JsValue) -> StoreError {
    let mut message = String::from("store.");
    message.push_str(method);
    message.push_str(" answered a ");
    message.push_str(&describe(value));
    message.push_str(", not ");
    message.push_str(expected);
    StoreError::new(message)
}

/// A version string, or `None` for `null`/`undefined`.
fn version(method: &str, value: JsValue) -> Result<Option<String>, StoreError> {
    if value.is_null() || value.is_undefined() {
        Ok(None)
    } else {
        value
            .as_string()
            .map(Some)
            .ok_or_else(|| wrong_answer(method, "a version string or null", &value))
    }
}

impl LockStore for JsStore {
    async fn create(&self, key: &str, value: &str) -> Result<Option<String>, StoreError> {
        let answer = self
            .call(&self.create, "create", &[&key.into(), &value.into()])
            .await?;
        version("create", answer)
    }

    async fn read(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        let answer = self.call(&self.read, "read", &[&key.into()]).await?;
        if answer.is_null() || answer.is_undefined() {
            return Ok(None);
        }
        let expected = "{ value: string, version: string } or null";
        if !answer.is_object() {
            return Err(wrong_answer("read", expected, &answer));
        }
        let get = |name: &str| {
            Reflect::get(&answer, &JsValue::from_str(name))
                .ok()
                .and_then(|v| v.as_string())
        };
        match (get("value"), get("version")) {
            (Some(value), Some(version)) => Ok(Some(Versioned { value, version })),
            _ => Err(wrong_answer("read", expected, &answer)),
        }
    }

    async fn replace(
        &self,
        key: &str,
        version_: &str,
        value: &str,
    ) -> Result<Option<String>, StoreError> {
        let answer = self
            .call(
                &self.replace,
                "replace",
                &[&key.into(), &version_.into(), &value.into()],
            )
            .await?;
        version("replace", answer)
    }
}

/// `options.now` (epoch milliseconds) or `Date.now`; sleeps are real timers. A `now` that
/// answers something other than a finite number is read as its last good answer.
#[derive(Debug)]
pub struct JsClock {
    now: Option<Function>,
    last: Cell<f64>,
}

impl Clock for JsClock {
    fn now_ms(&self) -> f64 {
        let now = match &self.now {
            Some(now) => now
                .call0(&JsValue::UNDEFINED)
                .ok()
                .and_then(|v| v.as_f64())
                .filter(|v| v.is_finite()),
            None => Some(js_sys::Date::now()),
        };
        match now {
            Some(now) => {
                self.last.set(now);
                now
            }
            None => self.last.get(),
        }
    }

    fn sleep(&self, ms: f64) -> Sleep {
        PlatformClock.sleep(ms)
    }
}

type Manager = LockManager<JsStore, JsClock, PlatformRandom>;
type JsFirstCall = FirstCall<JsStore, JsClock, PlatformRandom>;

/// The locks of one store (and one `now`) in this isolate; `acquireLock` keeps one per store.
#[wasm_bindgen]
#[derive(Clone)]
pub struct LockManagerCore {
    manager: Manager,
    /// `(message, cause) => new LockStoreError(message, { cause })`, from the package's JS (so
    /// the class is the one the package exports).
    store_error: Rc<Function>,
    /// First calls in flight, by name: a first call needs the name's local line empty and
    /// joins it, so there is at most one per name.
    first_calls: Rc<RefCell<HashMap<String, JsFirstCall, KeyHash>>>,
}

impl core::fmt::Debug for LockManagerCore {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.manager.fmt(f)
    }
}

fn lock_error(store_error: &Function, error: LockError) -> JsValue {
    match error {
        LockError::Store(error) => {
            let cause = error
                .cause
                .as_ref()
                .and_then(|cause| cause.downcast_ref::<JsValue>())
                .cloned()
                .unwrap_or_default();
            store_error
                .call2(
                    &JsValue::UNDEFINED,
                    &JsValue::from_str(&error.message),
                    &cause,
                )
                .unwrap_or_else(|e| e)
        }
        LockError::InvalidName(error) => super::errors::key_error("name", error),
        LockError::InvalidOption(OptionError::WaitMs(_)) => {
            range_error(&["options.waitMs must be a finite number, 0 or more"])
        }
        LockError::InvalidOption(OptionError::StaleMs(_)) => {
            range_error(&["options.staleMs must be a finite number above 0"])
        }
    }
}

#[wasm_bindgen]
impl LockManagerCore {
    /// A manager over `store`, with `now` (a function or undefined) as its clock, making store
    /// errors with `storeError(message, cause)`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        store: JsValue,
        now: JsValue,
        store_error: Function,
    ) -> Result<LockManagerCore, JsValue> {
        let store = JsStore::from_js(store)?;
        let now = optional_function(now, "options.now")?;
        let clock = JsClock {
            now,
            last: Cell::new(0.0),
        };
        Ok(LockManagerCore {
            manager: LockManager::new(store, clock, PlatformRandom),
            store_error: Rc::new(store_error),
            first_calls: Rc::default(),
        })
    }

    /// The name and options of `acquireLock`, checked.
    /// `waitMs` and `staleMs` are read from `options` by the package's JS (a property read
    /// there costs nothing; a `Reflect.get` from wasm is a crossing each). `options.now` was
    /// checked when the manager was made.
    fn checked(
        &self,
        name: &JsValue,
        options: &JsValue,
        wait_ms: JsValue,
        stale_ms: JsValue,
    ) -> Result<(String, LockOptions), JsValue> {
        let name = key_from_js(name, "name")?;
        let mut lock_options = LockOptions::default();
        if options_object(options, "options")?.is_some() {
            if let Some(wait) = optional_number(wait_ms, "options.waitMs")? {
                lock_options.wait_ms = wait;
            }
            if let Some(stale) = optional_number(stale_ms, "options.staleMs")? {
                lock_options.stale_ms = stale;
            }
        }
        lock_options
            .validate()
            .map_err(|error| lock_error(&self.store_error, LockError::InvalidOption(error)))?;
        Ok((name, lock_options))
    }

    /// `name`: the caller's string, which the lock's `name` answers without a copy.
    fn held(&self, lock: Lock<JsStore, JsClock, PlatformRandom>, name: JsValue) -> JsValue {
        JsLock {
            name,
            lock: Rc::new(lock),
            store_error: self.store_error.clone(),
            write: RefCell::new(None),
        }
        .into()
    }

    /// Resolves to a [`JsLock`], or `undefined` when a live holder kept the name for the wait.
    /// `waitMs` and `staleMs` are `options`' own, read by the caller.
    pub fn acquire(
        &self,
        name: JsValue,
        options: JsValue,
        wait_ms: JsValue,
        stale_ms: JsValue,
    ) -> Promise {
        let (name_str, options) = match self.checked(&name, &options, wait_ms, stale_ms) {
            Ok(checked) => checked,
            Err(error) => return Promise::reject(&error),
        };
        let this = self.clone();
        future_to_promise(async move {
            match this.manager.acquire(&name_str, options).await {
                Ok(Some(lock)) => Ok(this.held(lock, name)),
                Ok(None) => Ok(JsValue::UNDEFINED),
                Err(error) => Err(lock_error(&this.store_error, error)),
            }
        })
    }

    /// The fast start of `acquireLock`: when nobody here is in line for `name`, makes the one
    /// store call that may take it and answers the promise of the store's answer — settle it,
    /// then pass it with the name to `finishFirst`; `undefined` when others here are in line
    /// (use `acquire`). Throws for a bad name or option. Why: the common uncontended
    /// acquisition then needs no Rust future, only one JS await.
    #[wasm_bindgen(js_name = tryFirst)]
    pub fn try_first(
        &self,
        name: JsValue,
        options: JsValue,
        wait_ms: JsValue,
        stale_ms: JsValue,
    ) -> Result<Option<Promise>, JsValue> {
        let (name_str, options) = self.checked(&name, &options, wait_ms, stale_ms)?;
        let first = self
            .manager
            .first_call(&name_str, options)
            .map_err(|error| lock_error(&self.store_error, error))?;
        let Some(first) = first else {
            return Ok(None);
        };
        let store = self.manager.store();
        // The caller's own string as the key: no copy out of wasm.
        let value = JsValue::from_str(first.value());
        let answer = match first.version() {
            None => store.start(&store.create, &[&name, &value]),
            Some(version) => store.start(&store.replace, &[&name, &version.into(), &value]),
        };
        self.first_calls.borrow_mut().insert(name_str, first);
        Ok(Some(answer))
    }

    /// Takes the settled answer (`failed` when it rejected) to `name`'s first call: the lock,
    /// or a promise of the rest of the acquisition. Throws a `LockStoreError` when the store
    /// failed, a `TypeError` when no first call of `name` is in flight.
    #[wasm_bindgen(js_name = finishFirst)]
    pub fn finish_first(
        &self,
        name: JsValue,
        answer: JsValue,
        failed: bool,
    ) -> Result<JsValue, JsValue> {
        let first = name
            .as_string()
            .and_then(|key| self.first_calls.borrow_mut().remove(&key))
            .ok_or_else(|| type_error(&["no first call of this name is in flight"]))?;
        let method = if first.version().is_some() {
            "replace"
        } else {
            "create"
        };
        let outcome = self
            .manager
            .finish_first(first, answered(method, answer, failed))
            .map_err(|error| lock_error(&self.store_error, error))?;
        Ok(match outcome {
            FirstOutcome::Held(lock) => self.held(lock, name),
            FirstOutcome::Contend(resume) => {
                let this = self.clone();
                future_to_promise(async move {
                    match this.manager.resume(resume).await {
                        Ok(Some(lock)) => Ok(this.held(lock, name)),
                        Ok(None) => Ok(JsValue::UNDEFINED),
                        Err(error) => Err(lock_error(&this.store_error, error)),
                    }
                })
                .into()
            }
        })
    }

    /// Store calls made so far, for the benchmark.
    #[wasm_bindgen(js_name = storeCalls)]
    pub fn store_calls(&self) -> f64 {
        self.manager.store_calls() as f64
    }
}

/// A held lock, as JavaScript sees it. `release()` is defined by the package's JS over
/// `beginRelease` and `finishRelease`, so that a release is one JS await.
#[wasm_bindgen(js_name = KeyturnLock)]
pub struct JsLock {
    /// The name as the caller's string (kept, so a release needs no copy out of wasm).
    name: JsValue,
    lock: Rc<Lock<JsStore, JsClock, PlatformRandom>>,
    store_error: Rc<Function>,
    /// The release's CAS while it is in flight.
    write: RefCell<Option<ReleaseWrite>>,
}

impl core::fmt::Debug for JsLock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.lock.fmt(f)
    }
}

#[wasm_bindgen(js_class = KeyturnLock)]
impl JsLock {
    /// The lock's name.
    #[wasm_bindgen(getter)]
    pub fn name(&self) -> JsValue {
        self.name.clone()
    }

    /// The token in the record while this lock is held; shared within one hand-off batch.
    #[wasm_bindgen(getter)]
    pub fn token(&self) -> String {
        self.lock.token().to_owned()
    }

    /// Rises with every acquisition of the name.
    #[wasm_bindgen(getter)]
    pub fn fence(&self) -> f64 {
        self.lock.fence() as f64
    }

    /// Starts a release: `undefined` when nothing is to be written (released before, or handed
    /// on locally), else the promise of the store's answer to the release's CAS — pass it,
    /// settled, to `finishRelease`.
    #[wasm_bindgen(js_name = beginRelease)]
    pub fn begin_release(&self) -> Option<Promise> {
        let write = self.lock.begin_release()?;
        let store = self.lock.store();
        let answer = store.start(
            &store.replace,
            &[
                &self.name,
                &JsValue::from_str(write.version()),
                &JsValue::from_str(write.value()),
            ],
        );
        *self.write.borrow_mut() = Some(write);
        Some(answer)
    }

    /// Ends a release with its CAS's settled answer (`failed` when it rejected). Throws a
    /// `LockStoreError` when the store failed.
    #[wasm_bindgen(js_name = finishRelease)]
    pub fn finish_release(&self, answer: JsValue, failed: bool) -> Result<(), JsValue> {
        let Some(write) = self.write.borrow_mut().take() else {
            return Ok(());
        };
        self.lock
            .finish_release(write, answered("replace", answer, failed))
            .map_err(|error| lock_error(&self.store_error, error))
    }
}

/// `MemoryStore` for JavaScript: the embedded store, with exact create-if-absent and CAS.
#[wasm_bindgen(js_name = MemoryStore)]
#[derive(Debug, Default)]
pub struct JsMemoryStore {
    store: crate::store::MemoryStore,
}

fn text(value: &JsValue, what: &str) -> Result<String, JsValue> {
    value
        .as_string()
        .ok_or_else(|| type_error(&[what, " must be a string, got ", &describe(value)]))
}

fn settled(result: Result<JsValue, JsValue>) -> Promise {
    match result {
        Ok(value) => Promise::resolve(&value),
        Err(error) => Promise::reject(&error),
    }
}

fn optional_version(version: Option<String>) -> JsValue {
    version.map_or(JsValue::NULL, JsValue::from)
}

#[wasm_bindgen(js_class = MemoryStore)]
impl JsMemoryStore {
    /// An empty store.
    #[wasm_bindgen(constructor)]
    pub fn new() -> JsMemoryStore {
        JsMemoryStore::default()
    }

    /// Resolves to the new version, or `null` if a record exists.
    pub fn create(&self, key: JsValue, value: JsValue) -> Promise {
        settled((|| {
            let (key, value) = (key_from_js(&key, "key")?, text(&value, "value")?);
            if self.store.get(&key).is_some() {
                return Ok(JsValue::NULL);
            }
            Ok(self.store.put(&key, &value).into())
        })())
    }

    /// Resolves to `{ value, version }`, or `null` if there is no record.
    pub fn read(&self, key: JsValue) -> Promise {
        settled((|| {
            let key = key_from_js(&key, "key")?;
            let Some(found) = self.store.get(&key) else {
                return Ok(JsValue::NULL);
            };
            let record = Object::new();
            Reflect::set(&record, &"value".into(), &found.value.into())?;
            Reflect::set(&record, &"version".into(), &found.version.into())?;
            Ok(record.into())
        })())
    }

    /// Resolves to the new version if the record's version is still `version`, else `null`.
    pub fn replace(&self, key: JsValue, version: JsValue, value: JsValue) -> Promise {
        settled((|| {
            let (key, version, value) = (
                key_from_js(&key, "key")?,
                text(&version, "version")?,
                text(&value, "value")?,
            );
            let current = self.store.get(&key).map(|found| found.version);
            if current.as_deref() != Some(version.as_str()) {
                return Ok(JsValue::NULL);
            }
            Ok(optional_version(Some(self.store.put(&key, &value))))
        })())
    }
}
