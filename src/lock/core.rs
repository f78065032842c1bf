//! The lock's step machine: every rule of the lease lock in one place, with no I/O.
//!
//! A driver (the Rust [`LockManager`](super::LockManager), or the JS package's `lock.js`) asks
//! the core what to do next, does it — a store call, a sleep, waiting for its turn — and feeds
//! the answer back; the core answers with the next [`Step`]. The core calls nothing: no store,
//! no clock (`now` is an argument), no timer, no JavaScript. So a host exception cannot unwind
//! through it, and its decision table is tested natively on a manual clock.
//!
//! The rules, each in one function:
//! - **Taking a name** ([`LockCore::step`] on a contender, `contend`): the conditional create is
//!   the decision. A record that is free is taken by CAS on the version read; a held one older
//!   than `staleMs` was left by a dead holder and is taken over by CAS (at most [`TAKEOVERS`]
//!   per acquisition, as `board-lock.ts`); a record that is not ours only once it stayed unchanged for
//!   `staleMs`. Polls back off from 2 ms to [`MAX_POLL_MS`] with jitter.
//! - **Fencing**: every record written by a new holder carries a fence above every fence the
//!   name's record has carried (`record_fence + 1`); a record that is not ours gets the epoch
//!   milliseconds, which outgrow any count.
//! - **The local line**: contenders for a name in one isolate queue FIFO; only the head talks
//!   to the store. Others wait with no timer of their own: the core keeps their wait deadlines
//!   (and holders' `heldUntil`) ordered for one shared timer ([`LockCore::next_timer`],
//!   [`LockCore::expire`]).
//! - **Hand-off batches** (`release`): a release with waiters behind writes one CAS that
//!   raises the fence and reserves one fence for each waiter then in line (up to
//!   [`MAX_BATCH`]); the hand-offs after it within the batch need no store call. A batch is
//!   used only while younger than [`MAX_LOCAL_STREAK_MS`] and a quarter of `staleMs`, and a
//!   streak of local hand-offs ends after [`MAX_LOCAL_STREAK_MS`]: the record is freed and the
//!   next local head pauses one poll, so other isolates get their turn.
//! - **Leases** (`renew`): a renewal is one CAS on the version this holder's record has,
//!   keeping token and fence and moving `at` to now. A holder past its `heldUntil` has lost the
//!   lease for good; with others in line behind it, it is put out of the line and the next
//!   contends (and takes the record over once stale, as other isolates would).

use core::fmt;
use std::rc::Rc;

use super::{LockError, LockOptions, MAX_BATCH, MAX_LOCAL_STREAK_MS, MAX_POLL_MS, TAKEOVERS};
use crate::deadlines::Deadlines;
use crate::key::validate_name;
use crate::keymap::KeyMap;
use crate::queue::{KeyedQueue, Ticket};
use crate::random::Random;
use crate::record::{encode_ours, NotARecord, Record};

/// The first pause between attempts; each later pause doubles, up to [`MAX_POLL_MS`].
const FIRST_POLL_MS: f64 = 2.0;

/// Most names whose free record is remembered; past this the memory is cleared.
const KNOWN_NAMES: usize = 1024;

/// What the driver does next for one acquisition or lock.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<V> {
    /// `store.create(name, value)`, then [`Answer::Created`].
    Create {
        /// The record to write.
        value: String,
    },
    /// `store.read(name)`, then [`Answer::Read`].
    Read,
    /// `store.replace(name, version, value)`, then [`Answer::Replaced`].
    Replace {
        /// The version the record must still have.
        version: V,
        /// The record to write.
        value: String,
    },
    /// Pause until `until`, then [`Answer::Woke`] (the head of a line, between polls).
    Sleep {
        /// When to come back.
        until: f64,
    },
    /// Waiting in line: come back with [`Answer::Woke`] when [`LockCore::take_woken`] names
    /// this ticket, or at `until` at the latest (its wait deadline, or the holder's lease end).
    Wait {
        /// When to come back at the latest.
        until: f64,
    },
    /// The lease is held: see [`LockCore::lease`].
    Held,
    /// A release is done (or there was nothing to write).
    Done,
    /// The lease is lost: taken over, released, or past its `heldUntil`.
    Lost,
    /// The wait is over and nothing is held; the ticket has left the line.
    GiveUp,
}

/// What a driver knows of the acquisitions of a name that follow one: a serializer's queued
/// works, which each acquire only once the one before holds. The core takes `streak_ms` at an
/// acquisition ([`LockCore::acquire_with`]) and `followers` at each release
/// ([`LockCore::release_with`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Succession {
    /// Acquisitions after the next waiter's: the hand-off's record reserves a fence for each
    /// (up to [`MAX_BATCH`]), so they are handed on with no store call although each acquires
    /// only once the one before it holds.
    pub followers: usize,
    /// How long a streak of local hand-offs may run before the record is freed for other
    /// isolates.
    pub streak_ms: f64,
}

impl Succession {
    /// A plain lock's: nothing announced, streaks of [`MAX_LOCAL_STREAK_MS`] — a remote
    /// contender on the default wait still gets in.
    pub const LOCK: Succession = Succession {
        followers: 0,
        streak_ms: MAX_LOCAL_STREAK_MS,
    };

    /// A serializer's turns with a lease of `stale_ms`: streaks of a quarter of it (at least
    /// [`MAX_LOCAL_STREAK_MS`]), as a remote serializer's works wait for their deadline — seconds
    /// — rather than a lock's 100 ms.
    pub fn serialized(followers: usize, stale_ms: f64) -> Self {
        Succession {
            followers,
            streak_ms: (stale_ms / 4.0).max(MAX_LOCAL_STREAK_MS),
        }
    }
}

/// What came of the last [`Step`].
#[derive(Debug)]
pub enum Answer<V> {
    /// `create` answered: the new version, or `None` if a record exists.
    Created(Option<V>),
    /// `read` answered: the version and the record (or why it is not ours), or `None`.
    Read(Option<(V, Result<Record, NotARecord>)>),
    /// `replace` answered: the new version, or `None` if the version had changed.
    Replaced(Option<V>),
    /// A sleep or a wait ended.
    Woke,
    /// The store call failed (the driver keeps the error and reports it).
    Failed,
}

/// A held lease, as its holder sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaseView<'a> {
    /// The token in the record (shared within a hand-off batch).
    pub token: &'a str,
    /// This holder's fence.
    pub fence: u64,
    /// Until when nobody may take the lease over, on the writer's clock.
    pub held_until: f64,
}

/// Something the driver must tell a waiter, from [`LockCore::take_woken`].
#[derive(Debug, PartialEq)]
pub enum Woken<W> {
    /// Its turn came (it is the head now, or holds the lease): if the driver is waiting for it
    /// ([`Step::Wait`]), it calls [`LockCore::step`] with [`Answer::Woke`]; otherwise (it is
    /// busy with a step already) this changes nothing.
    Turn(Ticket),
    /// Its wait ended with nothing held; it has left the line.
    GaveUp(W),
}

struct Attempt<V> {
    deadline: f64,
    stale_ms: f64,
    /// Drawn when the attempt starts.
    token: String,
    takeovers: u32,
    poll: f64,
    /// A record that is not ours: the version first seen, and when.
    unreadable: Option<(V, f64)>,
    /// A record is known to be there: polls read instead of create.
    exists: bool,
    /// The fence of the record this isolate freed last (0 for none): a read that finds it
    /// still there, free, shows nobody took the name since (see [`Known`]).
    known_fence: u64,
    /// Another isolate wrote the record since this isolate freed it.
    contested: bool,
    call: Call,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Call {
    /// Not started yet: its turn just came.
    Idle,
    /// Paused (first a yield to other isolates, later between polls).
    Sleep,
    Create {
        fence: u64,
        at: f64,
    },
    Read,
    Replace {
        fence: u64,
        at: f64,
    },
}

struct Lease<V> {
    token: String,
    fence: u64,
    /// The fence the record carries: `fence`, or the highest one of a batch.
    record_fence: u64,
    /// The record's version while this lease holds it.
    version: V,
    /// When the record was written: the lease runs `stale_ms` from here.
    at: f64,
    stale_ms: f64,
    /// A renewal in flight, written at this time.
    renewing: Option<f64>,
    /// Found past its end by a renewal: never renewed again.
    lapsed: bool,
    /// Another isolate wrote the record between this isolate's last two acquisitions.
    contested: bool,
}

impl<V> Lease<V> {
    fn held_until(&self) -> f64 {
        self.at + self.stale_ms
    }
}

enum AfterRelease {
    /// The next waiter gets `fence`; fences up to `last_fence` are reserved for those behind.
    HandOff {
        token: String,
        fence: u64,
        last_fence: u64,
    },
    /// The record is freed; `capped`: a streak ended at its bound with waiters left.
    Free { capped: bool },
}

enum State<V> {
    /// In line behind others; gives up at `deadline`.
    Waiting { deadline: f64, stale_ms: f64 },
    /// The head of the line, talking to the store.
    Contending(Attempt<V>),
    /// Holds the lease.
    Holding(Lease<V>),
    /// Its release's CAS is in flight; it stays the head so nobody here contends meanwhile.
    Releasing {
        lease: Lease<V>,
        then: AfterRelease,
        at: f64,
    },
}

struct Entry<V, W> {
    state: State<V>,
    handle: W,
}

/// Fences one hand-off CAS reserved: the record at `version` carries `token` and `last_fence`
/// and was written at `at`.
struct Batch<V> {
    version: V,
    token: String,
    last_fence: u64,
    at: f64,
}

struct NameState<V> {
    /// When the current run of local hand-offs began.
    streak_since: Option<f64>,
    /// The next head pauses one poll before its first attempt (after a capped streak).
    yield_first: bool,
    batch: Option<Batch<V>>,
    /// The bound on a streak of local hand-offs ([`Succession::streak_ms`]).
    streak_ms: f64,
}

// Written out: a derive would ask `V: Default`.
impl<V> Default for NameState<V> {
    fn default() -> Self {
        NameState {
            streak_since: None,
            yield_first: false,
            batch: None,
            streak_ms: MAX_LOCAL_STREAK_MS,
        }
    }
}

/// The record this isolate wrote last for a name, which nobody here holds: the next
/// acquisition takes it with one CAS instead of create, read, CAS.
struct Known<V> {
    version: V,
    fence: u64,
    /// Another isolate wrote the record since this one freed it, last time: the next
    /// acquisition reads first rather than spend a CAS bound to fail on this version.
    contested: bool,
}

/// Known records by name, in the crate's one map type (see [`KeyMap`]).
struct KnownRecords<V> {
    index: KeyMap,
    records: Vec<(Rc<str>, Known<V>)>,
}

impl<V> Default for KnownRecords<V> {
    fn default() -> Self {
        KnownRecords {
            index: KeyMap::default(),
            records: Vec::new(),
        }
    }
}

impl<V> KnownRecords<V> {
    fn take(&mut self, name: &str) -> Option<Known<V>> {
        let at = self.index.remove(name)? as usize;
        if at >= self.records.len() {
            return None;
        }
        let (_, known) = self.records.swap_remove(at);
        if let Some((moved, _)) = self.records.get(at) {
            self.index.insert(moved.clone(), at as u32);
        }
        Some(known)
    }

    /// The name as the record keeps it, to share rather than copy.
    fn key(&self, name: &str) -> Option<Rc<str>> {
        let at = *self.index.get(name)? as usize;
        self.records.get(at).map(|(key, _)| key.clone())
    }

    fn put(&mut self, name: &Rc<str>, known: Known<V>) {
        if let Some(&at) = self.index.get(name) {
            if let Some(slot) = self.records.get_mut(at as usize) {
                slot.1 = known;
                return;
            }
        }
        if self.records.len() >= KNOWN_NAMES {
            *self = KnownRecords::default();
        }
        self.index.insert(name.clone(), self.records.len() as u32);
        self.records.push((name.clone(), known));
    }
}

/// Every lock of one store in one isolate: the local lines, their leases, the records this
/// isolate freed, and the times a shared timer must wake the core at. `V` is the store's
/// version type; `W` is what the driver keeps per waiter to wake it (a `Waker`, a JS object).
pub struct LockCore<V, W> {
    lines: KeyedQueue<Entry<V, W>, NameState<V>>,
    known: KnownRecords<V>,
    /// Waiters' deadlines and holders' `heldUntil`.
    timers: Deadlines,
    woken: Vec<Woken<W>>,
    calls: u64,
}

impl<V, W> fmt::Debug for LockCore<V, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockCore")
            .field("lines", &self.lines)
            .field("calls", &self.calls)
            .finish()
    }
}

impl<V: Clone + PartialEq, W> Default for LockCore<V, W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Clone + PartialEq, W> LockCore<V, W> {
    /// No locks.
    pub fn new() -> Self {
        LockCore {
            lines: KeyedQueue::new(),
            known: KnownRecords::default(),
            timers: Deadlines::default(),
            woken: Vec::new(),
            calls: 0,
        }
    }

    /// Starts an acquisition of `name`: at the head of an idle name, its first store call; in
    /// line behind others, [`Step::Wait`]. `handle` is how the driver wakes it. (A lock's: the
    /// drivers say [`acquire_with`](Self::acquire_with) which streak bound is theirs.)
    ///
    /// # Errors
    /// A bad name or option; nothing was queued.
    #[cfg(test)]
    pub fn acquire(
        &mut self,
        name: &str,
        handle: W,
        options: LockOptions,
        now: f64,
        random: &impl Random,
    ) -> Result<(Ticket, Step<V>), LockError> {
        self.acquire_with(name, handle, options, MAX_LOCAL_STREAK_MS, now, random)
    }

    /// [`acquire`](Self::acquire) for a driver whose streaks of local hand-offs on this name
    /// may run to `streak_ms` (a serializer's turns: [`Succession::streak_ms`]).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    pub fn acquire_with(
        &mut self,
        name: &str,
        handle: W,
        options: LockOptions,
        streak_ms: f64,
        now: f64,
        random: &impl Random,
    ) -> Result<(Ticket, Step<V>), LockError> {
        validate_name(name).map_err(LockError::InvalidName)?;
        let options = options.validate().map_err(LockError::InvalidOption)?;
        let deadline = now + options.wait_ms;
        let stale_ms = options.stale_ms;
        if let Some(line) = self.lines.line_id(name) {
            let waiting = State::Waiting { deadline, stale_ms };
            // The line is busy: this joins it (the queue opens one only for an idle name).
            let entry = Entry {
                state: waiting,
                handle,
            };
            let ticket = self.lines.push(name, entry).ticket;
            self.set_streak(ticket, streak_ms);
            self.push_timer(deadline, ticket);
            if let Some(head) = self.lines.head(line) {
                // A holder here past its lease with nobody to notice: put out now. Else its
                // lease end is timed from now on, as someone waits for it.
                self.put_out_if_lost(head, now);
                let held_until = self.lease(head).map(|lease| lease.held_until);
                if let Some(held_until) = held_until {
                    self.push_timer(held_until, head);
                }
            }
            let step = self.step(ticket, Answer::Woke, now, random);
            return Ok((ticket, step));
        }
        let attempt = Attempt::new(deadline, stale_ms);
        let entry = Entry {
            state: State::Contending(attempt),
            handle,
        };
        // A name this isolate freed last: its line shares the record's string.
        let ticket = match self.known.key(name) {
            Some(key) => self.lines.push_shared(&key, entry).ticket,
            None => self.lines.push(name, entry).ticket,
        };
        self.set_streak(ticket, streak_ms);
        let step = self.start(ticket, now, random);
        Ok((ticket, step))
    }

    /// Takes what came of the last step for `ticket` and says the next one. A ticket that has
    /// left (its wait ended, its lease lost) answers [`Step::GiveUp`] or [`Step::Lost`].
    pub fn step(
        &mut self,
        ticket: Ticket,
        answer: Answer<V>,
        now: f64,
        random: &impl Random,
    ) -> Step<V> {
        let Some(entry) = self.lines.get_mut(ticket) else {
            return Step::GiveUp;
        };
        match &mut entry.state {
            State::Waiting { deadline, .. } => {
                let deadline = *deadline;
                self.expire(now);
                match self.lines.get(ticket).map(|entry| &entry.state) {
                    None => Step::GiveUp,
                    Some(State::Waiting { .. }) if deadline <= now => {
                        self.remove(ticket);
                        Step::GiveUp
                    }
                    Some(State::Waiting { .. }) => Step::Wait {
                        until: self.wait_until(ticket, deadline),
                    },
                    Some(_) => self.step(ticket, Answer::Woke, now, random),
                }
            }
            State::Contending(attempt) => match (attempt.call, answer) {
                (Call::Idle, _) => self.start(ticket, now, random),
                (_, Answer::Failed) => {
                    self.remove(ticket);
                    Step::GiveUp
                }
                (_, answer) => self.contend(ticket, answer, now, random),
            },
            State::Holding(lease) => match (lease.renewing, answer) {
                (Some(at), Answer::Replaced(Some(version))) => {
                    lease.renewing = None;
                    self.renewed(ticket, version, at);
                    Step::Held
                }
                (Some(_), Answer::Replaced(None)) => {
                    // The record is no longer this holder's: taken over.
                    self.remove(ticket);
                    Step::Lost
                }
                (Some(_), Answer::Failed) => {
                    // A failed renewal changes nothing: the lease runs to its old end.
                    lease.renewing = None;
                    Step::Held
                }
                // A wake-up (a waiter handed the lease), or nothing in flight.
                _ => Step::Held,
            },
            State::Releasing { .. } => {
                if let Answer::Replaced(Some(version)) = answer {
                    self.released(ticket, version);
                }
                self.remove(ticket);
                Step::Done
            }
        }
    }

    /// Gives up an acquisition or a held lock without a store call: a waiter leaves its line; a
    /// contender leaves too (a record its call in flight writes stays held until stale); a holder
    /// handed the lease that never took it leaves the record to this isolate's next acquisition
    /// (`keep` true), or — a holder that is dropped, as if it crashed — leaves it held until
    /// stale (`keep` false).
    pub fn leave(&mut self, ticket: Ticket, keep: bool) {
        let Some(name) = self.lines.key(ticket).cloned() else {
            return;
        };
        if let Some(Entry {
            state: State::Holding(lease),
            ..
        }) = self.remove(ticket)
        {
            if keep && lease.renewing.is_none() {
                self.remember(&name, lease.version, lease.record_fence, lease.contested);
            }
        }
    }

    /// Starts a release: [`Step::Replace`] to make (then [`LockCore::step`] with its answer), or
    /// [`Step::Done`] when there is nothing to write — handed on within a batch, or not held.
    #[cfg(test)]
    pub fn release(&mut self, ticket: Ticket, now: f64, random: &impl Random) -> Step<V> {
        self.release_with(ticket, 0, now, random)
    }

    /// [`release`](Self::release) announcing `followers` acquisitions after the next waiter's
    /// (see [`Succession::followers`]).
    pub fn release_with(
        &mut self,
        ticket: Ticket,
        followers: usize,
        now: f64,
        random: &impl Random,
    ) -> Step<V> {
        let Some(line) = self.lines.line_of(ticket) else {
            return Step::Done;
        };
        let Some(Entry {
            state: State::Holding(lease),
            ..
        }) = self.lines.get(ticket)
        else {
            return Step::Done;
        };
        if lease.renewing.is_some() {
            // A driver releases after its renewal settled; if it does not, it lets go.
            self.remove(ticket);
            return Step::Done;
        }
        let next = self.lines.next_in_line(ticket);
        // Waiters behind the next one, here or announced: each gets one of the fences the
        // hand-off CAS reserves.
        let behind = next.map_or(0, |next| self.lines.behind(next, MAX_BATCH - 1));
        let behind = behind.max(followers.min(MAX_BATCH - 1)) as u64;
        let state = self.lines.line_data(line);
        let streak_since = state.and_then(|state| state.streak_since);
        let streak_ms = state.map_or(MAX_LOCAL_STREAK_MS, |state| state.streak_ms);
        let in_streak = streak_since.is_none_or(|since| now - since < streak_ms);
        let young = streak_ms.min(lease.stale_ms / 4.0);
        let from_batch = state
            .and_then(|state| state.batch.as_ref())
            .filter(|batch| {
                batch.version == lease.version
                    && lease.fence < batch.last_fence
                    && now - batch.at < young
            });
        match (next.filter(|_| in_streak), from_batch.is_some()) {
            (Some(next), true) => {
                self.hand_on_in_batch(ticket, next);
                Step::Done
            }
            (Some(_), false) => self.hand_off(ticket, behind, now, random),
            (None, _) => {
                // Waiters left when a streak ended at its bound: they let others in first.
                let capped = next.is_some() && streak_since.is_some();
                self.free(ticket, capped, now)
            }
        }
    }

    /// A release to `next` within the batch the record carries: no store call. The record
    /// already carries the batch's token and a fence above the next one.
    fn hand_on_in_batch(&mut self, ticket: Ticket, next: Ticket) {
        let Some(line) = self.lines.line_of(ticket) else {
            return;
        };
        let (
            Some(Entry {
                state: State::Holding(lease),
                ..
            }),
            Some(batch),
        ) = (
            self.lines.get(ticket),
            self.lines
                .line_data(line)
                .and_then(|state| state.batch.as_ref()),
        )
        else {
            return;
        };
        let handed = Lease {
            token: batch.token.clone(),
            fence: lease.fence + 1,
            record_fence: lease.record_fence,
            version: lease.version.clone(),
            at: batch.at,
            stale_ms: self.stale_ms_of(next).unwrap_or(lease.stale_ms),
            renewing: None,
            lapsed: false,
            contested: lease.contested,
        };
        self.hold(next, handed);
        self.remove(ticket);
    }

    /// A release to the next waiter here by one CAS that raises the fence and reserves `behind`
    /// more for the waiters after it.
    fn hand_off(&mut self, ticket: Ticket, behind: u64, now: f64, random: &impl Random) -> Step<V> {
        let Some(Entry {
            state: State::Holding(lease),
            ..
        }) = self.lines.get(ticket)
        else {
            return Step::Done;
        };
        let token = random.token();
        // Above every fence this record has carried, so the record's fence never falls.
        let fence = lease.record_fence + 1;
        let last_fence = fence + behind;
        let value = encode_ours(true, &token, last_fence, now);
        let version = lease.version.clone();
        let then = AfterRelease::HandOff {
            token,
            fence,
            last_fence,
        };
        self.begin_release(ticket, then, now);
        self.replace(version, value)
    }

    /// A release that frees the record, keeping its fence; `capped`: a streak ended at its
    /// bound with waiters left here.
    fn free(&mut self, ticket: Ticket, capped: bool, now: f64) -> Step<V> {
        let Some(Entry {
            state: State::Holding(lease),
            ..
        }) = self.lines.get(ticket)
        else {
            return Step::Done;
        };
        let value = encode_ours(false, "", lease.record_fence, now);
        let version = lease.version.clone();
        self.begin_release(ticket, AfterRelease::Free { capped }, now);
        self.replace(version, value)
    }

    /// Starts a renewal: [`Step::Replace`] that moves the lease to `now + staleMs` (then
    /// [`LockCore::step`] with its answer: [`Step::Held`] renewed, [`Step::Lost`] lost), or
    /// [`Step::Lost`] with no store call when the lease is gone or past its `heldUntil` — lost
    /// for good, and the ticket leaves its line.
    pub fn renew(&mut self, ticket: Ticket, now: f64) -> Step<V> {
        let Some(Entry {
            state: State::Holding(lease),
            ..
        }) = self.lines.get_mut(ticket)
        else {
            return Step::Lost;
        };
        if lease.lapsed || now >= lease.held_until() {
            // Lost for good; a release still frees the record if nobody took it over since.
            lease.lapsed = true;
            return Step::Lost;
        }
        if lease.renewing.is_some() {
            // One renewal at a time: a driver waits for the one in flight.
            return Step::Held;
        }
        lease.renewing = Some(now);
        let value = encode_ours(true, &lease.token, lease.record_fence, now);
        let version = lease.version.clone();
        self.replace(version, value)
    }

    /// The lease `ticket` holds, if it holds one (and a renewal has not found it lapsed).
    pub fn lease(&self, ticket: Ticket) -> Option<LeaseView<'_>> {
        match &self.lines.get(ticket)?.state {
            State::Holding(lease) if !lease.lapsed => Some(LeaseView {
                token: &lease.token,
                fence: lease.fence,
                held_until: lease.held_until(),
            }),
            _ => None,
        }
    }

    /// When a holder that keeps its lease while its work runs (`withLock`, a serializer's turn)
    /// renews next: `staleMs / 3` after `now` — when it took the lease, and after every renewal
    /// whatever it answered. So a renewal that failed (a store error) is tried again at the next
    /// tick while the lease has time left ([`LockCore::renew`] answers [`Step::Lost`] once it
    /// has none). `None` once the lease is lost, lapsed or released.
    pub fn next_renewal(&self, ticket: Ticket, now: f64) -> Option<f64> {
        match &self.lines.get(ticket)?.state {
            State::Holding(lease) if !lease.lapsed => Some(now + lease.stale_ms / 3.0),
            _ => None,
        }
    }

    /// The earliest time the shared timer must call [`LockCore::expire`] at, if any.
    pub fn next_timer(&mut self) -> Option<f64> {
        let lines = &self.lines;
        self.timers
            .first(|entry| timer_live(lines, entry))
            .map(|(at, _)| at)
    }

    /// Ends the waits whose deadline passed (each [`Woken::GaveUp`]) and puts out of their
    /// line the holders whose lease passed with others waiting (the next is [`Woken::Turn`]).
    pub fn expire(&mut self, now: f64) {
        loop {
            let lines = &self.lines;
            let Some((at, ticket)) = self.timers.first(|entry| timer_live(lines, entry)) else {
                return;
            };
            if at > now {
                return;
            }
            self.timers.pop();
            match self.lines.get(ticket).map(|entry| &entry.state) {
                Some(State::Waiting { .. }) => {
                    if let Some(entry) = self.remove(ticket) {
                        self.woken.push(Woken::GaveUp(entry.handle));
                    }
                }
                _ => {
                    self.put_out_if_lost(ticket, now);
                }
            }
        }
    }

    /// The next waiter to tell something, after any call that may have changed the lines (in no
    /// particular order: each is about a different waiter).
    pub fn take_woken(&mut self) -> Option<Woken<W>> {
        self.woken.pop()
    }

    /// The handle kept for a ticket.
    pub fn handle(&self, ticket: Ticket) -> Option<&W> {
        self.lines.get(ticket).map(|entry| &entry.handle)
    }

    /// The live ticket named by a [`Ticket::pack`]ed number.
    pub fn unpack(&self, packed: f64) -> Option<Ticket> {
        self.lines.unpack(packed)
    }

    /// Store calls asked for so far.
    pub fn store_calls(&self) -> u64 {
        self.calls
    }

    /// Local contenders waiting or holding, for `name`.
    pub fn local_line(&self, name: &str) -> usize {
        self.lines
            .line_id(name)
            .map_or(0, |line| self.lines.line_len(line))
    }

    /// Entries in the shared timer's heap, dead ones included (for tests of its bound).
    #[cfg(test)]
    pub fn timer_entries(&self) -> usize {
        self.timers.len()
    }

    /// Whether nothing is queued or held.
    #[cfg(test)]
    pub fn is_idle(&self) -> bool {
        self.lines.is_empty()
    }

    // --- the rules ---

    /// A contender's first step when its turn comes.
    fn start(&mut self, ticket: Ticket, now: f64, random: &impl Random) -> Step<V> {
        let yield_first = self
            .lines
            .line_of(ticket)
            .and_then(|line| self.lines.line_data_mut(line))
            .is_some_and(|state| std::mem::take(&mut state.yield_first));
        let Some(name) = self.lines.key(ticket).cloned() else {
            return Step::GiveUp;
        };
        let known = self.known.take(&name).filter(|_| !yield_first);
        let Some(Entry {
            state: State::Contending(attempt),
            ..
        }) = self.lines.get_mut(ticket)
        else {
            return Step::GiveUp;
        };
        attempt.token = random.token();
        if yield_first {
            let pause = (MAX_POLL_MS * (0.5 + random.unit() / 2.0)).min(attempt.deadline - now);
            if pause > 0.0 {
                attempt.call = Call::Sleep;
                return Step::Sleep { until: now + pause };
            }
        }
        match known {
            // Other isolates wrote it between this isolate's last two turns: they likely did
            // again, so read first (a CAS on the version known would fail, one call wasted).
            Some(known) if known.contested => {
                attempt.exists = true;
                attempt.known_fence = known.fence;
                attempt.contested = true;
                self.attempt(ticket, now)
            }
            // A record this isolate wrote last and nobody holds: take it with one CAS.
            Some(known) => {
                attempt.known_fence = known.fence;
                let fence = known.fence + 1;
                attempt.exists = true;
                attempt.call = Call::Replace { fence, at: now };
                let value = encode_ours(true, &attempt.token, fence, now);
                self.replace(known.version, value)
            }
            None => self.attempt(ticket, now),
        }
    }

    /// The next store call of a contender that holds nothing yet: create until a record is
    /// known to exist, then read (records are never deleted).
    fn attempt(&mut self, ticket: Ticket, now: f64) -> Step<V> {
        let Some(Entry {
            state: State::Contending(attempt),
            ..
        }) = self.lines.get_mut(ticket)
        else {
            return Step::GiveUp;
        };
        self.calls += 1;
        if attempt.exists {
            attempt.call = Call::Read;
            return Step::Read;
        }
        attempt.call = Call::Create { fence: 1, at: now };
        Step::Create {
            value: encode_ours(true, &attempt.token, 1, now),
        }
    }

    /// A contender's answer: hold, write, read again, pause, or give up.
    fn contend(
        &mut self,
        ticket: Ticket,
        answer: Answer<V>,
        now: f64,
        random: &impl Random,
    ) -> Step<V> {
        let Some(Entry {
            state: State::Contending(attempt),
            ..
        }) = self.lines.get_mut(ticket)
        else {
            return Step::GiveUp;
        };
        let call = std::mem::replace(&mut attempt.call, Call::Idle);
        match (call, answer) {
            (
                Call::Create { fence, at } | Call::Replace { fence, at },
                Answer::Created(Some(version)) | Answer::Replaced(Some(version)),
            ) => {
                let lease = Lease {
                    token: std::mem::take(&mut attempt.token),
                    fence,
                    record_fence: fence,
                    version,
                    at,
                    stale_ms: attempt.stale_ms,
                    renewing: None,
                    lapsed: false,
                    contested: attempt.contested,
                };
                self.hold(ticket, lease);
                Step::Held
            }
            // A record is there, or somebody wrote in between: read (again) at once, it is
            // progress.
            (Call::Create { .. } | Call::Replace { .. }, _) => {
                attempt.exists = true;
                // Another isolate wrote the record since this one freed it (or since it read).
                attempt.contested |= attempt.known_fence > 0;
                self.attempt(ticket, now)
            }
            (Call::Read, Answer::Read(found)) => self.decide(ticket, found, now, random),
            // A pause ended (or an answer that fits no call): try again.
            _ => self.attempt(ticket, now),
        }
    }

    /// What to do about the record a read found.
    fn decide(
        &mut self,
        ticket: Ticket,
        found: Option<(V, Result<Record, NotARecord>)>,
        now: f64,
        random: &impl Random,
    ) -> Step<V> {
        let Some(Entry {
            state: State::Contending(attempt),
            ..
        }) = self.lines.get_mut(ticket)
        else {
            return Step::GiveUp;
        };
        let stale_ms = attempt.stale_ms;
        if let Some((_, Ok(record))) = &found {
            // Nobody took the name since this isolate freed it: next time, a CAS straight away.
            if !record.held && record.fence == attempt.known_fence {
                attempt.contested = false;
            }
        }
        let write = match found {
            // Gone (a store that expires records): the next attempt creates.
            None => {
                attempt.exists = false;
                None
            }
            Some((version, Ok(record))) => {
                let stale = record.held && now - record.at > stale_ms;
                if !record.held || (stale && attempt.takeovers < TAKEOVERS) {
                    if stale {
                        attempt.takeovers += 1;
                    }
                    Some((version, record.fence.saturating_add(1)))
                } else {
                    None
                }
            }
            Some((version, Err(_))) => {
                // Not ours: taken over only once unchanged for staleMs.
                let since = match &attempt.unreadable {
                    Some((seen, since)) if *seen == version => *since,
                    _ => now,
                };
                attempt.unreadable = Some((version.clone(), since));
                if now - since >= stale_ms && attempt.takeovers < TAKEOVERS {
                    attempt.takeovers += 1;
                    // Its fence is lost; epoch milliseconds outgrow any count.
                    Some((version, (now.floor() as u64).max(1)))
                } else {
                    None
                }
            }
        };
        if let Some((version, fence)) = write {
            attempt.call = Call::Replace { fence, at: now };
            let value = encode_ours(true, &attempt.token, fence, now);
            return self.replace(version, value);
        }
        if now >= attempt.deadline {
            self.remove(ticket);
            return Step::GiveUp;
        }
        let pause = (attempt.poll * (0.5 + random.unit() / 2.0)).min(attempt.deadline - now);
        attempt.poll = (attempt.poll * 2.0).min(MAX_POLL_MS);
        attempt.call = Call::Sleep;
        Step::Sleep { until: now + pause }
    }

    /// A renewal the store took: the lease runs from `at`, and a batch on the same record
    /// follows it (its hand-offs keep the renewed version and time).
    fn renewed(&mut self, ticket: Ticket, version: V, at: f64) {
        let Some(Entry {
            state: State::Holding(lease),
            ..
        }) = self.lines.get_mut(ticket)
        else {
            return;
        };
        let old = std::mem::replace(&mut lease.version, version.clone());
        lease.at = at;
        let held_until = lease.held_until();
        if let Some(line) = self.lines.line_of(ticket) {
            if let Some(batch) = self
                .lines
                .line_data_mut(line)
                .and_then(|state| state.batch.as_mut())
                .filter(|batch| batch.version == old)
            {
                batch.version = version;
                batch.at = at;
            }
        }
        if self.lines.next_in_line(ticket).is_some() {
            self.push_timer(held_until, ticket);
        }
    }

    fn begin_release(&mut self, ticket: Ticket, then: AfterRelease, at: f64) {
        if let Some(entry) = self.lines.get_mut(ticket) {
            // Moved out through a placeholder that is overwritten at once (the caller checked
            // that it holds).
            let placeholder = State::Waiting {
                deadline: 0.0,
                stale_ms: 0.0,
            };
            if let State::Holding(lease) = std::mem::replace(&mut entry.state, placeholder) {
                entry.state = State::Releasing { lease, then, at };
            }
        }
    }

    /// A release's CAS took (the releaser is still the head): hand the lease to the next
    /// waiter here, or remember the free record.
    fn released(&mut self, ticket: Ticket, version: V) {
        let (Some(name), Some(line)) =
            (self.lines.key(ticket).cloned(), self.lines.line_of(ticket))
        else {
            return;
        };
        let Some(Entry {
            state: State::Releasing { lease, then, at },
            ..
        }) = self.lines.get_mut(ticket)
        else {
            return;
        };
        let (at, record_fence, stale_ms, contested) =
            (*at, lease.record_fence, lease.stale_ms, lease.contested);
        match std::mem::replace(then, AfterRelease::Free { capped: false }) {
            AfterRelease::HandOff {
                token,
                fence,
                last_fence,
            } => {
                // The waiter the CAS was for may have left meanwhile: whoever is next now.
                match self.lines.next_in_line(ticket) {
                    Some(target) => {
                        let handed = Lease {
                            token: token.clone(),
                            fence,
                            record_fence: last_fence,
                            version: version.clone(),
                            at,
                            stale_ms: self.stale_ms_of(target).unwrap_or(stale_ms),
                            renewing: None,
                            lapsed: false,
                            contested,
                        };
                        if let Some(state) = self.lines.line_data_mut(line) {
                            state.streak_since.get_or_insert(at);
                            state.batch = Some(Batch {
                                version,
                                token,
                                last_fence,
                                at,
                            });
                        }
                        self.hold(target, handed);
                    }
                    // Nobody here to take it: held by a token nobody has. Remembered, so this
                    // isolate's next acquisition takes it with one CAS.
                    None => self.remember(&name, version, last_fence, contested),
                }
            }
            AfterRelease::Free { capped } => {
                self.remember(&name, version, record_fence, contested);
                if let Some(state) = self.lines.line_data_mut(line) {
                    state.yield_first = capped;
                    state.streak_since = None;
                    state.batch = None;
                }
            }
        }
    }

    /// `ticket` now holds `lease`; it is told so, and — when others wait behind it — its lease
    /// end is timed.
    fn hold(&mut self, ticket: Ticket, lease: Lease<V>) {
        let held_until = lease.held_until();
        if let Some(entry) = self.lines.get_mut(ticket) {
            let was_contending = matches!(entry.state, State::Contending(_));
            entry.state = State::Holding(lease);
            if !was_contending {
                // A waiter handed the lease: its driver is waiting to be told.
                self.woken_turn(ticket);
            }
        }
        if self.lines.next_in_line(ticket).is_some() {
            self.push_timer(held_until, ticket);
        }
    }

    /// A holder past its lease with others waiting behind it is put out of the line: the lease
    /// is lost, and the next contends (taking the record over once stale, as others would).
    fn put_out_if_lost(&mut self, ticket: Ticket, now: f64) {
        let lost = matches!(
            self.lines.get(ticket).map(|entry| &entry.state),
            Some(State::Holding(lease)) if lease.renewing.is_none() && lease.held_until() <= now
        );
        if lost && self.lines.next_in_line(ticket).is_some() {
            self.remove(ticket);
        }
    }

    /// Removes an entry; when it was the head, the next one's turn comes.
    fn remove(&mut self, ticket: Ticket) -> Option<Entry<V, W>> {
        let removed = self.lines.remove(ticket)?;
        if let Some(next) = removed.next {
            self.promote(next);
        }
        Some(removed.payload)
    }

    /// The bound on streaks of local hand-offs for `ticket`'s line (see
    /// [`LockCore::acquire_with`]).
    #[inline(never)]
    fn set_streak(&mut self, ticket: Ticket, streak_ms: f64) {
        if let Some(state) = self
            .lines
            .line_of(ticket)
            .and_then(|line| self.lines.line_data_mut(line))
        {
            state.streak_ms = streak_ms;
        }
    }

    /// The new head of a line: a waiter starts contending (a holder was told already).
    fn promote(&mut self, ticket: Ticket) {
        let Some(entry) = self.lines.get_mut(ticket) else {
            return;
        };
        if let State::Waiting { deadline, stale_ms } = entry.state {
            entry.state = State::Contending(Attempt::new(deadline, stale_ms));
            self.woken_turn(ticket);
        }
    }

    fn woken_turn(&mut self, ticket: Ticket) {
        self.woken.push(Woken::Turn(ticket));
    }

    fn remember(&mut self, name: &Rc<str>, version: V, fence: u64, contested: bool) {
        self.known.put(
            name,
            Known {
                version,
                fence,
                contested,
            },
        );
    }

    fn replace(&mut self, version: V, value: String) -> Step<V> {
        self.calls += 1;
        Step::Replace { version, value }
    }

    fn stale_ms_of(&self, ticket: Ticket) -> Option<f64> {
        match &self.lines.get(ticket)?.state {
            State::Waiting { stale_ms, .. } => Some(*stale_ms),
            State::Contending(attempt) => Some(attempt.stale_ms),
            _ => None,
        }
    }

    /// How long a waiter may wait before it must look again: its deadline, or the end of the
    /// lease of the holder at the head.
    fn wait_until(&self, ticket: Ticket, deadline: f64) -> f64 {
        let head = self
            .lines
            .line_of(ticket)
            .and_then(|line| self.lines.head(line));
        match head
            .and_then(|head| self.lines.get(head))
            .map(|entry| &entry.state)
        {
            Some(State::Holding(lease)) => deadline.min(lease.held_until()),
            _ => deadline,
        }
    }

    fn push_timer(&mut self, at: f64, ticket: Ticket) {
        let lines = &self.lines;
        let live = lines.len();
        self.timers
            .push(at, ticket, live, |entry| timer_live(lines, entry));
    }
}

impl<V> Attempt<V> {
    fn new(deadline: f64, stale_ms: f64) -> Self {
        Attempt {
            deadline,
            stale_ms,
            token: String::new(),
            takeovers: 0,
            poll: FIRST_POLL_MS,
            unreadable: None,
            exists: false,
            known_fence: 0,
            contested: false,
            call: Call::Idle,
        }
    }
}

/// Whether a timer entry still stands: a waiter's deadline, or a holder's lease end.
fn timer_live<V, W>(
    lines: &KeyedQueue<Entry<V, W>, NameState<V>>,
    (at, ticket): (f64, Ticket),
) -> bool {
    match lines.get(ticket).map(|entry| &entry.state) {
        Some(State::Waiting { deadline, .. }) => *deadline == at,
        Some(State::Holding(lease)) => lease.held_until() == at,
        _ => false,
    }
}

#[cfg(all(test, not(target_family = "wasm")))]
mod allocations;
#[cfg(test)]
mod tests;
