//! The serializer in the engine: each serializer's busy keys (its key → line map) and their lines
//! of works ([`SerializerCore`]'s), when works start and end, their deadlines — and, over a store,
//! each turn's lease: taken before its work is called (one of the key's N slots), renewed while it
//! runs, let go before its caller hears when nothing of its key waits, kept for the key's next
//! turn otherwise ([`Turns`]'s rules).

use std::rc::Rc;

use super::asks::Asks;
use super::effect::StoreCall;
use super::effect::{Effect, Outcome, Why};
use super::key::validate_key;
use super::key::SERIALIZE_PREFIX;
use super::keymap::KeyMap;
use super::leases::Answer;
use super::leases::{Now, Refusal};
use super::locking::Holder;
use super::locking::Op;
use super::options::{Coalesce, LockOptions, OptionError, Rate, SerializerOptions};
use super::pace_record::PACE_PREFIX;
use super::queue::{LineId, Ticket};
use super::random::Random;
use super::record::encode_ours;
use super::turns::Turns;
use super::works::{Abandon, EnqueueError, GaveUp, Released, SerializerCore, Stats};
use super::{Engine, Owner};

/// One serializer: its lines, and with a store the leases its turns leave.
pub(crate) struct Serial<H> {
    pub(crate) core: SerializerCore<Work<H>>,
    /// Busy keys and their lines.
    pub(crate) index: KeyMap,
    /// With a store: the rules of its turns' leases, and the leases kept between turns.
    pub(crate) turns: Option<Turns<Ticket>>,
    /// With a store and a rate: the pace, held to the starts its key's record carries (see
    /// `crate::engine::starts`) — its core keeps none.
    pub(crate) rate: Option<Rate>,
    /// Works holding their key's lease until the record's pace lets them start, counted until
    /// their timer fires (what keeps the host alive meanwhile).
    pub(crate) pacing: usize,
    /// Works that waited for the record's pace, and calls it refused (`if_available`).
    paced: u64,
    unavailable: u64,
    /// Where contexts end (Workers) without a store, unless one isolate was said to be meant:
    /// its host says once that the order holds in this isolate only.
    pub(crate) one_isolate: bool,
}

/// What the engine keeps of a work besides its place in line: what every work needs, and
/// apart what only a work over a store does — a serializer queues up to millions of works, and
/// each byte here is one more per work, first touched while a burst is queued.
pub(crate) struct Work<H> {
    pub(crate) handle: H,
    /// With a timer per call: when its timer is armed for (∞: none).
    pub(crate) armed: f64,
    /// Abandoned: when it leaves its line if its caller has not said it heard (∞: not
    /// abandoned).
    pub(crate) orphan_at: f64,
    /// Where contexts end: when its host was told it may start ([`Effect::Ready`]); ∞ until
    /// then, and again once it waits for its pace instead. Read only while it has not started.
    pub(crate) ready_at: f64,
    /// With a store: its turn's lease (`None` without one).
    pub(crate) lease: Option<Box<TurnLease>>,
}

/// What a work of a serializer over a store keeps of its turn's lease.
pub(crate) struct TurnLease {
    /// The leg taking, then holding, its turn's lease (or its race).
    pub(crate) leg: Option<Ticket>,
    pub(crate) race: Option<Ticket>,
    /// Its lease is held and its work called: its outcome is reported ([`Engine::settled`]).
    pub(crate) called: bool,
    /// With a rate: holding its key's lease, it is called then, when the starts the record
    /// carries allow (∞ otherwise).
    pub(crate) pace_at: f64,
    /// It asked to start at once (`if_available`): a lease held in another isolate, or a
    /// record's pace that allows no start yet, refuses it ([`Outcome::NotYet`]) rather than
    /// holding it.
    pub(crate) if_available: bool,
}

impl TurnLease {
    /// A work's, before its turn: no leg, no race, not called, no pace to wait for.
    fn new(if_available: bool) -> Box<Self> {
        Box::new(TurnLease {
            leg: None,
            race: None,
            called: false,
            pace_at: f64::INFINITY,
            if_available,
        })
    }
}

impl<H> Work<H> {
    /// The leg taking or holding its turn's lease, if any.
    pub(crate) fn leg(&self) -> Option<Ticket> {
        self.lease.as_ref().and_then(|lease| lease.leg)
    }

    /// The race for its turn's lease, if any.
    pub(crate) fn race(&self) -> Option<Ticket> {
        self.lease.as_ref().and_then(|lease| lease.race)
    }

    /// Whether its lease is held and its work called.
    pub(crate) fn called(&self) -> bool {
        self.lease.as_ref().is_some_and(|lease| lease.called)
    }

    /// Whether it asked to start at once, over a store.
    pub(crate) fn if_available(&self) -> bool {
        self.lease.as_ref().is_some_and(|lease| lease.if_available)
    }

    /// When it is called, holding its lease, by the pace its record carries (∞: it waits for
    /// no such pace).
    pub(crate) fn pace_at(&self) -> f64 {
        self.lease
            .as_ref()
            .map_or(f64::INFINITY, |lease| lease.pace_at)
    }
}

/// How long after its deadline an abandoned work whose caller has not said it heard leaves its
/// line, where contexts end: its own context handles its deadline first when it is alive
/// (its timer fires at the deadline itself, the next work's this long after), so the work's
/// future is dropped before the next work starts; when its caller's context is gone, the next
/// work's own timer moves the key on.
pub const ORPHAN_MS: f64 = 1.0;

/// Where contexts end: how long a work whose turn came may take to start. Its host starts it
/// from its caller's own context, a moment after it is told; a caller's context that ended (a
/// request that answered without awaiting its call) never does, and the work behind it gives it
/// up this long after — never a live one, whose start comes within microtasks unless its
/// isolate is busy for longer than this.
pub const START_GRACE_MS: f64 = 1000.0;

/// The work right behind `work` in its line.
fn serial_next<V, H: Copy + PartialEq, const LOCKS: bool>(
    engine: &Engine<V, H, LOCKS>,
    serializer: u32,
    work: Ticket,
) -> Option<Ticket> {
    engine
        .serializers
        .get(serializer as usize)?
        .core
        .next_in_line(work)
}

/// How a call entered a serializer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Entered<H> {
    /// Its work was queued: its ticket.
    Queued(Ticket),
    /// It joined the key's last work (see [`Coalesce`]): that work's ticket and host handle.
    Joined(Ticket, H),
}

impl<V: Clone + PartialEq, H: Copy + PartialEq, const LOCKS: bool> Engine<V, H, LOCKS> {
    /// Adds a serializer with `options`; with `lease`, its turns hold the key's lease in the
    /// store (the lock named [`SERIALIZE_PREFIX`] + key), taken as many at a time as the
    /// serializer's concurrency, whatever `lease` says. Its number, for the calls below.
    ///
    /// # Errors
    /// A lease option out of range.
    pub fn add_serializer(
        &mut self,
        options: SerializerOptions,
        lease: Option<LockOptions>,
    ) -> Result<u32, OptionError> {
        self.add_scoped_serializer(options, lease, false)
    }

    /// [`add_serializer`](Self::add_serializer), where `isolate` says whether its caller meant
    /// one isolate (the package's `scope: 'isolate'`): a serializer without a store where
    /// contexts end (Workers, whose deployments run many isolates) is one the host warns of
    /// ([`warns_one_isolate`](Self::warns_one_isolate)) unless it was.
    ///
    /// # Errors
    /// As `add_serializer`'s; `isolate` with a lease ([`OptionError::ScopeOverStore`]).
    pub fn add_scoped_serializer(
        &mut self,
        options: SerializerOptions,
        lease: Option<LockOptions>,
        isolate: bool,
    ) -> Result<u32, OptionError> {
        if isolate && lease.is_some() {
            return Err(OptionError::ScopeOverStore);
        }
        if !LOCKS && lease.is_some() {
            // (Never asked of an engine without locks: its host has no store.)
            return Err(OptionError::StaleMs(0.0));
        }
        // Over a store the pace is the record's, decided when a turn holds the lease.
        let rate = options.rate().filter(|_| lease.is_some());
        let options = options.paced_by(options.rate().filter(|_| rate.is_none()));
        // N at a time: each turn holds one of the key's N slots, in every isolate.
        let lease = lease.map(|lease| lease.with_concurrency(options.concurrency() as f64));
        let turns = lease.map(Turns::new).transpose()?;
        let calls_at_start = turns.is_none();
        let one_isolate = turns.is_none() && self.config.contexts_end && !isolate;
        self.serializers.push(Serial {
            core: SerializerCore::new(options, true, calls_at_start),
            index: KeyMap::default(),
            turns,
            rate,
            pacing: 0,
            paced: 0,
            unavailable: 0,
            one_isolate,
        });
        Ok(self.serializers.len() as u32 - 1)
    }

    /// Whether serializer `serializer` orders its keys in this isolate only where a deployment
    /// runs many (no store, contexts end) without its caller having said one isolate is meant:
    /// then its host says so once.
    pub fn warns_one_isolate(&self, serializer: u32) -> bool {
        self.serializers
            .get(serializer as usize)
            .is_some_and(|serial| serial.one_isolate)
    }

    /// A call of serializer `serializer` for `key`, with its own deadline (`None`: the
    /// serializer's) and coalescing as `coalesce` says, for the host's `handle`. Its work's
    /// turn may come at once ([`Effect::Ready`] or [`Effect::Start`]). With `if_available`, it
    /// is queued only if its work can start at once.
    ///
    /// # Errors
    /// A bad key or deadline, a key at `maxPending`, too many works, or with `if_available` a
    /// work that could not start at once: nothing was queued.
    #[allow(clippy::too_many_arguments)]
    pub fn enter(
        &mut self,
        serializer: u32,
        key: &str,
        handle: H,
        timeout_ms: Option<f64>,
        coalesce: Coalesce,
        if_available: bool,
        now: Now,
    ) -> Result<Entered<H>, EnqueueError> {
        self.set_now(now);
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return Err(EnqueueError::IdleLine);
        };
        let work = Work {
            handle,
            armed: f64::INFINITY,
            orphan_at: f64::INFINITY,
            ready_at: f64::INFINITY,
            lease: serial.turns.is_some().then(|| TurnLease::new(if_available)),
        };
        let line = match serial.index.get(key) {
            Some(&line) => LineId(line),
            None => {
                validate_key(key).map_err(EnqueueError::InvalidKey)?;
                let timeout_ms = serial.core.timeout_given(timeout_ms)?;
                if if_available {
                    serial.core.available(key, None, now.mono)?;
                }
                // One copy of the key, for the line and the index.
                let key: Rc<str> = Rc::from(key);
                let pushed = serial
                    .core
                    .open_key(key.clone(), work, timeout_ms, coalesce)?;
                serial.index.insert(key, pushed.line.0);
                self.turn_came(serializer, pushed.line);
                return Ok(Entered::Queued(pushed.ticket));
            }
        };
        // (The deadline is checked once, here: joining and queueing take it as it is.)
        let timeout_ms = serial.core.timeout_given(timeout_ms)?;
        if if_available {
            // (Never a join: a work that can start at once has nothing unstarted ahead of it.)
            serial.core.available(key, Some(line), now.mono)?;
        }
        if let Some(joined) = serial.core.join_at(line, &coalesce, timeout_ms) {
            let handle = serial.core.payload(joined).map(|work| work.handle);
            if let Some(handle) = handle {
                return Ok(Entered::Joined(joined, handle));
            }
        }
        let ticket = serial.core.enqueue_at(line, work, timeout_ms, coalesce)?;
        if serial.core.turn_has_come(ticket) {
            self.turn_came(serializer, line);
        } else {
            self.arm_next(serializer, line);
        }
        if self.config.contexts_end && self.watches_on_entry(serializer, line, ticket) {
            self.watch_ahead(serializer, ticket);
        }
        Ok(Entered::Queued(ticket))
    }

    /// Starts line `line`'s next work, if its turn has come ([`Effect::Ready`] said it may).
    pub fn start(&mut self, serializer: u32, line: LineId, now: Now, random: &impl Random) {
        let ticket = self
            .serializers
            .get(serializer as usize)
            .and_then(|serial| serial.core.startable(line));
        if let Some(ticket) = ticket {
            self.start_work(serializer, ticket, now, random);
        }
    }

    /// Starts the work `work` if it may start now: its turn has come, every work ahead of it
    /// started, and its key's pace allows. Whether it did ([`Effect::Start`] follows, or its lease is taken first).
    pub fn start_work(
        &mut self,
        serializer: u32,
        work: Ticket,
        now: Now,
        random: &impl Random,
    ) -> bool {
        self.set_now(now);
        let may = self
            .serializers
            .get(serializer as usize)
            .is_some_and(|serial| serial.core.may_start(work));
        if !may {
            return false;
        }
        let handle = self.work_handle(serializer, work);
        self.acting(handle);
        let began = self.begin(serializer, work, now, random);
        self.drain(now, random);
        self.acting(None);
        began
    }

    /// A paced serializer's host called work `work` at `now`: its start is timed then, if later
    /// than when the engine started it — what ran between the two (a garbage collection, an
    /// executor polling other tasks first) must not open the key's next window early. Without a
    /// `rate`, nothing.
    pub fn work_called(&mut self, serializer: u32, work: Ticket, now: Now) {
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return;
        };
        serial.core.restamp_start(work, now.mono);
        let by_lease = LOCKS && serial.rate.is_some() && serial.core.options().concurrency() <= 1;
        let leg = serial.core.payload(work).and_then(Work::leg);
        if let Some(lease) = leg.filter(|_| by_lease).and_then(|leg| self.legs.get(leg)) {
            self.locks.restamp_start(lease.ticket, now.wall);
        }
    }

    /// The work `work`'s caller heard how it ended (its promise's handlers ran; its future
    /// returned or was dropped): it leaves its line, and the next work's turn may come. Its
    /// host handle, which the engine names no more; `None` for a work that left already (or
    /// one that never started: its caller gave up, and `cancel` took it out).
    pub fn done(
        &mut self,
        serializer: u32,
        work: Ticket,
        now: Now,
        random: &impl Random,
    ) -> Option<H> {
        self.set_now(now);
        let serial = self.serializers.get_mut(serializer as usize)?;
        if serial.core.is_waiting(work) {
            return None;
        }
        let handle = serial.core.payload(work).map(|found| found.handle)?;
        self.acting(Some(handle));
        self.finish_work(serializer, work, now, random);
        self.drain(now, random);
        self.acting(None);
        Some(handle)
    }

    /// [`done`](Self::done) for the head of `line` (one work of a key at a time: the work whose
    /// caller heard is its line's head).
    pub fn done_head(
        &mut self,
        serializer: u32,
        line: LineId,
        now: Now,
        random: &impl Random,
    ) -> Option<H> {
        let head = self.serializers.get(serializer as usize)?.core.head(line)?;
        self.done(serializer, head, now, random)
    }

    /// The running work `work` settled (a work started with `report`): its caller is told
    /// ([`Effect::Settle`] with [`Outcome::Done`]) — once its lease is let go, when nothing of
    /// its key waits to use it.
    pub fn settled(&mut self, serializer: u32, work: Ticket, now: Now, random: &impl Random) {
        self.set_now(now);
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return;
        };
        if serial.core.is_abandoned(work) {
            return; // its caller was told at its deadline
        }
        let line = serial.core.line_of(work);
        let pending = line.map_or(0, |line| serial.core.pending_in(line));
        let waiting = line.is_some_and(|line| serial.core.waiting_in(line));
        let Some(found) = serial.core.payload_mut(work) else {
            return;
        };
        let handle = found.handle;
        // Nothing of its key here will take its lease: let go before its caller hears.
        let first = found.lease.as_deref_mut().and_then(|lease| {
            lease
                .leg
                .take_if(|_| LOCKS && Turns::<()>::settled(pending, waiting, false))
        });
        self.acting(Some(handle));
        match first {
            Some(leg) => {
                if let Some(found) = self.legs.get_mut(leg) {
                    found.tell = Some(handle);
                }
                self.release_leg(leg, None, 0, now, random);
            }
            None => self.effects.push_back(Effect::Settle {
                handle,
                outcome: Outcome::Done,
            }),
        }
        self.drain(now, random);
        self.acting(None);
    }

    /// The caller of work `work` gave up on it (its signal; for a coalescing work, its last
    /// caller): a waiting work leaves its line and its caller is told [`Outcome::Aborted`]; a
    /// running one is abandoned ([`Effect::Abort`], then the same).
    pub fn cancel(&mut self, serializer: u32, work: Ticket, now: Now, random: &impl Random) {
        self.give_up_work(
            serializer,
            work,
            Outcome::Aborted,
            Why::Aborted,
            now,
            random,
        );
    }

    /// Work `work` is given up on: taken out of its line if it waits, abandoned if it runs (its
    /// signal aborts, `why`); its caller is told `outcome`.
    pub(crate) fn give_up_work(
        &mut self,
        serializer: u32,
        work: Ticket,
        outcome: Outcome,
        why: Why,
        now: Now,
        random: &impl Random,
    ) {
        self.set_now(now);
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return;
        };
        let Some(found) = serial.core.payload(work) else {
            return;
        };
        let (handle, leg, race) = (found.handle, found.leg(), found.race());
        let line = serial.core.line_of(work);
        let key = line.and_then(|line| serial.core.key_of(line));
        let first = line.is_some_and(|line| serial.core.first_unstarted(line) == Some(work));
        self.acting = Some(handle);
        match serial.core.give_up(work) {
            GaveUp::Left(released) => {
                self.effects.push_back(Effect::Settle { handle, outcome });
                if let (Some(line), Some(key)) = (line, key) {
                    self.line_moved(serializer, line, &key, &released, now, random);
                    // The first work not started left: the one behind it, whose turn came
                    // already (N at a time, no turn came now), may start in its place.
                    if first && !released.idle && released.next.is_none() {
                        self.turn_came(serializer, line);
                    }
                }
            }
            GaveUp::Abandoned => {
                // Given up on before its host heard it start (a refused timer): it never runs,
                // and its `Start` becomes its `Settle`, in its place. (Forgotten, not dropped:
                // a `Start` owns nothing, and no effect's drop code comes along.)
                let unheard = self.effects.iter_mut().find(
                    |effect| matches!(effect, Effect::Start { handle: h, .. } if *h == handle),
                );
                match unheard {
                    Some(start) => core::mem::forget(core::mem::replace(
                        start,
                        Effect::Settle { handle, outcome },
                    )),
                    None => {
                        self.effects.push_back(Effect::Abort { handle, why });
                        self.effects.push_back(Effect::Settle { handle, outcome });
                    }
                }
                self.abandoned(serializer, work, leg, race, now, random);
            }
            GaveUp::Nothing => {}
        }
        self.drain(now, random);
        self.acting(None);
    }

    /// One caller of coalescing work `work` left it: `true` while others remain (the work goes
    /// on for them); when it was the last, the work is cancelled ([`cancel`](Self::cancel)).
    pub fn leave(&mut self, serializer: u32, work: Ticket, now: Now, random: &impl Random) -> bool {
        let others = self
            .serializers
            .get_mut(serializer as usize)
            .is_some_and(|serial| serial.core.leave(work));
        if !others {
            self.cancel(serializer, work, now, random);
        }
        others
    }

    /// An abandoned work of serializer `serializer` settled after all.
    pub fn late_settled(&mut self, serializer: u32) {
        if let Some(serial) = self.serializers.get_mut(serializer as usize) {
            serial.core.late_settled();
        }
    }

    /// Works of `key` queued or running (what `maxPending` bounds); 0 for an idle key.
    pub fn pending(&self, serializer: u32, key: &str) -> usize {
        self.serializers
            .get(serializer as usize)
            .and_then(|serial| {
                let line = serial.index.get(key)?;
                Some(serial.core.pending_in(LineId(*line)))
            })
            .unwrap_or(0)
    }

    /// Keys of serializer `serializer` with queued or running work.
    pub fn keys(&self, serializer: u32) -> usize {
        self.serializers
            .get(serializer as usize)
            .map_or(0, |serial| serial.core.keys())
    }

    /// Counters since the serializer was made, and what is live now.
    pub fn stats(&self, serializer: u32) -> Stats {
        self.serializers
            .get(serializer as usize)
            .map(|serial| {
                let stats = serial.core.stats();
                Stats {
                    paced: stats.paced + serial.paced,
                    unavailable: stats.unavailable + serial.unavailable,
                    ..stats
                }
            })
            .unwrap_or_default()
    }

    /// A serializer's options.
    pub fn options(&self, serializer: u32) -> SerializerOptions {
        self.serializers
            .get(serializer as usize)
            .map(|serial| match serial.rate {
                Some(rate) => serial.core.options().paced_by(Some(rate)),
                None => serial.core.options(),
            })
            .unwrap_or_default()
    }

    /// The deadline length of a work still in its line.
    pub fn timeout_of(&self, serializer: u32, work: Ticket) -> Option<f64> {
        self.serializers
            .get(serializer as usize)?
            .core
            .timeout_of(work)
    }

    /// The line a work waits or runs in.
    pub fn line_of(&self, serializer: u32, work: Ticket) -> Option<LineId> {
        self.serializers
            .get(serializer as usize)?
            .core
            .line_of(work)
    }

    /// The handle of the work right ahead of `work` while `work` waits: where contexts end
    /// (Workers), a waiting work's caller keeps its request alive on that work's promise.
    pub fn ahead(&self, serializer: u32, work: Ticket) -> Option<H> {
        let core = &self.serializers.get(serializer as usize)?.core;
        let ahead = core.ahead_of(work).filter(|_| core.is_waiting(work))?;
        core.payload(ahead).map(|found| found.handle)
    }

    /// The live work a packed ticket names.
    #[inline]
    pub fn work(&self, serializer: u32, packed: f64) -> Option<Ticket> {
        self.serializers
            .get(serializer as usize)?
            .core
            .unpack(packed)
    }

    // ---- inside ----

    pub(crate) fn work_handle(&self, serializer: u32, work: Ticket) -> Option<H> {
        let serial = self.serializers.get(serializer as usize)?;
        serial.core.payload(work).map(|found| found.handle)
    }

    /// Line `line`'s next work may start: its host is told — unless it must wait for its
    /// key's pace.
    pub(crate) fn turn_came(&mut self, serializer: u32, line: LineId) {
        let Some(serial) = self.serializers.get(serializer as usize) else {
            return;
        };
        let next = serial.core.startable(line);
        if let Some(handle) = next
            .and_then(|next| serial.core.payload(next))
            .map(|w| w.handle)
        {
            if self.paced(serializer, line) {
                return;
            }
            self.effects.push_back(Effect::Ready {
                serializer,
                line,
                handle,
            });
            if self.config.contexts_end {
                self.told_ready(serializer, line);
            }
        }
    }

    /// Where contexts end: line `line`'s next work was told it may start now; the work behind
    /// it watches that it does ([`START_GRACE_MS`]).
    fn told_ready(&mut self, serializer: u32, line: LineId) {
        let now = self.last.mono;
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return;
        };
        let Some(next) = serial.core.first_unstarted(line) else {
            return;
        };
        if let Some(found) = serial.core.payload_mut(next) {
            if !found.ready_at.is_finite() {
                found.ready_at = now;
            }
        }
        // The work behind it watches, and so does the line's last (its newest call, the one
        // likeliest alive): a work between them whose context ended too cannot hold the line.
        let (behind, last) = (
            serial.core.next_in_line(next),
            serial.core.last_in_line(line),
        );
        if let Some(behind) = behind {
            self.watch_ahead(serializer, behind);
        }
        if let Some(last) = last.filter(|&last| Some(last) != behind) {
            self.watch_ahead(serializer, last);
        }
    }

    /// Where contexts end: whether a work just queued keeps a timer for the line's first work
    /// not started — when it waits right behind it. (Not every call behind a work that did not
    /// start at once: a burst of calls in one request would ask a timer each, past workerd's
    /// 10 000.)
    fn watches_on_entry(&self, serializer: u32, line: LineId, work: Ticket) -> bool {
        let Some(serial) = self.serializers.get(serializer as usize) else {
            return false;
        };
        let Some(first) = serial.core.first_unstarted(line) else {
            return false;
        };
        first != work && serial.core.ahead_of(work) == Some(first)
    }

    /// Where contexts end: work `work`, waiting behind its line's first work not started, keeps
    /// a timer for what that one waits on ([`ahead_waits_until`](Self::ahead_waits_until)), so
    /// that a work whose caller's context ended cannot hold the line. Armed for no later than
    /// [`START_GRACE_MS`] from now: the work it watches is told it may start as a rule sooner
    /// than that, and its start is then watched until [`START_GRACE_MS`] after — by a timer set
    /// for a later time, cleared and armed again (on Workers, posted to the watcher's request);
    /// one armed this way stands. Fired before what it watches is due, it is armed again for
    /// that ([`fired`](Self::fired)).
    pub(crate) fn watch_ahead(&mut self, serializer: u32, work: Ticket) {
        if !(self.config.timer_per_call && self.config.contexts_end) {
            return;
        }
        if let Some(at) = self.ahead_waits_until(serializer, work) {
            let soon = self.last.mono + START_GRACE_MS;
            self.arm(Owner::Work(serializer, work), at.min(soon));
        }
    }

    /// When the line's first work not started — ahead of `work`, its own timer perhaps ended
    /// with its caller's context — next needs the engine: once it was told it may start, the
    /// start overdue by [`START_GRACE_MS`] (any work behind it watches that); else, for the work
    /// right behind it, its pace or the deadline of a work running ahead (what its own timer
    /// watches, [`arm_next`](Self::arm_next)), each [`ORPHAN_MS`] later so that a live caller
    /// handles its own first — or workerd may cancel its request as hung (see
    /// [`earliest_ahead`](Self::earliest_ahead)).
    pub(crate) fn ahead_waits_until(&mut self, serializer: u32, work: Ticket) -> Option<f64> {
        let now = self.last.mono;
        let serial = self.serializers.get_mut(serializer as usize)?;
        let line = serial.core.line_of(work)?;
        let first = serial.core.first_unstarted(line)?;
        if first == work || serial.core.has_started(work) {
            return None;
        }
        let ready_at = serial.core.payload(first)?.ready_at;
        if ready_at.is_finite() {
            return Some(ready_at + START_GRACE_MS);
        }
        if serial.core.ahead_of(work) != Some(first) {
            return None;
        }
        let paced = serial.core.paced_until(line, now).map(|at| at + ORPHAN_MS);
        let running = self.earliest_ahead(serializer, line);
        match (paced, running) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Where contexts end: line `line`'s first work not started, told it may start
    /// [`START_GRACE_MS`] ago or more, never did — its caller's context ended — and is given up
    /// ([`Outcome::NeverStarted`]): the line moves on.
    pub(crate) fn start_overdue(
        &mut self,
        serializer: u32,
        line: LineId,
        now: Now,
        random: &impl Random,
    ) {
        let overdue = self
            .serializers
            .get(serializer as usize)
            .and_then(|serial| {
                let next = serial.core.first_unstarted(line)?;
                let ready_at = serial.core.payload(next)?.ready_at;
                (ready_at + START_GRACE_MS <= now.mono).then_some(next)
            });
        if let Some(next) = overdue {
            self.give_up_work(
                serializer,
                next,
                Outcome::NeverStarted,
                Why::Aborted,
                now,
                random,
            );
        }
    }

    /// Whether `line`'s next work must wait for its key's pace: then it is noted, and its
    /// timer (or the one for all) is armed for when the pace allows.
    fn paced(&mut self, serializer: u32, line: LineId) -> bool {
        let now = self.last.mono;
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return false;
        };
        let Some(at) = serial.core.paced_until(line, now) else {
            return false;
        };
        serial.core.wait_for_pace(line, at);
        if let Some(next) = serial.core.first_unstarted(line) {
            // Told it may start before (N at a time), it now waits for its pace instead.
            if let Some(found) = serial.core.payload_mut(next) {
                found.ready_at = f64::INFINITY;
            }
            self.arm(Owner::Work(serializer, next), at);
            if let Some(behind) = serial_next(self, serializer, next) {
                self.watch_ahead(serializer, behind);
            }
        }
        true
    }

    /// Starts work `ticket`: its deadline runs from now. Without a store its work is called;
    /// with one, its turn's lease is taken first. The line's next work may start too (N at a
    /// time). Whether it started: not when its key's pace holds it back.
    fn begin(&mut self, serializer: u32, ticket: Ticket, now: Now, random: &impl Random) -> bool {
        let paced_line = self
            .serializers
            .get(serializer as usize)
            .filter(|serial| serial.core.has_pace())
            .and_then(|serial| serial.core.line_of(ticket));
        if paced_line.is_some_and(|line| self.paced(serializer, line)) {
            return false;
        }
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return false;
        };
        let Some(started) = serial.core.start(ticket, now.mono) else {
            return false;
        };
        let (handle, deadline, slot, timeout_ms) = (
            started.payload.handle,
            started.deadline,
            started.slot,
            started.timeout_ms,
        );
        let line = serial.core.line_of(ticket);
        self.arm(Owner::Work(serializer, ticket), deadline);
        if let Some(line) = line {
            self.arm_next(serializer, line);
            self.turn_came(serializer, line);
        }
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return true;
        };
        let at_once = serial.core.payload(ticket).is_some_and(Work::if_available);
        let (Some(turns), Some(line), true) = (serial.turns.as_mut(), line, LOCKS) else {
            self.effects.push_back(Effect::Start {
                handle,
                slot,
                fence: 0,
                deadline,
                report: false,
            });
            return true;
        };
        let pending = serial.core.pending_in(line);
        let mut begin = turns.begin(line.0, pending, timeout_ms);
        if at_once {
            // One look at the record: a lease held in another isolate refuses it, as a work
            // ahead of it here does.
            begin.options.wait_ms = 0.0;
        }
        let key = serial.core.key_of(line).unwrap_or_default();
        // Not `format!`: the formatting machinery would be the module's only use of it.
        let name = [SERIALIZE_PREFIX, &key].concat();
        let n = begin.options.slots();
        let holder = Holder::Turn {
            serializer,
            work: ticket,
        };
        let streak_ms = begin.succession.streak_ms;
        // The slot the turn before left is handed on as a one-slot name's lease is; with none
        // left at N > 1, any slot.
        let hand_on_slot = begin
            .hand_on
            .and_then(|leg| self.legs.get(leg))
            .map(|leg| leg.slot);
        let opened = match (n, hand_on_slot) {
            (1, _) => self
                .open_leg(holder, &name, 0, begin.options, streak_ms, now, random)
                .map(|leg| (Some(leg), None)),
            (_, Some(slot)) => self
                .open_leg(holder, &name, slot, begin.options, streak_ms, now, random)
                .map(|leg| (Some(leg), None)),
            _ => self
                .open_race(holder, &name, begin.options, streak_ms, now, random)
                .map(|race| (None, Some(race))),
        };
        match opened {
            Ok((leg, race)) => {
                if let Some(lease) = self
                    .serializers
                    .get_mut(serializer as usize)
                    .and_then(|serial| serial.core.payload_mut(ticket))
                    .and_then(|found| found.lease.as_deref_mut())
                    .filter(|lease| !lease.called)
                {
                    if lease.leg.is_none() {
                        lease.leg = leg.filter(|leg| self.legs.get(*leg).is_some());
                    }
                    if lease.race.is_none() {
                        lease.race = race.filter(|race| self.races.get(*race).is_some());
                    }
                }
            }
            Err(refusal) => {
                let outcome = match refusal {
                    Refusal::ConcurrencyMismatch { found, .. } => Outcome::Mismatch { found },
                    _ => Outcome::StoreFailed,
                };
                self.turn_not_held(serializer, ticket, outcome, now, random);
            }
        }
        // Released once this turn's acquisition is in line: the lease passes to it with no
        // store call.
        if let Some(previous) = begin.hand_on {
            self.release_leg(previous, None, begin.succession.followers, now, random);
        }
        true
    }

    /// A turn's lease is held: its work is called, its lease renewed while it runs.
    pub(crate) fn turn_held(
        &mut self,
        serializer: u32,
        work: Ticket,
        leg: Ticket,
        now: Now,
        random: &impl Random,
    ) {
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            self.give_back(leg, now, random);
            return;
        };
        let running = serial.core.has_started(work) && !serial.core.is_abandoned(work);
        let Some(lease) = serial
            .core
            .payload_mut(work)
            .filter(|_| running)
            .and_then(|found| found.lease.as_deref_mut())
        else {
            // Abandoned meanwhile: nobody here is left to hand it to.
            self.give_back(leg, now, random);
            return;
        };
        lease.leg = Some(leg);
        lease.race = None;
        let if_available = lease.if_available;
        if let Some(rate) = serial.rate {
            let by_lease = serial.core.options().concurrency() <= 1;
            // Held while its pace is looked at, waited for or written: renewed meanwhile.
            self.keep_turn_renewed(leg, now);
            // Paced across isolates: at N = 1 by the starts the lease's record carries (and this
            // isolate's since), at N > 1 by the key's pace record.
            let lease = self.legs.get(leg).map(|found| found.ticket);
            let next = if by_lease {
                lease
                    .and_then(|lease| self.locks.starts(lease))
                    .map_or(f64::NEG_INFINITY, |starts| {
                        starts.next_start(rate.limit, rate.period_ms)
                    })
            } else {
                match self.pace_by_record(serializer, work, rate, now) {
                    Some(next) => next,
                    // Its start is being written, or it waits for this isolate's call on the
                    // record: `pace_answered` goes on.
                    None => return,
                }
            };
            if next > now.wall && if_available {
                if let Some(serial) = self.serializers.get_mut(serializer as usize) {
                    serial.unavailable += 1;
                }
                let outcome = Outcome::NotYet {
                    retry_after_ms: Some(next - now.wall),
                };
                self.give_up_work(serializer, work, outcome, Why::Aborted, now, random);
                return;
            }
            if next > now.wall {
                self.hold_for_pace(serializer, work, now.mono + (next - now.wall));
                return;
            }
            if !by_lease {
                self.write_start(serializer, work, rate, now);
                return;
            }
            if let Some(lease) = lease {
                self.locks.started(lease, now.wall, rate.limit);
            }
        }
        self.call_turn(serializer, work, leg, now);
    }

    /// Work `work`, holding its key's lease (`leg`), is called: its host starts it.
    fn call_turn(&mut self, serializer: u32, work: Ticket, leg: Ticket, now: Now) {
        let view = self.held_view(leg);
        let Some(found) = self
            .serializers
            .get_mut(serializer as usize)
            .and_then(|serial| serial.core.payload_mut(work))
        else {
            return;
        };
        if let Some(lease) = found.lease.as_deref_mut() {
            lease.pace_at = f64::INFINITY;
            lease.called = true;
        }
        let armed = std::mem::replace(&mut found.armed, f64::INFINITY);
        let handle = found.handle;
        if let Some(serial) = self.serializers.get_mut(serializer as usize) {
            serial.core.called(work);
        }
        let deadline = self.work_deadline(serializer, work);
        self.effects.push_back(Effect::Start {
            handle,
            slot: view.slot,
            fence: view.fence,
            deadline,
            report: true,
        });
        self.keep_turn_renewed(leg, now);
        // Armed again as what it is now: a timer that keeps nothing alive.
        if armed.is_finite() {
            self.arm(super::Owner::Work(serializer, work), armed);
        }
    }

    /// At N > 1: when work `work` (holding its slot's lease) may start by its key's pace record
    /// as this isolate knows it (epoch milliseconds) — or `None` when the record must be read
    /// first (the read is sent) or this isolate's call on it is in flight (the work waits for
    /// it). See `pace_record.rs`.
    fn pace_by_record(
        &mut self,
        serializer: u32,
        work: Ticket,
        rate: Rate,
        now: Now,
    ) -> Option<f64> {
        let name = self.pace_name(serializer, work)?;
        let (name, record) = self.paces.get_or_add(&name)?;
        if record.busy {
            record.waiting.push_back((serializer, work));
            return None;
        }
        if record.known {
            return Some(record.starts.next_start(rate.limit, rate.period_ms));
        }
        record.busy = true;
        self.send_pace(serializer, work, name, StoreCall::Read, now);
        None
    }

    /// At N > 1: work `work` may start by its key's pace record: its start is written (a
    /// compare-and-set on the version known, or a create), and it is called once that took.
    fn write_start(&mut self, serializer: u32, work: Ticket, rate: Rate, now: Now) {
        let Some(name) = self.pace_name(serializer, work) else {
            return;
        };
        let Some((name, record)) = self.paces.get_or_add(&name) else {
            return;
        };
        let mut starts = record.starts.clone();
        starts.started(now.wall, rate.limit);
        let value = encode_ours(false, "", 1, now.wall, None, &Asks::default(), &starts, 1);
        record.writing = Some(starts.clone());
        record.busy = true;
        let call = match record.version.clone() {
            Some(version) => StoreCall::Replace { version, value },
            None => StoreCall::Create { value },
        };
        self.send_pace(serializer, work, name, call, now);
    }

    /// The name of the pace record of work `work`'s key.
    fn pace_name(&self, serializer: u32, work: Ticket) -> Option<String> {
        let core = &self.serializers.get(serializer as usize)?.core;
        let key = core.key_of(core.line_of(work)?)?;
        Some([PACE_PREFIX, &key].concat())
    }

    /// Sends a store call on a pace record for work `work`, bounded by its turns'
    /// `storeTimeoutMs`.
    fn send_pace(
        &mut self,
        serializer: u32,
        work: Ticket,
        key: Rc<str>,
        call: StoreCall<V>,
        now: Now,
    ) {
        let bound_ms = self
            .serializers
            .get(serializer as usize)
            .and_then(|serial| serial.turns.as_ref())
            .map_or(0.0, Turns::store_timeout);
        let bound_at = now.mono + bound_ms;
        let op = self.insert_op(Op {
            leg: None,
            guard: None,
            pace: Some((serializer, work, key.clone())),
            method: call.method(),
            sent: now,
            bound_ms,
            bound_at,
        });
        let owner = self.work_handle(serializer, work);
        self.effects.push_back(Effect::Store {
            op,
            owner,
            key,
            call,
        });
        self.push_timer(bound_at, super::Timer::Op(op));
        self.arm(super::Owner::Work(serializer, work), bound_at);
    }

    /// The store answered a call on work `work`'s pace record: what this isolate knows of the
    /// record is updated; a start that took is called; anything else decides again. A failed
    /// call fails the work (it never runs: its start may or may not be in the record). Then
    /// the turns that waited for the call decide again.
    pub(crate) fn pace_answered(
        &mut self,
        serializer: u32,
        work: Ticket,
        name: &str,
        answer: Answer<V>,
        now: Now,
        random: &impl Random,
    ) {
        let Some(record) = self.paces.get_mut(name) else {
            return;
        };
        record.busy = false;
        let written = record.writing.take();
        let mut took = false;
        let mut failed = false;
        match answer {
            Answer::Read(Some((version, found))) => {
                record.known = true;
                record.version = Some(version);
                // A record that is not ours is written over: it paces nothing.
                record.starts = found.map(|found| found.starts).unwrap_or_default();
            }
            Answer::Read(None) => {
                record.known = true;
                record.version = None;
                record.starts = Default::default();
            }
            Answer::Created(Some(version)) | Answer::Replaced(Some(version)) => {
                record.known = true;
                record.version = Some(version);
                record.starts = written.unwrap_or_default();
                took = true;
            }
            Answer::Created(None) | Answer::Replaced(None) => record.known = false,
            _ => {
                record.known = false;
                failed = true;
            }
        }
        let waiting: Vec<(u32, Ticket)> = record.waiting.drain(..).collect();
        self.pace_go_on(serializer, work, took, failed, now, random);
        for (serializer, work) in waiting {
            self.pace_go_on(serializer, work, false, false, now, random);
        }
    }

    /// Work `work`, waiting on its key's pace record, goes on: called when its start took,
    /// failed when the store did, else decides again — if it still holds its lease.
    fn pace_go_on(
        &mut self,
        serializer: u32,
        work: Ticket,
        took: bool,
        failed: bool,
        now: Now,
        random: &impl Random,
    ) {
        let leg = self
            .serializers
            .get(serializer as usize)
            .and_then(|serial| serial.core.payload(work))
            .filter(|found| !found.called())
            .and_then(Work::leg)
            .filter(|&leg| self.legs.get(leg).is_some_and(|leg| leg.held));
        let Some(leg) = leg else {
            return;
        };
        if failed {
            self.give_up_work(
                serializer,
                work,
                Outcome::StoreFailed,
                Why::Aborted,
                now,
                random,
            );
        } else if took {
            self.call_turn(serializer, work, leg, now);
        } else {
            self.turn_held(serializer, work, leg, now, random);
        }
    }

    /// Work `work` holds its key's lease, and the starts its record carries let it start at `at`
    /// (monotonic): it is called then, its deadline running from then, its lease kept renewed
    /// meanwhile. Nothing of its key starts in any isolate before it.
    fn hold_for_pace(&mut self, serializer: u32, work: Ticket, at: f64) {
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return;
        };
        serial.core.restart_deadline(work, at);
        let Some(lease) = serial
            .core
            .payload_mut(work)
            .and_then(|found| found.lease.as_deref_mut())
        else {
            return;
        };
        if !lease.pace_at.is_finite() {
            serial.paced += 1;
        }
        lease.pace_at = at;
        serial.pacing += 1;
        self.push_timer(at, super::Timer::Paced(serializer, work));
        self.arm(super::Owner::Work(serializer, work), at);
    }

    /// The record's pace may let work `work` start now: it starts if it still holds its lease
    /// and waits for nothing else ([`turn_held`](Self::turn_held) looks at the pace again).
    pub(crate) fn pace_held_due(
        &mut self,
        serializer: u32,
        work: Ticket,
        now: Now,
        random: &impl Random,
    ) {
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return;
        };
        serial.pacing = serial.pacing.saturating_sub(1);
        let due = serial
            .core
            .payload_mut(work)
            .and_then(|found| found.lease.as_deref_mut())
            .filter(|lease| lease.pace_at <= now.mono && !lease.called)
            .and_then(|lease| {
                // Its time came: it waits for it no more (what it waits for next, it says).
                lease.pace_at = f64::INFINITY;
                lease.leg
            });
        if let Some(leg) = due.filter(|&leg| self.legs.get(leg).is_some_and(|leg| leg.held)) {
            self.turn_held(serializer, work, leg, now, random);
        }
    }

    /// A turn's acquisition ended with nothing (`outcome`): its wait ran out (the work times
    /// out), or the store failed (the work fails with it).
    pub(crate) fn turn_not_held(
        &mut self,
        serializer: u32,
        work: Ticket,
        outcome: Outcome,
        now: Now,
        random: &impl Random,
    ) {
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return;
        };
        let Some(found) = serial.core.payload_mut(work) else {
            return;
        };
        if let Some(lease) = found.lease.as_deref_mut() {
            lease.leg = None;
            lease.race = None;
        }
        let (handle, at_once) = (found.handle, found.if_available());
        if serial.core.is_abandoned(work) || !serial.core.has_started(work) {
            return;
        }
        let outcome = match outcome {
            // Its one look found the lease held in another isolate: refused, with no time to
            // give — how long a work runs is not the engine's to know.
            Outcome::Unavailable if at_once => {
                serial.unavailable += 1;
                Outcome::NotYet {
                    retry_after_ms: None,
                }
            }
            Outcome::Unavailable => {
                // The wait ended on the lease's clock before the deadline's timer: the same end.
                self.expire_work(serializer, work, now, random);
                return;
            }
            outcome => outcome,
        };
        serial.core.abandon(work, Abandon::Failed);
        self.effects.push_back(Effect::Settle { handle, outcome });
        self.orphan_watch(serializer, work, now.mono);
    }

    /// A running work's deadline passed: abandoned, its signal aborted, its caller told.
    pub(crate) fn expire_work(
        &mut self,
        serializer: u32,
        work: Ticket,
        now: Now,
        random: &impl Random,
    ) {
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return;
        };
        let Some(found) = serial.core.payload(work) else {
            return;
        };
        let (handle, leg, race) = (found.handle, found.leg(), found.race());
        let timeout_ms = serial.core.timeout_of(work).unwrap_or_default();
        if !serial.core.abandon(work, Abandon::TimedOut) {
            return;
        }
        self.effects.push_back(Effect::Abort {
            handle,
            why: Why::TimedOut,
        });
        self.effects.push_back(Effect::Settle {
            handle,
            outcome: Outcome::TimedOut { timeout_ms },
        });
        self.abandoned(serializer, work, leg, race, now, random);
    }

    /// A work was abandoned (its deadline, its caller): its lease is let go at once — kept for
    /// the key's next turn here, or freed. It leaves its line once its caller heard
    /// ([`done`](Self::done)); where contexts end, at the latest [`ORPHAN_MS`] on, from the
    /// context of the work behind it — its caller's context may be gone, and with it whatever
    /// would have said so.
    fn abandoned(
        &mut self,
        serializer: u32,
        work: Ticket,
        leg: Option<Ticket>,
        race: Option<Ticket>,
        now: Now,
        random: &impl Random,
    ) {
        if let Some(race) = race.filter(|_| LOCKS) {
            self.end_race(race, now, random);
        }
        if let Some(leg) = leg.filter(|_| LOCKS) {
            if let Some(found) = self
                .serializers
                .get_mut(serializer as usize)
                .and_then(|serial| serial.core.payload_mut(work))
                .and_then(|found| found.lease.as_deref_mut())
            {
                found.leg = None;
            }
            let held = self.legs.get(leg).is_some_and(|found| {
                found.doing != super::locking::Doing::Acquiring
                    || self.locks.lease(found.ticket).is_some()
            });
            if held {
                self.keep_for_next(serializer, work, leg, now, random);
            } else {
                self.let_go(leg, now, random);
            }
        }
        self.orphan_watch(serializer, work, now.mono);
    }

    /// Where contexts end: an abandoned work still in its line [`ORPHAN_MS`] after `at` leaves
    /// it then.
    fn orphan_watch(&mut self, serializer: u32, work: Ticket, at: f64) {
        if !self.config.contexts_end {
            return;
        }
        let at = self.push_orphan(at + ORPHAN_MS, serializer, work);
        if let Some(found) = self
            .serializers
            .get_mut(serializer as usize)
            .and_then(|serial| serial.core.payload_mut(work))
        {
            found.orphan_at = at;
        }
        if let Some(line) = self
            .serializers
            .get(serializer as usize)
            .and_then(|serial| serial.core.line_of(work))
        {
            self.arm_next(serializer, line);
        }
    }

    /// An abandoned work whose caller has not said it heard: it leaves its line now.
    pub(crate) fn orphan_due(
        &mut self,
        serializer: u32,
        work: Ticket,
        now: Now,
        random: &impl Random,
    ) {
        let abandoned = self
            .serializers
            .get(serializer as usize)
            .is_some_and(|serial| serial.core.is_abandoned(work));
        if abandoned {
            self.finish_work(serializer, work, now, random);
        }
    }

    /// A work leaves its line: its lease is kept for the key's next turn; the next work's turn
    /// may come; an idle key's lease is freed.
    fn finish_work(&mut self, serializer: u32, work: Ticket, now: Now, random: &impl Random) {
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return;
        };
        let Some(line) = serial.core.line_of(work) else {
            return;
        };
        let leg = serial
            .core
            .payload_mut(work)
            .and_then(|found| found.lease.as_deref_mut())
            .and_then(|lease| lease.leg.take())
            .filter(|_| LOCKS);
        if let Some(leg) = leg {
            self.keep_for_next(serializer, work, leg, now, random);
        }
        let Some(serial) = self.serializers.get_mut(serializer as usize) else {
            return;
        };
        let Some(key) = serial.core.key_of(line) else {
            return;
        };
        let Some(released) = serial.core.finish(work) else {
            return;
        };
        self.line_moved(serializer, line, &key, &released, now, random);
    }

    /// A line changed: idle, its key leaves the index and its kept lease is freed; else the
    /// next work's turn may have come.
    fn line_moved(
        &mut self,
        serializer: u32,
        line: LineId,
        key: &str,
        released: &Released,
        now: Now,
        random: &impl Random,
    ) {
        if released.idle {
            let Some(serial) = self.serializers.get_mut(serializer as usize) else {
                return;
            };
            let left = match LOCKS {
                true => serial.turns.as_mut().and_then(|turns| turns.idle(line.0)),
                false => None,
            };
            serial.index.remove(key);
            let idle = serial.index.is_empty();
            if let Some(leg) = left {
                self.give_back(leg, now, random);
            }
            if idle && !self.config.timer_per_call {
                self.wake_never();
            }
            return;
        }
        if released.next.is_some() {
            self.turn_came(serializer, line);
        }
    }

    /// A turn ended still holding its lease: kept for the key's next turn here (a lease kept
    /// before and not taken is given back).
    fn keep_for_next(
        &mut self,
        serializer: u32,
        work: Ticket,
        leg: Ticket,
        now: Now,
        random: &impl Random,
    ) {
        if !LOCKS {
            return;
        }
        if let Some(found) = self.legs.get_mut(leg) {
            found.holder = Holder::Nobody;
            found.kept = false;
            found.renew_at = f64::INFINITY;
        }
        let line = self
            .serializers
            .get(serializer as usize)
            .and_then(|serial| serial.core.line_of(work));
        let usable = self.legs.get(leg).is_some_and(|found| {
            !found.lost && !found.released && found.doing != super::locking::Doing::Releasing
        });
        let displaced = match (line, usable) {
            (Some(line), true) => self
                .serializers
                .get_mut(serializer as usize)
                .and_then(|serial| serial.turns.as_mut())
                .and_then(|turns| turns.ended(line.0, leg)),
            _ => Some(leg),
        };
        if let Some(displaced) = displaced {
            self.give_back(displaced, now, random);
        }
    }

    /// Renews a turn's lease while its work runs; a lease found lost aborts the work's signal.
    fn keep_turn_renewed(&mut self, leg: Ticket, now: Now) {
        self.keep_leg_renewed(leg, true, now);
    }

    /// The deadline of a started work (monotonic).
    fn work_deadline(&self, serializer: u32, work: Ticket) -> f64 {
        self.serializers
            .get(serializer as usize)
            .and_then(|serial| serial.core.deadline_of(work))
            .unwrap_or(f64::INFINITY)
    }

    /// Where contexts end: the next work to start in `line` keeps a timer for the earliest
    /// deadline of the works running ahead of it — so that a work whose caller's request ended
    /// (its own timer gone with it) still ends at its deadline, woken from the waiter's own
    /// context.
    fn arm_next(&mut self, serializer: u32, line: LineId) {
        if !(self.config.timer_per_call && self.config.contexts_end) {
            return;
        }
        let Some(serial) = self.serializers.get(serializer as usize) else {
            return;
        };
        let (Some(next), Some(at)) = (
            serial.core.first_unstarted(line),
            self.earliest_ahead(serializer, line),
        ) else {
            return;
        };
        let behind = serial.core.next_in_line(next);
        self.arm(Owner::Work(serializer, next), at);
        // The next work's caller's context may have ended, its timer with it: the work behind
        // it watches too.
        if let Some(behind) = behind {
            self.watch_ahead(serializer, behind);
        }
    }

    /// When the works running (or abandoned) at the head of `line` next need the engine: the
    /// earliest deadline of a running one, or when an abandoned one leaves its line — each
    /// [`ORPHAN_MS`] on, so that a live caller handles its own first. Not at the deadline
    /// itself: on Workers, a waiter's timer that fired first would time the work out from the
    /// waiter's request, and the work's own request, its timer spent and nothing else pending,
    /// would be cancelled as hung before it heard.
    pub(crate) fn earliest_ahead(&self, serializer: u32, line: LineId) -> Option<f64> {
        let serial = self.serializers.get(serializer as usize)?;
        let running = serial
            .core
            .earliest_running_deadline(line)
            .map(|at| at + ORPHAN_MS);
        let orphan = serial
            .core
            .head(line)
            .and_then(|head| serial.core.payload(head))
            .map(|found| found.orphan_at)
            .filter(|at| at.is_finite());
        match (running, orphan) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
