//! The lease lock in the engine: each lease line's steps ([`LockCore`]'s) driven to their end —
//! the store calls they ask for, each bounded; the sleeps, waits and watches between them; the
//! guards a busy line keeps; a held lock's renewals and the watch of its end — and a name taken
//! N at a time, whose acquisition races its slots.
//!
//! A *leg* is one [`LockCore`] ticket from its acquisition to its release: what it is for
//! ([`Holder`]), the run of steps in flight ([`Run`]) and the flags of a held lock (kept renewed,
//! watched, lost, released). A store call is an *op*: answered by the host, or given up at its
//! bound.

use std::rc::Rc;

use super::effect::{Effect, Held, Lost, Method, Outcome, StoreCall, Why};
use super::key::slot_name;
use super::leases::{Answer, Guard, Now, Refusal, Step, Succession, Woken};
use super::options::{LockOptions, OptionError};
use super::queue::{LineId, Ticket};
use super::random::Random;
use super::record::{NotARecord, Record};
use super::{Engine, Owner, Timer};

/// What a leg is for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Holder {
    /// A lock call's acquisition, and then its lock (the call's id stays the lock's).
    Lock(Ticket),
    /// One slot of a name taken N at a time, raced by the acquisition `race` (an entry of
    /// `Engine::races`).
    Race(Ticket),
    /// The turn of serializer `serializer`'s work `work` (a ticket of its lines).
    Turn { serializer: u32, work: Ticket },
    /// A lease a turn left for its key's next turn, or one given back: nobody hears of it.
    Nobody,
}

/// The run of steps a leg is in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Run {
    /// No step in flight (a held lease between renewals, or a leg about to step).
    Idle,
    /// A store call.
    Call(Ticket),
    /// Paused until then (between polls).
    Sleep(f64),
    /// Paused until then between polls, a pause that may end up to a millisecond early.
    Pause(f64),
    /// In line here, until woken or then.
    Wait(f64),
    /// Watching the record (the op) until then.
    Watch(Ticket, f64),
}

/// What a run of steps is doing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Doing {
    Acquiring,
    Renewing,
    Releasing,
}

pub(crate) struct Leg<H> {
    /// The lease core's ticket.
    pub(crate) ticket: Ticket,
    /// The record's key.
    pub(crate) key: Rc<str>,
    /// The name's slot.
    pub(crate) slot: u16,
    pub(crate) holder: Holder,
    pub(crate) run: Run,
    pub(crate) doing: Doing,
    /// A store call of this run failed: its error is the first failure to report.
    pub(crate) failed: bool,
    /// Renew calls waiting for the renewal in flight.
    pub(crate) renewers: Vec<Ticket>,
    /// The release call waiting for the release in flight, if any.
    pub(crate) releaser: Option<Ticket>,
    /// Renewed while its holder works (a lock kept renewed, a turn's lease).
    pub(crate) kept: bool,
    /// The next renewal's time (monotonic), or ∞.
    pub(crate) renew_at: f64,
    /// Its signal is watched: when to look at the lease's end next (monotonic), or ∞.
    pub(crate) end_at: f64,
    pub(crate) watched: bool,
    /// Lost (a renewal found it taken over, or it lapsed), or released: told once.
    pub(crate) lost: bool,
    pub(crate) released: bool,
    /// The release's followers (a turn's hand-on announces the works behind it).
    pub(crate) followers: usize,
    /// Given back on behalf of this call (the one whose event let it go): its store calls are
    /// that call's to make, in its context, and its future's to wait for.
    pub(crate) on_behalf: Option<H>,
    /// The work whose caller hears once the release ends (however it ends).
    pub(crate) tell: Option<H>,
    /// It got its lease (it is counted among the acquiring legs until then).
    pub(crate) held: bool,
}

/// A store call in flight.
pub(crate) struct Op {
    /// The leg it is for, a guard (`line`, `number`), or a turn's write of its key's pace
    /// record (`serializer`, `work`; see `pace_record.rs`).
    pub(crate) leg: Option<Ticket>,
    pub(crate) guard: Option<(LineId, u32)>,
    pub(crate) pace: Option<(u32, Ticket, Rc<str>)>,
    pub(crate) method: Method,
    /// When it was sent: a write's answer is timed from then.
    pub(crate) sent: Now,
    /// Its bound, and when that passes (monotonic).
    pub(crate) bound_ms: f64,
    pub(crate) bound_at: f64,
}

/// An acquisition of a name taken N at a time: each slot with nobody in line for it here tried
/// once with no wait (slot 0 always, where the options and the line's N are checked), then every
/// slot raced until the wait ends; the first slot had wins, the others are let go.
pub(crate) struct Race {
    /// Who hears of the winner: a lock call or a turn.
    pub(crate) holder: Holder,
    pub(crate) name: Rc<str>,
    pub(crate) options: LockOptions,
    pub(crate) streak_ms: f64,
    /// The wait's end (monotonic).
    pub(crate) until: f64,
    /// The slot tried once now; past the last, the race.
    pub(crate) trying: u16,
    pub(crate) racing: bool,
    /// Legs of the race still running.
    pub(crate) legs: Vec<Ticket>,
    pub(crate) over: bool,
}

/// A host's call about locks: an acquisition (then its lock), a renewal or a release.
pub(crate) struct Call<H> {
    pub(crate) handle: H,
    pub(crate) kind: CallKind,
    /// With a timer per call: when its timer is armed for (∞: none).
    pub(crate) armed: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum CallKind {
    /// Acquiring: through one leg, or a race.
    Acquire {
        leg: Option<Ticket>,
        race: Option<Ticket>,
    },
    /// A held lock: its leg.
    Lock(Ticket),
    /// A renewal or a release of a lock's leg.
    Renew(Ticket),
    Release(Ticket),
}

impl<V: Clone + PartialEq, H: Copy + PartialEq, const LOCKS: bool> Engine<V, H, LOCKS> {
    // ---- lock calls ----

    /// Starts an acquisition of `name` with `options`, for the host's `handle`: its id — the
    /// lock's once held. Its outcome comes as [`Effect::Settle`]: [`Outcome::Held`],
    /// [`Outcome::Unavailable`] once live holders kept it for the whole wait, or a failure.
    ///
    /// # Errors
    /// A bad name or option, or a name taken here with another concurrency: nothing was queued.
    pub fn acquire(
        &mut self,
        name: &str,
        options: LockOptions,
        handle: H,
        now: Now,
        random: &impl Random,
    ) -> Result<Ticket, Refusal> {
        self.set_now(now);
        let options = options.validate().map_err(Refusal::InvalidOption)?;
        self.acting(Some(handle));
        let call = self.calls.insert(Call {
            handle,
            kind: CallKind::Acquire {
                leg: None,
                race: None,
            },
            armed: f64::INFINITY,
        });
        let holder = Holder::Lock(call);
        let started = if options.slots() == 1 {
            self.open_leg(
                holder,
                name,
                0,
                options,
                Succession::LOCK.streak_ms,
                now,
                random,
            )
            .map(|leg| CallKind::Acquire {
                leg: Some(leg),
                race: None,
            })
        } else {
            self.open_race(
                holder,
                name,
                options,
                Succession::LOCK.streak_ms,
                now,
                random,
            )
            .map(|race| CallKind::Acquire {
                leg: None,
                race: Some(race),
            })
        };
        match started {
            Ok(kind) => {
                if let Some(entry) = self.calls.get_mut(call) {
                    if matches!(entry.kind, CallKind::Acquire { .. }) {
                        entry.kind = kind;
                    }
                }
                self.drain(now, random);
                self.acting(None);
                Ok(call)
            }
            Err(refusal) => {
                self.calls.remove(call);
                self.acting(None);
                Err(refusal)
            }
        }
    }

    /// The caller of an acquisition gave up (its signal): it is told [`Outcome::Aborted`] at
    /// once. Its legs leave their lines; a store call in flight finishes, and what it took is
    /// given back.
    pub fn abort(&mut self, call: Ticket, now: Now, random: &impl Random) {
        self.give_up_call(call, Outcome::Aborted, now, random);
    }

    /// Acquisition `call` is given up on: it leaves its line, and its caller is told `outcome`.
    pub(crate) fn give_up_call(
        &mut self,
        call: Ticket,
        outcome: Outcome,
        now: Now,
        random: &impl Random,
    ) {
        self.set_now(now);
        let Some(entry) = self.calls.get(call) else {
            return;
        };
        let CallKind::Acquire { leg, race } = entry.kind else {
            return;
        };
        let handle = entry.handle;
        self.acting(Some(handle));
        self.calls.remove(call);
        if let Some(leg) = leg {
            self.let_go(leg, now, random);
        }
        if let Some(race) = race {
            self.end_race(race, now, random);
        }
        self.effects.push_back(Effect::Settle { handle, outcome });
        self.drain(now, random);
        self.acting(None);
    }

    /// Renews the lock `lock` for the host's `handle`: one CAS moving its lease to now; its
    /// outcome [`Outcome::Renewed`], [`Outcome::NotRenewed`] (lost for good) or
    /// [`Outcome::StoreFailed`]. A renewal in flight answers this call too.
    pub fn renew(&mut self, lock: Ticket, handle: H, now: Now, random: &impl Random) {
        self.set_now(now);
        let call = self.calls.insert(Call {
            handle,
            kind: CallKind::Renew(Ticket::new(u32::MAX, 0)),
            armed: f64::INFINITY,
        });
        let Some(leg) = self.lock_leg(lock).filter(|leg| self.holds_lease(*leg)) else {
            self.finish_call(call, Outcome::NotRenewed);
            return;
        };
        if let Some(entry) = self.calls.get_mut(call) {
            entry.kind = CallKind::Renew(leg);
        }
        if let Some(found) = self.legs.get_mut(leg) {
            found.renewers.push(call);
        }
        self.start_renewal(leg, now);
        self.drain(now, random);
    }

    /// Releases the lock `lock` for the host's `handle` (a second release, or one after the
    /// lease was lost, changes nothing): to the next waiter here, or by freeing the record. A
    /// renewal in flight is given up (its answer is not used: the release reads first). Its
    /// outcome [`Outcome::Released`] or [`Outcome::StoreFailed`].
    pub fn release(&mut self, lock: Ticket, handle: H, now: Now, random: &impl Random) {
        self.set_now(now);
        let call = self.calls.insert(Call {
            handle,
            kind: CallKind::Release(Ticket::new(u32::MAX, 0)),
            armed: f64::INFINITY,
        });
        let leg = self.lock_leg(lock);
        let Some(leg) = leg.filter(|leg| self.legs.get(*leg).is_some_and(|l| !l.released)) else {
            self.finish_call(call, Outcome::Released);
            return;
        };
        if let Some(entry) = self.calls.get_mut(call) {
            entry.kind = CallKind::Release(leg);
        }
        self.release_leg(leg, Some(call), 0, now, random);
        // The lock's call is done with (its signal was told): its id names nothing from now on.
        self.calls.remove(lock);
        if let Some(found) = self.legs.get_mut(leg) {
            found.holder = Holder::Nobody;
        }
        self.drain(now, random);
    }

    /// The lock `lock` is renewed while its holder works (`keep`), every `staleMs / 3` — a
    /// failed renewal tried again while the lease has time left — until it is lost
    /// ([`Effect::LockLost`]); or no longer.
    pub fn keep_renewed(&mut self, lock: Ticket, keep: bool, now: Now) {
        self.set_now(now);
        if let Some(leg) = self.lock_leg(lock) {
            self.keep_leg_renewed(leg, keep, now);
        }
    }

    /// The lock `lock`'s signal is read (by the host's `handle` of it): from now on its loss,
    /// its lapse and its release are told ([`Effect::LockLost`]) — at once, when it is lost or
    /// released already (a released lock's id names nothing any more).
    pub fn watch_lock(&mut self, lock: Ticket, handle: H, now: Now) {
        self.set_now(now);
        let left = self
            .lock_leg(lock)
            .map_or(0.0, |leg| self.lease_left(leg, now));
        let found = self
            .lock_leg(lock)
            .and_then(|leg| Some((leg, self.legs.get_mut(leg)?)));
        let why = match found {
            None => Lost::Released,
            Some((_, found)) if found.released => Lost::Released,
            Some((_, found)) if found.lost || left <= 0.0 => {
                found.lost = true;
                Lost::Lapsed
            }
            Some((leg, found)) => {
                found.watched = true;
                found.end_at = now.mono + left;
                let at = found.end_at;
                self.push_timer(at, Timer::LeaseEnd(leg));
                self.arm_leg(leg, at);
                return;
            }
        };
        self.effects.push_back(Effect::LockLost { handle, why });
    }

    /// A Rust lock dropped unreleased: its record stays held until its lease ends (as a crashed
    /// holder's would), and the next waiter here contends.
    pub fn drop_lock(&mut self, lock: Ticket, now: Now, random: &impl Random) {
        self.set_now(now);
        if let Some(leg) = self.lock_leg(lock) {
            self.calls.remove(lock);
            if let Some(found) = self.remove_leg(leg) {
                self.locks.leave(found.ticket, false);
            }
            self.drain(now, random);
        }
    }

    /// Whether the lock `lock` still holds a lease that has not ended by `now`.
    pub fn holds(&self, lock: Ticket, now: Now) -> bool {
        self.lock_leg(lock)
            .and_then(|leg| self.legs.get(leg))
            .is_some_and(|leg| !leg.lost && !leg.released && self.locks.holds(leg.ticket, now))
    }

    /// The lock `lock`'s token: this isolate's id, then its count.
    pub fn token(&self, lock: Ticket) -> Option<String> {
        let leg = self.legs.get(self.lock_leg(lock)?)?;
        self.locks
            .lease(leg.ticket)
            .map(|lease| lease.token.to_owned())
    }

    /// The live lock call (an acquisition, a lock, a renewal, a release) a packed id names.
    pub fn call(&self, packed: f64) -> Option<Ticket> {
        self.calls.unpack(packed)
    }

    /// The store call in flight a packed id names.
    pub fn op(&self, packed: f64) -> Option<Ticket> {
        self.ops.unpack(packed)
    }

    /// This isolate's id, as every token and ask of this engine starts (drawn at the first one).
    pub fn isolate_id(&self) -> Option<String> {
        self.locks
            .isolate_id()
            .map(|id| id.iter().map(|&byte| char::from(byte)).collect())
    }

    // ---- store answers ----

    /// What the store answered to `op` (a stale `op` — answered already, or past its bound —
    /// changes nothing). A write's answer is timed from when it was sent; a read's is `now`.
    pub fn answer(&mut self, op: Ticket, answer: Answer<V>, now: Now, random: &impl Random) {
        self.set_now(now);
        let Some(found) = self.remove_op(op) else {
            return;
        };
        let acting = match &found.pace {
            Some((serializer, work, _)) => self.work_handle(*serializer, *work),
            None => found.leg.and_then(|leg| self.holder_handle(leg)),
        };
        self.acting(acting);
        self.answered(found, answer, now, random);
        self.drain(now, random);
        self.acting(None);
    }

    /// Feeds `answer` to whoever made the op.
    fn answered(&mut self, op: Op, answer: Answer<V>, now: Now, random: &impl Random) {
        if let Some((line, number)) = op.guard {
            self.locks.guarded(line, number, answer);
            return;
        }
        if let Some((serializer, work, name)) = op.pace {
            self.pace_answered(serializer, work, &name, answer, now, random);
            return;
        }
        let Some(leg) = op.leg else {
            return;
        };
        let failed = matches!(answer, Answer::Failed | Answer::TimedOut);
        // A write's answer is timed from when it was sent (a lease it took runs from then); a
        // read's, or a failure's, as it comes: what follows a failure is bounded from now.
        let when = match op.method {
            Method::Create | Method::Replace if !failed => op.sent,
            _ => now,
        };
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        if failed {
            found.failed = true;
        }
        let answer = match (op.method, answer) {
            // A watch: changed, or not (or its time came): either way the record is read again.
            (Method::Changed, Answer::Read(_) | Answer::Created(_) | Answer::Replaced(_)) => {
                Answer::Woke
            }
            (_, answer) => answer,
        };
        found.run = Run::Idle;
        let ticket = found.ticket;
        let step = self.locks.step(ticket, answer, when, random);
        self.follow(leg, step, now, random);
    }

    // ---- time ----

    /// An op past its bound: failed, its outcome unknown.
    pub(crate) fn op_timed_out(&mut self, op: Ticket, now: Now, random: &impl Random) {
        let Some(found) = self.remove_op(op) else {
            return;
        };
        let owner = match &found.pace {
            Some((serializer, work, _)) => self.work_handle(*serializer, *work),
            None => found.leg.and_then(|leg| self.holder_handle(leg)),
        };
        self.effects.push_back(Effect::Forget {
            op,
            owner,
            method: found.method,
            bound_ms: found.bound_ms,
        });
        self.answered(found, Answer::TimedOut, now, random);
    }

    /// A leg's sleep, wait or watch came to its end.
    pub(crate) fn leg_due(&mut self, leg: Ticket, now: Now, random: &impl Random) {
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        let ticket = found.ticket;
        let run = std::mem::replace(&mut found.run, Run::Idle);
        match run {
            Run::Sleep(_) | Run::Pause(_) | Run::Wait(_) => {}
            Run::Watch(op, _) => {
                // Its time came, unchanged: the record is read again; the watch's answer, if it
                // comes, is not wanted.
                self.remove_op(op);
            }
            run => {
                if let Some(found) = self.legs.get_mut(leg) {
                    found.run = run;
                }
                return;
            }
        }
        let step = self.locks.step(ticket, Answer::Woke, now, random);
        self.follow(leg, step, now, random);
    }

    /// A renewal of a lock kept renewed is due.
    pub(crate) fn renewal_due(&mut self, leg: Ticket, now: Now) {
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        found.renew_at = f64::INFINITY;
        self.start_renewal(leg, now);
    }

    /// A watched lock's lease end: lapsed, or looked at again later (a renewal moved it).
    pub(crate) fn lease_end_due(&mut self, leg: Ticket, now: Now) {
        let left = self.lease_left(leg, now);
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        if !found.watched || found.lost || found.released {
            return;
        }
        if left > 0.0 {
            found.end_at = now.mono + left;
            let at = found.end_at;
            self.push_timer(at, Timer::LeaseEnd(leg));
            self.arm_leg(leg, at);
            return;
        }
        found.lost = true;
        found.end_at = f64::INFINITY;
        self.tell_lost(leg, Lost::Lapsed);
    }

    // ---- legs ----

    /// Opens a leg acquiring slot `slot` of `name` for `holder`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open_leg(
        &mut self,
        holder: Holder,
        name: &str,
        slot: u16,
        options: LockOptions,
        streak_ms: f64,
        now: Now,
        random: &impl Random,
    ) -> Result<Ticket, Refusal> {
        if !LOCKS {
            return Err(Refusal::InvalidOption(OptionError::StaleMs(0.0)));
        }
        let leg = self.legs.insert(Leg {
            ticket: Ticket::new(u32::MAX, 0),
            key: Rc::from(""),
            slot,
            holder,
            run: Run::Idle,
            doing: Doing::Acquiring,
            failed: false,
            renewers: Vec::new(),
            releaser: None,
            kept: false,
            renew_at: f64::INFINITY,
            end_at: f64::INFINITY,
            watched: false,
            lost: false,
            released: false,
            followers: 0,
            on_behalf: None,
            tell: None,
            held: false,
        });
        self.acquiring += 1;
        let opened = self
            .locks
            .acquire_slot(name, slot, leg, options, streak_ms, now, random);
        let (ticket, step) = match opened {
            Ok(opened) => opened,
            Err(refusal) => {
                self.remove_leg(leg);
                return Err(refusal);
            }
        };
        let key = self.locks.key(ticket).unwrap_or_else(|| Rc::from(name));
        if let Some(found) = self.legs.get_mut(leg) {
            found.ticket = ticket;
            found.key = key;
        }
        self.follow(leg, step, now, random);
        Ok(leg)
    }

    /// Does what a leg's step asks, or tells its holder how its run ended.
    pub(crate) fn follow(&mut self, leg: Ticket, step: Step<V>, now: Now, random: &impl Random) {
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        let doing = found.doing;
        match step {
            Step::Create { value, bound_ms } => {
                self.send(leg, StoreCall::Create { value }, bound_ms, now)
            }
            Step::Read { bound_ms } => self.send(leg, StoreCall::Read, bound_ms, now),
            Step::Replace {
                version,
                value,
                bound_ms,
            } => self.send(leg, StoreCall::Replace { version, value }, bound_ms, now),
            Step::Sleep { until, early } => {
                found.run = if early {
                    Run::Pause(until)
                } else {
                    Run::Sleep(until)
                };
                self.push_timer(until, Timer::Leg(leg));
                self.arm_leg(leg, until);
            }
            Step::Wait { until } => {
                found.run = Run::Wait(until);
                self.push_timer(until, Timer::Leg(leg));
                self.arm_leg(leg, until);
            }
            Step::Watch { version, until } => {
                let ms = (until - now.mono).max(0.0);
                let key = found.key.clone();
                let op = self.insert_op(Op {
                    leg: Some(leg),
                    guard: None,
                    pace: None,
                    method: Method::Changed,
                    sent: now,
                    bound_ms: ms,
                    bound_at: f64::INFINITY,
                });
                if let Some(found) = self.legs.get_mut(leg) {
                    found.run = Run::Watch(op, until);
                }
                let owner = self.holder_handle(leg);
                self.effects.push_back(Effect::Store {
                    op,
                    owner,
                    key,
                    call: StoreCall::Changed { version, ms },
                });
                self.push_timer(until, Timer::Leg(leg));
                self.arm_leg(leg, until);
            }
            Step::Held => match doing {
                Doing::Acquiring => self.acquired(leg, now, random),
                Doing::Renewing => self.renewed(leg, true, now),
                Doing::Releasing => {}
            },
            Step::Lost => match doing {
                Doing::Renewing => self.renewed(leg, false, now),
                _ => self.released(leg, false),
            },
            Step::Done => self.released(leg, false),
            Step::GiveUp => self.gave_up(leg, Outcome::Unavailable, now, random),
            Step::Mismatch { found } => self.gave_up(leg, Outcome::Mismatch { found }, now, random),
            Step::Failed => match doing {
                Doing::Acquiring => self.gave_up(leg, Outcome::StoreFailed, now, random),
                Doing::Renewing => self.renewal_failed(leg, now),
                Doing::Releasing => self.released(leg, true),
            },
        }
    }

    /// Sends a leg's store call, bounded by `bound_ms`.
    fn send(&mut self, leg: Ticket, call: StoreCall<V>, bound_ms: f64, now: Now) {
        let Some(found) = self.legs.get(leg) else {
            return;
        };
        let key = found.key.clone();
        let bound_at = now.mono + bound_ms;
        let op = self.insert_op(Op {
            leg: Some(leg),
            guard: None,
            pace: None,
            method: call.method(),
            sent: now,
            bound_ms,
            bound_at,
        });
        if let Some(found) = self.legs.get_mut(leg) {
            found.run = Run::Call(op);
        }
        let owner = self.holder_handle(leg);
        self.effects.push_back(Effect::Store {
            op,
            owner,
            key,
            call,
        });
        self.push_timer(bound_at, Timer::Op(op));
        self.arm_leg(leg, bound_at);
    }

    /// A leg got its lease.
    fn acquired(&mut self, leg: Ticket, now: Now, random: &impl Random) {
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        found.failed = false;
        if !found.held {
            found.held = true;
            self.acquiring -= 1;
        }
        match found.holder {
            Holder::Lock(call) => {
                let held = self.held_view(leg);
                if let Some(entry) = self.calls.get_mut(call) {
                    entry.kind = CallKind::Lock(leg);
                    let handle = entry.handle;
                    let armed = std::mem::replace(&mut entry.armed, f64::INFINITY);
                    self.effects.push_back(Effect::Settle {
                        handle,
                        outcome: Outcome::Held(held),
                    });
                    // Armed again as what it is now: a timer that keeps nothing alive.
                    if armed.is_finite() {
                        self.arm(Owner::Call(call), armed);
                    }
                } else {
                    // Its caller gave up meanwhile: given back.
                    self.give_back(leg, now, random);
                }
            }
            Holder::Race(race) => self.race_won(race, leg, now, random),
            Holder::Turn { serializer, work } => self.turn_held(serializer, work, leg, now, random),
            Holder::Nobody => self.give_back(leg, now, random),
        }
    }

    /// A leg's acquisition ended with nothing held (`outcome`); it has left its line.
    fn gave_up(&mut self, leg: Ticket, outcome: Outcome, now: Now, random: &impl Random) {
        let Some(found) = self.remove_leg(leg) else {
            return;
        };
        match found.holder {
            Holder::Lock(call) => self.finish_call(call, outcome),
            Holder::Race(race) => self.race_lost(race, leg, outcome, now, random),
            Holder::Turn { serializer, work } => {
                self.turn_not_held(serializer, work, outcome, now, random)
            }
            Holder::Nobody => {}
        }
    }

    /// Gives a leg's lease back, nobody told (a turn's kept lease, a race's loser, an
    /// acquisition whose caller left).
    pub(crate) fn give_back(&mut self, leg: Ticket, now: Now, random: &impl Random) {
        if !LOCKS {
            return;
        }
        if let Some(found) = self.legs.get_mut(leg) {
            found.holder = Holder::Nobody;
        }
        self.release_leg(leg, None, 0, now, random);
    }

    /// The call an event is for, while the engine handles it: what it lets go is let go on its
    /// behalf.
    pub(crate) fn acting(&mut self, handle: Option<H>) {
        self.acting = handle;
    }

    /// Ends a leg whatever it is doing: acquiring, it leaves its line (a call in flight
    /// finishes, and a lease it took is given back); holding, its lease is given back.
    pub(crate) fn let_go(&mut self, leg: Ticket, now: Now, random: &impl Random) {
        if !LOCKS {
            return;
        }
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        found.holder = Holder::Nobody;
        if found.held {
            self.give_back(leg, now, random);
            return;
        }
        let (run, ticket) = (found.run, found.ticket);
        if let Run::Call(_) = run {
            // Its answer decides: a lease taken is given back then.
            return;
        }
        if let Run::Watch(op, _) = run {
            self.remove_op(op);
        }
        self.remove_leg(leg);
        self.locks.leave(ticket, true);
    }

    /// Releases a leg's lease, telling `call` (or nobody), announcing `followers`.
    pub(crate) fn release_leg(
        &mut self,
        leg: Ticket,
        call: Option<Ticket>,
        followers: usize,
        now: Now,
        random: &impl Random,
    ) {
        if !LOCKS {
            return;
        }
        let Some(found) = self.legs.get_mut(leg) else {
            if let Some(call) = call {
                self.finish_call(call, Outcome::Released);
            }
            return;
        };
        if found.released {
            if let Some(call) = call {
                self.finish_call(call, Outcome::Released);
            }
            return;
        }
        found.released = true;
        found.releaser = call;
        found.followers = followers;
        if call.is_none() && found.on_behalf.is_none() {
            found.on_behalf = self.acting;
        }
        found.renew_at = f64::INFINITY;
        let ticket = found.ticket;
        let watched = found.watched && !found.lost;
        let renewers = std::mem::take(&mut found.renewers);
        let (doing, run) = (found.doing, found.run);
        if doing == Doing::Renewing {
            // A renewal in flight is not waited for: its outcome is unknown, so the release
            // reads first; its callers hear it was not renewed.
            if let Run::Call(op) = run {
                self.remove_op(op);
            }
            self.locks.renewal_abandoned(ticket);
        }
        if let Some(found) = self.legs.get_mut(leg) {
            found.doing = Doing::Releasing;
            found.run = Run::Idle;
            found.failed = false;
        }
        for renewer in renewers {
            self.finish_call(renewer, Outcome::NotRenewed);
        }
        if watched {
            self.tell_lost(leg, Lost::Released);
        }
        let step = self.locks.release_with(ticket, followers, now, random);
        self.follow(leg, step, now, random);
    }

    /// A release ended (`failed`: the store failed): its caller is told, the leg is done.
    fn released(&mut self, leg: Ticket, failed: bool) {
        let Some(found) = self.remove_leg(leg) else {
            return;
        };
        if let Some(handle) = found.tell {
            self.effects.push_back(Effect::Settle {
                handle,
                outcome: Outcome::Done,
            });
        }
        if let Some(call) = found.releaser {
            let outcome = if failed {
                Outcome::StoreFailed
            } else {
                Outcome::Released
            };
            self.finish_call(call, outcome);
        }
    }

    // ---- held locks: renewals, their end ----

    pub(crate) fn keep_leg_renewed(&mut self, leg: Ticket, keep: bool, now: Now) {
        let next = self.locks_next_renewal(leg, now);
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        found.kept = keep;
        if !keep || found.released {
            found.renew_at = f64::INFINITY;
            return;
        }
        match next {
            Some(at) => {
                found.renew_at = at;
                self.push_timer(at, Timer::Renew(leg));
                self.arm_leg(leg, at);
            }
            None => self.lose(leg, Lost::Lapsed),
        }
    }

    fn locks_next_renewal(&self, leg: Ticket, now: Now) -> Option<f64> {
        let found = self.legs.get(leg)?;
        if found.lost || found.released {
            return None;
        }
        self.locks.next_renewal(found.ticket, now)
    }

    /// Starts a renewal of a held leg, unless one is in flight.
    fn start_renewal(&mut self, leg: Ticket, now: Now) {
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        if found.doing != Doing::Acquiring || found.released {
            // (A released or releasing leg: its renewers were told.)
        }
        if found.doing == Doing::Renewing || found.released {
            return;
        }
        found.doing = Doing::Renewing;
        found.failed = false;
        let ticket = found.ticket;
        let step = self.locks.renew(ticket, now);
        self.follow_renewal(leg, step, now);
    }

    /// A renewal's first step (it makes no random draw).
    fn follow_renewal(&mut self, leg: Ticket, step: Step<V>, now: Now) {
        match step {
            Step::Read { bound_ms } => self.send(leg, StoreCall::Read, bound_ms, now),
            Step::Replace {
                version,
                value,
                bound_ms,
            } => self.send(leg, StoreCall::Replace { version, value }, bound_ms, now),
            Step::Held => self.renewed(leg, true, now),
            _ => self.renewed(leg, false, now),
        }
    }

    /// A renewal ended: `held` (renewed), or lost.
    fn renewed(&mut self, leg: Ticket, held: bool, now: Now) {
        let view = held.then(|| self.held_view(leg));
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        found.doing = Doing::Acquiring;
        found.run = Run::Idle;
        let keep = found.kept;
        let renewers = std::mem::take(&mut found.renewers);
        let outcome = match view {
            Some(view) => Outcome::Renewed {
                held_until: view.held_until,
            },
            None => Outcome::NotRenewed,
        };
        for renewer in renewers {
            self.finish_call(renewer, outcome.clone());
        }
        if held {
            if keep {
                self.keep_leg_renewed(leg, true, now);
            }
        } else {
            self.lose(leg, Lost::TakenOver);
        }
    }

    /// A renewal's store call failed: the lease runs to its old end; one kept renewed is tried
    /// again at the next tick while it has time left.
    fn renewal_failed(&mut self, leg: Ticket, now: Now) {
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        found.doing = Doing::Acquiring;
        found.run = Run::Idle;
        let keep = found.kept;
        let renewers = std::mem::take(&mut found.renewers);
        for renewer in renewers {
            self.finish_call(renewer, Outcome::StoreFailed);
        }
        if keep {
            self.keep_leg_renewed(leg, true, now);
        }
    }

    /// A held leg lost its lease: never renewed again; its holder hears.
    fn lose(&mut self, leg: Ticket, why: Lost) {
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        if found.lost || found.released {
            return;
        }
        found.lost = true;
        found.kept = false;
        found.renew_at = f64::INFINITY;
        match found.holder {
            Holder::Turn { serializer, work } => {
                if let Some(handle) = self.work_handle(serializer, work) {
                    self.effects.push_back(Effect::Abort {
                        handle,
                        why: Why::LeaseLost,
                    });
                }
            }
            _ if found.watched => self.tell_lost(leg, why),
            _ => {}
        }
    }

    fn tell_lost(&mut self, leg: Ticket, why: Lost) {
        let Some(found) = self.legs.get_mut(leg) else {
            return;
        };
        found.watched = false;
        found.end_at = f64::INFINITY;
        if let Holder::Lock(call) = found.holder {
            if let Some(entry) = self.calls.get(call) {
                self.effects.push_back(Effect::LockLost {
                    handle: entry.handle,
                    why,
                });
            }
        }
    }

    /// What is left of a leg's lease at `now`, on whichever clock ends it first.
    fn lease_left(&self, leg: Ticket, now: Now) -> f64 {
        self.legs
            .get(leg)
            .and_then(|leg| self.locks.lease(leg.ticket))
            .map_or(0.0, |lease| {
                (lease.held_until - now.wall).min(lease.ends_at - now.mono)
            })
    }

    /// The lease a leg holds, as its holder sees it.
    pub(crate) fn held_view(&self, leg: Ticket) -> Held {
        let found = self.legs.get(leg);
        let slot = found.map_or(0, |leg| leg.slot);
        found.and_then(|leg| self.locks.lease(leg.ticket)).map_or(
            Held {
                slot,
                fence: 0,
                token_count: 0,
                held_until: f64::NAN,
                took_over: false,
            },
            |lease| Held {
                slot,
                fence: lease.fence,
                token_count: lease.count,
                held_until: lease.held_until,
                took_over: lease.took_over,
            },
        )
    }

    fn holds_lease(&self, leg: Ticket) -> bool {
        self.legs
            .get(leg)
            .is_some_and(|found| !found.released && !found.lost)
    }

    /// The leg of a lock call.
    fn lock_leg(&self, lock: Ticket) -> Option<Ticket> {
        match self.calls.get(lock)?.kind {
            CallKind::Lock(leg) => Some(leg),
            _ => None,
        }
    }

    /// Tells a call how it ended; it is done.
    pub(crate) fn finish_call(&mut self, call: Ticket, outcome: Outcome) {
        if let Some(entry) = self.calls.remove(call) {
            self.effects.push_back(Effect::Settle {
                handle: entry.handle,
                outcome,
            });
        }
    }

    /// The host handle a leg's store calls and timers belong to: its run's caller (a release's,
    /// a renewal's), else its holder.
    pub(crate) fn holder_handle(&self, leg: Ticket) -> Option<H> {
        let found = self.legs.get(leg)?;
        let call = match (found.doing, found.releaser, found.renewers.first()) {
            (Doing::Releasing, Some(call), _) => Some(call),
            (Doing::Renewing, _, Some(&call)) => Some(call),
            _ => None,
        };
        if let Some(handle) = call.and_then(|call| self.calls.get(call)).map(|c| c.handle) {
            return Some(handle);
        }
        if let (Holder::Nobody, Some(handle)) = (found.holder, found.on_behalf) {
            return Some(handle);
        }
        match found.holder {
            Holder::Lock(call) => self.calls.get(call).map(|entry| entry.handle),
            Holder::Race(race) => match self.races.get(race)?.holder {
                Holder::Lock(call) => self.calls.get(call).map(|entry| entry.handle),
                Holder::Turn { serializer, work } => self.work_handle(serializer, work),
                _ => None,
            },
            Holder::Turn { serializer, work } => self.work_handle(serializer, work),
            Holder::Nobody => None,
        }
    }

    /// The owner whose timer must wake the engine for a leg's timed step.
    pub(crate) fn leg_owner(&self, leg: Ticket) -> Option<Owner> {
        let found = self.legs.get(leg)?;
        let call = match (found.doing, found.releaser, found.renewers.first()) {
            (Doing::Releasing, Some(call), _) => Some(call),
            (Doing::Renewing, _, Some(&call)) => Some(call),
            _ => None,
        };
        if let Some(call) = call.filter(|call| self.calls.get(*call).is_some()) {
            return Some(Owner::Call(call));
        }
        match found.holder {
            Holder::Lock(call) => Some(Owner::Call(call)),
            Holder::Race(race) => match self.races.get(race)?.holder {
                Holder::Lock(call) => Some(Owner::Call(call)),
                Holder::Turn { serializer, work } => Some(Owner::Work(serializer, work)),
                _ => None,
            },
            Holder::Turn { serializer, work } => Some(Owner::Work(serializer, work)),
            Holder::Nobody => None,
        }
    }

    /// With a timer per call: the timer a leg's timed step at `at` needs is armed. (With one
    /// timer for all, pushing that time on the heap woke it by then.)
    fn arm_leg(&mut self, leg: Ticket, at: f64) {
        if !self.config.timer_per_call {
            return;
        }
        if let Some(owner) = self.leg_owner(leg) {
            self.arm(owner, at);
        } else if let Some(handle) = self.legs.get(leg).and_then(|found| found.on_behalf) {
            // A lease given back on a call's behalf: that call's timer bounds its store calls.
            self.effects.push_back(Effect::Arm {
                handle,
                at,
                keep: true,
                early: false,
            });
        }
    }

    /// A store call in flight (one made for a leg counts among what the host waits on).
    pub(crate) fn insert_op(&mut self, op: Op) -> Ticket {
        if op.leg.is_some() || op.pace.is_some() {
            self.leg_ops += 1;
        }
        self.ops.insert(op)
    }

    /// A store call answered, past its bound, or no longer wanted.
    fn remove_op(&mut self, op: Ticket) -> Option<Op> {
        let found = self.ops.remove(op)?;
        if found.leg.is_some() || found.pace.is_some() {
            self.leg_ops -= 1;
        }
        Some(found)
    }

    /// Takes a leg out (a leg still acquiring leaves the count of those).
    fn remove_leg(&mut self, leg: Ticket) -> Option<Leg<H>> {
        let found = self.legs.remove(leg)?;
        if !found.held {
            self.acquiring -= 1;
        }
        Some(found)
    }

    // ---- what the lease core asks besides a leg's steps ----

    /// Wakes the legs the lease core names, and starts the guards it wants, until it names
    /// none.
    pub(crate) fn drain(&mut self, now: Now, random: &impl Random) {
        if !LOCKS {
            return;
        }
        while let Some(woken) = self.locks.take_woken() {
            match woken {
                Woken::Turn(ticket) => {
                    let Some(&leg) = self.locks.handle(ticket) else {
                        continue;
                    };
                    let waits = self
                        .legs
                        .get(leg)
                        .is_some_and(|found| matches!(found.run, Run::Wait(_)));
                    if waits {
                        if let Some(found) = self.legs.get_mut(leg) {
                            found.run = Run::Idle;
                        }
                        let step = self.locks.step(ticket, Answer::Woke, now, random);
                        self.follow(leg, step, now, random);
                    }
                }
                Woken::GaveUp(leg) => {
                    let waits = self
                        .legs
                        .get(leg)
                        .is_some_and(|found| matches!(found.run, Run::Wait(_)));
                    if waits {
                        self.gave_up(leg, Outcome::Unavailable, now, random);
                    }
                }
                Woken::Guard => self.start_guards(now),
            }
        }
    }

    /// Starts the guards the lease core wants: a watch of a busy line's record for other
    /// isolates' asks, kept across its hand-offs.
    fn start_guards(&mut self, now: Now) {
        while let Some(Guard {
            line,
            number,
            name,
            version,
            until,
        }) = self.locks.take_guard(now)
        {
            let ms = (until - now.mono).max(0.0);
            let op = self.insert_op(Op {
                leg: None,
                guard: Some((line, number)),
                pace: None,
                method: Method::Changed,
                sent: now,
                bound_ms: ms,
                bound_at: until,
            });
            self.effects.push_back(Effect::Store {
                op,
                owner: None,
                key: name,
                call: StoreCall::Changed { version, ms },
            });
            self.push_timer(until, Timer::Op(op));
        }
    }

    // ---- a name taken N at a time ----

    /// Starts an acquisition of one of `options.concurrency` slots of `name` for `holder`.
    pub(crate) fn open_race(
        &mut self,
        holder: Holder,
        name: &str,
        options: LockOptions,
        streak_ms: f64,
        now: Now,
        random: &impl Random,
    ) -> Result<Ticket, Refusal> {
        let race = self.races.insert(Race {
            holder,
            name: Rc::from(name),
            options,
            streak_ms,
            until: now.mono + options.wait_ms,
            trying: 0,
            racing: false,
            legs: Vec::new(),
            over: false,
        });
        // Slot 0 is always tried first, at once: its refusal is the acquisition's.
        let once = LockOptions {
            wait_ms: 0.0,
            ..options
        };
        match self.open_leg(Holder::Race(race), name, 0, once, streak_ms, now, random) {
            Ok(leg) => {
                // (Its first step may have ended it already, the race moving on.)
                if let Some(found) = self.races.get_mut(race) {
                    if !found.over && self.legs.get(leg).is_some() {
                        found.legs.push(leg);
                    }
                }
                Ok(race)
            }
            Err(refusal) => {
                self.races.remove(race);
                Err(refusal)
            }
        }
    }

    /// A leg of a race got its slot: the first wins, the others end.
    fn race_won(&mut self, race: Ticket, leg: Ticket, now: Now, random: &impl Random) {
        let Some(found) = self.races.get_mut(race) else {
            self.give_back(leg, now, random);
            return;
        };
        if found.over {
            self.give_back(leg, now, random);
            return;
        }
        found.over = true;
        let holder = found.holder;
        let others: Vec<Ticket> = found.legs.iter().copied().filter(|&l| l != leg).collect();
        found.legs.clear();
        self.races.remove(race);
        for other in others {
            self.let_go(other, now, random);
        }
        if let Some(found) = self.legs.get_mut(leg) {
            found.holder = holder;
        }
        self.acquired(leg, now, random);
    }

    /// A leg of a race ended with nothing: the next slot is tried, or the race goes on, or —
    /// the last leg gone — the acquisition ends with `outcome`.
    fn race_lost(
        &mut self,
        race: Ticket,
        leg: Ticket,
        outcome: Outcome,
        now: Now,
        random: &impl Random,
    ) {
        let Some(found) = self.races.get_mut(race) else {
            return;
        };
        found.legs.retain(|&l| l != leg);
        if found.over {
            return;
        }
        if !matches!(outcome, Outcome::Unavailable) {
            // A failure or a mismatch ends the race with it.
            let holder = found.holder;
            self.end_race(race, now, random);
            self.tell_holder(holder, outcome, now, random);
            return;
        }
        if !found.racing {
            // The next slot with nobody in line for it here, once, with no wait.
            let n = found.options.slots();
            let name = found.name.clone();
            let mut slot = found.trying + 1;
            while slot < n && self.locks.local_line(&slot_name(&name, slot)) > 0 {
                slot += 1;
            }
            let Some(found) = self.races.get_mut(race) else {
                return;
            };
            if slot < n {
                found.trying = slot;
                let once = LockOptions {
                    wait_ms: 0.0,
                    ..found.options
                };
                let streak_ms = found.streak_ms;
                self.race_leg(race, slot, once, streak_ms, now, random);
                return;
            }
            // None taken: every slot at once, until the wait ends.
            found.racing = true;
            let rest = LockOptions {
                wait_ms: (found.until - now.mono).max(0.0),
                ..found.options
            };
            let streak_ms = found.streak_ms;
            for slot in 0..n {
                if self.races.get(race).is_none_or(|found| found.over) {
                    return;
                }
                self.race_leg(race, slot, rest, streak_ms, now, random);
            }
            return;
        }
        if found.legs.is_empty() {
            let holder = found.holder;
            found.over = true;
            self.races.remove(race);
            self.tell_holder(holder, Outcome::Unavailable, now, random);
        }
    }

    fn race_leg(
        &mut self,
        race: Ticket,
        slot: u16,
        options: LockOptions,
        streak_ms: f64,
        now: Now,
        random: &impl Random,
    ) {
        let Some(name) = self.races.get(race).map(|found| found.name.clone()) else {
            return;
        };
        match self.open_leg(
            Holder::Race(race),
            &name,
            slot,
            options,
            streak_ms,
            now,
            random,
        ) {
            Ok(leg) => {
                if let Some(found) = self.races.get_mut(race) {
                    if !found.over && self.legs.get(leg).is_some() {
                        found.legs.push(leg);
                    }
                }
            }
            Err(refusal) => {
                let outcome = match refusal {
                    Refusal::ConcurrencyMismatch { found, .. } => Outcome::Mismatch { found },
                    _ => Outcome::StoreFailed,
                };
                if let Some(holder) = self.races.get(race).map(|found| found.holder) {
                    self.end_race(race, now, random);
                    self.tell_holder(holder, outcome, now, random);
                }
            }
        }
    }

    /// Ends a race: its legs let go (what one takes meanwhile is given back).
    pub(crate) fn end_race(&mut self, race: Ticket, now: Now, random: &impl Random) {
        if !LOCKS {
            return;
        }
        let Some(found) = self.races.remove(race) else {
            return;
        };
        for leg in found.legs {
            self.let_go(leg, now, random);
        }
    }

    /// Tells a race's holder it ended with nothing (`outcome`).
    fn tell_holder(&mut self, holder: Holder, outcome: Outcome, now: Now, random: &impl Random) {
        match holder {
            Holder::Lock(call) => self.finish_call(call, outcome),
            Holder::Turn { serializer, work } => {
                self.turn_not_held(serializer, work, outcome, now, random)
            }
            _ => {}
        }
    }
}

/// A read's answer, as a host found it: the version and the record's text.
pub fn read_answer<V>(found: Option<(V, &str)>) -> Answer<V> {
    Answer::Read(found.map(|(version, value)| (version, Record::decode(value))))
}

/// A read's answer from the fields a host's JSON parser found (see [`Record::from_fields`]).
pub fn read_fields<V>(version: V, record: Result<Record, NotARecord>) -> Answer<V> {
    Answer::Read(Some((version, record)))
}
