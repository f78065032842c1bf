//! The serializer over a store's step machine: every rule of how a key's turns hold its lease,
//! with no I/O. Both front ends drive it — [`StoreSerializer`](super::StoreSerializer) for Rust
//! callers and the npm package's `keyturn-wasm/js/serializer/leased.js` for JavaScript ones — around the lock's
//! own core, which decides each acquisition, renewal and release.
//!
//! The rules, each in one function:
//! - **Hand-on** ([`Turns::begin`]): a turn acquires the key's lease (the lock named
//!   `SERIALIZE_PREFIX` + key, with the serializer's lease options, waiting up to the work's
//!   deadline), and only then is the lease the turn before left released toward it — so the
//!   lock's core hands it over without a store call, announcing the works queued behind
//!   (`pending − 1`: its hand-off reserves a fence for each).
//! - **Running** ([`Turns::acquired`]): a lease that came after its turn was abandoned is
//!   released; no lease at all (the wait ended first) is the turn's timeout.
//! - **Renewal**: every `staleMs / 3` while the work runs, tried again after a failure while the
//!   lease has time left; a lease found lost aborts the work's signal
//!   ([`LockCore::next_renewal`](crate::engine::leases::LockCore::next_renewal) decides, for locks too).
//! - **Release when last** ([`Turns::settled`]): when a work settles with nothing of its key
//!   queued behind it, its lease is freed before its caller hears — so a handler that answers
//!   its request as soon as its work settled leaves nothing held.
//! - **Handing on, letting go** ([`Turns::ended`], [`Turns::idle`]): a turn that ended with its
//!   lease leaves it for the key's next turn here; once the key is idle — its last turn settled,
//!   or was abandoned at its deadline — the lease left is freed for the other isolates.
//!
//! `L` is the driver's lease (a [`Lock`](crate::Lock), a JS lock object): the machine holds
//! the ones left between turns, and tells the driver which to release.

use core::fmt;

#[cfg(doc)]
use crate::engine::key::SERIALIZE_PREFIX;
use crate::engine::leases::Succession;
use crate::engine::options::{LockOptions, OptionError};

/// What a turn does first, from [`Turns::begin`].
#[derive(Debug)]
pub struct Begin<L> {
    /// The options of the turn's acquisition: the serializer's lease, waiting for it up to the
    /// work's deadline.
    pub options: LockOptions,
    /// Acquisitions after this turn's: the release of `hand_on` announces them.
    pub succession: Succession,
    /// The lease the key's turn before left: release it (announcing `succession.followers`)
    /// once this turn's acquisition is in line.
    pub hand_on: Option<L>,
}

/// What to do once a turn's acquisition ended, from [`Turns::acquired`].
#[derive(Debug, PartialEq, Eq)]
#[cfg(test)]
pub enum Acquired<L> {
    /// Run the work with this lease.
    Run(L),
    /// The turn was abandoned meanwhile: release this lease.
    Release(L),
    /// The wait ended before the turn's deadline timer did: the same end, a timeout.
    TimeOut,
    /// Nothing: the turn was abandoned, and nothing is held.
    Nothing,
}

/// Leases a turn left for the next turn of its key, by the key's slot: a number the driver
/// gives each busy key, unique among busy keys (the JS uses its line's id; the Rust
/// [`StoreSerializer`](crate::StoreSerializer) gives one per key). A key's lease is taken before
/// its slot goes to another key: at the key's next turn, or when it goes idle.
pub struct Turns<L> {
    held: Vec<Option<L>>,
    /// Slots holding a lease now.
    leases: usize,
    lease: LockOptions,
}

impl<L> fmt::Debug for Turns<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Turns")
            .field("lease", &self.lease)
            .field("held", &self.leases)
            .finish()
    }
}

impl<L> Turns<L> {
    /// No leases held, for turns that hold leases as `lease` says (`staleMs`,
    /// `maxClockSkewMs`, `storeTimeoutMs`; its wait is each work's deadline).
    ///
    /// # Errors
    /// A lease option out of range.
    pub fn new(lease: LockOptions) -> Result<Self, OptionError> {
        Ok(Turns {
            held: Vec::new(),
            leases: 0,
            lease: LockOptions {
                wait_ms: 0.0,
                ..lease
            }
            .validate()?,
        })
    }

    /// A turn of the key in `slot` starts, with `pending` works of the key queued or running
    /// here (itself included), for a work whose deadline is `timeout_ms` long: its acquisition's
    /// options and streak, and the lease to hand on. Its lock is named [`SERIALIZE_PREFIX`] +
    /// key.
    pub fn begin(&mut self, slot: u32, pending: usize, timeout_ms: f64) -> Begin<L> {
        Begin {
            options: self.options(timeout_ms),
            succession: Succession::serialized(pending.saturating_sub(1), self.lease.stale_ms),
            hand_on: self.take(slot),
        }
    }

    /// The bound on each store call of a turn (its `storeTimeoutMs`).
    pub fn store_timeout(&self) -> f64 {
        self.lease.store_timeout()
    }

    /// The options of an acquisition for a work whose deadline is `timeout_ms` long.
    fn options(&self, timeout_ms: f64) -> LockOptions {
        LockOptions {
            wait_ms: timeout_ms,
            ..self.lease
        }
    }

    /// A turn's acquisition ended with `lease` (`None`: the wait ended, nothing held);
    /// `abandoned`: its deadline passed or its caller cancelled it meanwhile.
    #[cfg(test)]
    pub fn acquired(lease: Option<L>, abandoned: bool) -> Acquired<L> {
        match (lease, abandoned) {
            (Some(lease), false) => Acquired::Run(lease),
            (Some(lease), true) => Acquired::Release(lease),
            (None, false) => Acquired::TimeOut,
            (None, true) => Acquired::Nothing,
        }
    }

    /// A turn's work settled, with `pending` works of the key queued or running here (itself
    /// included, unless it was abandoned), `waiting` whether one of them has not started: whether
    /// its lease is released before its caller hears — no later turn here will take it (it is
    /// the key's last, or — N at a time — the others started already, each with a lease of its
    /// own), and it was not abandoned.
    pub fn settled(pending: usize, waiting: bool, abandoned: bool) -> bool {
        !abandoned && (pending <= 1 || !waiting)
    }

    /// A turn of the key in `slot` ended (its caller heard) still holding `lease`: kept for the
    /// key's next turn here. Answers a lease an earlier turn left and nobody took, to release
    /// (its record is this one's, superseded).
    pub fn ended(&mut self, slot: u32, lease: L) -> Option<L> {
        let displaced = self.take(slot);
        let at = slot as usize;
        if self.held.len() <= at {
            self.held.resize_with(at + 1, || None);
        }
        // Within `held` now (no index panic: its message's formatting would be linked in).
        if let Some(held) = self.held.get_mut(at) {
            *held = Some(lease);
            self.leases += 1;
        }
        displaced
    }

    /// The key in `slot` went idle here: the lease its turns left, to free for the other
    /// isolates.
    pub fn idle(&mut self, slot: u32) -> Option<L> {
        self.take(slot)
    }

    /// Keys whose lease waits for their next turn.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.leases
    }

    fn take(&mut self, slot: u32) -> Option<L> {
        let lease = self.held.get_mut(slot as usize)?.take()?;
        self.leases -= 1;
        if self.leases == 0 {
            self.held.clear();
        }
        Some(lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(stale_ms: f64) -> LockOptions {
        LockOptions {
            stale_ms,
            ..LockOptions::default()
        }
    }

    #[test]
    fn a_turn_hands_on_what_the_turn_before_left_and_announces_the_works_behind() {
        let mut turns: Turns<&str> = Turns::new(lease(2_000.0)).unwrap();
        let first = turns.begin(4, 3, 1000.0);
        assert_eq!(
            first.options,
            LockOptions {
                wait_ms: 1000.0,
                ..lease(2_000.0)
            },
            "the serializer's lease, waited for up to the work's deadline"
        );
        assert_eq!(first.succession.followers, 2);
        assert_eq!(first.succession.streak_ms, 500.0);
        assert_eq!(first.hand_on, None);
        assert_eq!(turns.ended(4, "lease 1"), None);
        let second = turns.begin(4, 2, 1000.0);
        assert_eq!(second.hand_on, Some("lease 1"));
        assert_eq!(second.succession.followers, 1);
        assert_eq!(turns.held(), 0);
    }

    #[test]
    fn a_lease_option_out_of_range_is_refused() {
        assert_eq!(
            Turns::<u8>::new(lease(0.0)).map(|_| ()),
            Err(OptionError::StaleMs(0.0))
        );
    }

    #[test]
    fn a_lease_left_twice_releases_the_older_and_an_idle_key_frees_what_is_left() {
        let mut turns: Turns<u32> = Turns::new(lease(300.0)).unwrap();
        assert_eq!(turns.ended(0, 1), None);
        assert_eq!(turns.ended(0, 2), Some(1));
        assert_eq!(turns.ended(7, 3), None);
        assert_eq!(turns.held(), 2);
        assert_eq!(turns.idle(0), Some(2));
        assert_eq!(turns.idle(0), None);
        assert_eq!(turns.idle(7), Some(3));
        assert_eq!(turns.held(), 0);
        assert_eq!(
            turns.begin(0, 1, 1000.0).succession.streak_ms,
            100.0,
            "at least a lock's streak"
        );
    }

    #[test]
    fn what_an_acquisition_and_a_settled_work_lead_to() {
        assert_eq!(Turns::acquired(Some(7), false), Acquired::Run(7));
        assert_eq!(Turns::acquired(Some(7), true), Acquired::Release(7));
        assert_eq!(Turns::<u8>::acquired(None, false), Acquired::TimeOut);
        assert_eq!(Turns::<u8>::acquired(None, true), Acquired::Nothing);
        assert!(
            Turns::<u8>::settled(1, false, false),
            "the last turn frees its lease first"
        );
        assert!(
            !Turns::<u8>::settled(2, true, false),
            "a turn behind takes it over"
        );
        assert!(
            Turns::<u8>::settled(3, false, false),
            "N at a time, the turns running beside it have leases of their own"
        );
        assert!(
            !Turns::<u8>::settled(0, false, true),
            "an abandoned turn's caller heard already"
        );
    }
}
