//! A lease lock over any [`LockStore`]: the seed's board lock on a conditional put, with
//! fencing and a local FIFO.
//!
//! The conditional create is the decision: two contenders that both see no record cannot both
//! create it. A record older than `staleMs` is a holder that died, and is taken over — by one
//! compare-and-set on the version that was read, so a rival's fresh record is never lost (the
//! seed's `rm` could lose one). Only the holder's token releases a record, again by CAS, so a
//! late release after a takeover changes nothing. Every acquisition raises the record's fence.
//!
//! Within one isolate, contenders for a name queue in FIFO order and only the head talks to the
//! store; a release hands the lease to the next local waiter with one CAS that bumps the fence,
//! instead of everyone polling. That CAS reserves a fence for each waiter then in line (up to
//! [`MAX_BATCH`]), so the hand-offs after it, within the same batch, need no store call: each
//! gets the next reserved fence, and the record — which carries the batch's token and its
//! highest fence — stays held throughout. A batch is used only while it is younger than
//! [`MAX_LOCAL_STREAK_MS`] and a quarter of `staleMs`, so a holder it admits still has at least
//! three quarters of `staleMs`, and never less than `staleMs` − 100 ms, before others may take
//! the record over. Once the lock has passed from hand to hand locally for
//! [`MAX_LOCAL_STREAK_MS`], the record is freed instead and the next local waiter pauses one
//! full poll ([`MAX_POLL_MS`]) first — long enough that every waiting isolate polls once, so
//! other isolates get their turn.
//!
//! A holder that never releases (its caller threw, or dropped it without a release) holds the
//! lock until its record goes stale, here as in other isolates: the waiters in its own line
//! then put it out and take the record over, as the seed's contenders do whatever process
//! holds the lock file.
//!
//! What it does not do: renew a lease. A holder that keeps the lock past `staleMs` can be taken
//! over — by other isolates or by its own — while it still works; its writes must carry [`Lock::fence`] so the resource refuses the
//! older one. Staleness compares the record's `at` with the reader's clock, so isolates whose
//! clocks disagree by more than `staleMs` take over early or late.

use core::fmt;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::clock::{Clock, Sleep, TimerError};
use crate::key::{validate_key, KeyError};
use crate::queue::{KeyedQueue, Ticket};
use crate::random::Random;
use crate::record::Record;
use crate::store::{LockStore, StoreError};

/// How long one acquisition waits for a live holder before answering nothing, as the seed.
pub const LOCK_WAIT_MS: u32 = 100;

/// The age past which a held record is abandoned and taken over, as the seed.
pub const LOCK_STALE_MS: u32 = 2_000;

/// How many abandoned records one acquisition takes over before it stops trying, as the seed.
pub const TAKEOVERS: u32 = 2;

/// How long a name may pass from hand to hand within one isolate before its record is freed for
/// other isolates: the seed's whole wait, so a remote contender that arrived at the start of a
/// streak still finds the record free before its default wait is over.
pub const MAX_LOCAL_STREAK_MS: f64 = LOCK_WAIT_MS as f64;

/// Most fences one hand-off CAS reserves for the local waiters in line behind it.
pub const MAX_BATCH: usize = 64;

/// The first pause between attempts; each later pause doubles, up to [`MAX_POLL_MS`].
const FIRST_POLL_MS: f64 = 2.0;

/// The longest pause between attempts: a release by another isolate is seen within this.
pub const MAX_POLL_MS: f64 = 25.0;

/// What a caller may vary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LockOptions {
    /// How long to wait for a live holder, in milliseconds; 0 tries once.
    pub wait_ms: f64,
    /// The age past which a held record is abandoned, in milliseconds.
    pub stale_ms: f64,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            wait_ms: f64::from(LOCK_WAIT_MS),
            stale_ms: f64::from(LOCK_STALE_MS),
        }
    }
}

/// An option out of range: `waitMs` must be a finite number ≥ 0, `staleMs` finite and > 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptionError {
    /// `waitMs` is negative, NaN or infinite.
    WaitMs(f64),
    /// `staleMs` is not positive, or NaN or infinite.
    StaleMs(f64),
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionError::WaitMs(_) => {
                f.write_str("waitMs must be a finite number of milliseconds, 0 or more")
            }
            OptionError::StaleMs(_) => {
                f.write_str("staleMs must be a finite number of milliseconds, more than 0")
            }
        }
    }
}

impl std::error::Error for OptionError {}

impl LockOptions {
    /// Checks the options.
    pub fn validate(self) -> Result<Self, OptionError> {
        if !(self.wait_ms.is_finite() && self.wait_ms >= 0.0) {
            return Err(OptionError::WaitMs(self.wait_ms));
        }
        if !(self.stale_ms.is_finite() && self.stale_ms > 0.0) {
            return Err(OptionError::StaleMs(self.stale_ms));
        }
        Ok(self)
    }
}

/// Why an acquisition or a release failed. A live holder is not an error: that is `Ok(None)`.
#[derive(Debug, Clone, PartialEq)]
pub enum LockError {
    /// The name was refused; nothing was asked of the store.
    InvalidName(KeyError),
    /// An option was out of range; nothing was asked of the store.
    InvalidOption(OptionError),
    /// The store failed. An acquisition that fails holds nothing; a release that fails may have
    /// left the record held (it then goes stale and is taken over).
    Store(StoreError),
    /// The platform refused a timer for a wait; the acquisition holds nothing.
    Timer(TimerError),
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::InvalidName(error) => write!(f, "lock name {error}"),
            LockError::InvalidOption(error) => error.fmt(f),
            LockError::Store(error) => error.fmt(f),
            LockError::Timer(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for LockError {}

impl From<TimerError> for LockError {
    fn from(error: TimerError) -> Self {
        LockError::Timer(error)
    }
}

impl From<StoreError> for LockError {
    fn from(error: StoreError) -> Self {
        LockError::Store(error)
    }
}

/// A lease handed to a waiter by the holder's release.
struct Grant<V> {
    token: String,
    fence: u64,
    version: V,
    /// The fence the record carries at `version`: `fence`, or the highest of a batch.
    record_fence: u64,
    /// When the record at `version` was written: its staleness counts from here.
    at: f64,
}

impl<V> Grant<V> {
    /// The lease on a record this acquisition wrote itself at `at`: the record carries its fence.
    fn written(token: String, fence: u64, version: V, at: f64) -> Self {
        Grant {
            token,
            fence,
            version,
            record_fence: fence,
            at,
        }
    }
}

/// The first store call of an uncontended acquisition, from [`LockManager::first_call`]: a
/// create when [`FirstCall::version`] is `None`, else a CAS on that version; both write
/// [`FirstCall::value`] under the lock's name.
pub struct FirstCall<S: LockStore, C: Clock, R: Random> {
    version: Option<S::Version>,
    value: String,
    token: String,
    fence: u64,
    /// When the record was made.
    at: f64,
    resume: Resume<S, C, R>,
}

impl<S: LockStore, C: Clock, R: Random> FirstCall<S, C, R> {
    /// The version to CAS on, or `None` to create.
    pub fn version(&self) -> Option<&S::Version> {
        self.version.as_ref()
    }

    /// The record to write.
    pub fn value(&self) -> &str {
        &self.value
    }
}

impl<S: LockStore, C: Clock, R: Random> fmt::Debug for FirstCall<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FirstCall")
            .field("name", &self.resume.name)
            .field("fence", &self.fence)
            .finish()
    }
}

/// What a first call's answer led to.
pub enum FirstOutcome<S: LockStore, C: Clock, R: Random> {
    /// The lock is held.
    Held(Lock<S, C, R>),
    /// Somebody else's record is there: run [`LockManager::resume`].
    Contend(Resume<S, C, R>),
}

impl<S: LockStore, C: Clock, R: Random> fmt::Debug for FirstOutcome<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FirstOutcome::Held(lock) => f.debug_tuple("Held").field(lock).finish(),
            FirstOutcome::Contend(resume) => f.debug_tuple("Contend").field(resume).finish(),
        }
    }
}

/// An acquisition at the head of its local line that has yet to take the record; dropping it
/// leaves the line.
pub struct Resume<S: LockStore, C: Clock, R: Random> {
    /// The name, shared with its line in the queue (and the known record).
    name: Rc<str>,
    place: Place<S, C, R>,
    deadline: f64,
    stale_ms: f64,
    yield_first: bool,
    /// A record is known to be there: start by reading it.
    exists: bool,
}

impl<S: LockStore, C: Clock, R: Random> fmt::Debug for Resume<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resume").field("name", &self.name).finish()
    }
}

/// Fences one hand-off CAS reserved: the record at `version` carries `token` and `last_fence`,
/// and was written at `at`.
struct Batch<V> {
    version: V,
    token: String,
    last_fence: u64,
    at: f64,
}

struct Waiter<V> {
    waker: Option<Waker>,
    grant: Option<Grant<V>>,
    /// Once this entry holds the lock: when its record goes stale, after which the waiters
    /// behind it here may take it over, as other isolates may.
    stale_at: Option<f64>,
}

struct NameState<V> {
    /// When the current run of local hand-offs began.
    streak_since: Option<f64>,
    /// The next head pauses one poll before its first attempt (after a capped hand-off).
    yield_first: bool,
    /// The batch of the last hand-off CAS, whose unused fences later hand-offs may take.
    batch: Option<Batch<V>>,
}

// Written out: a derive would ask `V: Default`.
impl<V> Default for Waiter<V> {
    fn default() -> Self {
        Waiter {
            waker: None,
            grant: None,
            stale_at: None,
        }
    }
}

impl<V> Default for NameState<V> {
    fn default() -> Self {
        NameState {
            streak_since: None,
            yield_first: false,
            batch: None,
        }
    }
}

struct Inner<S: LockStore, C, R> {
    store: S,
    clock: C,
    random: R,
    queue: RefCell<Queue<S::Version>>,
    /// The records this isolate wrote last for each name and nobody holds — freed by a release,
    /// or handed to a waiter that had left — so the next acquisition can try one CAS instead of
    /// create, read, CAS.
    known: RefCell<Known<S::Version>>,
    /// Store calls made, for the benchmark.
    calls: Cell<u64>,
}

/// The head's conversation with the store, as its own boxed state machine.
type Contention<'a, V> = Pin<Box<dyn Future<Output = Result<Option<Grant<V>>, LockError>> + 'a>>;

/// The local lines: waiters and holders per name.
type Queue<V> = KeyedQueue<Waiter<V>, NameState<V>>;

/// Per name, the version and record this isolate wrote last, which nobody holds.
type Known<V> = HashMap<Rc<str>, (V, Record), crate::queue::KeyHash>;

/// Most names remembered in [`Inner::known`]; past this the memory is cleared.
const KNOWN_NAMES: usize = 1024;

/// Acquires and releases locks over one store, queueing this isolate's contenders per name.
///
/// Use one manager per store per isolate: contenders queue only with those of their manager.
pub struct LockManager<S: LockStore, C: Clock, R: Random> {
    inner: Rc<Inner<S, C, R>>,
}

impl<S: LockStore, C: Clock, R: Random> fmt::Debug for LockManager<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockManager")
            .field("queue", &self.inner.queue)
            .field("calls", &self.inner.calls.get())
            .finish()
    }
}

impl<S: LockStore, C: Clock, R: Random> Clone for LockManager<S, C, R> {
    fn clone(&self) -> Self {
        LockManager {
            inner: self.inner.clone(),
        }
    }
}

/// A held lock. Release it with [`Lock::release`]; dropping it unreleased leaves the record held
/// until it goes stale (as a crashed holder would) and lets the next local waiter contend.
pub struct Lock<S: LockStore, C: Clock, R: Random> {
    name: Rc<str>,
    token: String,
    fence: u64,
    /// The fence in the record at `version` (above `fence` when a batch reserved more).
    record_fence: u64,
    stale_ms: f64,
    /// When the record this lock holds goes stale: [`Lock::held_until`].
    stale_at: f64,
    version: S::Version,
    released: Cell<bool>,
    /// Whether this lock has left the local line (so it leaves once: at release, or on drop).
    left: Cell<bool>,
    ticket: Ticket,
    inner: Rc<Inner<S, C, R>>,
}

impl<S: LockStore, C: Clock, R: Random> fmt::Debug for Lock<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name)
            .field("fence", &self.fence)
            .field("released", &self.released.get())
            .finish()
    }
}

impl<S: LockStore, C: Clock, R: Random> LockManager<S, C, R> {
    /// A manager over `store`, timing with `clock` — epoch milliseconds, as
    /// `clock::WallClock` on wasm: record times are compared across
    /// isolates — and drawing tokens and jitter from `random` (the platform's crypto in
    /// production, never a predictable generator).
    pub fn new(store: S, clock: C, random: R) -> Self {
        LockManager {
            inner: Rc::new(Inner {
                store,
                clock,
                random,
                queue: RefCell::new(KeyedQueue::new()),
                known: RefCell::new(HashMap::default()),
                calls: Cell::new(0),
            }),
        }
    }

    /// Store calls made so far by this manager's acquisitions and releases.
    pub fn store_calls(&self) -> u64 {
        self.inner.calls.get()
    }

    /// Local contenders waiting or holding, for `name`.
    pub fn local_line(&self, name: &str) -> usize {
        let queue = self.inner.queue.borrow();
        queue.line_id(name).map_or(0, |line| queue.line_len(line))
    }

    /// Takes the lock `name`, or answers `None` when a live holder kept it for the whole
    /// `wait_ms`. Local contenders are served first come, first served.
    ///
    /// # Cancel safety
    /// Dropping the future gives up: a waiter leaves the local line (one that had been handed
    /// the lock leaves the record to this isolate's next acquisition, which takes it with one
    /// CAS); a head that was talking to the store holds nothing unless its create or CAS had
    /// already succeeded, in which case the record stays held until stale — as if the holder
    /// had crashed.
    ///
    /// # Errors
    /// A bad name or option (nothing asked of the store), or a store failure — never reported
    /// as a busy lock.
    pub async fn acquire(
        &self,
        name: &str,
        options: LockOptions,
    ) -> Result<Option<Lock<S, C, R>>, LockError> {
        if let Some(first) = self.first_call(name, options)? {
            let answer = match first.version() {
                None => boxed(self.inner.store.create(name, first.value())).await,
                Some(version) => {
                    boxed(self.inner.store.replace(name, version, first.value())).await
                }
            };
            return match self.finish_first(first, answer)? {
                FirstOutcome::Held(lock) => Ok(Some(lock)),
                FirstOutcome::Contend(resume) => self.resume(resume).await,
            };
        }
        let inner = &self.inner;
        let deadline = inner.clock.now_ms() + options.wait_ms;
        let (ticket, key) = {
            let mut queue = inner.queue.borrow_mut();
            let ticket = queue.push(name, Waiter::default()).ticket;
            // The line's own string, shared.
            let key = queue.key(ticket).cloned();
            (ticket, key.unwrap_or_else(|| Rc::from(name)))
        };
        let mut place = Place {
            inner: inner.clone(),
            ticket,
            kept: false,
        };
        loop {
            let granted = {
                let mut queue = inner.queue.borrow_mut();
                let grant = queue.get_mut(ticket).and_then(|waiter| waiter.grant.take());
                match grant {
                    Some(grant) => Some(Some(grant)),
                    None if queue.is_head(ticket) => Some(None),
                    None => None,
                }
            };
            match granted {
                Some(Some(grant)) => {
                    place.kept = true;
                    return Ok(Some(self.lock(key, grant, ticket, options.stale_ms)));
                }
                Some(None) => break,
                None => {}
            }
            let now = inner.clock.now_ms();
            let until = match abandon_stale_holder(inner, ticket, now) {
                Holder::Abandoned => continue,
                Holder::Live(stale_at) => deadline.min(stale_at),
                Holder::None => deadline,
            };
            if deadline - now <= 0.0 {
                return Ok(None);
            }
            Wake {
                inner,
                ticket,
                sleep: inner.clock.sleep(until - now)?,
            }
            .await;
        }
        let yield_first = {
            let mut queue = inner.queue.borrow_mut();
            let line = queue.line_of(ticket);
            line.and_then(|line| queue.line_data_mut(line))
                .is_some_and(|state| std::mem::take(&mut state.yield_first))
        };
        self.resume(Resume {
            name: key,
            place,
            deadline,
            stale_ms: options.stale_ms,
            yield_first,
            exists: false,
        })
        .await
    }

    /// The synchronous start of an acquisition, for a binding that makes its store calls
    /// itself: when nobody in this isolate waits for or holds `name`, joins its line and answers
    /// the one store call that takes the lock if nobody else has it — a create, or, when this
    /// isolate freed the record last, a CAS on that record. Make the call, then pass its answer
    /// to [`LockManager::finish_first`]. `Ok(None)`: others here are in line; use
    /// [`LockManager::acquire`].
    ///
    /// Dropping the [`FirstCall`] unfinished leaves the line; a record its call already wrote
    /// stays held until stale.
    ///
    /// # Errors
    /// A bad name or option; nothing was asked of the store.
    pub fn first_call(
        &self,
        name: &str,
        options: LockOptions,
    ) -> Result<Option<FirstCall<S, C, R>>, LockError> {
        validate_key(name).map_err(LockError::InvalidName)?;
        let options = options.validate().map_err(LockError::InvalidOption)?;
        let inner = &self.inner;
        if inner.queue.borrow().line_id(name).is_some() {
            return Ok(None);
        }
        let now = inner.clock.now_ms();
        // A name this isolate freed last is kept with its record: its line shares that string.
        let known = inner.known.borrow_mut().remove_entry(name);
        let (key, version, fence) = match known {
            Some((key, (version, free))) => (key, Some(version), free.fence + 1),
            None => (Rc::from(name), None, 1),
        };
        let ticket = inner
            .queue
            .borrow_mut()
            .push_shared(&key, Waiter::default())
            .ticket;
        let token = inner.random.token();
        Ok(Some(FirstCall {
            value: Record::encode_held(&token, fence, now),
            version,
            token,
            fence,
            at: now,
            resume: Resume {
                name: key,
                place: Place {
                    inner: inner.clone(),
                    ticket,
                    kept: false,
                },
                deadline: now + options.wait_ms,
                stale_ms: options.stale_ms,
                yield_first: false,
                exists: false,
            },
        }))
    }

    /// Takes the answer to a [`FirstCall`]: the lock, or — when the record was there or had
    /// changed — the rest of the acquisition, which [`LockManager::resume`] runs.
    ///
    /// # Errors
    /// The store failed: nothing is held and the line is left.
    pub fn finish_first(
        &self,
        first: FirstCall<S, C, R>,
        answer: Result<Option<S::Version>, StoreError>,
    ) -> Result<FirstOutcome<S, C, R>, LockError> {
        let inner = &self.inner;
        inner.calls.set(inner.calls.get() + 1);
        let FirstCall {
            token,
            fence,
            at,
            mut resume,
            ..
        } = first;
        match answer? {
            Some(version) => {
                resume.place.kept = true;
                let grant = Grant::written(token, fence, version, at);
                let ticket = resume.place.ticket;
                let (name, stale_ms) = (resume.name.clone(), resume.stale_ms);
                Ok(FirstOutcome::Held(self.lock(name, grant, ticket, stale_ms)))
            }
            None => {
                resume.exists = true;
                Ok(FirstOutcome::Contend(resume))
            }
        }
    }

    /// The rest of an acquisition whose first call did not take the lock: the head's
    /// conversation with the store, as in [`LockManager::acquire`].
    ///
    /// # Cancel safety
    /// As [`LockManager::acquire`].
    ///
    /// # Errors
    /// As [`LockManager::acquire`].
    pub async fn resume(
        &self,
        resume: Resume<S, C, R>,
    ) -> Result<Option<Lock<S, C, R>>, LockError> {
        let Resume {
            name,
            mut place,
            deadline,
            stale_ms,
            yield_first,
            exists,
        } = resume;
        // Boxed behind `dyn`: the contention's state machine stands on its own instead of being
        // inlined into the caller's (smaller wasm; one allocation per acquisition).
        let contention: Contention<'_, S::Version> =
            Box::pin(self.contend(&name, deadline, stale_ms, yield_first, exists));
        match contention.await? {
            Some(grant) => {
                place.kept = true;
                let ticket = place.ticket;
                Ok(Some(self.lock(name, grant, ticket, stale_ms)))
            }
            None => Ok(None),
        }
    }

    /// The store this manager's locks live in.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// The clock this manager's locks are timed by.
    pub fn clock(&self) -> &C {
        &self.inner.clock
    }

    fn lock(
        &self,
        name: Rc<str>,
        grant: Grant<S::Version>,
        ticket: Ticket,
        stale_ms: f64,
    ) -> Lock<S, C, R> {
        let stale_at = grant.at + stale_ms;
        if let Some(waiter) = self.inner.queue.borrow_mut().get_mut(ticket) {
            waiter.stale_at = Some(stale_at);
        }
        Lock {
            stale_at,
            name,
            token: grant.token,
            fence: grant.fence,
            record_fence: grant.record_fence,
            stale_ms,
            version: grant.version,
            released: Cell::new(false),
            left: Cell::new(false),
            ticket,
            inner: self.inner.clone(),
        }
    }

    /// The head's conversation with the store, until it holds the record or the wait is over.
    async fn contend(
        &self,
        name: &str,
        deadline: f64,
        stale_ms: f64,
        yield_first: bool,
        mut exists: bool,
    ) -> Result<Option<Grant<S::Version>>, LockError> {
        let inner = &self.inner;
        let token = inner.random.token();
        let mut takeovers = 0;
        let mut poll = FIRST_POLL_MS;
        // A record that is not ours: the version first seen, and when.
        let mut unreadable: Option<(S::Version, f64)> = None;
        let mut known = inner.known.borrow_mut().remove(name);
        if yield_first {
            known = None;
            let pause = (MAX_POLL_MS * (0.5 + inner.random.unit() / 2.0))
                .min(deadline - inner.clock.now_ms());
            if pause > 0.0 {
                inner.clock.sleep(pause)?.await;
            }
        }
        // Once a create found a record, polls only read: records are never deleted.
        loop {
            let now = inner.clock.now_ms();
            // A record from `known` is one this isolate wrote last and nobody holds: take it.
            let ours = known.is_some();
            let read = match known.take() {
                Some(known) => Some(known),
                None => {
                    if !exists {
                        let value = Record::encode_held(&token, 1, now);
                        if let Some(version) = self.call(inner.store.create(name, &value)).await? {
                            return Ok(Some(Grant::written(token, 1, version, now)));
                        }
                        exists = true;
                    }
                    match self.call(inner.store.read(name)).await? {
                        Some(found) => {
                            let record = Record::decode(&found.value);
                            match record {
                                Ok(record) => Some((found.version, record)),
                                Err(_) => {
                                    // Not ours: taken over only once unchanged for stale_ms.
                                    let since = match &unreadable {
                                        Some((version, since)) if *version == found.version => {
                                            *since
                                        }
                                        _ => now,
                                    };
                                    unreadable = Some((found.version.clone(), since));
                                    if now - since >= stale_ms && takeovers < TAKEOVERS {
                                        takeovers += 1;
                                        // Its fence is lost; epoch milliseconds outgrow any count.
                                        let fence = (now.floor() as u64).max(1);
                                        let value = Record::encode_held(&token, fence, now);
                                        if let Some(version) = self
                                            .call(inner.store.replace(name, &found.version, &value))
                                            .await?
                                        {
                                            return Ok(Some(Grant::written(
                                                token, fence, version, now,
                                            )));
                                        }
                                        continue;
                                    }
                                    None
                                }
                            }
                        }
                        // Gone (a store that expires records): the next attempt creates.
                        None => {
                            exists = false;
                            None
                        }
                    }
                }
            };
            if let Some((version, record)) = read {
                let stale = !ours && record.held && now - record.at > stale_ms;
                if ours || !record.held || (stale && takeovers < TAKEOVERS) {
                    if stale {
                        takeovers += 1;
                    }
                    let fence = record.fence + 1;
                    let value = Record::encode_held(&token, fence, now);
                    match self
                        .call(inner.store.replace(name, &version, &value))
                        .await?
                    {
                        Some(version) => {
                            return Ok(Some(Grant::written(token, fence, version, now)))
                        }
                        // Somebody wrote in between: read again at once, it is progress.
                        None => continue,
                    }
                }
            }
            let now = inner.clock.now_ms();
            if now >= deadline {
                return Ok(None);
            }
            let pause = (poll * (0.5 + inner.random.unit() / 2.0)).min(deadline - now);
            poll = (poll * 2.0).min(MAX_POLL_MS);
            inner.clock.sleep(pause)?.await;
        }
    }

    /// One store call, counted (see [`boxed`]).
    async fn call<'a, T: 'a>(
        &self,
        call: impl Future<Output = Result<T, StoreError>> + 'a,
    ) -> Result<T, StoreError> {
        self.inner.calls.set(self.inner.calls.get() + 1);
        boxed(call).await
    }
}

impl<S: LockStore, C: Clock, R: Random> Lock<S, C, R> {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The token in the record while this lock is held (128 random bits, hex). Acquisitions
    /// handed on within one batch share it; the fence is unique to each.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// When the record this lock holds goes stale (epoch milliseconds on the manager's clock):
    /// from then on other isolates may take it over, and so may the waiters in this one, after
    /// which releasing it changes nothing. The lock is not renewed.
    pub fn held_until(&self) -> f64 {
        self.stale_at
    }

    /// Strictly greater than the fence of every earlier acquisition of this name, across
    /// releases and takeovers: a protected resource refuses writes with a lower one.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// Gives the lock back, if the record still carries this holder's token: to the next local
    /// waiter — from this lock's batch with no store call, or with one CAS that raises the fence
    /// and reserves fences for the waiters behind — or, with none waiting (or the streak over),
    /// by freeing the record. Releasing twice, or after a takeover, changes nothing.
    ///
    /// # Cancel safety
    /// Dropping the future after the store call began leaves the local line without handing
    /// on: the record stays as the call left it, and goes stale if still held.
    ///
    /// # Errors
    /// The store failed; the record may still be held by this token and goes stale.
    pub async fn release(&self) -> Result<(), LockError> {
        let Some(write) = self.begin_release() else {
            return Ok(());
        };
        let answer = boxed(
            self.inner
                .store
                .replace(&self.name, &write.version, &write.value),
        )
        .await;
        self.finish_release(write, answer)
    }

    /// The synchronous start of [`Lock::release`], for a binding that makes its store calls
    /// itself: `None` when there is nothing to write (released before, or handed on from the
    /// batch), else the CAS to make — then pass its answer to [`Lock::finish_release`].
    pub fn begin_release(&self) -> Option<ReleaseWrite<S::Version>> {
        if self.released.replace(true) {
            return None;
        }
        let inner = &self.inner;
        let version = self.version.clone();
        let now = inner.clock.now_ms();
        let mut queue = inner.queue.borrow_mut();
        let next = queue.next_in_line(self.ticket);
        let behind = next.map_or(0, |next| queue.behind(next, MAX_BATCH - 1));
        // By ticket, not by name: this lock is in its line until it leaves (no hashing).
        let line = queue.line_of(self.ticket);
        let state = line.and_then(|line| queue.line_data_mut(line));
        let streak_since = state.as_ref().and_then(|state| state.streak_since);
        let in_streak = streak_since.is_none_or(|since| now - since < MAX_LOCAL_STREAK_MS);
        let young = MAX_LOCAL_STREAK_MS.min(self.stale_ms / 4.0);
        let from_batch = state
            .and_then(|state| state.batch.as_ref())
            .filter(|batch| {
                batch.version == version && self.fence < batch.last_fence && now - batch.at < young
            })
            .map(|batch| (batch.token.clone(), batch.at));
        let write = match (next.filter(|_| in_streak), from_batch) {
            (Some(next), Some((token, batch_at))) => {
                // The record already carries this batch's token and a fence above the next one.
                if let Some(waiter) = queue.get_mut(next) {
                    waiter.grant = Some(Grant {
                        token,
                        fence: self.fence + 1,
                        version,
                        record_fence: self.record_fence,
                        at: batch_at,
                    });
                }
                drop(queue);
                self.leave_once();
                return None;
            }
            (Some(next), None) => {
                let token = inner.random.token();
                // Above every fence this record has carried, so the record's fence never falls.
                let fence = self.record_fence + 1;
                let last_fence = fence + behind as u64;
                ReleaseWrite {
                    value: Record::encode_held(&token, last_fence, now),
                    version,
                    now,
                    then: AfterRelease::HandOff {
                        next,
                        token,
                        fence,
                        last_fence,
                    },
                }
            }
            (None, _) => {
                let free = Record::free(self.record_fence, now);
                ReleaseWrite {
                    value: free.encode(),
                    version,
                    now,
                    then: AfterRelease::Free {
                        free,
                        // Waiters left when a streak ended at its bound: they let others in first.
                        capped: next.is_some() && streak_since.is_some(),
                    },
                }
            }
        };
        Some(write)
    }

    /// Takes the answer to a [`ReleaseWrite`] and leaves the local line, waking the next.
    ///
    /// # Errors
    /// The store failed; the record may still be held by this token and goes stale.
    pub fn finish_release(
        &self,
        write: ReleaseWrite<S::Version>,
        answer: Result<Option<S::Version>, StoreError>,
    ) -> Result<(), LockError> {
        let inner = &self.inner;
        inner.calls.set(inner.calls.get() + 1);
        if let Ok(Some(version)) = &answer {
            match write.then {
                AfterRelease::HandOff {
                    next,
                    token,
                    fence,
                    last_fence,
                } => {
                    let mut queue = inner.queue.borrow_mut();
                    // The waiter the CAS was for may have left meanwhile (its wait ended): the
                    // grant goes to whoever is next now.
                    let target = if queue.get(next).is_some() {
                        Some(next)
                    } else {
                        queue.next_in_line(self.ticket)
                    };
                    match target.and_then(|target| queue.get_mut(target)) {
                        Some(waiter) => {
                            waiter.grant = Some(Grant {
                                token: token.clone(),
                                fence,
                                version: version.clone(),
                                record_fence: last_fence,
                                at: write.now,
                            });
                            let line = queue.line_of(self.ticket);
                            if let Some(state) = line.and_then(|line| queue.line_data_mut(line)) {
                                state.streak_since.get_or_insert(write.now);
                                state.batch = Some(Batch {
                                    version: version.clone(),
                                    token,
                                    last_fence,
                                    at: write.now,
                                });
                            }
                        }
                        None => {
                            // Nobody here to take it: the record is held by a token nobody
                            // has. Remembered, so this isolate's next acquisition takes it with
                            // one CAS instead of waiting for it to go stale.
                            drop(queue);
                            let orphan = Record::held(&token, last_fence, write.now);
                            remember(&mut inner.known.borrow_mut(), &self.name, version, orphan);
                        }
                    }
                }
                AfterRelease::Free { free, capped } => {
                    remember(&mut inner.known.borrow_mut(), &self.name, version, free);
                    let mut queue = inner.queue.borrow_mut();
                    let line = queue.line_of(self.ticket);
                    if let Some(state) = line.and_then(|line| queue.line_data_mut(line)) {
                        state.yield_first = capped;
                        state.streak_since = None;
                        state.batch = None;
                    }
                }
            }
        }
        self.leave_once();
        answer.map(|_| ()).map_err(LockError::Store)
    }

    /// The store the lock lives in.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    fn leave_once(&self) {
        if !self.left.replace(true) {
            leave(&self.inner, self.ticket);
        }
    }
}

/// Remembers the record this isolate wrote last for `name`, which nobody holds.
fn remember<V: Clone>(known: &mut Known<V>, name: &Rc<str>, version: &V, record: Record) {
    if known.len() >= KNOWN_NAMES {
        known.clear();
    }
    known.insert(name.clone(), (version.clone(), record));
}

/// The store call a release makes: a CAS from [`ReleaseWrite::version`] to
/// [`ReleaseWrite::value`] under the lock's name.
#[derive(Debug)]
pub struct ReleaseWrite<V> {
    version: V,
    value: String,
    now: f64,
    then: AfterRelease,
}

impl<V> ReleaseWrite<V> {
    /// The version the record must still have.
    pub fn version(&self) -> &V {
        &self.version
    }

    /// The record to write.
    pub fn value(&self) -> &str {
        &self.value
    }
}

/// What a successful release CAS leads to.
#[derive(Debug)]
enum AfterRelease {
    /// The next waiter holds the record, with fences up to `last_fence` reserved.
    HandOff {
        next: Ticket,
        token: String,
        fence: u64,
        last_fence: u64,
    },
    /// The record is free.
    Free { free: Record, capped: bool },
}

/// A store call as a boxed future, so each store method's future is compiled once rather than
/// into every state machine that awaits it; the allocation is nothing beside the I/O.
fn boxed<'a, T: 'a>(
    call: impl Future<Output = Result<T, StoreError>> + 'a,
) -> Pin<Box<dyn Future<Output = Result<T, StoreError>> + 'a>> {
    Box::pin(call)
}

impl<S: LockStore, C: Clock, R: Random> Drop for Lock<S, C, R> {
    fn drop(&mut self) {
        self.leave_once();
    }
}

/// Leaves the local line and wakes whoever's turn it now is (outside the borrow: a waker may
/// poll, and a poll borrows the queue).
fn leave<S: LockStore, C: Clock, R>(inner: &Inner<S, C, R>, ticket: Ticket) {
    let (waker, orphan) = {
        let mut queue = inner.queue.borrow_mut();
        let name = queue.key(ticket).cloned();
        let removed = queue.remove(ticket);
        let next = removed.as_ref().and_then(|removed| removed.next);
        let orphan = removed.and_then(|removed| removed.payload.grant).zip(name);
        let waker = next
            .and_then(|next| queue.get_mut(next))
            .and_then(|waiter| waiter.waker.take());
        (waker, orphan)
    };
    // A waiter handed the lock that left before it took it (a Rust caller dropped the
    // acquisition): the record is ours and nobody holds it — remembered, so the next
    // acquisition here takes it with one CAS instead of waiting for it to go stale. (The clock
    // is read outside the queue's borrow: a JS `now` may call back into the manager.)
    if let Some((grant, name)) = orphan {
        let orphan = Record::held(&grant.token, grant.record_fence, inner.clock.now_ms());
        remember(&mut inner.known.borrow_mut(), &name, &grant.version, orphan);
    }
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// The holder ahead of a waiter, as [`abandon_stale_holder`] found it.
enum Holder {
    /// None yet: the head is still talking to the store.
    None,
    /// Held until the record goes stale at this time.
    Live(f64),
    /// It was past `staleMs` and has been put out of the line.
    Abandoned,
}

/// Puts the holder at the head of `ticket`'s line out of it when its record has gone stale —
/// a holder that crashed, or never released — so the line moves on: the next head contends
/// at the store, where the record is stale too, and takes it over by CAS. Other isolates would
/// take it over at the same time; the seed, with no local line, does the same for contenders
/// in the holder's own process. The holder's late release then changes nothing here, and its
/// CAS fails in the store once the record is taken over.
fn abandon_stale_holder<S: LockStore, C: Clock, R>(
    inner: &Inner<S, C, R>,
    ticket: Ticket,
    now: f64,
) -> Holder {
    let head = {
        let mut queue = inner.queue.borrow_mut();
        let Some(line) = queue.line_of(ticket) else {
            return Holder::None;
        };
        let Some(head) = queue.head(line).filter(|&head| head != ticket) else {
            return Holder::None;
        };
        match queue.get(head).and_then(|holder| holder.stale_at) {
            None => return Holder::None,
            Some(stale_at) if stale_at > now => return Holder::Live(stale_at),
            Some(_) => {}
        }
        if let Some(state) = queue.line_data_mut(line) {
            *state = NameState::default();
        }
        head
    };
    leave(inner, head);
    Holder::Abandoned
}

/// A place in the local line, left on drop unless it became a held lock.
struct Place<S: LockStore, C: Clock, R> {
    inner: Rc<Inner<S, C, R>>,
    ticket: Ticket,
    kept: bool,
}

impl<S: LockStore, C: Clock, R> Drop for Place<S, C, R> {
    fn drop(&mut self) {
        if !self.kept {
            leave(&self.inner, self.ticket);
        }
    }
}

/// Completes when the waiter is woken (its turn, or a grant) or its wait is over.
struct Wake<'a, S: LockStore, C, R> {
    inner: &'a Inner<S, C, R>,
    ticket: Ticket,
    sleep: Sleep,
}

impl<S: LockStore, C, R> Future for Wake<'_, S, C, R> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        {
            let mut queue = self.inner.queue.borrow_mut();
            let ready = queue.is_head(self.ticket)
                || queue
                    .get(self.ticket)
                    .is_some_and(|waiter| waiter.grant.is_some());
            if ready {
                return Poll::Ready(());
            }
            if let Some(waiter) = queue.get_mut(self.ticket) {
                waiter.waker = Some(cx.waker().clone());
            }
        }
        self.sleep.as_mut().poll(cx)
    }
}
