//! `acquireLock` for JavaScript: [`LockManager`] over a store that is any JS object with the
//! three async methods, the platform's crypto and timers, and `Date.now` (or `options.now`).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use js_sys::{Function, Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{future_to_promise, JsFuture};

use super::errors::{
    describe, field, key_from_js, optional_function, optional_number, options_object, range_error,
    type_error,
};
use super::platform::PlatformClock;
use super::platform::PlatformRandom;
use crate::clock::{Clock, Sleep, TimerError};
use crate::lock::{
    FirstCall, FirstOutcome, Lock, LockError, LockManager, LockOptions, OptionError, ReleaseWrite,
};
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

/// How a store call settled, as the package's JS saw it (`typeof` there is free; each check
/// from wasm is a crossing).
const ANSWER_VERSION: u8 = 0;
const ANSWER_NONE: u8 = 1;
const ANSWER_FAILED: u8 = 2;

/// A create's or CAS's settled answer, as the store trait has it: `kind` says whether `answer`
/// is a version string, `null`/`undefined`, the reason it rejected, or anything else.
fn answered(method: &str, answer: JsValue, kind: u8) -> Result<Option<JsValue>, StoreError> {
    match kind {
        ANSWER_VERSION => Ok(Some(answer)),
        ANSWER_NONE => Ok(None),
        ANSWER_FAILED => Err(failure(method, answer)),
        _ => Err(wrong_answer(method, "a version string or null", &answer)),
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

/// A version string (kept as the JS string: it only goes back to the store), or `None` for
/// `null`/`undefined`.
fn version(method: &str, value: JsValue) -> Result<Option<JsValue>, StoreError> {
    if value.is_string() {
        Ok(Some(value))
    } else if value.is_null() || value.is_undefined() {
        Ok(None)
    } else {
        Err(wrong_answer(method, "a version string or null", &value))
    }
}

impl LockStore for JsStore {
    type Version = JsValue;

    async fn create(&self, key: &str, value: &str) -> Result<Option<JsValue>, StoreError> {
        let answer = self
            .call(&self.create, "create", &[&key.into(), &value.into()])
            .await?;
        version("create", answer)
    }

    async fn read(&self, key: &str) -> Result<Option<Versioned<JsValue>>, StoreError> {
        let answer = self.call(&self.read, "read", &[&key.into()]).await?;
        if answer.is_null() || answer.is_undefined() {
            return Ok(None);
        }
        let expected = "{ value: string, version: string } or null";
        if !answer.is_object() {
            return Err(wrong_answer("read", expected, &answer));
        }
        let get = |name: &str| Reflect::get(&answer, &JsValue::from_str(name)).ok();
        let value = get("value").and_then(|value| value.as_string());
        let version = get("version").filter(JsValue::is_string);
        match (value, version) {
            (Some(value), Some(version)) => Ok(Some(Versioned { value, version })),
            _ => Err(wrong_answer("read", expected, &answer)),
        }
    }

    async fn replace(
        &self,
        key: &str,
        version_: &JsValue,
        value: &str,
    ) -> Result<Option<JsValue>, StoreError> {
        let answer = self
            .call(
                &self.replace,
                "replace",
                &[&key.into(), version_, &value.into()],
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

    fn sleep(&self, ms: f64) -> Result<Sleep, TimerError> {
        PlatformClock.sleep(ms)
    }
}

type Manager = LockManager<JsStore, JsClock, PlatformRandom>;
type JsFirstCall = FirstCall<JsStore, JsClock, PlatformRandom>;
type JsLock = Lock<JsStore, JsClock, PlatformRandom>;

/// What an id the package's JS holds stands for: a first call in flight, or a held lock (with
/// its release's CAS while that is in flight).
enum Entry {
    First(JsFirstCall),
    Held(JsLock, Option<ReleaseWrite<JsValue>>),
}

/// Entries by id, in a slab. An id is a slot's index and its generation, which rises each time
/// the slot is freed, so a stale id finds nothing rather than somebody else's lock.
#[derive(Default)]
struct Entries {
    slots: Vec<Slot>,
    /// Free slots, reused last freed first (their memory is the most recently touched).
    free: Vec<u32>,
    /// Entries kept (not counting reserved slots that are empty).
    live: usize,
    /// Held locks past this many are checked for ones gone stale (see [`Entries::insert`]).
    check_at: usize,
}

struct Slot {
    generation: u32,
    entry: Option<Entry>,
}

/// Bits of an id that are the slot's index: 16 million entries at once, and ids within the 53
/// bits an f64 holds exactly.
const INDEX_BITS: u32 = 24;

/// Generations wrap within the 29 bits left: an id is stale unless its slot was freed a
/// multiple of 2^29 times since.
const GENERATION_MASK: u32 = (1 << (53 - INDEX_BITS)) - 1;

/// Entries kept before the first check for stale ones.
const FIRST_CHECK: usize = 64;

impl Entries {
    fn slot(&mut self, id: f64) -> Option<&mut Slot> {
        let id = id as u64;
        let index = (id & ((1 << INDEX_BITS) - 1)) as usize;
        self.slots
            .get_mut(index)
            .filter(|slot| u64::from(slot.generation) == id >> INDEX_BITS)
    }

    /// Whether [`Entries::insert`] should check for stale locks first (it needs the time then).
    fn check_due(&self) -> bool {
        self.live >= self.check_at.max(FIRST_CHECK)
    }

    /// A new id, for an entry inserted later; `None` when every index is in use.
    fn reserve(&mut self) -> Option<f64> {
        let index = match self.free.pop() {
            Some(index) => index,
            None if self.slots.len() < 1 << INDEX_BITS => {
                self.slots.push(Slot {
                    generation: 0,
                    entry: None,
                });
                (self.slots.len() - 1) as u32
            }
            None => return None,
        };
        let generation = u64::from(self.slots[index as usize].generation);
        Some(((generation << INDEX_BITS) | u64::from(index)) as f64)
    }

    /// Keeps `entry` under the reserved id `id`. A lock object that is dropped unreleased
    /// leaves its entry here; so, whenever the entries have doubled since the last check, the
    /// held locks past their stale time (`now` is given when [`Entries::check_due`]) are taken
    /// out — the waiters in their line could put them out anyway, and a late release of one
    /// then changes nothing — so forgotten locks do not keep memory for ever (amortised
    /// constant time per entry). Answers those, to be dropped by the caller.
    fn insert(&mut self, id: f64, entry: Entry, now: Option<f64>) -> Vec<Entry> {
        let mut stale = Vec::new();
        if let Some(now) = now {
            for index in 0..self.slots.len() {
                let slot = &mut self.slots[index];
                if matches!(&slot.entry, Some(Entry::Held(lock, None)) if lock.held_until() <= now)
                {
                    stale.extend(slot.entry.take());
                    slot.generation = (slot.generation + 1) & GENERATION_MASK;
                    self.free.push(index as u32);
                    self.live -= 1;
                }
            }
            self.check_at = self.live * 2;
        }
        self.put(id, entry);
        stale
    }

    /// Puts `entry` in the reserved slot of `id` (empty, or taken out by [`Entries::take`]).
    fn put(&mut self, id: f64, entry: Entry) {
        if let Some(slot) = self.slot(id) {
            if slot.entry.replace(entry).is_none() {
                self.live += 1;
            }
        }
    }

    /// Takes the entry of `id` out, keeping its slot reserved.
    fn take(&mut self, id: f64) -> Option<Entry> {
        let entry = self.slot(id)?.entry.take()?;
        self.live -= 1;
        Some(entry)
    }

    /// Frees the slot of `id` (empty, after [`Entries::take`]); its id is then stale.
    fn free(&mut self, id: f64) {
        if let Some(slot) = self.slot(id) {
            if slot.entry.is_none() {
                slot.generation = (slot.generation + 1) & GENERATION_MASK;
                self.free.push((id as u64 & ((1 << INDEX_BITS) - 1)) as u32);
            }
        }
    }

    fn remove(&mut self, id: f64) -> Option<Entry> {
        let entry = self.take(id)?;
        self.free(id);
        Some(entry)
    }
}

/// The locks of one store (and one `now`) in this isolate; `acquireLock` keeps one per store.
/// The package's JS holds ids into it: a first call in flight, or a held lock (whose JS object
/// is made by `newLock`, so it is a plain JS object with no finalizer to run).
#[wasm_bindgen]
#[derive(Clone)]
pub struct LockManagerCore {
    manager: Manager,
    /// `(message, cause) => new LockStoreError(message, { cause })`, from the package's JS (so
    /// the class is the one the package exports).
    store_error: Rc<Function>,
    /// `(id, name, fence, token) => lock`, from the package's JS.
    new_lock: Rc<Function>,
    /// `(id, version, value) => answer`, from the package's JS: the store call of a first call
    /// or a release — a create when `version` is undefined, else a CAS — made in JS under the
    /// name of the call in progress (the JS has it), which notes `id` and settles the answer
    /// itself.
    start: Rc<Function>,
    entries: Rc<RefCell<Entries>>,
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
        LockError::Timer(error) => js_sys::Error::new(&error.to_string()).into(),
        LockError::InvalidOption(OptionError::WaitMs(_)) => {
            range_error(&["options.waitMs must be a finite number, 0 or more"])
        }
        LockError::InvalidOption(OptionError::StaleMs(_)) => {
            range_error(&["options.staleMs must be a finite number above 0"])
        }
    }
}

fn no_entry() -> JsValue {
    type_error(&["no acquisition or release of this id is in flight"])
}

#[wasm_bindgen]
impl LockManagerCore {
    /// A manager over `store`, with `now` (a function or undefined) as its clock, making store
    /// errors with `storeError(message, cause)`, lock objects with
    /// `newLock(id, name, fence, token)`, and the store calls of first calls and releases with
    /// `start(id, version, value)`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        store: JsValue,
        now: JsValue,
        store_error: Function,
        new_lock: Function,
        start: Function,
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
            new_lock: Rc::new(new_lock),
            start: Rc::new(start),
            entries: Rc::default(),
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

    /// Entries are never borrowed across a call out to JS (a store method, `now`): the JS may
    /// call back into this manager.
    fn insert(&self, id: f64, entry: Entry) {
        let due = self.entries.borrow().check_due();
        let now = due.then(|| self.manager.clock().now_ms());
        let stale = self.entries.borrow_mut().insert(id, entry, now);
        // Dropped outside the borrow: a lock's drop leaves its line and wakes the next waiter.
        drop(stale);
    }

    /// A new entry id, or the error for none left.
    fn reserve(&self) -> Result<f64, JsValue> {
        self.entries
            .borrow_mut()
            .reserve()
            .ok_or_else(|| range_error(&["too many locks are held or being taken in this isolate"]))
    }

    /// The JS lock for `lock`. `name`: the caller's string, which the lock's `name` answers
    /// without a copy out of wasm.
    fn held(&self, lock: JsLock, name: JsValue) -> Result<JsValue, JsValue> {
        let fence = lock.fence() as f64;
        let token = JsValue::from_str(lock.token());
        let id = self.reserve()?;
        self.insert(id, Entry::Held(lock, None));
        self.new_lock.call4(
            &JsValue::UNDEFINED,
            &id.into(),
            &name,
            &fence.into(),
            &token,
        )
    }

    /// Resolves to a lock, or `undefined` when a live holder kept the name for the wait.
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
                Ok(Some(lock)) => this.held(lock, name),
                Ok(None) => Ok(JsValue::UNDEFINED),
                Err(error) => Err(lock_error(&this.store_error, error)),
            }
        })
    }

    /// Calls the package's JS to make a store call for entry `id`: a create when `version` is
    /// `None`, else a CAS. Its answer, unsettled (a value or a promise; a rejected one if the
    /// store threw).
    fn begin(&self, id: f64, version: Option<&JsValue>, value: &str) -> JsValue {
        let undefined = JsValue::UNDEFINED;
        let version = version.unwrap_or(&undefined);
        let value = JsValue::from_str(value);
        self.start
            .call3(&JsValue::UNDEFINED, &id.into(), version, &value)
            .unwrap_or_else(|error| Promise::reject(&error).into())
    }

    /// The fast start of `acquireLock`, for a `name` nobody here is in line for: makes the one
    /// store call that may take it (through `start`, which notes the id) and answers its
    /// answer, unsettled — settle it, then pass it with the id to `finishFirst`. When others
    /// here are in line (or the name has a U+FFFD, which may be a lone surrogate), `start` is
    /// not called: use `acquire`. `waitMs` and `staleMs` are
    /// numbers (the package's JS puts in the defaults, and sends anything that is not a number
    /// to `acquire`, which names it in its error). Throws for a bad name or a number out of
    /// range. Why: the common uncontended acquisition then needs no Rust future, only one JS
    /// await, and as few crossings as it can.
    #[wasm_bindgen(js_name = tryFirst)]
    pub fn try_first(&self, name: String, wait_ms: f64, stale_ms: f64) -> Result<JsValue, JsValue> {
        // A lone surrogate came in as U+FFFD, which a real U+FFFD also is: `acquire` tells them
        // apart (it has the JS string).
        if name
            .as_bytes()
            .windows(3)
            .any(|bytes| bytes == "\u{FFFD}".as_bytes())
        {
            return Ok(JsValue::UNDEFINED);
        }
        let options = LockOptions { wait_ms, stale_ms };
        let first = self
            .manager
            .first_call(&name, options)
            .map_err(|error| lock_error(&self.store_error, error))?;
        let Some(first) = first else {
            return Ok(JsValue::UNDEFINED);
        };
        let id = self.reserve()?;
        let answer = self.begin(id, first.version(), first.value());
        self.insert(id, Entry::First(first));
        Ok(answer)
    }

    /// Takes the settled answer to first call `id` (`kind`: how it settled, see `answered`),
    /// with the caller's `name`: the lock, or a promise of the rest of the acquisition. Throws
    /// a `LockStoreError` when the store failed, a `TypeError` when no such first call is in
    /// flight.
    #[wasm_bindgen(js_name = finishFirst)]
    pub fn finish_first(
        &self,
        id: f64,
        name: JsValue,
        answer: JsValue,
        kind: u8,
    ) -> Result<JsValue, JsValue> {
        let Some(Entry::First(first)) = self.entries.borrow_mut().remove(id) else {
            return Err(no_entry());
        };
        let method = if first.version().is_some() {
            "replace"
        } else {
            "create"
        };
        let outcome = self
            .manager
            .finish_first(first, answered(method, answer, kind))
            .map_err(|error| lock_error(&self.store_error, error))?;
        match outcome {
            FirstOutcome::Held(lock) => self.held(lock, name),
            FirstOutcome::Contend(resume) => {
                let this = self.clone();
                Ok(future_to_promise(async move {
                    match this.manager.resume(resume).await {
                        Ok(Some(lock)) => this.held(lock, name),
                        Ok(None) => Ok(JsValue::UNDEFINED),
                        Err(error) => Err(lock_error(&this.store_error, error)),
                    }
                })
                .into())
            }
        }
    }

    /// Starts releasing lock `id`: when there is something to write, makes the
    /// release's CAS through `start` (which notes the id) and answers its answer, unsettled —
    /// settle it and pass it to `finishRelease`. When nothing is to be written (handed on
    /// locally, or the lock is no longer kept here), `start` is not called.
    #[wasm_bindgen(js_name = beginRelease)]
    pub fn begin_release(&self, id: f64) -> JsValue {
        // Out of its slot while the JS store is called, and put back.
        let taken = self.entries.borrow_mut().take(id);
        let lock = match taken {
            Some(Entry::Held(lock, None)) => lock,
            Some(other) => {
                self.entries.borrow_mut().put(id, other);
                return JsValue::UNDEFINED;
            }
            None => return JsValue::UNDEFINED,
        };
        let Some(release) = lock.begin_release() else {
            self.entries.borrow_mut().free(id);
            return JsValue::UNDEFINED;
        };
        let answer = self.begin(id, Some(release.version()), release.value());
        self.entries
            .borrow_mut()
            .put(id, Entry::Held(lock, Some(release)));
        answer
    }

    /// Ends the release of lock `id` with its CAS's settled answer (`kind`: how it settled).
    /// Throws a `LockStoreError` when the store failed.
    #[wasm_bindgen(js_name = finishRelease)]
    pub fn finish_release(&self, id: f64, answer: JsValue, kind: u8) -> Result<(), JsValue> {
        let Some(Entry::Held(lock, Some(write))) = self.entries.borrow_mut().remove(id) else {
            return Err(no_entry());
        };
        lock.finish_release(write, answered("replace", answer, kind))
            .map_err(|error| lock_error(&self.store_error, error))
    }

    /// Store calls made so far, for the benchmark.
    #[wasm_bindgen(js_name = storeCalls)]
    pub fn store_calls(&self) -> f64 {
        self.manager.store_calls() as f64
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
