//! Holding a lease: its view, its end, and its renewals.
//!
//! A lease runs `staleMs` from its record's `at` on the wall clock, and from the write on this
//! isolate's monotonic clock, whichever ends first. A renewal is one CAS on the version this
//! holder's record has, keeping token and fence and moving `at` to now — by at least 1, so no
//! two writes of the record carry the same bytes (a store whose version hashes the value never
//! sees a version come back, and a watcher sees every renewal). A holder that renews while it
//! works does so `staleMs / 3` apart, whatever the last renewal answered: a failed one is tried
//! again while the lease has time left. A lease past its end is lost for good.
//!
//! A write refused because the version moved reads the record: still held with this lease's
//! token and fence, it was another isolate asking for the name (`asks`), and the write is made
//! again on the new version, keeping the asks — at most [`REFRESHES`] times per write.

use super::{is_written, Answer, Entry, Lease, LeaseView, LockCore, Now, Stamp, State, Step};
use crate::engine::asks::MAX_ASKS;
use crate::engine::queue::Ticket;
use crate::engine::record::{encode_ours, NotARecord, Record};
use crate::engine::starts::Starts;

/// A renewal in flight: its record's stamp, and where it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Renewal {
    stamp: Stamp,
    phase: Phase,
    /// Reads after a refused write so far.
    refreshes: u8,
}

/// The most times one write of a lease is made again after asks moved the record's version:
/// each isolate asks once per turn and a queue holds [`MAX_ASKS`] of them, so more means a store
/// that answers wrongly.
pub(super) const REFRESHES: u8 = 2 * MAX_ASKS as u8;

/// Where a write of a held lease is: reading the record first (the last write's outcome was
/// unknown), writing, or reading back a write whose call failed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Phase {
    ReadFirst,
    Write,
    ReadBack,
}

impl<V> Lease<V> {
    /// Whether `record` is this lease's record as the store has it: held, with its token and
    /// fence (at any time: an unknown write of its own may have moved it).
    pub(super) fn owns(&self, record: &Result<Record, NotARecord>) -> bool {
        matches!(record, Ok(found) if found.held && found.token == *self.token && found.fence == self.record_fence)
    }

    /// Goes on from the record the store has, found to be this lease's: its version, and the
    /// asks other isolates added.
    pub(super) fn adopt(&mut self, version: V, record: Result<Record, NotARecord>) {
        self.version = version;
        if let Ok(record) = record {
            self.asks = record.asks;
        }
    }

    /// The stamp of this lease's next write: now, and at least 1 past its record's `at`, so no
    /// two writes of the record carry the same bytes even on a clock that has not moved.
    pub(super) fn next_stamp(&self, now: Now) -> Stamp {
        Stamp {
            at: Stamp::of(now).at.max(self.stamp.at + 1.0),
            mono: now.mono,
        }
    }

    /// The renewal of this lease's record, stamped `stamp`: a replace of its version.
    pub(super) fn write(&self, stamp: Stamp) -> Step<V>
    where
        V: Clone,
    {
        Step::Replace {
            version: self.version.clone(),
            value: self.record(stamp),
            bound_ms: self.store_timeout_ms,
        }
    }

    /// This lease's record, stamped `stamp`.
    pub(super) fn record(&self, stamp: Stamp) -> String {
        encode_ours(
            true,
            &self.token,
            self.record_fence,
            stamp.at,
            self.promised(),
            &self.asks.live(stamp.at),
            &self.starts,
            self.slots,
        )
    }
}

impl<V: Clone + PartialEq, W> LockCore<V, W> {
    fn lease_mut(&mut self, ticket: Ticket) -> Option<&mut Lease<V>> {
        match self.lines.get_mut(ticket) {
            Some(Entry {
                state: State::Holding(lease),
                ..
            }) => Some(lease),
            _ => None,
        }
    }

    /// The lease `ticket` holds, if it holds one (and a renewal has not found it lapsed).
    pub fn lease(&self, ticket: Ticket) -> Option<LeaseView<'_>> {
        match &self.lines.get(ticket)?.state {
            State::Holding(lease) if !lease.lapsed => Some(LeaseView {
                token: &lease.token,
                count: lease.token.count,
                fence: lease.fence,
                held_until: lease.held_until(),
                ends_at: lease.ends_at(),
                took_over: lease.took_over,
            }),
            _ => None,
        }
    }

    /// The key's last starts as the lease `ticket` holds knows them (a paced serializer's).
    pub(crate) fn starts(&self, ticket: Ticket) -> Option<&Starts> {
        match &self.lines.get(ticket)?.state {
            State::Holding(lease) => Some(&lease.starts),
            _ => None,
        }
    }

    /// A paced serializer's work started at `wall` under the lease `ticket` holds: its next
    /// write carries the start on, with the `limit` before it at most.
    pub(crate) fn started(&mut self, ticket: Ticket, wall: f64, limit: u32) {
        if let Some(lease) = self.lease_mut(ticket) {
            lease.starts.started(wall, limit);
        }
    }

    /// The newest start under the lease `ticket` holds was made at `wall`, not before.
    pub(crate) fn restamp_start(&mut self, ticket: Ticket, wall: f64) {
        if let Some(lease) = self.lease_mut(ticket) {
            lease.starts.restamp(wall);
        }
    }

    /// Whether `ticket` holds a lease that has not ended by `now`.
    pub fn holds(&self, ticket: Ticket, now: Now) -> bool {
        matches!(&self.lines.get(ticket).map(|entry| &entry.state),
            Some(State::Holding(lease)) if !lease.lapsed && !lease.ended(now))
    }

    /// A renewal its driver stopped waiting for (dropped, or past its bound): its outcome is
    /// unknown, so the lease's next write reads the record first. Its answer, if it ever comes,
    /// is not fed back.
    pub fn renewal_abandoned(&mut self, ticket: Ticket) {
        if let Some(lease) = self.lease_mut(ticket) {
            if lease.renewing.take().is_some() {
                lease.uncertain = true;
            }
        }
    }

    /// When a holder that keeps its lease while its work runs (`withLock`, a serializer's turn)
    /// renews next, on the monotonic clock: `staleMs / 3` after `now` — when it took the lease, and
    /// after every renewal whatever it answered. So a renewal that failed (a store error) is
    /// tried again at the next tick while the lease has time left ([`LockCore::renew`] answers
    /// [`Step::Lost`] once it has none). `None` once the lease is lost, lapsed or released.
    pub fn next_renewal(&self, ticket: Ticket, now: Now) -> Option<f64> {
        match &self.lines.get(ticket)?.state {
            State::Holding(lease) if !lease.lapsed => Some(now.mono + lease.stale_ms / 3.0),
            _ => None,
        }
    }

    /// Starts a renewal: [`Step::Replace`] that moves the lease to now (or [`Step::Read`] first,
    /// when the last write's outcome is unknown), then [`LockCore::step`] with each answer:
    /// [`Step::Held`] renewed, [`Step::Lost`] lost, [`Step::Failed`] the store failed and the
    /// lease runs to its old end. [`Step::Lost`] with no store call when the lease is gone or
    /// past its end — lost for good.
    pub fn renew(&mut self, ticket: Ticket, now: Now) -> Step<V> {
        let Some(lease) = self.lease_mut(ticket) else {
            return Step::Lost;
        };
        if lease.lapsed || lease.ended(now) {
            // Lost for good; a release still frees the record if nobody took it over since.
            lease.lapsed = true;
            return Step::Lost;
        }
        if lease.renewing.is_some() {
            // One renewal at a time: a driver waits for the one in flight.
            return Step::Held;
        }
        let stamp = lease.next_stamp(now);
        if lease.uncertain {
            lease.renewing = Some(Renewal {
                stamp,
                phase: Phase::ReadFirst,
                refreshes: 0,
            });
            let bound_ms = lease.store_timeout_ms;
            return self.call(Step::Read { bound_ms });
        }
        lease.renewing = Some(Renewal {
            stamp,
            phase: Phase::Write,
            refreshes: 0,
        });
        let step = lease.write(stamp);
        self.call(step)
    }

    /// A holder's answer: to a renewal's store call, or a wake-up.
    pub(super) fn holding(&mut self, ticket: Ticket, answer: Answer<V>, now: Now) -> Step<V> {
        let Some(lease) = self.lease_mut(ticket) else {
            return Step::Lost;
        };
        let Some(Renewal {
            stamp,
            phase,
            refreshes,
        }) = lease.renewing
        else {
            // A wake-up (a waiter handed the lease), or nothing in flight.
            return Step::Held;
        };
        let write = |lease: &mut Lease<V>, phase| {
            lease.renewing = Some(Renewal {
                stamp,
                phase,
                refreshes,
            });
        };
        match (phase, answer) {
            (Phase::Write, Answer::Replaced(Some(version))) => {
                self.renewed(ticket, version, stamp, now);
                Step::Held
            }
            // The version moved: an ask, or a takeover. The read says which.
            (Phase::Write, Answer::Replaced(None)) if refreshes < REFRESHES => {
                lease.renewing = Some(Renewal {
                    stamp,
                    phase: Phase::ReadFirst,
                    refreshes: refreshes + 1,
                });
                let bound_ms = lease.store_timeout_ms;
                self.call(Step::Read { bound_ms })
            }
            (Phase::Write, Answer::Failed | Answer::TimedOut) => {
                write(lease, Phase::ReadBack);
                let bound_ms = lease.store_timeout_ms;
                self.call(Step::Read { bound_ms })
            }
            (Phase::ReadBack, Answer::Read(Some((version, record))))
                if is_written(
                    &record,
                    true,
                    &lease.token,
                    lease.record_fence,
                    stamp.at,
                    lease.promised(),
                ) =>
            {
                self.stats.read_backs_applied += 1;
                self.renewed(ticket, version, stamp, now);
                Step::Held
            }
            // The write did not take, and the record is still this lease's: it runs on.
            (Phase::ReadBack, Answer::Read(Some((_, record)))) if lease.owns(&record) => {
                lease.renewing = None;
                Step::Failed
            }
            (Phase::ReadBack | Phase::ReadFirst, Answer::Failed | Answer::TimedOut) => {
                lease.renewing = None;
                lease.uncertain = true;
                Step::Failed
            }
            // The record is this lease's, at a version an unknown write of its own left: go on
            // from there.
            (Phase::ReadFirst, Answer::Read(Some((version, record)))) if lease.owns(&record) => {
                lease.adopt(version, record);
                lease.uncertain = false;
                write(lease, Phase::Write);
                let step = lease.write(stamp);
                self.call(step)
            }
            // Refused, or the record is somebody else's: taken over.
            _ => {
                self.remove(ticket);
                Step::Lost
            }
        }
    }

    /// A renewal the store took: the lease runs from `stamp`, and a batch on the same record
    /// follows it (its hand-offs keep the renewed version and time).
    fn renewed(&mut self, ticket: Ticket, version: V, stamp: Stamp, now: Now) {
        let Some(name) = self.key(ticket) else {
            return;
        };
        let Some(lease) = self.lease_mut(ticket) else {
            return;
        };
        let old = std::mem::replace(&mut lease.version, version.clone());
        lease.stamp = stamp;
        lease.renewing = None;
        let ends_at = lease.ends_at();
        if let Some(line) = self.lines.line_of(ticket) {
            if let Some(batch) = self
                .lines
                .line_data_mut(line)
                .and_then(|state| state.batch.as_mut())
                .filter(|batch| batch.version == old)
            {
                batch.version = version.clone();
                batch.stamp = stamp;
            }
        }
        self.known.saw(&name, &version, now.mono);
        if self.lines.next_in_line(ticket).is_some() {
            self.push_timer(ends_at, ticket);
        }
    }
}
