//! Taking a name: a contender at the head of its line, talking to the store.
//!
//! The conditional create is the decision; a free record is taken by CAS on the version read.
//! A held record is taken over by CAS once it is stale by either rule:
//! - **aged**: older, by this isolate's wall clock, than its lease plus the clock skew allowed
//!   (`maxClockSkewMs`, default 0), where its lease is the longer of the one its holder promised
//!   (the record's `lease`) and the taker's own `staleMs`: so a taker never cuts short a lease a
//!   holder promised itself, and a taker whose clock runs fast by less than the skew allowed
//!   never takes a live lease;
//! - **watched**: this isolate has seen that same version stay unchanged for that lease on its
//!   monotonic clock, counted from the answer that first showed it (a read's, or its own
//!   write's) — which needs no clock agreement, so a dead holder whose clock ran ahead, even by
//!   hours, is taken over after one lease of watching (the DynamoDB Lock Client's rule).
//!
//! A record that is not ours is taken over only by watching. A write whose call failed is read
//! back once: the record holding exactly what it wrote means the write took.
//!
//! **Asking** (`crate::engine::asks`): a contender that finds the name held elsewhere, live, adds its
//! ask to the record with one CAS that keeps every other field, then waits (watching the
//! record, or polling, its pauses ending by when the record turns stale or its offer comes). A free record that carries asks is
//! taken only as [`Asks::may_take`] says — the first ask at once, the others each after the
//! offers before theirs ran — and its taker keeps the asks still waiting, so its own release
//! offers them the name in turn.

use super::releasing::Batch;
use super::{
    batch_fences, is_written, next_fence, promised, Answer, Entry, LockCore, Now, Stamp, State,
    Step,
};
use super::{Lease, Token};
use crate::engine::asks::{AskId, Asks};
use crate::engine::options::{LockOptions, MAX_BATCH, MAX_POLL_MS, TAKEOVERS};
use crate::engine::queue::Ticket;
use crate::engine::random::Random;
use crate::engine::record::{encode_ours, is_plain, NotARecord, Record};
use crate::engine::starts::Starts;

/// The first pause between attempts; each later pause doubles, up to [`MAX_POLL_MS`].
const FIRST_POLL_MS: f64 = 2.0;

/// One acquisition at the head of its line.
pub(super) struct Attempt {
    pub(super) deadline: f64,
    pub(super) options: LockOptions,
    /// Made when the attempt starts ([`LockCore::new_token`]).
    token: Token,
    takeovers: u32,
    poll: f64,
    /// A record is known to be there: polls read instead of create.
    exists: bool,
    /// The fence of the record this isolate freed last (0 for none): a read that finds it
    /// still there, free, shows nobody took the name since.
    known_fence: u64,
    /// Another isolate wrote the record since this isolate freed it.
    contested: bool,
    /// A watch of this attempt failed: it polls from then on (a store whose `changed` fails
    /// once would cost a failed call per poll).
    watch_failed: bool,
    /// The asks the record this attempt writes carries (what it took over, or was offered).
    asks: Asks,
    /// The starts the record this attempt writes carries on (see `crate::engine::starts`).
    starts: Starts,
    /// When (monotonic) to look at the record again at the latest: a held one turns stale, or
    /// a free one offered to others first becomes this attempt's to take.
    look_at: Option<f64>,
    call: Call,
}

/// What a read leads to.
enum Next<V> {
    /// A create or CAS taking the name: the version, the fence, a takeover, the asks it keeps.
    Write(V, u64, bool, Asks),
    /// A CAS adding this attempt's ask.
    Ask(V, String),
    /// Wait for the record at this version to change.
    Wait(V),
    Poll,
}

/// The step an attempt is in.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Call {
    /// Not started yet: its turn just came.
    Idle,
    /// Paused (first a yield to other isolates, later between polls).
    Sleep,
    /// Watching the record for a change (a store that tells changes), since `since`
    /// (monotonic).
    Watch {
        since: f64,
    },
    Read,
    /// A CAS adding this attempt's ask to a record held elsewhere.
    Ask,
    /// A create or CAS taking the record.
    Write {
        take: Take,
        /// Its call failed: the record is being read back.
        read_back: bool,
    },
}

/// What a take writes: this attempt's `fence`, and — in the record — `last`: above `fence`, the
/// fences of a batch, those up to `owed` owed to the acquisitions known to follow. Stamped
/// `stamp`; `takeover`: of a stale record.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Take {
    fence: u64,
    owed: u64,
    last: u64,
    stamp: Stamp,
    takeover: bool,
}

impl Attempt {
    pub(super) fn new(deadline: f64, options: LockOptions) -> Self {
        Attempt {
            deadline,
            options,
            token: Token::default(),
            takeovers: 0,
            poll: FIRST_POLL_MS,
            exists: false,
            known_fence: 0,
            contested: false,
            watch_failed: false,
            asks: Asks::default(),
            starts: Starts::default(),
            look_at: None,
            call: Call::Idle,
        }
    }

    /// The bound on this attempt's next store call, at `now`: its `storeTimeoutMs`, and no later
    /// than its wait's end plus one such bound — so an acquisition settles within that.
    fn bound(&self, now: Now) -> f64 {
        let bound = self.options.store_timeout();
        bound.min(self.deadline + bound - now.mono).max(0.0)
    }

    /// The record this attempt writes: held, with its token and `fence`, stamped `stamp`,
    /// carrying the asks of the isolates still waiting.
    fn record(&self, fence: u64, stamp: Stamp, asks: &Asks) -> String {
        encode_ours(
            true,
            &self.token,
            fence,
            stamp.at,
            Some(promised(self.options.stale_ms)),
            asks,
            &self.starts,
            self.options.slots(),
        )
    }

    /// `record` with this attempt's ask added, waiting until its deadline (on the wall clock
    /// of `now`): `None` when the queue is full, or the record cannot be written back as it
    /// is (a token that would need escaping is no token of ours).
    fn asked(&self, record: &Record, asks: &Asks, id: &AskId, now: Now) -> Option<String> {
        let until = now.wall + (self.deadline - now.mono);
        let asks = asks.with(id, until)?;
        is_plain(&record.token).then(|| {
            encode_ours(
                record.held,
                &record.token,
                record.fence,
                record.at,
                record.lease,
                &asks,
                &record.starts,
                record.n,
            )
        })
    }
}

impl<V: Clone + PartialEq, W> LockCore<V, W> {
    fn attempt_mut(&mut self, ticket: Ticket) -> Option<&mut Attempt> {
        match self.lines.get_mut(ticket) {
            Some(Entry {
                state: State::Contending(attempt),
                ..
            }) => Some(attempt),
            _ => None,
        }
    }

    /// A contender's first step when its turn comes.
    pub(super) fn start(&mut self, ticket: Ticket, now: Now, random: &impl Random) -> Step<V> {
        let yield_first = self
            .lines
            .line_of(ticket)
            .and_then(|line| self.lines.line_data_mut(line))
            .is_some_and(|state| std::mem::take(&mut state.yield_first));
        let Some(name) = self.key(ticket) else {
            return Step::GiveUp;
        };
        let freed = self.known.take_freed(&name).filter(|_| !yield_first);
        // A record this isolate has seen (records are never deleted): read it, not create.
        let seen = freed.is_none() && self.known.key(&name).is_some();
        let token = self.new_token(random);
        let Some(attempt) = self.attempt_mut(ticket) else {
            return Step::GiveUp;
        };
        attempt.token = token;
        if yield_first {
            let jittered = MAX_POLL_MS * (0.5 + random.unit() / 2.0);
            let pause = jittered.min(attempt.deadline - now.mono);
            if pause > 0.0 {
                attempt.call = Call::Sleep;
                return Step::Sleep {
                    until: now.mono + pause,
                    early: pause == jittered,
                };
            }
        }
        if freed.is_none() {
            if let Some((version, offer)) = self.known.take_queued(&name) {
                // This isolate freed the record for others, its own ask behind theirs: it waits
                // for the record to change, or for its offer, without reading first.
                if let Some(attempt) = self.attempt_mut(ticket) {
                    attempt.exists = true;
                    attempt.look_at = Some(offer);
                }
                return self.wait_for_record(ticket, version, now, random);
            }
        }
        let Some(attempt) = self.attempt_mut(ticket) else {
            return Step::GiveUp;
        };
        // A name keeps one concurrency: the record this isolate freed says which.
        let slots = attempt.options.slots();
        if let Some((_, freed)) = freed.as_ref().filter(|(_, freed)| freed.slots != slots) {
            let found = freed.slots;
            self.remove(ticket);
            return Step::Mismatch { found };
        }
        match freed {
            // Other isolates wrote it between this isolate's last two turns: they likely did
            // again, so read first (a CAS on the version known would fail, one call wasted).
            Some((_, freed)) if freed.contested => {
                attempt.exists = true;
                attempt.known_fence = freed.fence;
                attempt.contested = true;
                self.attempt(ticket, now)
            }
            // A record this isolate freed and nobody holds: take it with one CAS.
            Some((version, freed)) => {
                attempt.known_fence = freed.fence;
                attempt.starts = freed.starts;
                attempt.exists = true;
                let fence = next_fence(freed.fence, now);
                self.write(ticket, version, fence, false, Asks::default(), now)
            }
            None => {
                attempt.exists = seen;
                self.attempt(ticket, now)
            }
        }
    }

    /// The next store call of a contender that holds nothing yet: create until a record is
    /// known to exist, then read (records are never deleted).
    fn attempt(&mut self, ticket: Ticket, now: Now) -> Step<V> {
        let Some(attempt) = self.attempt_mut(ticket) else {
            return Step::GiveUp;
        };
        if attempt.exists {
            attempt.call = Call::Read;
            let bound_ms = attempt.bound(now);
            return self.call(Step::Read { bound_ms });
        }
        let fence = next_fence(0, now);
        let (owed, last) = self.reservation(ticket, fence, now);
        let Some(attempt) = self.attempt_mut(ticket) else {
            return Step::GiveUp;
        };
        let stamp = Stamp::of(now);
        attempt.call = Call::Write {
            take: Take {
                fence,
                owed,
                last,
                stamp,
                takeover: false,
            },
            read_back: false,
        };
        let (value, bound_ms) = (
            attempt.record(last, stamp, &Asks::default()),
            attempt.bound(now),
        );
        self.call(Step::Create { value, bound_ms })
    }

    /// The fences a take by `ticket` with `fence` reserves — `(owed, last)`: with acquisitions
    /// waiting behind it here, a batch ([`MAX_BATCH`] fences, one owed to each of those, the
    /// rest spare), so they are handed on with no store call; else `fence` alone.
    fn reservation(&self, ticket: Ticket, fence: u64, now: Now) -> (u64, u64) {
        match self.lines.next_in_line(ticket) {
            None => (fence, fence),
            Some(next) => {
                let behind = 1 + self.lines.behind(next, MAX_BATCH - 2) as u64;
                batch_fences(fence, behind, now)
            }
        }
    }

    /// A CAS on `version` writing this attempt's record with `fence` and `asks`.
    fn write(
        &mut self,
        ticket: Ticket,
        version: V,
        fence: u64,
        takeover: bool,
        asks: Asks,
        now: Now,
    ) -> Step<V> {
        let (owed, last) = self.reservation(ticket, fence, now);
        let Some(attempt) = self.attempt_mut(ticket) else {
            return Step::GiveUp;
        };
        let stamp = Stamp::of(now);
        attempt.call = Call::Write {
            take: Take {
                fence,
                owed,
                last,
                stamp,
                takeover,
            },
            read_back: false,
        };
        let (value, bound_ms) = (attempt.record(last, stamp, &asks), attempt.bound(now));
        attempt.asks = asks;
        self.call(Step::Replace {
            version,
            value,
            bound_ms,
        })
    }

    /// A contender's answer: hold, write, read (again, or back), pause, or give up.
    pub(super) fn contend(
        &mut self,
        ticket: Ticket,
        answer: Answer<V>,
        now: Now,
        random: &impl Random,
    ) -> Step<V> {
        let Some(attempt) = self.attempt_mut(ticket) else {
            return Step::GiveUp;
        };
        let call = std::mem::replace(&mut attempt.call, Call::Idle);
        match (call, answer) {
            (Call::Idle, _) => self.start(ticket, now, random),
            (
                Call::Write {
                    take,
                    read_back: false,
                },
                Answer::Created(Some(version)) | Answer::Replaced(Some(version)),
            ) => {
                self.took(ticket, version, take, now);
                Step::Held
            }
            // The write failed: read the record back, once.
            (
                Call::Write {
                    take,
                    read_back: false,
                },
                Answer::Failed | Answer::TimedOut,
            ) => {
                attempt.call = Call::Write {
                    take,
                    read_back: true,
                };
                let bound_ms = attempt.bound(now);
                self.call(Step::Read { bound_ms })
            }
            (
                Call::Write {
                    take,
                    read_back: true,
                },
                Answer::Read(Some((version, record))),
            ) if is_written(
                &record,
                true,
                &attempt.token,
                take.last,
                take.stamp.at,
                Some(promised(attempt.options.stale_ms)),
            ) =>
            {
                self.stats.read_backs_applied += 1;
                self.took(ticket, version, take, now);
                Step::Held
            }
            // Asked: wait for the record to change (the version is this attempt's own write).
            (Call::Ask, Answer::Replaced(Some(version))) => {
                if let Some(name) = self.key(ticket) {
                    self.known.asked(&name, &version, now.mono);
                }
                self.wait_for_record(ticket, version, now, random)
            }
            // Somebody wrote in between: read again at once.
            (Call::Ask, Answer::Replaced(None)) => self.attempt(ticket, now),
            // An ask whose outcome is unknown: the next read shows whether it took.
            (Call::Ask, Answer::Failed | Answer::TimedOut) => self.pause(ticket, now, random),
            // A watch that failed is no failure of the acquisition: it polls from then on.
            (Call::Watch { .. }, Answer::Failed | Answer::TimedOut) => {
                attempt.watch_failed = true;
                self.pause(ticket, now, random)
            }
            // Changed, or its time came: read again, at once.
            (Call::Watch { since }, answer) => {
                let saved = polls_in(now.mono - since, attempt.poll);
                self.stats.polls_saved += saved;
                if matches!(answer, Answer::Changed) {
                    self.stats.wake_ups += 1;
                }
                self.attempt(ticket, now)
            }
            (_, Answer::Failed | Answer::TimedOut)
            | (
                Call::Write {
                    read_back: true, ..
                },
                _,
            ) => {
                self.remove(ticket);
                Step::Failed
            }
            // A record is there, or somebody wrote in between: read (again) at once, it is
            // progress.
            (Call::Write { .. }, _) => {
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

    /// The attempt's write took: it holds the lease on `version` — and, when the take reserved
    /// a batch, the line hands it on from there.
    fn took(&mut self, ticket: Ticket, version: V, take: Take, now: Now) {
        let Take {
            fence,
            owed,
            last,
            stamp,
            takeover,
        } = take;
        let (Some(name), Some(line), Some(attempt)) = (
            self.key(ticket),
            self.lines.line_of(ticket),
            self.attempt_mut(ticket),
        ) else {
            return;
        };
        let batch = (last > fence).then(|| {
            let (token, version) = (attempt.token.clone(), version.clone());
            let lease = promised(attempt.options.stale_ms);
            let bound_ms = attempt.options.store_timeout();
            Batch::new(version, token, (owed, last), stamp, lease, bound_ms)
        });
        let stale_ms = attempt.options.stale_ms;
        let lease = Lease {
            token: std::mem::take(&mut attempt.token),
            fence,
            record_fence: last,
            version: version.clone(),
            stamp,
            stale_ms: attempt.options.stale_ms,
            store_timeout_ms: attempt.options.store_timeout(),
            renewing: None,
            lapsed: false,
            uncertain: false,
            contested: attempt.contested,
            asks: std::mem::take(&mut attempt.asks),
            starts: std::mem::take(&mut attempt.starts),
            slots: attempt.options.slots(),
            took_over: takeover,
        };
        if takeover {
            self.stats.takeovers += 1;
        }
        self.known.saw(&name, &version, now.mono);
        self.hold(ticket, lease);
        if let Some(batch) = batch {
            self.begin_batch(line, batch, stale_ms);
        }
    }

    /// What to do about the record a read found: take it, take it over, ask for it, or wait.
    fn decide(
        &mut self,
        ticket: Ticket,
        found: Option<(V, Result<Record, NotARecord>)>,
        now: Now,
        random: &impl Random,
    ) -> Step<V> {
        let Some(name) = self.key(ticket) else {
            return Step::GiveUp;
        };
        let id = self.ask_id(random);
        let since = match &found {
            Some((version, record)) => {
                let holder = match record {
                    Ok(record) if record.held => Some((record.fence, record.at)),
                    _ => None,
                };
                self.known.saw_held(&name, version, holder, now.mono)
            }
            None => now.mono,
        };
        let Some(attempt) = self.attempt_mut(ticket) else {
            return Step::GiveUp;
        };
        if let Some((_, Ok(record))) = &found {
            // A name keeps one concurrency: a record that says another is refused, unwritten.
            if record.n != attempt.options.slots() {
                let found = record.n;
                self.remove(ticket);
                return Step::Mismatch { found };
            }
            // Nobody took the name since this isolate freed it: next time, a CAS straight away.
            if !record.held && record.fence == attempt.known_fence {
                attempt.contested = false;
            }
        }
        attempt.look_at = None;
        let next = match found {
            // Gone (a store that expires records): the next attempt creates.
            None => {
                attempt.exists = false;
                attempt.starts = Starts::default();
                Next::Poll
            }
            Some((version, record)) => {
                let stale = stale(&record, since, attempt.options, now);
                attempt.starts = record
                    .as_ref()
                    .map(|found| found.starts.clone())
                    .unwrap_or_default();
                match &record {
                    Err(_) if stale && attempt.takeovers < TAKEOVERS => {
                        attempt.takeovers += 1;
                        // Not ours: its fence is lost; the clock's is above every one before.
                        let fence = next_fence(0, now);
                        Next::Write(version, fence, true, Asks::default())
                    }
                    Err(_) => {
                        attempt.look_at = Some(stale_at(&record, since, attempt.options, now));
                        Next::Wait(version)
                    }
                    Ok(found) => {
                        let asks = found.asks.live(now.wall);
                        let fence = next_fence(found.fence, now);
                        if !found.held && asks.may_take(&id, found.at, now.wall) {
                            let asks = asks.taken(&id, Some(found.at), now.wall);
                            Next::Write(version, fence, false, asks)
                        } else if found.held && stale && attempt.takeovers < TAKEOVERS {
                            attempt.takeovers += 1;
                            let asks = asks.taken(&id, None, now.wall);
                            Next::Write(version, fence, true, asks)
                        } else if stale {
                            // Stale, with no takeover left: polls, as before asks.
                            Next::Poll
                        } else {
                            // Held elsewhere, or offered to others first: ask, then wait for
                            // the record to change — at the latest until it turns stale, or
                            // this attempt's offer comes.
                            attempt.look_at = Some(if found.held {
                                stale_at(&record, since, attempt.options, now)
                            } else {
                                now.mono + (asks.offer_at(&id, found.at) - now.wall)
                            });
                            let queued = asks.position(&id).is_some();
                            match (!queued).then(|| attempt.asked(found, &asks, &id, now)) {
                                Some(Some(value)) => Next::Ask(version, value),
                                _ => Next::Wait(version),
                            }
                        }
                    }
                }
            }
        };
        if let Next::Write(version, fence, takeover, asks) = next {
            return self.write(ticket, version, fence, takeover, asks, now);
        }
        if now.mono >= attempt.deadline {
            self.remove(ticket);
            return Step::GiveUp;
        }
        match next {
            Next::Ask(version, value) => {
                attempt.call = Call::Ask;
                let bound_ms = attempt.bound(now);
                self.call(Step::Replace {
                    version,
                    value,
                    bound_ms,
                })
            }
            Next::Wait(version) => self.wait_for_record(ticket, version, now, random),
            _ => self.pause(ticket, now, random),
        }
    }

    /// Waits for the record at `version` to change: watched where the store tells changes
    /// (bounded by the attempt's deadline, its `look_at` and one `storeTimeoutMs`), else a poll.
    fn wait_for_record(
        &mut self,
        ticket: Ticket,
        version: V,
        now: Now,
        random: &impl Random,
    ) -> Step<V> {
        let tells_changes = self.store_tells_changes;
        let Some(attempt) = self.attempt_mut(ticket) else {
            return Step::GiveUp;
        };
        if !tells_changes || attempt.watch_failed {
            return self.pause(ticket, now, random);
        }
        attempt.call = Call::Watch { since: now.mono };
        // Bounded like every store call: a watch lasts `storeTimeoutMs` at most.
        let until = attempt
            .look_at
            .unwrap_or(f64::INFINITY)
            .min(attempt.deadline)
            .min(now.mono + attempt.options.store_timeout());
        self.stats.watches += 1;
        self.call(Step::Watch { version, until })
    }

    /// A pause between polls, with jitter, backing off; `GiveUp` past the deadline.
    fn pause(&mut self, ticket: Ticket, now: Now, random: &impl Random) -> Step<V> {
        let Some(attempt) = self.attempt_mut(ticket) else {
            return Step::GiveUp;
        };
        if now.mono >= attempt.deadline {
            self.remove(ticket);
            return Step::GiveUp;
        }
        // A poll comes back by `look_at` at the latest, if that is still ahead.
        let look_at = attempt
            .look_at
            .filter(|at| *at > now.mono)
            .map_or(f64::INFINITY, |at| at - now.mono);
        let jittered = attempt.poll * (0.5 + random.unit() / 2.0);
        let pause = jittered.min(attempt.deadline - now.mono).min(look_at);
        attempt.poll = (attempt.poll * 2.0).min(MAX_POLL_MS);
        attempt.call = Call::Sleep;
        Step::Sleep {
            until: now.mono + pause,
            early: pause == jittered,
        }
    }
}

/// The reads a poller makes in `ms` from a pause of `poll` on, backing off as
/// `pause` does (each pause at its mean jitter, three quarters of its length).
fn polls_in(ms: f64, mut poll: f64) -> u64 {
    let (mut left, mut polls) = (ms, 0);
    while poll < MAX_POLL_MS {
        let pause = poll * 0.75;
        if left < pause {
            return polls;
        }
        left -= pause;
        polls += 1;
        poll = (poll * 2.0).min(MAX_POLL_MS);
    }
    polls + (left.max(0.0) / (MAX_POLL_MS * 0.75)).floor() as u64
}

/// Whether a held record (or one that is not ours) may be taken over: aged past its lease and
/// the skew allowed on this isolate's wall clock, or watched unchanged for its lease since
/// `since` on its monotonic clock (the only rule for a record that is not ours).
fn stale(record: &Result<Record, NotARecord>, since: f64, options: LockOptions, now: Now) -> bool {
    let own = options.stale_ms;
    match record {
        Ok(record) if !record.held => false,
        Ok(record) => {
            let lease = judged_lease(record, own);
            now.wall - record.at > lease + options.max_clock_skew_ms || now.mono - since > lease
        }
        Err(_) => now.mono - since > own,
    }
}

/// The lease a taker judges a held record by: the longer of the one its holder promised and
/// the taker's own (`own`).
fn judged_lease(record: &Record, own: f64) -> f64 {
    record
        .lease
        .map_or(own, |promised| (promised as f64).max(own))
}

/// When (monotonic) a record that is not stale yet becomes so by [`stale`]'s rules, with a
/// millisecond to spare (they compare strictly): what a watch waits for at the latest.
fn stale_at(
    record: &Result<Record, NotARecord>,
    since: f64,
    options: LockOptions,
    now: Now,
) -> f64 {
    let own = options.stale_ms;
    match record {
        // A free record is taken, not watched.
        Ok(record) if !record.held => now.mono,
        Ok(record) => {
            let lease = judged_lease(record, own);
            let by_age = now.mono + (record.at + lease + options.max_clock_skew_ms - now.wall);
            by_age.min(since + lease) + 1.0
        }
        Err(_) => since + own + 1.0,
    }
}
