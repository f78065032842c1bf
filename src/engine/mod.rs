//! The engine: every rule, state and timer of keyturn in one machine that makes no call of any
//! kind — no store, no clock (the time is an argument), no timer, no host code. The shape of
//! quinn-proto's `Connection`: events in (a call with its options, a cancel, a store's answer, a
//! work settled, the time), effects out ([`Effect`]: make a store call, start a work, settle a
//! caller, abort a signal, arm a timer), and the one time it next needs waking
//! ([`Engine::poll_timeout`]).
//!
//! Two front ends execute it and decide nothing: the Rust futures of `src/front/` and the npm
//! package's JavaScript (through its bindings). Each rule lives once, in the machines it drives:
//! per-key lines of works (`works.rs`), the lease lock (`leases.rs`), how a serializer's turns hold
//! a key's lease (`turns.rs`); the engine keeps what the front ends used to keep besides — store
//! calls in flight and their bounds, waits, sleeps and watches, guards, renewals, a name's slot
//! race, a lock's flags, the key → line maps — and every timer.
//!
//! **Timers.** One heap holds every time the engine must act at (a work's deadline, a store
//! call's bound, a poll's pause, a wait's or a watch's end, a renewal, a watched lease's end),
//! besides the lease core's own (waiters' deadlines, holders' lease ends). A host with one timer
//! for everything arms it for [`Engine::poll_timeout`] and calls [`Engine::tick`]. A host whose
//! timers belong to the context that armed them — Cloudflare Workers ends a request's timers with
//! the request — keeps one per call instead ([`Config::timer_per_call`]): the engine says when
//! each call's timer must fire ([`Effect::Arm`]), and the next work of a line watches the deadline
//! of the works running ahead of it, so a work whose caller's request ended cannot hold its key
//! past its deadline. No time the engine asks for is further than [`MAX_TIMEOUT_MS`] away.

pub(crate) mod asks;
pub(crate) mod deadlines;
pub(crate) mod decimal;
mod effect;
pub(crate) mod key;
pub(crate) mod keymap;
pub(crate) mod leases;
mod locking;
pub mod messages;
pub(crate) mod options;
pub(crate) mod pace;
pub(crate) mod pace_record;
pub(crate) mod queue;
pub(crate) mod random;
pub(crate) mod record;
mod serial;
pub(crate) mod slab;
pub(crate) mod slots;
pub(crate) mod starts;
pub(crate) mod turns;
pub(crate) mod works;

use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

pub use effect::{Effect, Held, Lost, Method, Outcome, StoreCall, Why};
pub use leases::{Answer, LockStats, Now, Refusal};
pub use locking::{read_answer, read_fields};
pub use queue::{LineId, Ticket, MAX_ENTRIES};
pub use random::NoRandom;
pub use record::Record;
pub use serial::{Entered, ORPHAN_MS, START_GRACE_MS};
pub use works::EnqueueError;

use deadlines::Deadlines;
use leases::LockCore;
use locking::{Call, CallKind, Leg, Op, Race};
use options::MAX_TIMEOUT_MS;
use random::Random;
use serial::Serial;
use slab::Slab;

/// How the host runs the engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Config {
    /// Each call keeps a timer of its own, in its own context ([`Effect::Arm`]): Cloudflare
    /// Workers, where a timer ends with the request that armed it, and the Rust front end. Else
    /// one timer serves all ([`Engine::poll_timeout`]).
    pub timer_per_call: bool,
    /// A call's context can end while the call waits (Cloudflare Workers ends a request's
    /// timers and I/O with the request): the next work of a line then also watches the works
    /// running ahead of it, and one abandoned whose caller never says it heard leaves its line
    /// [`ORPHAN_MS`] after — so no ended request holds a key past its deadline.
    pub contexts_end: bool,
    /// The store answers `changed`: a waiter watches the record instead of polling, and a busy
    /// line keeps a guard.
    pub store_tells_changes: bool,
}

/// Whose timer must wake the engine: a work, or a lock call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Owner {
    Work(u32, Ticket),
    Call(Ticket),
}

/// What the engine must do at a time on its heap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Timer {
    /// A store call's bound.
    Op(Ticket),
    /// A leg's sleep, wait or watch ends.
    Leg(Ticket),
    /// A lock kept renewed renews.
    Renew(Ticket),
    /// A watched lock's lease ends.
    LeaseEnd(Ticket),
    /// An abandoned work of a serializer leaves its line, if its caller has not said it heard
    /// (an engine with locks; one without keeps these in `orphans`).
    Orphan(u32, Ticket),
    /// A work of a serializer over a store, holding its key's lease, may start by the pace the
    /// record carries (always fires: it keeps the host alive until then).
    Paced(u32, Ticket),
}

/// Every serializer and every lock of one store (or of none) in one isolate, on one clock. `V`
/// is the store's version; `H` the host's handle of a call (copied into each effect for it).
/// `LOCKS`: whether it has locks and serializers over a store — an engine without (a page that
/// only serializes) carries none of their code.
pub struct Engine<V, H, const LOCKS: bool = true> {
    config: Config,
    serializers: Vec<Serial<H>>,
    locks: LockOnly<LockCore<V, Ticket>, LOCKS>,
    legs: LockOnly<Slab<Leg<H>>, LOCKS>,
    races: LockOnly<Slab<Race>, LOCKS>,
    calls: LockOnly<Slab<Call<H>>, LOCKS>,
    ops: LockOnly<Slab<Op>, LOCKS>,
    timers: Deadlines<Timer>,
    /// The pace records of keys taken N at a time (`pace_record.rs`).
    paces: LockOnly<pace_record::PaceRecords<V>, LOCKS>,
    /// Where contexts end: when each abandoned work whose caller has not said it heard leaves
    /// its line (its serializer, its ticket). Each is [`ORPHAN_MS`] after its abandonment, so
    /// they come in time order: a line, not a heap (and a module without locks has no timer
    /// heap at all).
    orphans: VecDeque<(f64, u32, Ticket)>,
    effects: VecDeque<Effect<V, H>>,
    /// The latest time an event brought.
    last: Now,
    /// The call the event being handled is for (see `acting`).
    acting: Option<H>,
    /// With one timer for all: when it is armed for, and whether it keeps the host alive, as
    /// last said ([`Effect::Wake`]).
    woken_at: f64,
    woken_keep: bool,
    /// Whether the one timer's time is a pause between polls, which may end a little early.
    woken_early: bool,
    /// Legs acquiring (not holding yet), and store calls in flight for legs: what the host
    /// waits on.
    acquiring: usize,
    leg_ops: usize,
}

/// What only an engine with locks fills: one without (`LOCKS` false) leaves it empty and has
/// no code to drop it — its module (a page that only serializes) carries none of the lock's
/// state's drop glue.
pub(crate) struct LockOnly<T, const LOCKS: bool>(ManuallyDrop<T>);

impl<T, const LOCKS: bool> LockOnly<T, LOCKS> {
    fn new(value: T) -> Self {
        LockOnly(ManuallyDrop::new(value))
    }
}

impl<T: Default, const LOCKS: bool> Default for LockOnly<T, LOCKS> {
    fn default() -> Self {
        LockOnly::new(T::default())
    }
}

impl<T, const LOCKS: bool> Deref for LockOnly<T, LOCKS> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T, const LOCKS: bool> DerefMut for LockOnly<T, LOCKS> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T, const LOCKS: bool> Drop for LockOnly<T, LOCKS> {
    fn drop(&mut self) {
        if LOCKS {
            // SAFETY: dropped once, here, and never touched again.
            unsafe { ManuallyDrop::drop(&mut self.0) }
        }
    }
}

impl<V, H, const LOCKS: bool> core::fmt::Debug for Engine<V, H, LOCKS> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.config)
            .field("serializers", &self.serializers.len())
            .field("calls", &self.calls.len())
            .field("ops", &self.ops.len())
            .finish()
    }
}

impl<V: Clone + PartialEq, H: Copy + PartialEq, const LOCKS: bool> Engine<V, H, LOCKS> {
    /// An engine with nothing queued, run as `config` says.
    pub fn new(config: Config) -> Self {
        let mut locks = LockCore::new();
        locks.set_store_tells_changes(config.store_tells_changes);
        locks.set_line_guards(true);
        Engine {
            config,
            serializers: Vec::new(),
            locks: LockOnly::new(locks),
            legs: LockOnly::default(),
            races: LockOnly::default(),
            calls: LockOnly::default(),
            ops: LockOnly::default(),
            timers: Deadlines::default(),
            paces: LockOnly::default(),
            orphans: VecDeque::new(),
            effects: VecDeque::new(),
            last: Now {
                wall: 0.0,
                mono: f64::NEG_INFINITY,
            },
            acting: None,
            woken_at: f64::INFINITY,
            woken_keep: false,
            woken_early: false,
            acquiring: 0,
            leg_ops: 0,
        }
    }

    /// The next thing for the host to do, if any. Call until `None` after every event.
    pub fn poll(&mut self) -> Option<Effect<V, H>> {
        if let Some(effect) = self.effects.pop_front() {
            return Some(effect);
        }
        self.poll_keep().map(|keep| Effect::Wake {
            at: self.woken_at,
            keep,
            early: self.woken_early,
        })
    }

    /// With one timer for all, armed, and no effect left: whether it now keeps the host alive,
    /// if that changed — the [`Effect::Wake`] [`poll`](Self::poll) would give next, of the time
    /// already said, taken. A host may do it along with the effect it polled last.
    pub fn poll_keep(&mut self) -> Option<bool> {
        if !self.effects.is_empty() || !self.keep_changed() {
            return None;
        }
        // Whether the one timer keeps the host alive follows whether anything waits on it.
        self.woken_keep = !self.woken_keep;
        Some(self.woken_keep)
    }

    /// With one timer for all, armed: whether it must now keep the host alive where it did not,
    /// or no longer.
    fn keep_changed(&self) -> bool {
        LOCKS
            && !self.config.timer_per_call
            && self.woken_at.is_finite()
            && self.keeps_alive() != self.woken_keep
    }

    /// Whether anything waits on the engine's timer: an acquisition, a store call in flight for
    /// a lease, or a work for its key's pace (a guard's watch keeps nothing alive: it serves
    /// holders, who keep alive what they need).
    fn keeps_alive(&self) -> bool {
        self.leg_ops > 0
            || self.acquiring > 0
            || self
                .serializers
                .iter()
                .any(|serial| serial.core.waits_for_pace() || serial.pacing > 0)
    }

    /// Whether effects wait to be polled (a change of whether the one timer keeps the host
    /// alive among them).
    pub fn has_effects(&self) -> bool {
        !self.effects.is_empty() || self.keep_changed()
    }

    /// When the engine next needs [`tick`](Self::tick), on the monotonic clock: the earliest
    /// deadline, bound, pause or end it keeps — never more than [`MAX_TIMEOUT_MS`] after the
    /// last event's time, so a host timer honours it. `None` when nothing is timed.
    pub fn poll_timeout(&mut self) -> Option<f64> {
        let mut at = f64::INFINITY;
        for serial in &mut self.serializers {
            if let Some(deadline) = serial.core.next_deadline() {
                at = at.min(deadline);
            }
            if let Some(pace) = serial.core.next_pace() {
                at = at.min(pace);
            }
        }
        if LOCKS {
            if let Some(next) = self.locks.next_timer() {
                at = at.min(next);
            }
        }
        if let Some(next) = self.next_own_timer() {
            at = at.min(next);
        }
        if let Some((next, ..)) = self.next_orphan() {
            at = at.min(next);
        }
        at.is_finite()
            .then(|| at.min(self.last.mono + f64::from(MAX_TIMEOUT_MS)))
    }

    /// Time passed: everything due by `now` is done — works past their deadline abandoned,
    /// store calls past their bound failed, waits and pauses ended, renewals started.
    pub fn tick(&mut self, now: Now, random: &impl Random) {
        self.set_now(now);
        // (With one timer for all, it fired: nothing is armed now.)
        self.woken_at = f64::INFINITY;
        for serializer in 0..self.serializers.len() as u32 {
            while let Some(work) = self
                .serializers
                .get_mut(serializer as usize)
                .and_then(|serial| serial.core.expired(now.mono))
            {
                self.expire_work(serializer, work, now, random);
            }
            while let Some(line) = self
                .serializers
                .get_mut(serializer as usize)
                .and_then(|serial| serial.core.pace_came(now.mono))
            {
                self.turn_came(serializer, line);
            }
        }
        if LOCKS {
            self.locks.expire(now);
            self.drain(now, random);
        }
        while let Some((at, timer)) = self.first_timer() {
            if at > now.mono {
                break;
            }
            self.timers.pop();
            match timer {
                Timer::Op(op) => self.op_timed_out(op, now, random),
                Timer::Leg(leg) => self.leg_due(leg, now, random),
                Timer::Renew(leg) => self.renewal_due(leg, now),
                Timer::LeaseEnd(leg) => self.lease_end_due(leg, now),
                Timer::Orphan(serializer, work) => self.orphan_due(serializer, work, now, random),
                Timer::Paced(serializer, work) => self.pace_held_due(serializer, work, now, random),
            }
            self.drain(now, random);
        }
        // (Without locks there is no timer heap: works due to leave their line wait in theirs.)
        while let Some((at, serializer, work)) = self.next_orphan() {
            if at > now.mono {
                break;
            }
            self.orphans.pop_front();
            self.orphan_due(serializer, work, now, random);
        }
        if !self.config.timer_per_call {
            // The shared timer fired: armed again for what is left.
            if let Some(next) = self.poll_timeout() {
                self.wake_by(next);
            }
        }
    }

    /// The host refused the timer the engine asked for: the call it was for is given up on
    /// ([`Outcome::TimerRefused`]; a running work's signal aborts with [`Why::TimerRefused`]) —
    /// with a timer per call, work `work` of `serializer` (or, with `serializer` `None`, lock
    /// call `work`); with one timer for all (`work` `None`), the call whose time is earliest.
    /// A call waits for no timer it cannot have, and no other call is held up by it.
    pub fn timer_refused(
        &mut self,
        serializer: Option<u32>,
        work: Option<Ticket>,
        now: Now,
        random: &impl Random,
    ) {
        self.set_now(now);
        let owner = match (serializer, work) {
            (Some(serializer), Some(work)) => Some(Owner::Work(serializer, work)),
            (None, Some(call)) => Some(Owner::Call(call)),
            _ => self.earliest_owner(),
        };
        match owner {
            // A waiter in line behind a holder here is served without its own timer: its wait
            // ends at the next timer that fires in the isolate (one request holding workerd's
            // 10 000 timers has others to fire).
            Some(owner) if LOCKS && self.config.timer_per_call && self.waits_in_line(owner) => {}
            Some(Owner::Work(serializer, work)) => {
                self.give_up_work(
                    serializer,
                    work,
                    Outcome::TimerRefused,
                    Why::TimerRefused,
                    now,
                    random,
                );
            }
            Some(Owner::Call(call)) if LOCKS => {
                self.give_up_call(call, Outcome::TimerRefused, now, random)
            }
            _ => {}
        }
        if !self.config.timer_per_call {
            self.woken_at = f64::INFINITY;
            if let Some(next) = self.poll_timeout() {
                self.wake_by(next);
            }
        }
    }

    /// Whether `owner`'s leg waits in line behind a holder in this engine.
    fn waits_in_line(&self, owner: Owner) -> bool {
        let leg = match owner {
            Owner::Call(call) => match self.calls.get(call).map(|entry| &entry.kind) {
                Some(CallKind::Acquire { leg, .. }) => *leg,
                _ => None,
            },
            Owner::Work(serializer, work) => self
                .serializers
                .get(serializer as usize)
                .and_then(|serial| serial.core.payload(work))
                .and_then(serial::Work::leg),
        };
        leg.and_then(|leg| self.legs.get(leg))
            .is_some_and(|found| self.locks.waits_in_line(found.ticket))
    }

    /// With one timer for all: the call the earliest time is for (a work's deadline, or what a
    /// call's lease waits on).
    fn earliest_owner(&mut self) -> Option<Owner> {
        let mut earliest: Option<(f64, Owner)> = None;
        for (index, serial) in self.serializers.iter_mut().enumerate() {
            if let Some((at, work)) = serial.core.earliest_entry() {
                if earliest.is_none_or(|(first, _)| at < first) {
                    earliest = Some((at, Owner::Work(index as u32, work)));
                }
            }
        }
        if !LOCKS {
            // (Only a lease's timers have an owner besides the works.)
            return earliest.map(|(_, owner)| owner);
        }
        let timer = self
            .first_timer()
            .filter(|(at, _)| earliest.is_none_or(|(first, _)| *at < first));
        let leg = match timer {
            Some((_, Timer::Op(op))) => self.ops.get(op).and_then(|op| op.leg),
            Some((_, Timer::Leg(leg) | Timer::Renew(leg) | Timer::LeaseEnd(leg))) => Some(leg),
            _ => None,
        };
        leg.and_then(|leg| self.leg_owner(leg))
            .or(earliest.map(|(_, owner)| owner))
    }

    /// With a timer per call: the timer of work `work` of `serializer` (or, with `serializer`
    /// `None`, of lock call `work`) fired. Everything due is done ([`tick`](Self::tick)), and
    /// if the call still needs its timer it is armed again ([`Effect::Arm`]).
    pub fn fired(&mut self, serializer: Option<u32>, call: Ticket, now: Now, random: &impl Random) {
        let owner = match serializer {
            Some(serializer) => Owner::Work(serializer, call),
            None if LOCKS => Owner::Call(call),
            None => return,
        };
        self.set_armed(owner, f64::INFINITY);
        let handle = match owner {
            Owner::Work(serializer, work) => self.work_handle(serializer, work),
            Owner::Call(call) => self.calls.get(call).map(|found| found.handle),
        };
        self.acting(handle);
        self.tick(now, random);
        if let Owner::Work(serializer, work) = owner {
            // Where contexts end, the work ahead of this one may never start: see to it.
            let line = self
                .serializers
                .get(serializer as usize)
                .and_then(|serial| serial.core.line_of(work));
            if let (Some(line), true) = (line, self.config.contexts_end) {
                self.start_overdue(serializer, line, now, random);
            }
        }
        self.acting(None);
        if let Some(at) = self.need(owner) {
            self.arm(owner, at);
        }
    }

    /// What this engine's locks did, and what is live now.
    pub fn lock_stats(&self) -> LockStats {
        self.locks.stats()
    }

    /// Local contenders waiting or holding, for the record `key`.
    pub fn local_line(&self, key: &str) -> usize {
        self.locks.local_line(key)
    }

    // ---- inside ----

    pub(crate) fn set_now(&mut self, now: Now) {
        if now.mono > self.last.mono || self.last.mono == f64::NEG_INFINITY {
            self.last = now;
        }
    }

    pub(crate) fn push_timer(&mut self, at: f64, timer: Timer) {
        let live = self.ops.len() + 2 * self.legs.len() + 16;
        let (ops, legs, serializers) = (&self.ops, &self.legs, &self.serializers);
        self.timers.push(at, timer, live, |entry| {
            timer_live(ops, legs, serializers, entry)
        });
        if !self.config.timer_per_call {
            self.wake_by(at.min(self.last.mono + f64::from(MAX_TIMEOUT_MS)));
        }
    }

    /// Whether the engine's first time, `at`, is a pause between polls that may end up to a
    /// millisecond early: the first timer, a leg's pause.
    fn pause_at(&mut self, at: f64) -> bool {
        let first = self.first_timer();
        let legs = &self.legs;
        first.is_some_and(|(first, timer)| {
            first == at
                && matches!(timer, Timer::Leg(leg) if legs
                    .get(leg)
                    .is_some_and(|leg| matches!(leg.run, locking::Run::Pause(_))))
        })
    }

    fn first_timer(&mut self) -> Option<(f64, Timer)> {
        if !LOCKS {
            // (Every timer on the heap is a lease's.)
            return None;
        }
        let (ops, legs, serializers) = (&self.ops, &self.legs, &self.serializers);
        self.timers
            .first(|entry| timer_live(ops, legs, serializers, entry))
    }

    /// The first abandoned work due to leave its line (its time, serializer and ticket), those
    /// that left already dropped.
    fn next_orphan(&mut self) -> Option<(f64, u32, Ticket)> {
        if LOCKS {
            return None;
        }
        while let Some(&(at, serializer, work)) = self.orphans.front() {
            let live = self
                .serializers
                .get(serializer as usize)
                .and_then(|serial| serial.core.payload(work))
                .is_some_and(|found| found.orphan_at == at);
            if live {
                return Some((at, serializer, work));
            }
            self.orphans.pop_front();
        }
        None
    }

    /// Where contexts end: abandoned work `work` of `serializer` leaves its line at `at` (no
    /// earlier than those before it) if its caller has not said it heard by then.
    pub(crate) fn push_orphan(&mut self, at: f64, serializer: u32, work: Ticket) -> f64 {
        if LOCKS {
            self.push_timer(at, Timer::Orphan(serializer, work));
            return at;
        }
        let at = self.orphans.back().map_or(at, |&(last, ..)| at.max(last));
        self.orphans.push_back((at, serializer, work));
        if !self.config.timer_per_call {
            self.wake_by(at.min(self.last.mono + f64::from(MAX_TIMEOUT_MS)));
        }
        at
    }

    fn next_own_timer(&mut self) -> Option<f64> {
        self.first_timer().map(|(at, _)| at)
    }

    /// With a timer per call: `owner`'s timer must fire by `at` — armed anew when earlier than
    /// the one it has.
    pub(crate) fn arm(&mut self, owner: Owner, at: f64) {
        let at = at.min(self.last.mono + f64::from(MAX_TIMEOUT_MS));
        if !self.config.timer_per_call {
            self.wake_by(at);
            return;
        }
        let armed = match owner {
            Owner::Work(serializer, work) => self
                .serializers
                .get_mut(serializer as usize)
                .and_then(|serial| serial.core.payload_mut(work))
                .filter(|found| at < found.armed)
                .map(|found| {
                    found.armed = at;
                    (found.handle, found.leg(), found.pace_at().is_finite())
                })
                .map(|(handle, leg, pace_held)| {
                    // A work waits on its timer while its lease is being taken, or its pace
                    // comes.
                    let leg = leg.filter(|_| LOCKS).and_then(|leg| self.legs.get(leg));
                    let paced = self
                        .serializers
                        .get(serializer as usize)
                        .is_some_and(|serial| {
                            serial.core.has_pace() && !serial.core.has_started(work)
                        });
                    (
                        handle,
                        paced || pace_held || leg.is_some_and(|leg| !leg.held),
                    )
                }),
            Owner::Call(_) if !LOCKS => None,
            Owner::Call(call) => self
                .calls
                .get_mut(call)
                .filter(|found| at < found.armed)
                .map(|found| {
                    found.armed = at;
                    // Every call but a held lock's (its renewals only guard) has a caller waiting.
                    (found.handle, !matches!(found.kind, CallKind::Lock(_)))
                }),
        };
        if let Some((handle, keep)) = armed {
            let early = self.pauses_until(owner, at);
            self.effects.push_back(Effect::Arm {
                handle,
                at,
                keep,
                early,
            });
        }
    }

    /// Whether `owner`'s time `at` is one of its legs' pauses between polls, which may end up to
    /// a millisecond early.
    fn pauses_until(&self, owner: Owner, at: f64) -> bool {
        self.owner_legs(owner).into_iter().any(|leg| {
            self.legs
                .get(leg)
                .is_some_and(|found| found.run == locking::Run::Pause(at))
        })
    }

    /// The legs `owner` takes or holds a lease with (none without locks).
    fn owner_legs(&self, owner: Owner) -> Vec<Ticket> {
        let mut legs = Vec::new();
        if !LOCKS {
            return legs;
        }
        let race = match owner {
            Owner::Work(serializer, work) => {
                let Some(found) = self
                    .serializers
                    .get(serializer as usize)
                    .and_then(|serial| serial.core.payload(work))
                else {
                    return legs;
                };
                legs.extend(found.leg());
                found.race()
            }
            Owner::Call(call) => match self.calls.get(call).map(|found| found.kind) {
                Some(CallKind::Acquire { leg, race }) => {
                    legs.extend(leg);
                    race
                }
                Some(CallKind::Lock(leg) | CallKind::Renew(leg) | CallKind::Release(leg)) => {
                    legs.push(leg);
                    None
                }
                None => None,
            },
        };
        if let Some(race) = race.and_then(|race| self.races.get(race)) {
            legs.extend(race.legs.iter().copied());
        }
        legs
    }

    /// With one timer for all: it must fire by `at`.
    pub(crate) fn wake_by(&mut self, at: f64) {
        if at < self.woken_at {
            self.woken_at = at;
            self.woken_keep = self.keeps_alive();
            self.woken_early = LOCKS && self.pause_at(at);
            self.effects.push_back(Effect::Wake {
                at,
                keep: self.woken_keep,
                early: self.woken_early,
            });
        }
    }

    /// With one timer for all: nothing is timed any more (every key idle), so it is cleared.
    pub(crate) fn wake_never(&mut self) {
        if self.woken_at.is_finite() && self.poll_timeout().is_none() {
            self.woken_at = f64::INFINITY;
            self.woken_keep = false;
            self.woken_early = false;
            self.effects.push_back(Effect::Wake {
                at: f64::INFINITY,
                keep: false,
                early: false,
            });
        }
    }

    fn set_armed(&mut self, owner: Owner, at: f64) {
        match owner {
            Owner::Work(serializer, work) => {
                if let Some(found) = self
                    .serializers
                    .get_mut(serializer as usize)
                    .and_then(|serial| serial.core.payload_mut(work))
                {
                    found.armed = at;
                }
            }
            Owner::Call(call) => {
                if let Some(found) = self.calls.get_mut(call).filter(|_| LOCKS) {
                    found.armed = at;
                }
            }
        }
    }

    /// The earliest time `owner` still needs waking at, if any: its deadline, its legs' bounds,
    /// pauses and ends, its renewal, its watched lease's end — and for the next work of a line,
    /// the deadline of those running ahead of it.
    fn need(&mut self, owner: Owner) -> Option<f64> {
        let mut at = f64::INFINITY;
        let legs = self.owner_legs(owner);
        match owner {
            Owner::Work(serializer, work) => {
                let serial = self.serializers.get(serializer as usize)?;
                let found = serial.core.payload(work)?;
                at = at.min(found.pace_at());
                // Told it may start, a work keeps its own timer until it starts: the timer of
                // another call may have told it (its pace came there first), and on Workers
                // what that posts reaches it by a reaction workerd does not wait for — its own
                // request, its timer spent, would be cancelled as hung before it started.
                if self.config.contexts_end && !serial.core.has_started(work) {
                    at = at.min(found.ready_at + START_GRACE_MS);
                }
                if let Some(deadline) = serial.core.deadline_of(work) {
                    at = at.min(deadline);
                }
                let line = serial.core.line_of(work)?;
                if serial.core.first_unstarted(line) == Some(work) {
                    if let Some(ahead) = self.earliest_ahead(serializer, line) {
                        at = at.min(ahead);
                    }
                    let now = self.last.mono;
                    if let Some(paced) = self
                        .serializers
                        .get_mut(serializer as usize)
                        .and_then(|serial| serial.core.paced_until(line, now))
                    {
                        at = at.min(paced);
                    }
                } else if self.config.contexts_end {
                    if let Some(ahead) = self.ahead_waits_until(serializer, work) {
                        at = at.min(ahead);
                    }
                }
            }
            Owner::Call(_) if !LOCKS => return None,
            Owner::Call(call) => {
                self.calls.get(call)?;
            }
        }
        for leg in legs {
            if let Some(found) = self.legs.get(leg) {
                at = at.min(found.renew_at).min(found.end_at);
                at = at.min(match found.run {
                    locking::Run::Call(op) => {
                        self.ops.get(op).map_or(f64::INFINITY, |op| op.bound_at)
                    }
                    locking::Run::Sleep(until)
                    | locking::Run::Pause(until)
                    | locking::Run::Wait(until) => until,
                    locking::Run::Watch(_, until) => until,
                    locking::Run::Idle => f64::INFINITY,
                });
            }
        }
        at.is_finite().then_some(at)
    }
}

/// Whether a timer entry still stands: the op still in flight with that bound; the leg still in
/// that sleep, wait or watch, or with that renewal or lease end to come.
fn timer_live<H>(
    ops: &Slab<Op>,
    legs: &Slab<Leg<H>>,
    serializers: &[Serial<H>],
    (at, timer): (f64, Timer),
) -> bool {
    match timer {
        Timer::Orphan(serializer, work) => serializers
            .get(serializer as usize)
            .and_then(|serial| serial.core.payload(work))
            .is_some_and(|found| found.orphan_at == at),
        Timer::Op(op) => ops.get(op).is_some_and(|op| op.bound_at == at),
        Timer::Leg(leg) => legs.get(leg).is_some_and(|leg| match leg.run {
            locking::Run::Sleep(until) | locking::Run::Pause(until) | locking::Run::Wait(until) => {
                until == at
            }
            locking::Run::Watch(_, until) => until == at,
            _ => false,
        }),
        Timer::Renew(leg) => legs.get(leg).is_some_and(|leg| leg.renew_at == at),
        Timer::LeaseEnd(leg) => legs.get(leg).is_some_and(|leg| leg.end_at == at),
        Timer::Paced(..) => true,
    }
}
