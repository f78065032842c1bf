//! The pace of a key taken N at a time over a store: a record of its own.
//!
//! At `concurrency` 1 a key's starts travel in its lease record (`starts.rs`): nobody else can
//! start the key while the lease is held. At N > 1 each slot is a record of its own, so the
//! key's starts go in one more record, `keyturn:pace:<key>` — a free lock record (fence 1, no
//! token) whose `starts` field is the key's last starts. A turn that holds its slot's lease
//! adds its start with one compare-and-set on the version this isolate last saw, and is called
//! once that write took: one store call per start when nobody else wrote the record since
//! (a read first when this isolate does not know it, or another isolate's write moved it).
//! This isolate makes one such call per record at a time; the turns that come meanwhile wait
//! for it, and use what it learned.
//!
//! A start is written before its work is called, at the time the write is sent: a work starts
//! up to one store round trip after the time its record carries, so across isolates the window
//! holds up to the clocks' skew plus that round trip. A record the store loses lets one window's
//! worth through again, as at N = 1.

use std::collections::VecDeque;
use std::rc::Rc;

use super::keymap::KeyMap;
use super::queue::Ticket;
use super::starts::Starts;

/// The prefix of a key's pace record, at N > 1.
pub const PACE_PREFIX: &str = "keyturn:pace:";

/// Most pace records known at once; past this the memory is cleared (a forgotten record costs
/// one read).
const KNOWN_PACES: usize = 1024;

/// What this isolate knows of one pace record.
pub(crate) struct PaceRecord<V> {
    /// Whether `version` and `starts` are what the store had at this isolate's last call (else
    /// the next turn reads first).
    pub(crate) known: bool,
    /// Its version (`None`: there is no record).
    pub(crate) version: Option<V>,
    pub(crate) starts: Starts,
    /// The starts a write in flight carries, which the record has once it took.
    pub(crate) writing: Option<Starts>,
    /// A call of this isolate on the record is in flight.
    pub(crate) busy: bool,
    /// Turns holding their slot's lease that wait for that call: `(serializer, work)`.
    pub(crate) waiting: VecDeque<(u32, Ticket)>,
}

/// This isolate's pace records, by name.
pub(crate) struct PaceRecords<V> {
    index: KeyMap,
    records: Vec<(Rc<str>, PaceRecord<V>)>,
}

impl<V> Default for PaceRecords<V> {
    fn default() -> Self {
        PaceRecords {
            index: KeyMap::default(),
            records: Vec::new(),
        }
    }
}

impl<V> PaceRecords<V> {
    /// The record `name`, known or not, and its name as kept.
    pub(crate) fn get_or_add(&mut self, name: &str) -> Option<(Rc<str>, &mut PaceRecord<V>)> {
        let at = match self.index.get(name) {
            Some(&at) => at as usize,
            None => {
                if self.records.len() >= KNOWN_PACES {
                    // Forget the idle ones: a record with a call in flight or turns waiting
                    // stays, so its answer still finds it.
                    self.records
                        .retain(|(_, record)| record.busy || !record.waiting.is_empty());
                    self.index = KeyMap::default();
                    for (i, (key, _)) in self.records.iter().enumerate() {
                        self.index.insert(key.clone(), i as u32);
                    }
                }
                let key: Rc<str> = Rc::from(name);
                self.index.insert(key.clone(), self.records.len() as u32);
                self.records.push((
                    key,
                    PaceRecord {
                        known: false,
                        version: None,
                        starts: Starts::default(),
                        writing: None,
                        busy: false,
                        waiting: VecDeque::new(),
                    },
                ));
                self.records.len() - 1
            }
        };
        self.records
            .get_mut(at)
            .map(|(key, record)| (key.clone(), record))
    }

    /// The record `name`, if known.
    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut PaceRecord<V>> {
        let at = *self.index.get(name)? as usize;
        self.records.get_mut(at).map(|(_, record)| record)
    }
}
