//! What this isolate knows of each name's record: the version it last saw and since when on
//! its monotonic clock (the watch that lets a takeover need no clock agreement), and whether
//! it freed that record itself (then the next acquisition takes it with one CAS instead of
//! create, read, CAS).

use std::rc::Rc;

use crate::engine::keymap::KeyMap;
use crate::engine::starts::Starts;

/// Most names known at once; past this the memory is cleared. Forgetting is safe: a watch that
/// starts again only delays a takeover, and a forgotten free record costs one read.
const KNOWN_NAMES: usize = 1024;

/// A record this isolate freed (or handed to nobody) and nobody here holds.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Freed {
    /// The fence the record carries.
    pub(super) fence: u64,
    /// Another isolate wrote the record between this isolate's last two acquisitions: the
    /// next one reads first rather than spend a CAS bound to fail on this version.
    pub(super) contested: bool,
    /// The `n` the record carries: the name's `concurrency`.
    pub(super) slots: u16,
    /// The starts the record carries, or later ones this isolate made under the lease.
    pub(super) starts: Starts,
}

struct Known<V> {
    version: V,
    /// When this isolate first saw `version` (monotonic milliseconds): the answer that showed
    /// it arrived then.
    since: f64,
    freed: Option<Freed>,
    /// The fence and `at` of the held record at `version`: a later version with both unchanged
    /// differs only in its asks, so the watch goes on (other isolates asking do not keep a
    /// dead holder's record from being taken over).
    holder: Option<(u64, f64)>,
    /// This isolate freed the record at `version` for other isolates, its own ask behind
    /// theirs: its offer comes then (monotonic).
    offer: Option<f64>,
}

/// Known records by name, in the crate's one map type.
pub(super) struct KnownRecords<V> {
    index: KeyMap,
    records: Vec<(Rc<str>, Known<V>)>,
}

impl<V> Default for KnownRecords<V> {
    fn default() -> Self {
        KnownRecords {
            index: KeyMap::default(),
            records: Vec::new(),
        }
    }
}

impl<V: PartialEq> KnownRecords<V> {
    /// The name as this isolate keeps it, to share rather than copy.
    pub(super) fn key(&self, name: &str) -> Option<Rc<str>> {
        let at = *self.index.get(name)? as usize;
        self.records.get(at).map(|(key, _)| key.clone())
    }

    /// An answer showed `name`'s record at `version`, at `mono`: since when this isolate has
    /// watched that version unchanged (`mono` itself for a version it had not seen).
    pub(super) fn saw(&mut self, name: &Rc<str>, version: &V, mono: f64) -> f64
    where
        V: Clone,
    {
        self.saw_held(name, version, None, mono)
    }

    /// [`saw`](Self::saw) a held record with `holder`'s fence and `at`: a version that only
    /// added asks to the one watched keeps the watch.
    pub(super) fn saw_held(
        &mut self,
        name: &Rc<str>,
        version: &V,
        holder: Option<(u64, f64)>,
        mono: f64,
    ) -> f64
    where
        V: Clone,
    {
        let seen = || Known {
            version: version.clone(),
            since: mono,
            freed: None,
            holder,
            offer: None,
        };
        // (One lookup: an acquisition's own answer comes here on every lock cycle.)
        match self.get_mut(name) {
            Some(known) if known.version == *version => return known.since,
            Some(known) if holder.is_some() && known.holder == holder && known.freed.is_none() => {
                known.version = version.clone();
                return known.since;
            }
            Some(known) => *known = seen(),
            None => self.put(name, seen()),
        }
        mono
    }

    /// This isolate's ask moved `name`'s record to `version`, keeping its holder: the watch
    /// goes on.
    pub(super) fn asked(&mut self, name: &Rc<str>, version: &V, mono: f64)
    where
        V: Clone,
    {
        let holder = self.get_mut(name).and_then(|known| known.holder);
        self.saw_held(name, version, holder, mono);
    }

    /// This isolate left `name`'s record at `version` free (or held by nobody), written at
    /// `mono`.
    pub(super) fn freed(&mut self, name: &Rc<str>, version: V, mono: f64, freed: Freed) {
        self.set(name, version, mono, Some(freed));
    }

    /// This isolate freed `name`'s record at `version` for other isolates, at `mono`, its own
    /// ask behind theirs: the name is offered to it at `offer`.
    pub(super) fn queued(&mut self, name: &Rc<str>, version: V, mono: f64, offer: f64) {
        self.set(name, version, mono, None);
        if let Some(known) = self.get_mut(name) {
            known.offer = Some(offer);
        }
    }

    /// The version of `name`'s record this isolate freed with its own ask in it, and when the
    /// name is offered to it, if that is the last it knows of the record (once).
    pub(super) fn take_queued(&mut self, name: &str) -> Option<(V, f64)>
    where
        V: Clone,
    {
        let known = self.get_mut(name)?;
        let offer = known.offer.take()?;
        Some((known.version.clone(), offer))
    }

    /// The record this isolate freed for `name`, if it is the last it knows of: the version to
    /// CAS on. It is forgotten, watch and all — the next answer about it starts both again.
    pub(super) fn take_freed(&mut self, name: &str) -> Option<(V, Freed)> {
        let at = *self.index.get(name)? as usize;
        self.records.get(at)?.1.freed.as_ref()?;
        self.index.remove(name);
        if at >= self.records.len() {
            return None;
        }
        let (_, known) = self.records.swap_remove(at);
        if let Some((moved, _)) = self.records.get(at) {
            self.index.insert(moved.clone(), at as u32);
        }
        known.freed.map(|freed| (known.version, freed))
    }

    fn get_mut(&mut self, name: &str) -> Option<&mut Known<V>> {
        let at = *self.index.get(name)? as usize;
        self.records.get_mut(at).map(|(_, known)| known)
    }

    fn set(&mut self, name: &Rc<str>, version: V, since: f64, freed: Option<Freed>) {
        let known = Known {
            version,
            since,
            freed,
            holder: None,
            offer: None,
        };
        match self.get_mut(name) {
            Some(slot) => *slot = known,
            None => self.put(name, known),
        }
    }

    fn put(&mut self, name: &Rc<str>, known: Known<V>) {
        if self.records.len() >= KNOWN_NAMES {
            *self = KnownRecords::default();
        }
        self.index.insert(name.clone(), self.records.len() as u32);
        self.records.push((name.clone(), known));
    }
}
