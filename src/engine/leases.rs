//! The lock's step machine: every rule of the lease lock in one place, with no I/O.
//!
//! A driver (the Rust [`LockManager`](super::LockManager), or the npm package's
//! `keyturn-wasm/js/lock/`) asks the core what to do next, does it — a store call, a sleep,
//! waiting for its turn — and feeds the answer back; the core answers with the next [`Step`]. The core calls nothing: no store,
//! no clock (the time is an argument, [`Now`]), no timer, no JavaScript. So a host exception
//! cannot unwind through it, and its decision table is tested natively on manual time.
//!
//! The rules, one concern per file:
//! - **Taking a name** (`taking.rs`): the conditional create is the decision; a free record is
//!   taken by CAS on the version read; a held one is taken over by CAS (at most [`TAKEOVERS`]
//!   per acquisition, as `board-lock.ts`) once it is older than its lease — the longer of the
//!   one its holder promised and the taker's own — plus the clock skew allowed, or once this
//!   isolate has watched that version stay unchanged for the lease on its monotonic clock;
//!   a record that is not ours only by watching. Polls back off from 2 ms to [`MAX_POLL_MS`].
//! - **Fencing**: every fence an acquisition takes is above every fence the name's record has
//!   carried and at least the acquirer's wall clock in microseconds ([`FENCES_PER_MS`]): so a
//!   record the store lost, written again, still yields fences above every one handed out
//!   before, once the clocks have moved on by more than they disagree. A batch reserves spare
//!   fences no further than a batch past the clock's, so fences never run ahead of it.
//! - **Holding** (`holding.rs`): a lease runs from its record's `at` on the wall clock and from
//!   its write on the monotonic one, whichever ends first; a renewal is one CAS that moves `at`
//!   by at least 1 (no two writes carry the same bytes), every `staleMs / 3` while its holder
//!   works.
//! - **Releasing** (`releasing.rs`): a release with waiters behind hands the lease on — one CAS
//!   reserving a fence for each waiter then in line, the hand-offs after it free of store calls
//!   — or frees the record; streaks of local hand-offs end after their bound.
//! - **Lost answers**: a write whose call failed (an error, a timeout) is read back once, and
//!   counts as done when the record holds exactly what it wrote; a write whose outcome stayed
//!   unknown makes the lease's next write read first.
//! - **The local line**: contenders for a name in one isolate queue FIFO; only the head talks
//!   to the store. Waiters' deadlines and holders' lease ends are ordered for one shared timer.
//! - **What this isolate knows of each name's record** (`known.rs`): the version it last saw
//!   and since when (the watch), and whether it freed that record itself (then the next
//!   acquisition takes it with one CAS).

use core::fmt;
use std::rc::Rc;

use crate::engine::asks::{AskId, Asks, ASK_ID_LEN};
use crate::engine::deadlines::Deadlines;
use crate::engine::decimal::push_chars;
use crate::engine::key::KeyError;
use crate::engine::key::{slot_name, validate_name};
use crate::engine::options::{LockOptions, OptionError, MAX_BATCH, MAX_LOCAL_STREAK_MS};
use crate::engine::queue::{KeyedQueue, LineId, Ticket};
use crate::engine::random::Random;
use crate::engine::record::{NotARecord, Record, MAX_FENCE};
use crate::engine::starts::Starts;

mod holding;
mod known;
mod releasing;
mod taking;

use known::{Freed, KnownRecords};
use releasing::Batch;
use taking::Attempt;

/// Fences per millisecond of an acquirer's wall clock: the fence of every acquisition that
/// writes the record is at least its `now()`, in whole milliseconds, times this — whole numbers
/// under 2^53 until the year 2255.
///
/// So a record the store lost and a fresh record written in its place still yield fences above
/// every one handed out before, once the acquisition after the loss comes more than the
/// clocks' disagreement (`maxClockSkewMs`) after the last one before it: a fence runs ahead
/// of its clock's by at most the spare fences of one batch, unless a name is acquired about
/// this many times in one millisecond.
pub const FENCES_PER_MS: f64 = 1000.0;

/// The least fence an acquisition at `now` takes: its wall clock in microseconds (0 before
/// 1970), short of [`MAX_FENCE`] by a batch.
fn clock_fence(now: Now) -> u64 {
    // The fault harness's planted bug (faults/README.md), built only by faults/planted-fences.sh:
    // fences from the record alone, as before they followed the clock.
    if cfg!(keyturn_planted = "record-fences") {
        return 0;
    }
    let limit = (MAX_FENCE - MAX_BATCH as u64) as f64;
    (now.wall.max(0.0).floor() * FENCES_PER_MS).min(limit) as u64
}

/// The fence of an acquisition at `now` on a record whose fence is `record` (0: none, or not
/// ours): above it, and at least the clock's.
fn next_fence(record: u64, now: Now) -> u64 {
    record
        .saturating_add(1)
        .max(clock_fence(now))
        .min(MAX_FENCE)
}

/// The fences a write taking `fence` reserves for `behind` acquisitions after it: `(owed,
/// last)`. Past the owed ones, spare fences up to a batch in all — and no further than a batch
/// past the clock's fence, so fences never run ahead of the clock by more.
fn batch_fences(fence: u64, behind: u64, now: Now) -> (u64, u64) {
    let batch = MAX_BATCH as u64 - 1;
    let owed = fence.saturating_add(behind).min(MAX_FENCE);
    let spare = (clock_fence(now) + batch).min(fence.saturating_add(batch));
    (owed, owed.max(spare).min(MAX_FENCE))
}

/// What time it is, on the two clocks a lease needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Now {
    /// Epoch milliseconds on this isolate's wall clock (the `now` option): what records carry
    /// and other isolates compare with their own.
    pub wall: f64,
    /// Milliseconds on this isolate's monotonic clock (`performance.now()`): what no clock step
    /// moves. Waits, polls, renewals, watched versions and a holder's own lease are timed by it;
    /// the wall clock only stamps records and judges their age.
    pub mono: f64,
}

/// What the driver does next for one acquisition or lock. A store call carries its bound: the
/// driver counts it failed ([`Answer::TimedOut`]) once it has not answered within `bound_ms`.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<V> {
    /// `store.create(name, value)`, then [`Answer::Created`].
    Create {
        /// The record to write.
        value: String,
        /// How long the call may take, in milliseconds.
        bound_ms: f64,
    },
    /// `store.read(name)`, then [`Answer::Read`].
    Read {
        /// How long the call may take, in milliseconds.
        bound_ms: f64,
    },
    /// `store.replace(name, version, value)`, then [`Answer::Replaced`].
    Replace {
        /// The version the record must still have.
        version: V,
        /// The record to write.
        value: String,
        /// How long the call may take, in milliseconds.
        bound_ms: f64,
    },
    /// Pause until `until` (monotonic), then [`Answer::Woke`] (the head of a line, between
    /// polls).
    Sleep {
        /// When to come back.
        until: f64,
        /// A jittered pause between polls, bounded by nothing else: it may end up to a
        /// millisecond early (see [`Effect::Wake`](crate::engine::Effect::Wake)).
        early: bool,
    },
    /// Over a store that tells changes ([`LockCore::set_store_tells_changes`]): the head of a
    /// line found the name held by another isolate. `store.changed(name, version, until −
    /// now)` — bounded by `until`, past which it counts as answered — then
    /// [`Answer::Changed`] when it answered `true`, [`Answer::Woke`] when it answered `false` or
    /// `until` came; [`Answer::Failed`] if it failed, and the acquisition polls from then on. `version` is the one the read saw, so a release between that read and this call is
    /// not missed.
    Watch {
        /// The version the record had.
        version: V,
        /// When to come back at the latest (monotonic): the wait's deadline, when the record
        /// becomes stale, or one `storeTimeoutMs` on, whichever comes first.
        until: f64,
    },
    /// Waiting in line: come back with [`Answer::Woke`] when [`LockCore::take_woken`] names
    /// this ticket, or at `until` (monotonic) at the latest (its wait deadline, or the holder's
    /// lease end).
    Wait {
        /// When to come back at the latest.
        until: f64,
    },
    /// The lease is held: see [`LockCore::lease`].
    Held,
    /// A release is done (or there was nothing to write).
    Done,
    /// The lease is lost: taken over, released, or past its end.
    Lost,
    /// The wait is over and nothing is held; the ticket has left the line.
    GiveUp,
    /// A store call failed and was not found to have applied: the driver reports its error.
    /// An acquisition has left its line holding nothing; a renewal left the lease as it was; a
    /// release left the record as the store has it (held until stale, if it still is).
    Failed,
    /// The record says the name is taken `found` at a time, not as this acquisition asked
    /// ([`Refusal::ConcurrencyMismatch`]): it has left its line holding nothing, having
    /// written nothing.
    Mismatch {
        /// The record's `n`.
        found: u16,
    },
}

impl<V> Step<V> {
    /// The bound of a store call; `None` for a step that is not one.
    #[cfg(test)]
    pub fn bound_ms(&self) -> Option<f64> {
        match self {
            Step::Create { bound_ms, .. }
            | Step::Read { bound_ms }
            | Step::Replace { bound_ms, .. } => Some(*bound_ms),
            _ => None,
        }
    }
}

/// Why an acquisition was refused: nothing was queued, nothing asked of the store.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The name is empty or too long.
    InvalidName(KeyError),
    /// An option is out of range.
    InvalidOption(OptionError),
    /// The name is taken `found` at a time — as a record of it says, or an acquisition of it
    /// in this isolate — and this acquisition asked for `asked`.
    ConcurrencyMismatch {
        /// The lock's name.
        name: String,
        /// The acquisition's `concurrency`.
        asked: u16,
        /// The name's, as found.
        found: u16,
    },
}

/// What a driver knows of the acquisitions of a name that follow one: a serializer's queued
/// works, which each acquire only once the one before holds. The core takes `streak_ms` at an
/// acquisition ([`LockCore::acquire_with`]) and `followers` at each release
/// ([`LockCore::release_with`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Succession {
    /// Acquisitions after the next waiter's: the hand-off's record reserves a fence for each
    /// (up to `MAX_BATCH`), so they are handed on with no store call although each acquires
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

/// What came of a store call the engine asked for ([`Effect::Store`](crate::engine::Effect::Store)).
#[derive(Debug)]
pub enum Answer<V> {
    /// `create` answered: the new version, or `None` if a record exists.
    Created(Option<V>),
    /// `read` answered: the version and the record (or why it is not ours), or `None`.
    Read(Option<(V, Result<Record, NotARecord>)>),
    /// `replace` answered: the new version, or `None` if the version had changed.
    Replaced(Option<V>),
    /// A sleep or a wait ended (a watch included, unless the store said the record changed).
    Woke,
    /// A watch (the store's `changed`) ended because the store said the record changed.
    Changed,
    /// The store call failed (the driver keeps the error, to report it to the call's caller).
    Failed,
    /// The store call did not answer within its bound: failed, its outcome unknown.
    TimedOut,
}

/// A held lease, as its holder sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaseView<'a> {
    /// The token in the record (shared within a hand-off batch).
    pub token: &'a str,
    /// The count in that token.
    pub count: u64,
    /// This holder's fence.
    pub fence: u64,
    /// Until when nobody may take the lease over, on the writer's wall clock.
    pub held_until: f64,
    /// The lease's end on this isolate's monotonic clock: it ends at whichever comes first.
    pub ends_at: f64,
    /// It was taken over from a holder found stale (or a record not ours).
    pub took_over: bool,
}

/// A guard for the driver to start, from [`LockCore::take_guard`]: `store.changed(name,
/// version, until − now)`, raced with `until` (monotonic), then [`LockCore::guarded`] with the
/// line and the number.
#[derive(Debug)]
pub struct Guard<V> {
    /// The busy line it watches for.
    pub line: LineId,
    /// Its number, which its answer gives back.
    pub number: u32,
    /// The line's name: the record's key.
    pub name: Rc<str>,
    /// The version of the batch's record.
    pub version: V,
    /// When it ends at the latest (monotonic).
    pub until: f64,
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
    /// A line wants a guard: the driver starts what [`LockCore::take_guard`] gives.
    Guard,
}

/// What a store's locks did in this isolate: what is live now, and counts since the core was
/// made. The JS names each field as in `index.d.ts`'s `LockStats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockStats {
    /// Names held here now.
    pub held: u64,
    /// Acquisitions waiting in a local line now.
    pub waiting: u64,
    /// Acquisitions that got their lease.
    pub acquisitions: u64,
    /// ... of those, handed the lease by the holder before them here.
    pub hand_offs: u64,
    /// Records taken over from a holder found stale (or a record that was not ours).
    pub takeovers: u64,
    /// Store calls made.
    pub store_calls: u64,
    /// ... of those that failed (timed out included).
    pub store_failures: u64,
    /// ... of those that did not answer within their bound.
    pub store_timeouts: u64,
    /// Failed writes that a read-back found applied after all.
    pub read_backs_applied: u64,
    /// Waits on the store's `changed` instead of polling (each watch one store
    /// call, counted in `store_calls` too).
    pub watches: u64,
    /// ... of those, ended by the store saying the record changed.
    pub wake_ups: u64,
    /// Reads a poller would have made while those watches waited, at the backoff it had then:
    /// the polls the watches saved.
    pub polls_saved: u64,
}

/// When a record was written: `at` on the writer's wall clock (whole milliseconds, as the
/// record carries it) and the writer's monotonic time then.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stamp {
    at: f64,
    mono: f64,
}

impl Stamp {
    fn of(now: Now) -> Self {
        Stamp {
            at: now.wall.max(0.0).floor(),
            mono: now.mono,
        }
    }
}

/// A token of this isolate — its id, then a count in 16 hex digits — and that count, which its
/// holder is told without reading the digits back.
#[derive(Debug, Clone, Default, PartialEq)]
struct Token {
    text: String,
    count: u64,
}

impl core::ops::Deref for Token {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

/// A held lease: the record this holder wrote (or was handed), and how it stands.
struct Lease<V> {
    token: Token,
    fence: u64,
    /// The fence the record carries: `fence`, or the highest one of a batch.
    record_fence: u64,
    /// The record's version while this lease holds it.
    version: V,
    /// When the record was written: the lease runs `stale_ms` from here, on either clock.
    stamp: Stamp,
    stale_ms: f64,
    /// The bound on each of its store calls (renewals, the release).
    store_timeout_ms: f64,
    /// A renewal in flight.
    renewing: Option<holding::Renewal>,
    /// Found past its end by a renewal: never renewed again.
    lapsed: bool,
    /// A write of this lease whose outcome is unknown (its call and the read-back failed, or
    /// its driver gave up on it): the next write reads the record first.
    uncertain: bool,
    /// Another isolate wrote the record between this isolate's last two acquisitions.
    contested: bool,
    /// The isolates that asked for the name, as this holder last saw its record: its writes
    /// keep them, and its release offers them the name.
    asks: Asks,
    /// A paced serializer's last starts of the key: read with the record, added to as its turns
    /// start, carried by every write.
    starts: Starts,
    /// The name's `concurrency`, which its records carry.
    slots: u16,
    /// Taken over from a holder found stale (or a record not ours).
    took_over: bool,
}

impl<V> Lease<V> {
    /// The lease's end on the wall clock: what its holder and waiters are told.
    fn held_until(&self) -> f64 {
        self.stamp.at + self.stale_ms
    }

    /// The lease's end on the monotonic clock: what this isolate's timers wait for.
    fn ends_at(&self) -> f64 {
        self.stamp.mono + self.stale_ms
    }

    /// Whether the lease has ended, on either clock (a wall clock stepping back does not
    /// stretch it).
    fn ended(&self, now: Now) -> bool {
        now.wall >= self.held_until() || now.mono >= self.ends_at()
    }

    /// This holder's own lease and bound, as options (for a hand-off with nobody else's).
    fn options(&self) -> LockOptions {
        LockOptions {
            stale_ms: self.stale_ms,
            store_timeout_ms: Some(self.store_timeout_ms),
            concurrency: f64::from(self.slots),
            ..LockOptions::default()
        }
    }

    /// The lease the records of this holder promise: its `staleMs`, whole milliseconds up.
    fn promised(&self) -> Option<u64> {
        Some(promised(self.stale_ms))
    }
}

/// A lease length as records carry it: whole milliseconds, rounded up.
fn promised(stale_ms: f64) -> u64 {
    stale_ms.ceil() as u64
}

/// Whether `record` is exactly what a write of these fields wrote.
fn is_written(
    record: &Result<Record, NotARecord>,
    held: bool,
    token: &str,
    fence: u64,
    at: f64,
    lease: Option<u64>,
) -> bool {
    matches!(record, Ok(found) if found.held == held && found.token == token && found.fence == fence
        && found.at == at && found.lease == lease)
}

enum State<V> {
    /// In line behind others; gives up at `deadline` (monotonic).
    Waiting { deadline: f64, options: LockOptions },
    /// The head of the line, talking to the store.
    Contending(Attempt),
    /// Holds the lease.
    Holding(Lease<V>),
    /// Its release is in flight; it stays the head so nobody here contends meanwhile.
    Releasing(releasing::Release<V>),
}

struct Entry<V, W> {
    state: State<V>,
    handle: W,
}

struct NameState<V> {
    /// When the current run of local hand-offs began.
    streak_since: Option<f64>,
    /// The next head pauses one poll before its first attempt (after a capped streak).
    yield_first: bool,
    batch: Option<Batch<V>>,
    /// The bound on a streak of local hand-offs ([`Succession::streak_ms`]).
    streak_ms: f64,
    /// The guard in flight: its number, and the watch of the batch's record at this version,
    /// until this time (monotonic). See `releasing.rs`.
    guard: Option<(u32, V, f64)>,
    /// A guard is wanted: queued for the driver ([`LockCore::take_guard`]).
    guard_wanted: bool,
    /// Another isolate wrote the batch's record since this isolate did (a guard said so): the
    /// next release reads it first.
    told: bool,
    /// The name's `concurrency`, as the acquisition that opened the line gave it: one that
    /// joins with another is refused.
    slots: u16,
}

// Written out: a derive would ask `V: Default`.
impl<V> Default for NameState<V> {
    fn default() -> Self {
        NameState {
            streak_since: None,
            yield_first: false,
            batch: None,
            streak_ms: MAX_LOCAL_STREAK_MS,
            guard: None,
            guard_wanted: false,
            told: false,
            slots: 1,
        }
    }
}

/// Every lock of one store in one isolate: the local lines, their leases, what this isolate
/// knows of each name's record, and the times a shared timer must wake the core at. `V` is the
/// store's version type; `W` is what the driver keeps per waiter to wake it (a `Waker`, a JS
/// object).
pub struct LockCore<V, W> {
    lines: KeyedQueue<Entry<V, W>, NameState<V>>,
    known: KnownRecords<V>,
    /// Waiters' deadlines and holders' lease ends, on the monotonic clock.
    timers: Deadlines,
    woken: Vec<Woken<W>>,
    stats: LockStats,
    /// The store answers `changed`: a contender waits on the record instead of polling.
    store_tells_changes: bool,
    /// This isolate's id in the asks of records (drawn at its first ask or token): one place in
    /// a name's queue per isolate, kept by its next acquisitions.
    ask_id: Option<AskId>,
    /// Tokens made so far ([`LockCore::new_token`]).
    tokens: u64,
    /// The driver keeps a guard watching a line's record across its hand-offs
    /// ([`LockCore::set_line_guards`]).
    line_guards: bool,
    /// Lines that want a guard, for [`LockCore::take_guard`].
    guards: Vec<LineId>,
    /// The number of the last guard started.
    guard_number: u32,
}

impl<V, W> fmt::Debug for LockCore<V, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockCore")
            .field("lines", &self.lines)
            .field("stats", &self.stats)
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
            stats: LockStats::default(),
            store_tells_changes: false,
            ask_id: None,
            tokens: 0,
            line_guards: false,
            guards: Vec::new(),
            guard_number: 0,
        }
    }

    /// Whether the store tells changes of a record (its optional `changed`): then the head of a
    /// line that finds the name held watches the record ([`Step::Watch`]) instead of polling.
    /// Off by default; only the pauses between polls change.
    pub fn set_store_tells_changes(&mut self, tells: bool) {
        self.store_tells_changes = tells;
    }

    /// Whether the driver watches a busy line's record for other isolates' asks while its
    /// holders hand the lease on from a batch (a *guard*: [`LockCore::take_guard`], answered
    /// by [`LockCore::guarded`]), keeping one watch across the line's hand-offs. Over a store
    /// that tells changes, a guarded batch may hand its spare fences on for as long as it is
    /// young; unguarded, for a poll's longest pause (25 ms) — what a poller waits anyway.
    /// Off by default.
    pub fn set_line_guards(&mut self, guards: bool) {
        self.line_guards = guards;
    }

    /// Starts a lock's acquisition of `name`: at the head of an idle name, its first store
    /// call; in line behind others, [`Step::Wait`]. `handle` is how the driver wakes it. Its
    /// streaks of local hand-offs run [`Succession::LOCK`]'s bound (a serializer's turns say
    /// theirs: [`acquire_with`](Self::acquire_with)).
    ///
    /// # Errors
    /// A bad name or option; nothing was queued.
    #[cfg(test)]
    pub fn acquire(
        &mut self,
        name: &str,
        handle: W,
        options: LockOptions,
        now: Now,
        random: &impl Random,
    ) -> Result<(Ticket, Step<V>), Refusal> {
        self.acquire_with(
            name,
            handle,
            options,
            Succession::LOCK.streak_ms,
            now,
            random,
        )
    }

    /// [`acquire`](Self::acquire) for a driver whose streaks of local hand-offs on this name
    /// may run to `streak_ms` (a serializer's turns: [`Succession::streak_ms`]).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    #[cfg(test)]
    pub fn acquire_with(
        &mut self,
        name: &str,
        handle: W,
        options: LockOptions,
        streak_ms: f64,
        now: Now,
        random: &impl Random,
    ) -> Result<(Ticket, Step<V>), Refusal> {
        self.acquire_slot(name, 0, handle, options, streak_ms, now, random)
    }

    /// [`acquire_with`](Self::acquire_with) for slot `slot` of a name taken N at a time
    /// (`options.concurrency`): its record is [`slot_name`]`(name, slot)`, and the driver's
    /// store calls for it name that key. Which slot to try is the driver's to say (see
    /// [`LockManager::acquire`](crate::LockManager::acquire)).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire); a slot past `concurrency` is an option out of range; a
    /// name whose acquisitions here give another `concurrency` is
    /// [`Refusal::ConcurrencyMismatch`].
    #[allow(clippy::too_many_arguments)]
    pub fn acquire_slot(
        &mut self,
        name: &str,
        slot: u16,
        handle: W,
        options: LockOptions,
        streak_ms: f64,
        now: Now,
        random: &impl Random,
    ) -> Result<(Ticket, Step<V>), Refusal> {
        validate_name(name).map_err(Refusal::InvalidName)?;
        let options = options.validate().map_err(Refusal::InvalidOption)?;
        if slot >= options.slots() {
            return Err(Refusal::InvalidOption(OptionError::Concurrency(
                options.concurrency,
            )));
        }
        let key = (slot > 0).then(|| slot_name(name, slot));
        let base = name;
        let name = key.as_deref().unwrap_or(name);
        let deadline = now.mono + options.wait_ms;
        if let Some(line) = self.lines.line_id(name) {
            let found = self.lines.line_data(line).map_or(1, |state| state.slots);
            if found != options.slots() {
                return Err(Refusal::ConcurrencyMismatch {
                    name: base.to_owned(),
                    asked: options.slots(),
                    found,
                });
            }
            // The line is busy: this joins it (the queue opens one only for an idle name).
            let entry = Entry {
                state: State::Waiting { deadline, options },
                handle,
            };
            let ticket = self.lines.push(name, entry).ticket;
            self.set_line(ticket, streak_ms, options.slots());
            self.push_timer(deadline, ticket);
            if let Some(head) = self.lines.head(line) {
                // A holder here past its lease with nobody to notice: put out now. Else its
                // lease end is timed from now on, as someone waits for it.
                self.put_out_if_lost(head, now);
                let ends_at = match self.lines.get(head).map(|entry| &entry.state) {
                    Some(State::Holding(lease)) if !lease.lapsed => Some(lease.ends_at()),
                    _ => None,
                };
                if let Some(ends_at) = ends_at {
                    self.push_timer(ends_at, head);
                }
            }
            let step = self.step(ticket, Answer::Woke, now, random);
            return Ok((ticket, step));
        }
        let entry = Entry {
            state: State::Contending(Attempt::new(deadline, options)),
            handle,
        };
        // A name this isolate knows: its line shares the record's string.
        let ticket = match self.known.key(name) {
            Some(key) => self.lines.push_shared(&key, entry).ticket,
            None => self.lines.push(name, entry).ticket,
        };
        self.set_line(ticket, streak_ms, options.slots());
        let step = self.start(ticket, now, random);
        Ok((ticket, step))
    }

    /// Takes what came of the last step for `ticket` and says the next one. A ticket that has
    /// left (its wait ended, its lease lost) answers [`Step::GiveUp`] or [`Step::Lost`].
    pub fn step(
        &mut self,
        ticket: Ticket,
        answer: Answer<V>,
        now: Now,
        random: &impl Random,
    ) -> Step<V> {
        if matches!(answer, Answer::Failed | Answer::TimedOut) {
            self.stats.store_failures += 1;
            if matches!(answer, Answer::TimedOut) {
                self.stats.store_timeouts += 1;
            }
        }
        let Some(entry) = self.lines.get(ticket) else {
            return Step::GiveUp;
        };
        match &entry.state {
            State::Waiting { deadline, .. } => {
                let deadline = *deadline;
                self.expire(now);
                match self.lines.get(ticket).map(|entry| &entry.state) {
                    None => Step::GiveUp,
                    Some(State::Waiting { .. }) if deadline <= now.mono => {
                        self.remove(ticket);
                        Step::GiveUp
                    }
                    Some(State::Waiting { .. }) => Step::Wait {
                        until: self.wait_until(ticket, deadline, now),
                    },
                    Some(_) => self.step(ticket, Answer::Woke, now, random),
                }
            }
            State::Contending(_) => self.contend(ticket, answer, now, random),
            State::Holding(_) => self.holding(ticket, answer, now),
            State::Releasing(_) => self.releasing(ticket, answer, now),
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
            if keep && lease.renewing.is_none() && !lease.uncertain {
                self.known.freed(
                    &name,
                    lease.version,
                    lease.stamp.mono,
                    Freed {
                        fence: lease.record_fence,
                        contested: lease.contested,
                        slots: lease.slots,
                        starts: lease.starts,
                    },
                );
            }
        }
    }

    /// Whether `ticket` waits in this isolate's line behind a holder here (no store call).
    pub fn waits_in_line(&self, ticket: Ticket) -> bool {
        matches!(
            self.lines.get(ticket).map(|entry| &entry.state),
            Some(State::Waiting { .. })
        )
    }

    /// The earliest time (monotonic) the shared timer must call [`LockCore::expire`] at.
    pub fn next_timer(&mut self) -> Option<f64> {
        let lines = &self.lines;
        self.timers
            .first(|entry| timer_live(lines, entry))
            .map(|(at, _)| at)
    }

    /// Ends the waits whose deadline passed (each [`Woken::GaveUp`]) and puts out of their
    /// line the holders whose lease passed with others waiting (the next is [`Woken::Turn`]).
    pub fn expire(&mut self, now: Now) {
        loop {
            let lines = &self.lines;
            let Some((at, ticket)) = self.timers.first(|entry| timer_live(lines, entry)) else {
                return;
            };
            if at > now.mono {
                return;
            }
            self.timers.pop();
            match self.lines.get(ticket).map(|entry| &entry.state) {
                Some(State::Waiting { .. }) => {
                    if let Some(entry) = self.remove(ticket) {
                        self.woken.push(Woken::GaveUp(entry.handle));
                    }
                }
                _ => self.put_out_if_lost(ticket, now),
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

    /// What this store's locks did here, and what is live now.
    pub fn stats(&self) -> LockStats {
        let (mut held, mut waiting) = (0, 0);
        for entry in self.lines.entries() {
            match entry.state {
                State::Holding(_) | State::Releasing(_) => held += 1,
                State::Waiting { .. } | State::Contending(_) => waiting += 1,
            }
        }
        LockStats {
            held,
            waiting,
            ..self.stats
        }
    }

    /// This isolate's id, once drawn: the first [`ASK_ID_LEN`] hex digits of every token this
    /// core makes, and its asks' id; the rest of a token is a count, in 16 hex digits.
    pub fn isolate_id(&self) -> Option<&AskId> {
        self.ask_id.as_ref()
    }

    /// Store calls asked for so far.
    #[cfg(test)]
    pub fn store_calls(&self) -> u64 {
        self.stats.store_calls
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

    // --- what every rule shares ---

    /// `ticket` now holds `lease`; it is told so, and — when others wait behind it — its lease
    /// end is timed.
    fn hold(&mut self, ticket: Ticket, lease: Lease<V>) {
        let ends_at = lease.ends_at();
        if let Some(entry) = self.lines.get_mut(ticket) {
            let was_contending = matches!(entry.state, State::Contending(_));
            entry.state = State::Holding(lease);
            self.stats.acquisitions += 1;
            if !was_contending {
                // A waiter handed the lease: its driver is waiting to be told.
                self.stats.hand_offs += 1;
                self.woken_turn(ticket);
            }
        }
        if self.lines.next_in_line(ticket).is_some() {
            self.push_timer(ends_at, ticket);
        }
    }

    /// A holder past its lease with others waiting behind it is put out of the line: the lease
    /// is lost, and the next contends (taking the record over once stale, as others would).
    fn put_out_if_lost(&mut self, ticket: Ticket, now: Now) {
        let lost = matches!(
            self.lines.get(ticket).map(|entry| &entry.state),
            Some(State::Holding(lease)) if lease.renewing.is_none() && lease.ended(now)
        );
        if lost && self.lines.next_in_line(ticket).is_some() {
            self.remove(ticket);
        }
    }

    /// Moves `ticket`'s state out, to move it into another; the caller puts one back or
    /// removes the entry (the placeholder left meanwhile is never seen).
    fn take_state(&mut self, ticket: Ticket) -> Option<State<V>> {
        let placeholder = State::Waiting {
            deadline: 0.0,
            options: LockOptions::default(),
        };
        let entry = self.lines.get_mut(ticket)?;
        Some(std::mem::replace(&mut entry.state, placeholder))
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
    /// [`LockCore::acquire_with`]), and its name's `concurrency` (the same for every ticket in
    /// it: [`LockCore::acquire_slot`] refuses another).
    #[inline(never)]
    fn set_line(&mut self, ticket: Ticket, streak_ms: f64, slots: u16) {
        if let Some(state) = self
            .lines
            .line_of(ticket)
            .and_then(|line| self.lines.line_data_mut(line))
        {
            state.streak_ms = streak_ms;
            state.slots = slots;
        }
    }

    /// The new head of a line: a waiter starts contending (a holder was told already).
    fn promote(&mut self, ticket: Ticket) {
        let Some(entry) = self.lines.get_mut(ticket) else {
            return;
        };
        if let State::Waiting { deadline, options } = entry.state {
            entry.state = State::Contending(Attempt::new(deadline, options));
            self.woken_turn(ticket);
        }
    }

    fn woken_turn(&mut self, ticket: Ticket) {
        self.woken.push(Woken::Turn(ticket));
    }

    /// A store call asked for (its bound the asker's: see `Attempt::bound` and
    /// `Lease::store_timeout_ms`).
    fn call(&mut self, step: Step<V>) -> Step<V> {
        self.stats.store_calls += 1;
        step
    }

    fn options_of(&self, ticket: Ticket) -> Option<LockOptions> {
        match &self.lines.get(ticket)?.state {
            State::Waiting { options, .. } => Some(*options),
            State::Contending(attempt) => Some(attempt.options),
            _ => None,
        }
    }

    /// How long a waiter may wait before it must look again: its deadline, or the end of the
    /// lease of the holder at the head — a millisecond on, once that has passed with the holder
    /// still in line (a renewal in flight, whose answer decides): never a time already gone.
    fn wait_until(&self, ticket: Ticket, deadline: f64, now: Now) -> f64 {
        let head = self
            .lines
            .line_of(ticket)
            .and_then(|line| self.lines.head(line));
        match head
            .and_then(|head| self.lines.get(head))
            .map(|entry| &entry.state)
        {
            Some(State::Holding(lease)) => deadline.min(lease.ends_at().max(now.mono + 1.0)),
            _ => deadline,
        }
    }

    fn push_timer(&mut self, at: f64, ticket: Ticket) {
        let lines = &self.lines;
        let live = lines.len();
        self.timers
            .push(at, ticket, live, |entry| timer_live(lines, entry));
    }

    /// The record `ticket` contends for or holds — its name's, or its slot's
    /// ([`acquire_slot`](Self::acquire_slot)) — as its line shares it; `None` once it left.
    pub fn key(&self, ticket: Ticket) -> Option<Rc<str>> {
        self.lines.key(ticket).cloned()
    }

    /// This isolate's id: its asks in records carry it, and so does every token it writes —
    /// [`ASK_ID_LEN`] random hex digits, drawn the first time one is needed.
    fn ask_id(&mut self, random: &impl Random) -> AskId {
        *self.ask_id.get_or_insert_with(|| {
            let token = random.token();
            let mut id = [b'0'; ASK_ID_LEN];
            id.iter_mut()
                .zip(token.bytes())
                .for_each(|(to, from)| *to = from);
            id
        })
    }

    /// A token no acquisition or hand-off has had: this isolate's id, then 16 hex digits of a
    /// count (so no two writes of this isolate share one, and another isolate's id differs —
    /// random, as versions in `RedisStore` are). No random draw per acquisition.
    fn new_token(&mut self, random: &impl Random) -> Token {
        let id = self.ask_id(random);
        self.tokens = self.tokens.wrapping_add(1);
        // Made as bytes and appended at once (see `push_chars`). The count's width is the
        // count's own, not the id's: a wider one would shift past its bits.
        const COUNT_DIGITS: usize = (u64::BITS / 4) as usize;
        let mut bytes = [b'0'; ASK_ID_LEN + COUNT_DIGITS];
        let (own, count) = bytes.split_at_mut(ASK_ID_LEN);
        own.copy_from_slice(&id);
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for (digit, to) in count.iter_mut().rev().enumerate() {
            *to = HEX[((self.tokens >> (4 * digit)) & 15) as usize];
        }
        let mut token = String::with_capacity(bytes.len());
        push_chars(&mut token, &bytes);
        Token {
            text: token,
            count: self.tokens,
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
        Some(State::Holding(lease)) => lease.ends_at() == at,
        _ => false,
    }
}

#[cfg(all(test, not(target_family = "wasm")))]
mod allocations;
#[cfg(test)]
mod tests;
