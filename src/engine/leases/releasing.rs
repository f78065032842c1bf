//! Releasing a lease: a hand-on within a batch, a hand-off, or a free.
//!
//! A release with waiters behind hands the lease to the next one here by one CAS that raises
//! the fence and reserves [`MAX_BATCH`] fences: one *owed* to each waiter then in line (or
//! announced), the rest *spare* for those who join later (a take reserves them the same way,
//! see `taking.rs`). The hand-ons after it within the batch need no store call. A batch is used
//! only while younger than the streak bound and a quarter of the lease, and a streak of local
//! hand-offs ends after its bound ([`Succession::streak_ms`](super::Succession)): the record is
//! freed and the next local head pauses one poll, so other isolates get their turn. With nobody
//! waiting here the record is freed, keeping its fence.
//!
//! A holder learns that other isolates asked for the name (`crate::engine::asks`) when a write of its
//! record is refused — the version moved: it reads, and the record is still its own — or, over
//! a store that tells changes, from a *guard*: one watch of the batch's record, kept by the
//! driver across the line's hand-offs ([`LockCore::take_guard`]). So spare fences are handed on
//! only while no ask is known and the batch is watched by a guard, or younger than
//! [`MAX_POLL_MS`] (a remote asker waits no longer than a poller would); owed ones always. Once
//! the owed fences are used, a holder that knows of asks — or whose guard said the record
//! changed, which a read first tells apart — frees the record, offered to the asks in order, its
//! own isolate's ask last when it has waiters left here, so they wait without asking again.
//!
//! A release whose write failed reads the record back once, as every write of a lease does; one
//! that follows a write whose outcome stayed unknown (a renewal its driver stopped waiting for)
//! reads the record first, and releases only a record that is still this lease's.

use super::holding::{Phase, REFRESHES};
use super::known::Freed;
use super::Token;
use super::{
    batch_fences, is_written, next_fence, promised, Answer, Entry, Guard, Lease, LockCore,
    NameState, Now, Stamp, State, Step,
};
use crate::engine::asks::{AskId, Asks, OFFER_MS};
use crate::engine::options::{LockOptions, MAX_BATCH, MAX_LOCAL_STREAK_MS, MAX_POLL_MS};
use crate::engine::queue::LineId;
use crate::engine::queue::Ticket;
use crate::engine::random::Random;
use crate::engine::record::{encode_ours, NotARecord, Record};
use crate::engine::starts::Starts;

/// A release in flight; its holder stays the head of its line so nobody here contends
/// meanwhile.
pub(super) struct Release<V> {
    lease: Lease<V>,
    then: AfterRelease,
    /// The stamp of the record the release writes.
    stamp: Stamp,
    phase: Phase,
    /// Reads after a refused write so far.
    refreshes: u8,
    /// Its free record carries this isolate's ask behind the others'.
    queued: bool,
}

/// What a release writes, and what comes of it.
enum AfterRelease {
    /// The next waiter gets `fence`; fences up to `last_fence` are reserved for those behind.
    /// The record promises `lease` (the next waiter's `staleMs`).
    HandOff {
        token: Token,
        fence: u64,
        /// The last fence owed to a waiter known now.
        owed: u64,
        last_fence: u64,
        lease: u64,
    },
    /// The record is freed; `capped`: a streak ended at its bound with waiters left.
    Free { capped: bool },
}

/// Fences one hand-off CAS reserved: the record at `version` carries `token`, `last_fence` and
/// `lease`, and was written at `stamp`.
pub(super) struct Batch<V> {
    pub(super) version: V,
    token: Token,
    /// Fences up to this one are owed to the waiters known at the write; the rest are spare.
    owed: u64,
    last_fence: u64,
    pub(super) stamp: Stamp,
    lease: u64,
    /// The bound on a store call of the batch's holders (a guard's).
    bound_ms: f64,
    /// How long after `stamp` the batch is used at all (the streak's bound and a quarter of
    /// the lease, as the write that made it saw them): a guard lasts no longer.
    young_ms: f64,
}

impl<V: Clone> Batch<V> {
    /// The batch a write at `stamp` reserved: the record at `version` carries `token`, the
    /// fences up to `last_fence` (those up to `owed` owed) and the lease `lease`; its holders'
    /// store calls are bounded by `bound_ms` ([`LockCore::begin_batch`] says how long it is
    /// used).
    pub(super) fn new(
        version: V,
        token: Token,
        (owed, last_fence): (u64, u64),
        stamp: Stamp,
        lease: u64,
        bound_ms: f64,
    ) -> Self {
        Batch {
            version,
            token,
            owed,
            last_fence,
            stamp,
            lease,
            bound_ms,
            young_ms: 0.0,
        }
    }

    /// The lease of the holder handed `fence` in this batch, with its own options: it holds for
    /// its own lease or the one the record promises, whichever is shorter.
    fn lease(&self, fence: u64, holder: LockOptions, contested: bool) -> Lease<V> {
        Lease {
            token: self.token.clone(),
            fence,
            record_fence: self.last_fence,
            version: self.version.clone(),
            stamp: self.stamp,
            stale_ms: holder.stale_ms.min(self.lease as f64),
            store_timeout_ms: holder.store_timeout(),
            renewing: None,
            lapsed: false,
            uncertain: false,
            contested,
            asks: Asks::default(),
            starts: Starts::default(),
            slots: holder.slots(),
            took_over: false,
        }
    }
}

impl<V> Release<V> {
    /// The record this release writes; `own`: this isolate's ask (its id, and until when (wall)
    /// the next waiter here waits), for a free offered to other isolates.
    fn record(&mut self, own: Option<(AskId, f64)>) -> String {
        match &self.then {
            AfterRelease::HandOff {
                token,
                last_fence,
                lease,
                ..
            } => encode_ours(
                true,
                token,
                *last_fence,
                self.stamp.at,
                Some(*lease),
                &Asks::default(),
                &self.lease.starts,
                self.lease.slots,
            ),
            AfterRelease::Free { .. } => {
                let offered = self.offered();
                // Others asked and waiters are left here: this isolate queues behind them.
                let own = own.filter(|_| !offered.is_empty());
                let asks = own.and_then(|(id, until)| offered.with(&id, until));
                self.queued = asks.is_some();
                let asks = asks.unwrap_or(offered);
                encode_ours(
                    false,
                    "",
                    self.lease.record_fence,
                    self.stamp.at,
                    None,
                    &asks,
                    &self.lease.starts,
                    self.lease.slots,
                )
            }
        }
    }

    /// The asks a free record of this release offers the name to.
    fn offered(&self) -> Asks {
        self.lease.asks.live(self.stamp.at)
    }

    /// Another isolate asked since this release was decided: a hand-off here becomes a free
    /// offered to it.
    fn asked(&mut self) {
        if !self.offered().is_empty() {
            self.then = AfterRelease::Free { capped: false };
        }
    }

    /// Whether `record` is exactly what this release wrote.
    fn wrote(&self, record: &Result<Record, NotARecord>) -> bool {
        match &self.then {
            AfterRelease::HandOff {
                token,
                last_fence,
                lease,
                ..
            } => is_written(
                record,
                true,
                token,
                *last_fence,
                self.stamp.at,
                Some(*lease),
            ),
            AfterRelease::Free { .. } => is_written(
                record,
                false,
                "",
                self.lease.record_fence,
                self.stamp.at,
                None,
            ),
        }
    }

    /// Moves to writing: a replace of the lease's version with this release's record (`own`:
    /// see [`record`](Self::record)).
    fn write(&mut self, own: Option<(AskId, f64)>) -> Step<V>
    where
        V: Clone,
    {
        self.phase = Phase::Write;
        Step::Replace {
            version: self.lease.version.clone(),
            value: self.record(own),
            bound_ms: self.lease.store_timeout_ms,
        }
    }

    /// A read of the record, bounded as the lease's calls are.
    fn read(&self) -> Step<V> {
        Step::Read {
            bound_ms: self.lease.store_timeout_ms,
        }
    }
}

impl<V: Clone + PartialEq, W> LockCore<V, W> {
    /// [`release_with`](Self::release_with) a lock's release: announcing nobody.
    #[cfg(test)]
    pub fn release(&mut self, ticket: Ticket, now: Now, random: &impl Random) -> Step<V> {
        self.release_with(ticket, 0, now, random)
    }

    /// Starts a release announcing `followers` acquisitions after the next waiter's (a
    /// serializer's queued works, see [`Succession::followers`](super::Succession); 0 for a
    /// lock): [`Step::Replace`] (or [`Step::Read`] first, after a write whose outcome is
    /// unknown) to make, then [`LockCore::step`] with each answer, until [`Step::Done`] (the
    /// record is released, or it was not this lease's any more) or [`Step::Failed`] (the store
    /// failed; the record stays as the store has it, held until stale if it still is).
    /// [`Step::Done`] at once when there is nothing to write — handed on within a batch, or not
    /// held. A renewal still in flight is one its driver stopped waiting for: its outcome is
    /// unknown, so the release reads first.
    pub fn release_with(
        &mut self,
        ticket: Ticket,
        followers: usize,
        now: Now,
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
        let uncertain = lease.uncertain || lease.renewing.is_some();
        // Other isolates asked: once the waiters owed a fence had their turn, they go first.
        let asked = !lease.asks.live(now.wall).is_empty();
        let waiter = self.lines.next_in_line(ticket);
        // Waiters behind the next one, here or announced: each is owed one of the fences the
        // hand-off CAS reserves.
        let behind = waiter.map_or(0, |next| self.lines.behind(next, MAX_BATCH - 1));
        let behind = behind.max(followers.min(MAX_BATCH - 1)) as u64;
        let state = self.lines.line_data(line);
        let streak_since = state.and_then(|state| state.streak_since);
        let streak_ms = state.map_or(MAX_LOCAL_STREAK_MS, |state| state.streak_ms);
        let in_streak = streak_since.is_none_or(|since| now.mono - since < streak_ms);
        let young = streak_ms.min(lease.stale_ms / 4.0);
        let told = state.is_some_and(|state| state.told);
        let from_batch = state.is_some_and(|state| {
            state.batch.as_ref().is_some_and(|batch| {
                !uncertain
                    && batch.version == lease.version
                    && now.mono - batch.stamp.mono < young
                    && (lease.fence < batch.owed
                        || (lease.fence < batch.last_fence
                            && !asked
                            && !told
                            && spare_usable(state, batch, now)))
            })
        });
        let next = waiter.filter(|_| in_streak);
        let then = match next {
            Some(next) if from_batch => {
                self.hand_on_in_batch(ticket, next);
                return Step::Done;
            }
            Some(next) if !asked => {
                let fence = next_fence(lease.record_fence, now);
                let (owed, last_fence) = batch_fences(fence, behind, now);
                let stale_ms = self.options_of(next).map_or(lease.stale_ms, |o| o.stale_ms);
                AfterRelease::HandOff {
                    token: self.new_token(random),
                    fence,
                    owed,
                    last_fence,
                    lease: promised(stale_ms),
                }
            }
            // Waiters left when a streak ended at its bound: they let others in first.
            _ => AfterRelease::Free {
                capped: !asked && next.is_none() && waiter.is_some() && streak_since.is_some(),
            },
        };
        if waiter.is_some() {
            // Should the record be freed for other isolates, the waiter here asks behind them.
            self.ask_id(random);
        }
        // The record changed under the batch (a guard said so): read it first.
        self.begin_release(ticket, then, uncertain || told, now)
    }

    /// A release to `next` within the batch the record carries: no store call. The record
    /// already carries the batch's token and a fence above the next one; the next holds it for
    /// its own lease or the one the record promises, whichever is shorter.
    fn hand_on_in_batch(&mut self, ticket: Ticket, next: Ticket) {
        let holder = self.options_of(next);
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
        let mut handed = batch.lease(
            lease.fence + 1,
            holder.unwrap_or_else(|| lease.options()),
            lease.contested,
        );
        // What this holder learned of other isolates' asks goes on with the batch.
        handed.asks = lease.asks.clone();
        handed.starts = lease.starts.clone();
        self.hold(next, handed);
        self.remove(ticket);
    }

    /// Moves a holder to releasing, and says its first store call.
    fn begin_release(
        &mut self,
        ticket: Ticket,
        then: AfterRelease,
        read_first: bool,
        now: Now,
    ) -> Step<V> {
        let own = self.own_ask(ticket, now);
        let Some(State::Holding(mut lease)) = self.take_state(ticket) else {
            return Step::Done;
        };
        lease.renewing = None;
        let mut release = Release {
            stamp: lease.next_stamp(now),
            lease,
            then,
            phase: Phase::ReadFirst,
            refreshes: 0,
            queued: false,
        };
        let step = if read_first {
            release.read()
        } else {
            release.write(own)
        };
        if let Some(entry) = self.lines.get_mut(ticket) {
            entry.state = State::Releasing(release);
        }
        self.call(step)
    }

    /// A releaser's answer: released, refused (nothing of this lease's is left), read back, or
    /// failed.
    pub(super) fn releasing(&mut self, ticket: Ticket, answer: Answer<V>, now: Now) -> Step<V> {
        let own = self.own_ask(ticket, now);
        let Some(Entry {
            state: State::Releasing(release),
            ..
        }) = self.lines.get_mut(ticket)
        else {
            return Step::Done;
        };
        match (release.phase, answer) {
            (Phase::Write, Answer::Replaced(Some(version))) => {
                self.released(ticket, version, now);
                Step::Done
            }
            (Phase::Write, Answer::Failed | Answer::TimedOut) => {
                release.phase = Phase::ReadBack;
                let step = release.read();
                self.call(step)
            }
            // The version moved: an ask, or a takeover. The read says which.
            (Phase::Write, Answer::Replaced(None)) if release.refreshes < REFRESHES => {
                release.phase = Phase::ReadFirst;
                release.refreshes += 1;
                let step = release.read();
                self.call(step)
            }
            (Phase::ReadBack, Answer::Read(Some((version, record)))) if release.wrote(&record) => {
                self.stats.read_backs_applied += 1;
                self.released(ticket, version, now);
                Step::Done
            }
            // The record is this lease's, at a version an unknown write of its own left.
            (Phase::ReadFirst, Answer::Read(Some((version, record))))
                if release.lease.owns(&record) =>
            {
                release.lease.adopt(version, record);
                release.asked();
                let step = release.write(own);
                self.call(step)
            }
            // The write did not take (the record is still this lease's), or the store did not
            // answer the read: the record stays as the store has it.
            (Phase::ReadBack, Answer::Read(Some((_, record)))) if release.lease.owns(&record) => {
                self.remove(ticket);
                Step::Failed
            }
            (_, Answer::Failed | Answer::TimedOut) => {
                self.remove(ticket);
                Step::Failed
            }
            // Refused, gone, or somebody else's: taken over, nothing left to release.
            _ => {
                self.remove(ticket);
                Step::Done
            }
        }
    }

    /// A release's write took: hand the lease to whoever is next here now (the waiter the CAS
    /// was for may have left meanwhile), or remember the free record; the releaser leaves.
    fn released(&mut self, ticket: Ticket, version: V, now: Now) {
        let (Some(name), Some(line)) = (self.key(ticket), self.lines.line_of(ticket)) else {
            return;
        };
        let next = self.lines.next_in_line(ticket);
        // Leaves its line last (below), so the next waiter is handed the lease rather than
        // promoted.
        let Some(State::Releasing(release)) = self.take_state(ticket) else {
            return;
        };
        let others = release.offered().len();
        let offered = others > 0;
        // Its own ask went in behind the others': its offer comes after theirs.
        let queued = release.queued.then_some(others as f64 * OFFER_MS);
        let Release {
            lease, then, stamp, ..
        } = release;
        match (then, next) {
            (
                AfterRelease::HandOff {
                    token,
                    fence,
                    owed,
                    last_fence,
                    lease: promised,
                },
                Some(target),
            ) => {
                let batch = Batch::new(
                    version.clone(),
                    token,
                    (owed, last_fence),
                    stamp,
                    promised,
                    lease.store_timeout_ms,
                );
                let holder = self.options_of(target).unwrap_or_else(|| lease.options());
                let mut handed = batch.lease(fence, holder, lease.contested);
                handed.starts = lease.starts;
                self.begin_batch(line, batch, lease.stale_ms);
                self.known.saw(&name, &version, now.mono);
                self.hold(target, handed);
            }
            // Nobody here to take it: held by a token nobody has. Remembered, so this
            // isolate's next acquisition takes it with one CAS.
            (AfterRelease::HandOff { last_fence, .. }, None) => {
                self.known.freed(
                    &name,
                    version,
                    now.mono,
                    Freed {
                        fence: last_fence,
                        contested: lease.contested,
                        slots: lease.slots,
                        starts: lease.starts,
                    },
                );
            }
            // Offered to the isolates that asked: this isolate's next acquisition reads it.
            (AfterRelease::Free { .. }, _) if offered => {
                match queued {
                    Some(after) => {
                        self.known
                            .queued(&name, version, now.mono, stamp.mono + after);
                    }
                    None => {
                        self.known.saw(&name, &version, now.mono);
                    }
                }
                if let Some(state) = self.lines.line_data_mut(line) {
                    state.yield_first = false;
                    state.end_batch();
                }
            }
            (AfterRelease::Free { capped }, _) => {
                self.known.freed(
                    &name,
                    version,
                    now.mono,
                    Freed {
                        fence: lease.record_fence,
                        contested: lease.contested,
                        slots: lease.slots,
                        starts: lease.starts,
                    },
                );
                if let Some(state) = self.lines.line_data_mut(line) {
                    state.yield_first = capped;
                    state.end_batch();
                }
            }
        }
        self.remove(ticket);
    }

    /// This isolate's ask for the waiter behind `ticket` here, if any: its id, and until when
    /// (wall) it waits.
    fn own_ask(&self, ticket: Ticket, now: Now) -> Option<(AskId, f64)> {
        let id = self.ask_id?;
        let next = self.lines.next_in_line(ticket)?;
        match self.lines.get(next)?.state {
            State::Waiting { deadline, .. } => Some((id, now.wall + (deadline - now.mono))),
            _ => None,
        }
    }

    /// `line` hands its lease on from `batch` from now on, for as long as its streak's bound
    /// and a quarter of its writer's lease (`stale_ms`) allow; nothing is told of its record
    /// yet, and a guard is wanted.
    #[inline(never)]
    pub(super) fn begin_batch(&mut self, line: LineId, mut batch: Batch<V>, stale_ms: f64) {
        if let Some(state) = self.lines.line_data_mut(line) {
            batch.young_ms = state.streak_ms.min(stale_ms / 4.0);
            state.streak_since.get_or_insert(batch.stamp.mono);
            state.batch = Some(batch);
            state.told = false;
        }
        self.want_guard(line);
    }

    // --- guards: a busy line's watch for other isolates' asks ---

    /// `line` wants a guard on its batch's record (a store that tells changes, and a driver that
    /// keeps guards).
    pub(super) fn want_guard(&mut self, line: LineId) {
        if !(self.line_guards && self.store_tells_changes) {
            return;
        }
        let Some(state) = self.lines.line_data_mut(line) else {
            return;
        };
        if !state.guard_wanted {
            state.guard_wanted = true;
            if self.guards.is_empty() {
                self.woken.push(super::Woken::Guard);
            }
            self.guards.push(line);
        }
    }

    /// The next guard the driver must start, at `now`, for the line it names:
    /// `store.changed(name, version, until − now)`, raced with `until` (monotonic) — one store
    /// call's bound, and no later than the batch is used — then [`guarded`](Self::guarded) with
    /// what came of it. One store call, counted as a watch. A line has one guard at a time,
    /// kept across its hand-offs; a guard whose answer never came is given up at `until` and
    /// started anew.
    pub fn take_guard(&mut self, now: Now) -> Option<Guard<V>> {
        while let Some(line) = self.guards.pop() {
            let name = self.lines.head(line).and_then(|head| self.key(head));
            let (Some(name), Some(state)) = (name, self.lines.line_data_mut(line)) else {
                continue;
            };
            state.guard_wanted = false;
            let Some(batch) = &state.batch else {
                continue;
            };
            // Watched already, or too old to be used any more.
            let used_until = batch.stamp.mono + batch.young_ms;
            if guard_live(state, batch, now) || now.mono >= used_until {
                continue;
            }
            let until = used_until.min(now.mono + batch.bound_ms);
            let version = batch.version.clone();
            self.guard_number = self.guard_number.wrapping_add(1);
            let number = self.guard_number;
            state.guard = Some((number, version.clone(), until));
            self.stats.watches += 1;
            self.stats.store_calls += 1;
            return Some(Guard {
                line,
                number,
                name,
                version,
                until,
            });
        }
        None
    }

    /// What came of guard `number` of `line`: [`Answer::Changed`] — another isolate wrote the
    /// record (an ask, or a takeover), so the line's next release past the owed fences reads it
    /// first; [`Answer::Woke`] — unchanged until its bound, so it is started anew; a failure —
    /// not started again before the line's next batch. A guard of a version the line's own
    /// write has moved on from is started anew on the new one.
    pub fn guarded(&mut self, line: LineId, number: u32, answer: Answer<V>) {
        match answer {
            Answer::Changed => self.stats.wake_ups += 1,
            Answer::Failed | Answer::TimedOut => self.stats.store_failures += 1,
            _ => {}
        }
        // (A line gone idle has no state; one made again for another name has no guard of
        // this number.)
        let Some(state) = self.lines.line_data_mut(line) else {
            return;
        };
        let Some((_, version, _)) = state.guard.take_if(|(watched, _, _)| *watched == number)
        else {
            return; // a guard given up already
        };
        let Some(batch) = &state.batch else {
            return;
        };
        let current = batch.version == version;
        match answer {
            Answer::Changed if current => state.told = true,
            Answer::Failed | Answer::TimedOut => {}
            _ => self.want_guard(line),
        }
    }
}

impl<V> NameState<V> {
    /// The line's record is freed: no batch, no streak, no guard.
    fn end_batch(&mut self) {
        self.streak_since = None;
        self.batch = None;
        self.guard = None;
        self.told = false;
    }
}

/// Whether `state`'s guard watches `batch`'s record now.
fn guard_live<V: PartialEq>(state: &NameState<V>, batch: &Batch<V>, now: Now) -> bool {
    state
        .guard
        .as_ref()
        .is_some_and(|(_, version, until)| *version == batch.version && now.mono < *until)
}

/// Whether `batch`'s spare fences may be handed on: a guard watches its record for asks, or it
/// is younger than a poll's longest pause (so an asker waits no longer than a poller would).
fn spare_usable<V: PartialEq>(state: &NameState<V>, batch: &Batch<V>, now: Now) -> bool {
    now.mono - batch.stamp.mono < MAX_POLL_MS || guard_live(state, batch, now)
}
