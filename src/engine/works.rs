//! The serializer's step machine: per-key lines of works, which of them may run (the first
//! `concurrency` of each line), their slots, deadlines and counters, with no I/O, no timers and
//! no executor. Both front ends drive it — the Rust [`KeyedSerializer`]
//! (futures) and the JavaScript binding (promises) — by telling it what happened (a call came
//! in, a work's turn came, it settled, it was abandoned, time passed) and doing what it answers.
//!
//! [`KeyedSerializer`]: super::KeyedSerializer

use core::fmt;

use super::options::{validate_timeout_ms, Coalesce, SerializerOptions, TimeoutOutOfRange};
use super::pace::Pace;
use super::slots::Slots;
use crate::engine::deadlines::Deadlines;
use crate::engine::key::KeyError;
use crate::engine::messages;
use crate::engine::queue::{LineId, Lines, Pushed, Ticket};

/// Where a work is in its life.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Waiting for its turn: `concurrency` works are ahead of it in its line.
    Waiting,
    /// Its turn has come (fewer than `concurrency` works are ahead of it) but it has not
    /// started yet.
    Queued,
    /// Its turn came at some time; past `deadline` it is abandoned.
    Running { deadline: f64 },
    /// Given up on — timed out, or cancelled by its caller — but still in its line, holding
    /// its slot, until its front end has told its caller and calls [`SerializerCore::finish`].
    /// It no longer counts against `maxPending`.
    Abandoned,
}

struct Job<P> {
    payload: P,
    /// This work's deadline in milliseconds (the serializer's, or its own).
    timeout_ms: f64,
    state: State,
    /// How calls may join it (only while it is the last of its line and has not started).
    coalesce: Coalesce,
    /// The key's slot it holds once started (0 … `concurrency` − 1).
    slot: u16,
    /// The calls it answers: the one that queued it and those that joined it, less those that
    /// left. It leaves its line (or is abandoned) only when its last caller leaves.
    callers: u32,
}

/// Per line: what its works are doing. A line's works start in line order, and a work's turn
/// comes once fewer than `concurrency` works are ahead of it: so the started works are the
/// line's first, the works whose turn has come its first `concurrency`, and two places in the
/// line say where each ends.
#[derive(Debug, Default)]
struct LineState {
    /// Works that count against `maxPending` (queued or running, not abandoned).
    counted: u32,
    /// Works in the line, abandoned ones included.
    entries: u32,
    /// The first work that has not started, if any.
    unstarted: Option<Ticket>,
    /// The first work whose turn has not come (`concurrency` works ahead of it), if any.
    frontier: Option<Ticket>,
    /// The slots its started works hold.
    slots: Slots,
}

/// Why a running work was given up on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abandon {
    /// Its deadline passed.
    TimedOut,
    /// Its caller cancelled it (an aborted `signal` in JavaScript, a dropped future in Rust).
    Aborted,
    /// It could not run (over a store, its turn's lease failed): its caller has its error, and
    /// no counter counts it.
    Failed,
}

/// Why a call was refused; nothing was queued.
#[derive(Debug, Clone, PartialEq)]
pub enum EnqueueError {
    /// The key is empty or too long.
    InvalidKey(KeyError),
    /// The call's own deadline is out of range.
    InvalidTimeout(TimeoutOutOfRange),
    /// The key already has `max_pending` works queued or running.
    QueueFull {
        /// The serializer's bound.
        max_pending: usize,
    },
    /// [`MAX_ENTRIES`](crate::engine::MAX_ENTRIES) works are queued already, under every key
    /// together.
    TooManyWorks,
    /// The line named is idle (a front end's stale id); nothing was queued.
    IdleLine,
    /// The call asked to run only if its work could start at once, and it could not: a work
    /// of its key is ahead of it, no slot is free, or the pace does not allow a start yet.
    Unavailable {
        /// How long until the pace allows a start (ms), where that is what holds it up and
        /// no work is ahead of it; `None` when it waits for a slot or a line.
        retry_after_ms: Option<f64>,
    },
}

impl fmt::Display for EnqueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnqueueError::InvalidKey(error) => error.fmt(f),
            EnqueueError::InvalidTimeout(error) => error.fmt(f),
            EnqueueError::QueueFull { max_pending } => {
                write!(
                    f,
                    "the key has {max_pending} works queued or running already"
                )
            }
            EnqueueError::TooManyWorks => f.write_str(messages::TOO_MANY_WORKS),
            EnqueueError::IdleLine => f.write_str("the line is idle"),
            EnqueueError::Unavailable { .. } => f.write_str(
                "the work could not start at once, as asked: a work of its key is ahead of it, no slot is free, or its pace allows no start yet",
            ),
        }
    }
}

impl std::error::Error for EnqueueError {}

/// A work whose turn came, from [`SerializerCore::start_next`] or [`SerializerCore::start`].
#[derive(Debug)]
pub struct Started<'a, P> {
    /// What was queued with it.
    pub payload: &'a mut P,
    /// Its deadline's length in milliseconds: how long a timer of its own runs, and what its
    /// timeout error says.
    pub timeout_ms: f64,
    /// Its deadline, on the clock the start was timed by: past it the work is abandoned.
    pub deadline: f64,
    /// The key's slot it holds while it runs: the lowest free one, 0 … `concurrency` − 1.
    pub slot: u16,
}

/// What came of a caller giving up on its work, from [`SerializerCore::give_up`].
#[derive(Debug)]
pub enum GaveUp {
    /// The work was waiting: it left its line.
    Left(Released),
    /// The work was running: it is abandoned (its front end aborts it and tells its caller).
    Abandoned,
    /// Nothing: the work had settled or was abandoned already.
    Nothing,
}

/// A work that left its line, from [`SerializerCore::finish`].
#[derive(Debug)]
pub struct Released {
    /// The work whose turn came because this one left (it was one of the line's first
    /// `concurrency` works, and another waited behind them): its front end starts the line's
    /// next work ([`SerializerCore::start_next`]).
    pub next: Option<Ticket>,
    /// Whether the key went idle (its [`LineId`] is free for reuse).
    pub idle: bool,
}

/// Counters since the core was made, and what is live now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Keys with works queued or running.
    pub keys: usize,
    /// Works whose turn came and that have neither settled nor been abandoned.
    pub running: usize,
    /// Works waiting for their turn.
    pub waiting: usize,
    /// Works whose `work` was called.
    pub started: u64,
    /// Works abandoned at their deadline.
    pub timed_out: u64,
    /// Works cancelled by their caller, waiting or running.
    pub aborted: u64,
    /// Calls refused because their key had `max_pending` works.
    pub refused: u64,
    /// Abandoned works that settled later.
    pub late_settled: u64,
    /// Calls that joined a queued work instead of adding one (see [`Coalesce`]).
    pub coalesced: u64,
    /// Works that waited for their key's pace (see [`SerializerOptions::with_rate`]).
    pub paced: u64,
    /// Calls refused because their work could not start at once, as they asked.
    pub unavailable: u64,
}

/// Per-key FIFO lines of works, the deadlines of the running ones and the counters, with no
/// I/O of its own.
///
/// A front end queues works ([`open`](Self::open) for an idle key, [`enqueue_on`](Self::enqueue_on)
/// for a busy one), starts a line's next work when its turn comes ([`start_next`](Self::start_next)),
/// and reports what happened: a work settled ([`finish`](Self::finish)), was abandoned at its
/// deadline or cancelled while running ([`abandon`](Self::abandon)) or cancelled while waiting
/// ([`finish`](Self::finish) before it started). With a shared timer it arms one timer for
/// [`next_deadline`](Self::next_deadline) and calls [`expire`](Self::expire) when it fires.
///
/// Keys are found by the front end (the JS binding keeps a JS `Map`, the Rust front end a
/// `HashMap`): the core knows lines by [`LineId`].
pub struct SerializerCore<P> {
    lines: Lines<Job<P>, LineState>,
    options: SerializerOptions,
    /// Whether the core orders deadlines for one shared timer (else each work has its own).
    shared_timer: bool,
    /// Whether a work is called as soon as it starts (else its driver says when:
    /// [`called`](Self::called), after the lease of a serializer over a store).
    calls_at_start: bool,
    /// Running works' deadlines, a min-heap of `(deadline, ticket)`. Entries of works that
    /// ended stay until they reach the top or the heap is compacted (see `Deadlines`).
    deadlines: Deadlines,
    /// With a rate: its keys' recent starts, and the lines waiting for their pace.
    pace: Option<Pace>,
    running: usize,
    counted: usize,
    stats: Stats,
}

impl<P> fmt::Debug for SerializerCore<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SerializerCore")
            .field("options", &self.options)
            .field("stats", &self.stats())
            .finish()
    }
}

impl<P> SerializerCore<P> {
    /// A core with these (already validated) options. `shared_timer`: whether its front end
    /// runs one timer for every deadline ([`next_deadline`](Self::next_deadline) and
    /// [`expire`](Self::expire)) or one per work (then the core keeps no deadline order).
    /// `calls_at_start`: whether each work is called as soon as it starts, or later, when its
    /// front end says so ([`called`](Self::called)): [`Stats::started`] counts works called.
    pub fn new(options: SerializerOptions, shared_timer: bool, calls_at_start: bool) -> Self {
        SerializerCore {
            lines: Lines::new(),
            options,
            shared_timer,
            calls_at_start,
            deadlines: Deadlines::default(),
            pace: options.rate.map(Pace::new),
            running: 0,
            counted: 0,
            stats: Stats::default(),
        }
    }

    /// The options the core was made with.
    pub fn options(&self) -> SerializerOptions {
        self.options
    }

    /// A call's deadline length: its own (checked), or the serializer's.
    pub(crate) fn timeout_given(&self, own: Option<f64>) -> Result<f64, EnqueueError> {
        match own {
            None => Ok(self.options.timeout_ms),
            Some(ms) => validate_timeout_ms(ms).map_err(EnqueueError::InvalidTimeout),
        }
    }

    fn job(payload: P, timeout_ms: f64, coalesce: Coalesce) -> Job<P> {
        Job {
            payload,
            timeout_ms,
            state: State::Waiting,
            coalesce,
            slot: 0,
            callers: 1,
        }
    }

    /// A work just pushed at the end of `line`: its turn comes at once when fewer than
    /// `concurrency` works are ahead of it; else it is the first whose turn has not come, if
    /// no other is.
    fn pushed(&mut self, line: LineId, ticket: Ticket) {
        let concurrency = self.options.concurrency();
        let Some(state) = self.lines.line_data_mut(line) else {
            return;
        };
        state.entries += 1;
        state.counted = state.counted.saturating_add(1);
        self.counted += 1;
        state.unstarted.get_or_insert(ticket);
        if state.entries as usize > concurrency {
            state.frontier.get_or_insert(ticket);
        } else if let Some(job) = self.lines.get_mut(ticket) {
            job.state = State::Queued;
        }
    }

    /// Queues a work under `key`, which the front end knows is idle, with its own deadline
    /// (`timeout_ms`) or the serializer's (`None`), joinable as `coalesce` says. It is the head
    /// of its new line: its turn has come, and the front end starts it
    /// ([`start_next`](Self::start_next)).
    ///
    /// # Errors
    /// A bad key or deadline, or too many works; nothing was queued.
    #[cfg(test)]
    pub fn open(
        &mut self,
        key: &str,
        payload: P,
        timeout_ms: Option<f64>,
        coalesce: Coalesce,
    ) -> Result<Pushed, EnqueueError> {
        crate::engine::key::validate_key(key).map_err(EnqueueError::InvalidKey)?;
        let timeout_ms = self.timeout_given(timeout_ms)?;
        self.open_key(std::rc::Rc::from(key), payload, timeout_ms, coalesce)
    }

    /// [`open`](Self::open) with the key checked and already shared (a caller that keeps it
    /// too), and the deadline length [`timeout_given`](Self::timeout_given).
    pub(crate) fn open_key(
        &mut self,
        key: std::rc::Rc<str>,
        payload: P,
        timeout_ms: f64,
        coalesce: Coalesce,
    ) -> Result<Pushed, EnqueueError> {
        if !self.lines.has_room() {
            return Err(EnqueueError::TooManyWorks);
        }
        let pushed = self
            .lines
            .open(key, Self::job(payload, timeout_ms, coalesce));
        self.pushed(pushed.line, pushed.ticket);
        Ok(pushed)
    }

    /// Queues a work behind the others of a busy key, known by its line, joinable as
    /// `coalesce` says. Its turn has come at once when fewer than `concurrency` works are ahead
    /// of it ([`turn_has_come`](Self::turn_has_come)): its front end then starts the line's
    /// next work.
    ///
    /// # Errors
    /// A bad deadline, a key at `maxPending` (counted in [`Stats::refused`]), too many works,
    /// or an idle line; nothing was queued.
    #[cfg(test)]
    pub fn enqueue_on(
        &mut self,
        line: LineId,
        payload: P,
        timeout_ms: Option<f64>,
        coalesce: Coalesce,
    ) -> Result<Ticket, EnqueueError> {
        let timeout_ms = self.timeout_given(timeout_ms)?;
        self.enqueue_at(line, payload, timeout_ms, coalesce)
    }

    /// [`enqueue_on`](Self::enqueue_on) with the deadline length
    /// [`timeout_given`](Self::timeout_given).
    pub(crate) fn enqueue_at(
        &mut self,
        line: LineId,
        payload: P,
        timeout_ms: f64,
        coalesce: Coalesce,
    ) -> Result<Ticket, EnqueueError> {
        let Some(counted) = self.lines.line_data(line).map(|state| state.counted) else {
            return Err(EnqueueError::IdleLine);
        };
        if counted as usize >= self.options.max_pending {
            self.stats.refused += 1;
            return Err(EnqueueError::QueueFull {
                max_pending: self.options.max_pending,
            });
        }
        if !self.lines.has_room() {
            return Err(EnqueueError::TooManyWorks);
        }
        let ticket = self
            .lines
            .push_on(line, Self::job(payload, timeout_ms, coalesce))
            .ok_or(EnqueueError::IdleLine)?;
        self.pushed(line, ticket);
        Ok(ticket)
    }

    /// A call that coalesces (not [`Coalesce::Never`]) under a busy key: it joins the key's
    /// last work when that work was queued with the same `coalesce`, has not started and has
    /// the same deadline length (`timeout_ms`, or the serializer's). Then the work answers one
    /// more caller, the call adds nothing to what `maxPending` bounds, and [`Stats::coalesced`]
    /// counts it: the joined work's ticket. `None` when it cannot join: the call queues as any
    /// call does ([`enqueue_on`](Self::enqueue_on)).
    ///
    /// Only the last work, and only a waiting one: a call never skips ahead of other work,
    /// and every call is answered by a run that starts after it was made.
    ///
    /// # Errors
    /// A bad deadline; nothing was joined.
    #[cfg(test)]
    pub fn join(
        &mut self,
        line: LineId,
        coalesce: &Coalesce,
        timeout_ms: Option<f64>,
    ) -> Result<Option<Ticket>, EnqueueError> {
        let timeout_ms = self.timeout_given(timeout_ms)?;
        Ok(self.join_at(line, coalesce, timeout_ms))
    }

    /// [`join`](Self::join) with the deadline length [`timeout_given`](Self::timeout_given).
    pub(crate) fn join_at(
        &mut self,
        line: LineId,
        coalesce: &Coalesce,
        timeout_ms: f64,
    ) -> Option<Ticket> {
        if *coalesce == Coalesce::Never {
            return None;
        }
        let last = self.lines.last(line)?;
        let job = self.lines.get_mut(last)?;
        let waits = matches!(job.state, State::Waiting | State::Queued);
        if !waits || job.timeout_ms != timeout_ms || job.coalesce != *coalesce {
            return None;
        }
        job.callers = job.callers.saturating_add(1);
        self.stats.coalesced += 1;
        Some(last)
    }

    /// One caller of a work left it (its signal aborted, its future was dropped). `true` while
    /// others remain: the work stays, unchanged, for them. `false` when it was the work's last
    /// caller, changing nothing: its front end then takes the work out as for any call —
    /// [`finish`](Self::finish) while it waits, [`abandon`](Self::abandon) while it runs.
    pub fn leave(&mut self, ticket: Ticket) -> bool {
        match self.lines.get_mut(ticket) {
            Some(job) if job.callers > 1 => {
                job.callers -= 1;
                true
            }
            _ => false,
        }
    }

    /// One work of `line` no longer counts against `maxPending`.
    fn uncount(&mut self, line: LineId) {
        if let Some(state) = self.lines.line_data_mut(line) {
            state.counted = state.counted.saturating_sub(1);
        }
        self.counted = self.counted.saturating_sub(1);
    }

    /// Whether a work's turn has come: fewer than `concurrency` works are ahead of it in its
    /// line (at `concurrency` 1: it is the head). `false` for a stale ticket.
    pub fn turn_has_come(&self, ticket: Ticket) -> bool {
        matches!(self.lines.get(ticket), Some(job) if job.state != State::Waiting)
    }

    /// The line's first work that has not started, if its turn has come: the one to start next.
    #[inline]
    pub fn startable(&self, line: LineId) -> Option<Ticket> {
        let ticket = self.lines.line_data(line)?.unstarted?;
        self.may_start(ticket).then_some(ticket)
    }

    /// Whether the work of `ticket` may start now: its turn has come and every work ahead of
    /// it has started.
    pub fn may_start(&self, ticket: Ticket) -> bool {
        self.line_to_start_in(ticket).is_some()
    }

    /// The line of the work of `ticket` when it [`may_start`](Self::may_start).
    #[inline]
    fn line_to_start_in(&self, ticket: Ticket) -> Option<LineId> {
        if self.lines.get(ticket)?.state != State::Queued {
            return None;
        }
        let line = self.lines.line_of(ticket)?;
        (self.lines.line_data(line)?.unstarted == Some(ticket)).then_some(line)
    }

    /// Starts the line's first work that has not started, if its turn has come: it runs from
    /// `now` until its deadline, in the lowest free slot. `None` when that work's turn has not
    /// come, or every work of the line has started (or the line is idle).
    #[cfg(test)]
    pub fn start_next(&mut self, line: LineId, now: f64) -> Option<Started<'_, P>> {
        let ticket = self.lines.line_data(line)?.unstarted?;
        self.start(ticket, now)
    }

    /// [`start_next`](Self::start_next) for the work of `ticket`: `None` unless it is its
    /// line's first work that has not started and its turn has come — works start in line order.
    pub fn start(&mut self, ticket: Ticket, now: f64) -> Option<Started<'_, P>> {
        let line = self.line_to_start_in(ticket)?;
        let after = self.lines.next_in_line(ticket);
        let state = self.lines.line_data_mut(line)?;
        state.unstarted = after;
        let slot = state.slots.take();
        if let (Some(pace), Some(key)) = (self.pace.as_mut(), self.lines.line_key(line)) {
            pace.started(key, now);
        }
        let job = self.lines.get_mut(ticket)?;
        let deadline = now + job.timeout_ms;
        job.state = State::Running { deadline };
        job.slot = slot;
        self.running += 1;
        if self.calls_at_start {
            self.stats.started += 1;
        }
        if self.shared_timer {
            let lines = &self.lines;
            self.deadlines
                .push(deadline, ticket, self.running, |entry| {
                    live_deadline(lines, entry)
                });
        }
        let job = self.lines.get_mut(ticket)?;
        Some(Started {
            payload: &mut job.payload,
            timeout_ms: job.timeout_ms,
            deadline,
            slot,
        })
    }

    /// A running work whose work has not been called yet (a serializer over a store, waiting for
    /// the pace its key's record carries) runs its deadline from `at` instead: a wait for the
    /// pace does not eat into it.
    pub fn restart_deadline(&mut self, ticket: Ticket, at: f64) {
        let Some(job) = self.lines.get_mut(ticket) else {
            return;
        };
        if !matches!(job.state, State::Running { .. }) {
            return;
        }
        let deadline = at + job.timeout_ms;
        job.state = State::Running { deadline };
        if self.shared_timer {
            let lines = &self.lines;
            self.deadlines
                .push(deadline, ticket, self.running, |entry| {
                    live_deadline(lines, entry)
                });
        }
    }

    /// A running work had its work called (a core made without `calls_at_start`: a serializer
    /// over a store calls a work once it holds the key's lease). A work that never got that
    /// far — it timed out waiting for the lease — is not counted in [`Stats::started`].
    pub fn called(&mut self, ticket: Ticket) {
        let running = self
            .lines
            .get(ticket)
            .is_some_and(|job| matches!(job.state, State::Running { .. }));
        if running {
            self.stats.started += 1;
        }
    }

    /// Gives up on a running work: it timed out, or its caller cancelled it. It stays in its
    /// line, in its slot (the next work's turn comes at [`finish`](Self::finish)), but no
    /// longer counts as running nor against `maxPending`. `false`, changing nothing, for a work
    /// that is not running.
    pub fn abandon(&mut self, ticket: Ticket, why: Abandon) -> bool {
        let Some(job) = self.lines.get_mut(ticket) else {
            return false;
        };
        if !matches!(job.state, State::Running { .. }) {
            return false;
        }
        job.state = State::Abandoned;
        self.running -= 1;
        match why {
            Abandon::TimedOut => self.stats.timed_out += 1,
            Abandon::Aborted => self.stats.aborted += 1,
            Abandon::Failed => {}
        }
        if let Some(line) = self.lines.line_of(ticket) {
            self.uncount(line);
        }
        true
    }

    /// A work leaves its line: it settled (running or abandoned), or it was cancelled before
    /// it started (counted in [`Stats::aborted`]). When it was one of the line's first
    /// `concurrency` works, the next work's turn comes ([`Released::next`]). `None` for a stale
    /// ticket.
    pub fn finish(&mut self, ticket: Ticket) -> Option<Released> {
        let line = self.lines.line_of(ticket)?;
        let job = self.lines.get(ticket)?;
        let (state, slot) = (job.state, job.slot);
        match state {
            State::Waiting | State::Queued => {
                self.stats.aborted += 1;
                self.uncount(line);
            }
            State::Running { .. } => {
                self.running -= 1;
                self.uncount(line);
            }
            State::Abandoned => {}
        }
        let after = self.lines.next_in_line(ticket);
        let mut next = None;
        let mut idle = false;
        if let Some(line_state) = self.lines.line_data_mut(line) {
            line_state.entries -= 1;
            idle = line_state.entries == 0;
            if line_state.unstarted == Some(ticket) {
                line_state.unstarted = after;
            }
            if matches!(state, State::Running { .. } | State::Abandoned) {
                line_state.slots.free(slot);
            }
            if line_state.frontier == Some(ticket) {
                line_state.frontier = after;
            } else if state != State::Waiting {
                next = line_state.frontier;
            }
        }
        if let Some(came) = next {
            let after_came = self.lines.next_in_line(came);
            if let Some(line_state) = self.lines.line_data_mut(line) {
                line_state.frontier = after_came;
            }
            if let Some(job) = self.lines.get_mut(came) {
                job.state = State::Queued;
            }
        }
        // The line's last work leaves (its key goes idle): the key's pace waits for nothing.
        if idle {
            if let (Some(pace), Some(key)) = (self.pace.as_mut(), self.lines.line_key(line)) {
                pace.idle(key);
            }
        }
        let removed = self.lines.remove(ticket)?;
        Some(Released {
            next,
            idle: removed.idle,
        })
    }

    /// The caller of a work gave up on it — its signal aborted, its future was dropped; for a
    /// coalescing work, its last caller ([`leave`](Self::leave)): a waiting work leaves its line
    /// (counted in [`Stats::aborted`]), a running one is abandoned as aborted.
    pub fn give_up(&mut self, ticket: Ticket) -> GaveUp {
        match self.lines.get(ticket).map(|job| job.state) {
            Some(State::Waiting | State::Queued) => {
                self.finish(ticket).map_or(GaveUp::Nothing, GaveUp::Left)
            }
            Some(State::Running { .. }) => {
                self.abandon(ticket, Abandon::Aborted);
                GaveUp::Abandoned
            }
            _ => GaveUp::Nothing,
        }
    }

    /// [`finish`](Self::finish) for the head of a line (at `concurrency` 1, the work whose turn
    /// it is).
    #[cfg(test)]
    pub fn finish_head(&mut self, line: LineId) -> Option<Released> {
        let head = self.lines.head(line)?;
        self.finish(head)
    }

    /// An abandoned work settled after all.
    pub fn late_settled(&mut self) {
        self.stats.late_settled += 1;
    }

    /// The running work with the earliest deadline at or before `now`, taken off the deadline
    /// order but not abandoned (the engine abandons it, and says so): `None` when no deadline
    /// has passed. Call until `None`.
    pub fn expired(&mut self, now: f64) -> Option<Ticket> {
        let (deadline, ticket) = self.earliest_entry()?;
        if deadline > now {
            return None;
        }
        self.deadlines.pop();
        Some(ticket)
    }

    /// The deadline of a running work (not abandoned), on the clock its start was timed by.
    pub fn deadline_of(&self, ticket: Ticket) -> Option<f64> {
        match self.lines.get(ticket)?.state {
            State::Running { deadline } => Some(deadline),
            _ => None,
        }
    }

    /// The key of a busy line.
    pub fn key_of(&self, line: LineId) -> Option<std::rc::Rc<str>> {
        self.lines.line_key(line).cloned()
    }

    /// The last work of a line, if any.
    pub(crate) fn last_in_line(&self, line: LineId) -> Option<Ticket> {
        self.lines.last(line)
    }

    /// The work right behind `ticket` in its line, if any.
    pub(crate) fn next_in_line(&self, ticket: Ticket) -> Option<Ticket> {
        self.lines.next_in_line(ticket)
    }

    /// The first work of a line that has not started, if any.
    pub fn first_unstarted(&self, line: LineId) -> Option<Ticket> {
        self.lines.line_data(line)?.unstarted
    }

    /// The earliest deadline of the works running in a line (the line's first works), if any.
    pub fn earliest_running_deadline(&self, line: LineId) -> Option<f64> {
        let mut at = self.lines.head(line);
        let mut earliest: Option<f64> = None;
        while let Some(ticket) = at {
            match self.lines.get(ticket).map(|job| job.state) {
                Some(State::Running { deadline }) => {
                    earliest = Some(earliest.map_or(deadline, |e| e.min(deadline)));
                }
                Some(State::Abandoned) => {}
                _ => break,
            }
            at = self.lines.next_in_line(ticket);
        }
        earliest
    }

    /// The earliest deadline of a running work (with a shared timer), if any runs.
    pub fn next_deadline(&mut self) -> Option<f64> {
        let lines = &self.lines;
        self.deadlines
            .first(|entry| live_deadline(lines, entry))
            .map(|(deadline, _)| deadline)
    }

    /// The running work with the earliest deadline at or before `now`, abandoned as timed out
    /// (with a shared timer); `None` when no deadline has passed. Call until `None`.
    #[cfg(test)]
    pub fn expire(&mut self, now: f64) -> Option<Ticket> {
        let (deadline, ticket) = self.earliest_entry()?;
        if deadline > now {
            return None;
        }
        self.deadlines.pop();
        self.abandon(ticket, Abandon::TimedOut);
        Some(ticket)
    }

    /// The earliest deadline of a running work, and that work (with a shared timer).
    pub(crate) fn earliest_entry(&mut self) -> Option<(f64, Ticket)> {
        let lines = &self.lines;
        self.deadlines.first(|entry| live_deadline(lines, entry))
    }

    /// Entries in the deadline heap, ended works' included (for tests of its bound).
    #[cfg(test)]
    pub fn deadline_entries(&self) -> usize {
        self.deadlines.len()
    }

    /// The head of a busy line.
    pub fn head(&self, line: LineId) -> Option<Ticket> {
        self.lines.head(line)
    }

    /// The line a queued or running work is in.
    pub fn line_of(&self, ticket: Ticket) -> Option<LineId> {
        self.lines.line_of(ticket)
    }

    /// What was queued with a work.
    pub fn payload(&self, ticket: Ticket) -> Option<&P> {
        self.lines.get(ticket).map(|job| &job.payload)
    }

    /// What was queued with a work, mutably.
    pub fn payload_mut(&mut self, ticket: Ticket) -> Option<&mut P> {
        self.lines.get_mut(ticket).map(|job| &mut job.payload)
    }

    /// Whether a work is waiting: queued, its turn not come or not started yet.
    pub fn is_waiting(&self, ticket: Ticket) -> bool {
        matches!(self.lines.get(ticket), Some(job) if matches!(job.state, State::Waiting | State::Queued))
    }

    /// Whether a work has started and is in its line still: running, or abandoned and not
    /// finished yet.
    pub fn has_started(&self, ticket: Ticket) -> bool {
        matches!(self.lines.get(ticket), Some(job) if matches!(job.state, State::Running { .. } | State::Abandoned))
    }

    /// Whether a work was abandoned (timed out, or its caller gave up while it ran) and has not
    /// left its line yet.
    pub fn is_abandoned(&self, ticket: Ticket) -> bool {
        matches!(self.lines.get(ticket), Some(job) if job.state == State::Abandoned)
    }

    /// A queued or running work's deadline length, in milliseconds: its own, or the
    /// serializer's.
    pub fn timeout_of(&self, ticket: Ticket) -> Option<f64> {
        self.lines.get(ticket).map(|job| job.timeout_ms)
    }

    /// The work right ahead of `ticket` in its line.
    pub fn ahead_of(&self, ticket: Ticket) -> Option<Ticket> {
        self.lines.prev_in_line(ticket)
    }

    /// The live work named by a [`Ticket::pack`]ed number, if any.
    pub fn unpack(&self, packed: f64) -> Option<Ticket> {
        self.lines.unpack(packed)
    }

    /// Whether a work of `line` has not started yet.
    pub fn waiting_in(&self, line: LineId) -> bool {
        self.lines
            .line_data(line)
            .is_some_and(|state| state.unstarted.is_some())
    }

    /// Works of a line that count against `maxPending`: queued or running, not abandoned.
    pub fn pending_in(&self, line: LineId) -> usize {
        self.lines
            .line_data(line)
            .map_or(0, |state| state.counted as usize)
    }

    /// Keys with queued or running work (abandoned works that have not left their line yet
    /// included: their key moves on a moment later).
    pub fn keys(&self) -> usize {
        self.lines.keys()
    }

    /// Counters since creation, and what is live now.
    pub fn stats(&self) -> Stats {
        Stats {
            keys: self.lines.keys(),
            running: self.running,
            waiting: self.counted - self.running,
            paced: self.pace.as_ref().map_or(0, |pace| pace.paced),
            ..self.stats
        }
    }

    /// The host called work `ticket`, started by the pace at `at` (see `Pace::restamp`).
    pub(crate) fn restamp_start(&mut self, ticket: Ticket, at: f64) {
        let key = self
            .lines
            .line_of(ticket)
            .and_then(|line| self.lines.line_key(line));
        if let (Some(pace), Some(key)) = (self.pace.as_mut(), key) {
            pace.restamp(key, at);
        }
    }

    /// Whether the serializer has a pace.
    #[inline]
    pub(crate) fn has_pace(&self) -> bool {
        self.pace.is_some()
    }

    /// Whether a line waits for its key's pace.
    pub(crate) fn waits_for_pace(&self) -> bool {
        self.pace.as_ref().is_some_and(Pace::waits)
    }

    /// When `line`'s next work may start by its key's pace, if that is after `now` (`None`
    /// without a rate, or when it may start now).
    pub(crate) fn paced_until(&mut self, line: LineId, now: f64) -> Option<f64> {
        let pace = self.pace.as_mut()?;
        let key = self.lines.line_key(line)?;
        Some(pace.next_start(key, now)).filter(|&at| at > now)
    }

    /// `line`'s next work waits for its key's pace until `at` ([`paced_until`](Self::paced_until)).
    pub(crate) fn wait_for_pace(&mut self, line: LineId, at: f64) {
        let (Some(pace), Some(key), Some(work)) = (
            self.pace.as_mut(),
            self.lines.line_key(line),
            self.lines.line_data(line).and_then(|state| state.unstarted),
        ) else {
            return;
        };
        let lines = &self.lines;
        pace.wait(key, line, at, work, |line| {
            lines.line_key(line).map(|key| &**key)
        })
    }

    /// When the first line waiting for its pace may start, if any.
    pub(crate) fn next_pace(&mut self) -> Option<f64> {
        let lines = &self.lines;
        self.pace
            .as_mut()?
            .next_wait(|line| lines.line_key(line).map(|key| &**key))
    }

    /// A line whose pace came by `now`: it waits no more. Call until `None`.
    pub(crate) fn pace_came(&mut self, now: f64) -> Option<LineId> {
        let lines = &self.lines;
        self.pace
            .as_mut()?
            .due(now, |line| lines.line_key(line).map(|key| &**key))
    }

    /// Whether a call for `key` (its line, if busy) could start its work at once, as
    /// `ifAvailable` asks: no work of the key waits, a slot is free, and the pace allows.
    /// Counted in [`Stats::unavailable`] when not.
    ///
    /// # Errors
    /// [`EnqueueError::Unavailable`] when it could not.
    pub(crate) fn available(
        &mut self,
        key: &str,
        line: Option<LineId>,
        now: f64,
    ) -> Result<(), EnqueueError> {
        // (With none waiting, every work in the line holds a slot: running or abandoned.)
        let busy = line
            .and_then(|line| self.lines.line_data(line))
            .is_some_and(|state| {
                state.unstarted.is_some() || state.entries as usize >= self.options.concurrency
            });
        let paced = self
            .pace
            .as_mut()
            .map(|pace| pace.next_start(key, now))
            .filter(|&at| at > now);
        if !busy && paced.is_none() {
            return Ok(());
        }
        self.stats.unavailable += 1;
        Err(EnqueueError::Unavailable {
            retry_after_ms: paced.filter(|_| !busy).map(|at| at - now),
        })
    }
}

/// Whether a heap entry is a running work's current deadline (ended works' entries are dead).
fn live_deadline<P>(lines: &Lines<Job<P>, LineState>, (deadline, ticket): (f64, Ticket)) -> bool {
    matches!(lines.get(ticket), Some(job) if job.state == State::Running { deadline })
}

#[cfg(test)]
mod tests;
