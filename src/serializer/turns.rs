//! The serializer over a store's step machine: every rule of how a key's turns hold its lease,
//! with no I/O. Both front ends drive it — [`StoreSerializer`](super::StoreSerializer) for Rust
//! callers and the package's `js/serializer/leased.js` for JavaScript ones — around the lock's
//! own core, which decides each acquisition, renewal and release.
//!
//! The rules, each in one function:
//! - **Hand-on** ([`Turns::begin`]): a turn acquires the key's lease (the lock named
//!   [`SERIALIZE_PREFIX`] + key, waiting up to its deadline), and only then is the lease the turn
//!   before left released toward it — so the lock's core hands it over without a store call,
//!   announcing the works queued behind (`pending − 1`: its hand-off reserves a fence for each).
//! - **Running** ([`Turns::acquired`]): a lease that came after its turn was abandoned is
//!   released; no lease at all (the wait ended first) is the turn's timeout.
//! - **Renewal**: every `staleMs / 3` while the work runs, tried again after a failure while the
//!   lease has time left; a lease found lost aborts the work's signal
//!   ([`LockCore::next_renewal`](crate::lock::LockCore::next_renewal) decides, for locks too).
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
use std::rc::Rc;

use crate::key::SERIALIZE_PREFIX;
use crate::keymap::KeyMap;
use crate::lock::Succession;

/// What a turn does first, from [`Turns::begin`].
#[derive(Debug)]
pub struct Begin<L> {
    /// The lock to acquire: [`SERIALIZE_PREFIX`] + key.
    pub name: String,
    /// Acquisitions after this turn's: the release of `hand_on` announces them.
    pub succession: Succession,
    /// The lease the key's turn before left: release it (announcing `succession.followers`)
    /// once this turn's acquisition is in line.
    pub hand_on: Option<L>,
}

/// What to do once a turn's acquisition ended, from [`Turns::acquired`].
#[derive(Debug, PartialEq, Eq)]
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

/// Leases a turn left for the next turn of its key, by key.
pub struct Turns<L> {
    index: KeyMap,
    held: Vec<Option<L>>,
    free: Vec<u32>,
    stale_ms: f64,
}

impl<L> fmt::Debug for Turns<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Turns")
            .field("stale_ms", &self.stale_ms)
            .field("held", &(self.held.len() - self.free.len()))
            .finish()
    }
}

impl<L> Turns<L> {
    /// No leases held, for turns whose leases run `stale_ms` (checked by the caller).
    pub fn new(stale_ms: f64) -> Self {
        Turns {
            index: KeyMap::default(),
            held: Vec::new(),
            free: Vec::new(),
            stale_ms,
        }
    }

    /// The lease each turn holds, in milliseconds.
    pub fn stale_ms(&self) -> f64 {
        self.stale_ms
    }

    /// A turn of `key` starts, with `pending` works of the key queued or running here (itself
    /// included): the lock to acquire, how its streak runs, and the lease to hand on.
    pub fn begin(&mut self, key: &str, pending: usize) -> Begin<L> {
        Begin {
            name: [SERIALIZE_PREFIX, key].concat(),
            succession: Succession::serialized(pending.saturating_sub(1), self.stale_ms),
            hand_on: self.take(key),
        }
    }

    /// A turn's acquisition ended with `lease` (`None`: the wait ended, nothing held);
    /// `abandoned`: its deadline passed or its caller cancelled it meanwhile.
    pub fn acquired(lease: Option<L>, abandoned: bool) -> Acquired<L> {
        match (lease, abandoned) {
            (Some(lease), false) => Acquired::Run(lease),
            (Some(lease), true) => Acquired::Release(lease),
            (None, false) => Acquired::TimeOut,
            (None, true) => Acquired::Nothing,
        }
    }

    /// A turn's work settled, with `pending` works of the key queued or running here (itself
    /// included, unless it was abandoned): whether its lease is released before its caller
    /// hears — it is the key's last turn here, and was not abandoned.
    pub fn settled(pending: usize, abandoned: bool) -> bool {
        !abandoned && pending <= 1
    }

    /// A turn of `key` ended (its caller heard) still holding `lease`: kept for the key's next
    /// turn here. Answers a lease an earlier turn left and nobody took, to release (its record
    /// is this one's, superseded).
    pub fn ended(&mut self, key: &str, lease: L) -> Option<L> {
        let displaced = self.take(key);
        let slot = match self.free.pop() {
            Some(slot) => {
                self.held[slot as usize] = Some(lease);
                slot
            }
            None => {
                self.held.push(Some(lease));
                (self.held.len() - 1) as u32
            }
        };
        self.index.insert(Rc::from(key), slot);
        displaced
    }

    /// `key` went idle here: the lease its turns left, to free for the other isolates.
    pub fn idle(&mut self, key: &str) -> Option<L> {
        self.take(key)
    }

    /// Keys whose lease waits for their next turn.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.held.len() - self.free.len()
    }

    fn take(&mut self, key: &str) -> Option<L> {
        let slot = self.index.remove(key)?;
        let lease = self.held.get_mut(slot as usize)?.take();
        self.free.push(slot);
        if self.index.is_empty() {
            self.held.clear();
            self.free.clear();
        }
        lease
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_hands_on_what_the_turn_before_left_and_announces_the_works_behind() {
        let mut turns: Turns<&str> = Turns::new(2_000.0);
        let first = turns.begin("k", 3);
        assert_eq!(first.name, "keyturn:serialize:k");
        assert_eq!(first.succession.followers, 2);
        assert_eq!(first.succession.streak_ms, 500.0);
        assert_eq!(first.hand_on, None);
        assert_eq!(turns.ended("k", "lease 1"), None);
        let second = turns.begin("k", 2);
        assert_eq!(second.hand_on, Some("lease 1"));
        assert_eq!(second.succession.followers, 1);
        assert_eq!(turns.held(), 0);
    }

    #[test]
    fn a_lease_left_twice_releases_the_older_and_an_idle_key_frees_what_is_left() {
        let mut turns: Turns<u32> = Turns::new(300.0);
        assert_eq!(turns.ended("k", 1), None);
        assert_eq!(turns.ended("k", 2), Some(1));
        assert_eq!(turns.ended("other", 3), None);
        assert_eq!(turns.idle("k"), Some(2));
        assert_eq!(turns.idle("k"), None);
        assert_eq!(turns.idle("other"), Some(3));
        assert_eq!(turns.held(), 0);
        assert_eq!(
            turns.begin("k", 1).succession.streak_ms,
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
            Turns::<u8>::settled(1, false),
            "the last turn frees its lease first"
        );
        assert!(
            !Turns::<u8>::settled(2, false),
            "a turn behind takes it over"
        );
        assert!(
            !Turns::<u8>::settled(0, true),
            "an abandoned turn's caller heard already"
        );
    }
}
