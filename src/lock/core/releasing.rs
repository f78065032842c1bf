//! Releasing a lease: a hand-on within a batch, a hand-off, or a free.
//!
//! A release with waiters behind hands the lease to the next one here by one CAS that raises
//! the fence and reserves one fence for each waiter then in line (up to [`MAX_BATCH`]); the
//! hand-ons after it within the batch need no store call. A batch is used only while younger
//! than the streak bound and a quarter of the lease, and a streak of local hand-offs ends after
//! its bound ([`Succession::streak_ms`](super::Succession)): the record is freed and the next
//! local head pauses one poll, so other isolates get their turn. With nobody waiting here the
//! record is freed, keeping its fence.
//!
//! A holder whose record carries asks (other isolates waiting, see `crate::asks`) frees it at
//! its release, whoever waits here: the free record, keeping the asks, is offered to them in
//! order. A release refused because the version moved reads the record, as a renewal does: an
//! ask came in, and the release is made again on the new version — now a free.
//!
//! A release whose write failed reads the record back once, as every write of a lease does; one
//! that follows a write whose outcome stayed unknown (a renewal its driver stopped waiting for)
//! reads the record first, and releases only a record that is still this lease's.

use super::holding::{Phase, REFRESHES};
use super::{is_written, promised, Answer, Entry, Lease, LockCore, Now, Stamp, State, Step};
use crate::asks::Asks;
use crate::lock::{LockOptions, MAX_BATCH, MAX_LOCAL_STREAK_MS};
use crate::queue::Ticket;
use crate::random::Random;
use crate::record::{encode_ours, NotARecord, Record};

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
}

/// What a release writes, and what comes of it.
enum AfterRelease {
    /// The next waiter gets `fence`; fences up to `last_fence` are reserved for those behind.
    /// The record promises `lease` (the next waiter's `staleMs`).
    HandOff {
        token: String,
        fence: u64,
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
    token: String,
    last_fence: u64,
    pub(super) stamp: Stamp,
    lease: u64,
}

impl<V: Clone> Batch<V> {
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
        }
    }
}

impl<V> Release<V> {
    /// The record this release writes.
    fn record(&self) -> String {
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
            ),
            AfterRelease::Free { .. } => encode_ours(
                false,
                "",
                self.lease.record_fence,
                self.stamp.at,
                None,
                &self.offered(),
            ),
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

    /// Moves to writing: a replace of the lease's version with this release's record.
    fn write(&mut self) -> Step<V>
    where
        V: Clone,
    {
        self.phase = Phase::Write;
        Step::Replace {
            version: self.lease.version.clone(),
            value: self.record(),
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
        // Other isolates asked: they go first, whoever waits here.
        let asked = !lease.asks.live(now.wall).is_empty();
        let next = self.lines.next_in_line(ticket).filter(|_| !asked);
        // Waiters behind the next one, here or announced: each gets one of the fences the
        // hand-off CAS reserves.
        let behind = next.map_or(0, |next| self.lines.behind(next, MAX_BATCH - 1));
        let behind = behind.max(followers.min(MAX_BATCH - 1)) as u64;
        let state = self.lines.line_data(line);
        let streak_since = state.and_then(|state| state.streak_since);
        let streak_ms = state.map_or(MAX_LOCAL_STREAK_MS, |state| state.streak_ms);
        let in_streak = streak_since.is_none_or(|since| now.mono - since < streak_ms);
        let young = streak_ms.min(lease.stale_ms / 4.0);
        let from_batch = state
            .and_then(|state| state.batch.as_ref())
            .is_some_and(|batch| {
                !uncertain
                    && batch.version == lease.version
                    && lease.fence < batch.last_fence
                    && now.mono - batch.stamp.mono < young
            });
        let then = match (next.filter(|_| in_streak), from_batch) {
            (Some(next), true) => {
                self.hand_on_in_batch(ticket, next);
                return Step::Done;
            }
            (Some(next), false) => {
                let fence = lease.record_fence + 1;
                let stale_ms = self.options_of(next).map_or(lease.stale_ms, |o| o.stale_ms);
                AfterRelease::HandOff {
                    token: random.token(),
                    fence,
                    last_fence: fence + behind,
                    lease: promised(stale_ms),
                }
            }
            // Waiters left when a streak ended at its bound: they let others in first.
            (None, _) => AfterRelease::Free {
                capped: !asked && next.is_some() && streak_since.is_some(),
            },
        };
        self.begin_release(ticket, then, uncertain, now)
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
        let handed = batch.lease(
            lease.fence + 1,
            holder.unwrap_or_else(|| lease.options()),
            lease.contested,
        );
        self.hold(next, handed);
        self.remove(ticket);
    }

    /// Moves a holder to releasing, and says its first store call.
    fn begin_release(
        &mut self,
        ticket: Ticket,
        then: AfterRelease,
        uncertain: bool,
        now: Now,
    ) -> Step<V> {
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
        };
        let step = if uncertain {
            release.read()
        } else {
            release.write()
        };
        if let Some(entry) = self.lines.get_mut(ticket) {
            entry.state = State::Releasing(release);
        }
        self.call(step)
    }

    /// A releaser's answer: released, refused (nothing of this lease's is left), read back, or
    /// failed.
    pub(super) fn releasing(&mut self, ticket: Ticket, answer: Answer<V>, now: Now) -> Step<V> {
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
                let step = release.write();
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
        let (Some(name), Some(line)) = (self.name_of(ticket), self.lines.line_of(ticket)) else {
            return;
        };
        let next = self.lines.next_in_line(ticket);
        // Leaves its line last (below), so the next waiter is handed the lease rather than
        // promoted.
        let Some(State::Releasing(release)) = self.take_state(ticket) else {
            return;
        };
        let offered = !release.offered().is_empty();
        let Release {
            lease, then, stamp, ..
        } = release;
        match (then, next) {
            (
                AfterRelease::HandOff {
                    token,
                    fence,
                    last_fence,
                    lease: promised,
                },
                Some(target),
            ) => {
                let batch = Batch {
                    version: version.clone(),
                    token,
                    last_fence,
                    stamp,
                    lease: promised,
                };
                let holder = self.options_of(target).unwrap_or_else(|| lease.options());
                let handed = batch.lease(fence, holder, lease.contested);
                if let Some(state) = self.lines.line_data_mut(line) {
                    state.streak_since.get_or_insert(stamp.mono);
                    state.batch = Some(batch);
                }
                self.known.saw(&name, &version, now.mono);
                self.hold(target, handed);
            }
            // Nobody here to take it: held by a token nobody has. Remembered, so this
            // isolate's next acquisition takes it with one CAS.
            (AfterRelease::HandOff { last_fence, .. }, None) => {
                self.known
                    .freed(&name, version, now.mono, last_fence, lease.contested);
            }
            // Offered to the isolates that asked: this isolate's next acquisition reads it.
            (AfterRelease::Free { .. }, _) if offered => {
                self.known.saw(&name, &version, now.mono);
                if let Some(state) = self.lines.line_data_mut(line) {
                    state.yield_first = false;
                    state.streak_since = None;
                    state.batch = None;
                }
            }
            (AfterRelease::Free { capped }, _) => {
                self.known.freed(
                    &name,
                    version,
                    now.mono,
                    lease.record_fence,
                    lease.contested,
                );
                if let Some(state) = self.lines.line_data_mut(line) {
                    state.yield_first = capped;
                    state.streak_since = None;
                    state.batch = None;
                }
            }
        }
        self.remove(ticket);
    }
}
