//! The per-key FIFO every turn waits in: the serializer's works and the lock's local waiters.
//!
//! Each busy key has a line of entries, oldest first; its head is the entry whose turn it is and
//! its tail is the last one pushed. An idle key has no line at all, so it holds no memory. Lines
//! and entries live in two slabs shared by all keys: a busy key's line has a [`LineId`] (so a
//! caller that already knows the line skips hashing the key), and an entry has a [`Ticket`] — a
//! slot index and the number of the push that filled it, so the ticket of a removed entry is
//! stale instead of naming whoever reuses the slot, even after a drained queue gave its slabs
//! back to the allocator.

use std::rc::Rc;

use crate::engine::keymap::KeyMap;

const NONE: u32 = u32::MAX;

/// Names one entry of a machine's lines (a work of the serializer's, an acquisition of the
/// lock's); stale once the entry is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket {
    index: u32,
    generation: u32,
}

/// Bits of a packed ticket that are the slot's index (see [`Ticket::pack`]).
const PACKED_INDEX_BITS: u32 = 24;

/// The generation bits a packed ticket keeps: 53 - 24, so a packed ticket is an exact f64.
const PACKED_GENERATION_MASK: u32 = (1 << (53 - PACKED_INDEX_BITS)) - 1;

/// Most entries a queue holds at once: what a packed ticket can name.
pub const MAX_ENTRIES: usize = 1 << PACKED_INDEX_BITS;

impl Ticket {
    /// Slot `index` filled by push number `generation` (the engine's tables make them; a
    /// driver's tests may too).
    pub fn new(index: u32, generation: u32) -> Self {
        Ticket { index, generation }
    }

    /// The slot's index and the push number, as [`Ticket::new`] took them.
    pub(crate) fn parts(self) -> (u32, u32) {
        (self.index, self.generation)
    }

    /// A packed number's slot index and the low bits of its push number (see
    /// [`Ticket::pack`]); `None` for a number no ticket packs to.
    pub(crate) fn unpacked(packed: f64) -> Option<(u32, u32)> {
        if !(0.0..9_007_199_254_740_992.0).contains(&packed) || packed.fract() != 0.0 {
            return None;
        }
        let packed = packed as u64;
        let index = (packed & ((1 << PACKED_INDEX_BITS) - 1)) as u32;
        Some((index, (packed >> PACKED_INDEX_BITS) as u32))
    }

    /// Whether a packed number's push number (its low bits) is this ticket's.
    pub(crate) fn same_generation(self, packed_generation: u32) -> bool {
        self.generation & PACKED_GENERATION_MASK == packed_generation
    }

    /// The ticket as one number that JavaScript holds exactly: the slot index in the low 24
    /// bits, the low 29 bits of the generation above. The engine reads it back
    /// ([`Engine::work`](crate::engine::Engine::work), [`Engine::call`](crate::engine::Engine::call)).
    pub fn pack(self) -> f64 {
        let generation = u64::from(self.generation & PACKED_GENERATION_MASK);
        ((generation << PACKED_INDEX_BITS) | u64::from(self.index)) as f64
    }
}

/// Names the line of a busy key, for as long as the key stays busy; the id is reused after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LineId(pub u32);

struct Entry<P> {
    line: u32,
    prev: u32,
    next: u32,
    payload: P,
}

struct Slot<P> {
    /// The push number of the entry in this slot (or of the last one it held).
    generation: u32,
    entry: Option<Entry<P>>,
}

struct Line<L> {
    key: Rc<str>,
    head: u32,
    tail: u32,
    data: L,
}

/// Where an entry was put (see [`SerializerCore::open`](crate::engine::works::SerializerCore::open)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pushed {
    /// The new entry.
    pub ticket: Ticket,
    /// Its key's line.
    pub line: LineId,
    /// Whether it is the head: the key was idle, so its turn has already come.
    pub is_head: bool,
}

/// What [`KeyedQueue::remove`] took out.
#[derive(Debug)]
pub struct Removed<P> {
    /// The removed entry's payload.
    pub payload: P,
    /// The key's new head when the removed entry was the head and others wait behind it.
    pub next: Option<Ticket>,
    /// Whether the key went idle: its line is gone and its [`LineId`] no longer names it.
    pub idle: bool,
}

/// FIFO lines over one slab, each for one busy key and with data of its own (`L`, made by
/// `Default` when the line opens, dropped when it empties). `Lines` does not look keys up: a
/// caller that keeps its own key → [`LineId`] map (the JS binding keeps a JS `Map`) opens a
/// line only for a key that has none. [`KeyedQueue`] adds the lookup. Not thread-safe: one
/// isolate, one thread.
pub struct Lines<P, L = ()> {
    lines: Vec<Option<Line<L>>>,
    free_lines: Vec<u32>,
    slots: Vec<Slot<P>>,
    free: Vec<u32>,
    len: usize,
    busy: usize,
    pushes: u32,
}

impl<P, L: Default> Default for Lines<P, L> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P, L> core::fmt::Debug for Lines<P, L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Lines")
            .field("busy", &self.busy)
            .field("entries", &self.len)
            .finish()
    }
}

/// Capacity a drained queue keeps: past this, memory goes back to the allocator once idle.
const KEEP_WHEN_IDLE: usize = 64;

impl<P, L: Default> Lines<P, L> {
    /// No lines.
    pub fn new() -> Self {
        Lines {
            lines: Vec::new(),
            free_lines: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            busy: 0,
            pushes: 0,
        }
    }

    /// Opens a line for `key`, which the caller knows has none, with `payload` as its head.
    pub fn open(&mut self, key: impl Into<Rc<str>>, payload: P) -> Pushed {
        let index = self.alloc_slot();
        let line = Line {
            key: key.into(),
            head: index,
            tail: index,
            data: L::default(),
        };
        let line = match self.free_lines.pop() {
            Some(free) => {
                if let Some(slot) = self.lines.get_mut(free as usize) {
                    *slot = Some(line);
                }
                free
            }
            None => {
                self.lines.push(Some(line));
                (self.lines.len() - 1) as u32
            }
        };
        self.busy += 1;
        let ticket = self.fill_slot(
            index,
            Entry {
                line,
                prev: NONE,
                next: NONE,
                payload,
            },
        );
        Pushed {
            ticket,
            line: LineId(line),
            is_head: true,
        }
    }

    /// Appends `payload` to a busy key's line; `None` (and nothing pushed) if the line is idle.
    pub fn push_on(&mut self, line: LineId, payload: P) -> Option<Ticket> {
        let prev = self.tail(line)?;
        Some(self.append(line, prev, payload))
    }

    /// The last entry of a busy line.
    fn tail(&self, line: LineId) -> Option<u32> {
        Some(self.lines.get(line.0 as usize)?.as_ref()?.tail)
    }

    /// Appends `payload` to `line`, whose tail is `prev`.
    fn append(&mut self, line: LineId, prev: u32, payload: P) -> Ticket {
        let index = self.alloc_slot();
        if let Some(Some(busy)) = self.lines.get_mut(line.0 as usize) {
            busy.tail = index;
        }
        if let Some(entry) = self.entry_mut(prev) {
            entry.next = index;
        }
        self.fill_slot(
            index,
            Entry {
                line: line.0,
                prev,
                next: NONE,
                payload,
            },
        )
    }

    #[inline]
    fn alloc_slot(&mut self) -> u32 {
        match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    entry: None,
                });
                (self.slots.len() - 1) as u32
            }
        }
    }

    #[inline]
    fn fill_slot(&mut self, index: u32, entry: Entry<P>) -> Ticket {
        // A stale ticket could only match after 2^32 more pushes landed on the same slot.
        self.pushes = self.pushes.wrapping_add(1);
        if let Some(slot) = self.slots.get_mut(index as usize) {
            slot.generation = self.pushes;
            slot.entry = Some(entry);
            self.len += 1;
        }
        Ticket {
            index,
            generation: self.pushes,
        }
    }

    /// The entry a link names. Links only ever name live entries (every unlink below fixes its
    /// neighbours), so this is never `None`; it is an `Option` so that no path can panic.
    fn entry_mut(&mut self, index: u32) -> Option<&mut Entry<P>> {
        self.slots.get_mut(index as usize)?.entry.as_mut()
    }

    fn live(&self, ticket: Ticket) -> Option<&Entry<P>> {
        let slot = self.slots.get(ticket.index as usize)?;
        if slot.generation != ticket.generation {
            return None;
        }
        slot.entry.as_ref()
    }

    fn line(&self, line: u32) -> Option<&Line<L>> {
        self.lines.get(line as usize)?.as_ref()
    }

    fn ticket_at(&self, index: u32) -> Ticket {
        // Links name live slots only; a slot that is not there gives a ticket nothing matches.
        let generation = self
            .slots
            .get(index as usize)
            .map_or(0, |slot| slot.generation);
        Ticket { index, generation }
    }

    /// The live entry named by a [`Ticket::pack`]ed number; `None` for anything else (a stale
    /// ticket, a number that is no ticket) — never a panic, whatever JavaScript passes.
    #[inline]
    pub fn unpack(&self, packed: f64) -> Option<Ticket> {
        let (index, generation) = Ticket::unpacked(packed)?;
        let slot = self.slots.get(index as usize)?;
        slot.entry.as_ref()?;
        let ticket = Ticket {
            index,
            generation: slot.generation,
        };
        ticket.same_generation(generation).then_some(ticket)
    }

    /// Whether another entry can be pushed: at most [`MAX_ENTRIES`] live at once (a packed
    /// ticket could not name more).
    pub fn has_room(&self) -> bool {
        self.len < MAX_ENTRIES
    }

    /// Every live entry's payload, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = &P> {
        self.slots
            .iter()
            .filter_map(|slot| slot.entry.as_ref().map(|entry| &entry.payload))
    }

    /// The payload of a live entry.
    pub fn get(&self, ticket: Ticket) -> Option<&P> {
        self.live(ticket).map(|entry| &entry.payload)
    }

    /// The payload of a live entry, mutably.
    pub fn get_mut(&mut self, ticket: Ticket) -> Option<&mut P> {
        let slot = self.slots.get_mut(ticket.index as usize)?;
        if slot.generation != ticket.generation {
            return None;
        }
        slot.entry.as_mut().map(|entry| &mut entry.payload)
    }

    /// The key a live entry waits under.
    pub fn key(&self, ticket: Ticket) -> Option<&Rc<str>> {
        let line = self.live(ticket)?.line;
        self.line(line).map(|line| &line.key)
    }

    /// The key of a busy line.
    pub fn line_key(&self, line: LineId) -> Option<&Rc<str>> {
        self.line(line.0).map(|line| &line.key)
    }

    /// The line a live entry waits in.
    pub fn line_of(&self, ticket: Ticket) -> Option<LineId> {
        self.live(ticket).map(|entry| LineId(entry.line))
    }

    /// The entry right behind a live one in its line.
    pub fn next_in_line(&self, ticket: Ticket) -> Option<Ticket> {
        let next = self.live(ticket)?.next;
        (next != NONE).then(|| self.ticket_at(next))
    }

    /// The entry right ahead of a live one in its line.
    pub fn prev_in_line(&self, ticket: Ticket) -> Option<Ticket> {
        let prev = self.live(ticket)?.prev;
        (prev != NONE).then(|| self.ticket_at(prev))
    }

    /// How many entries wait behind a live one in its line, counting at most `max` (so the
    /// walk is bounded however long the line is).
    pub fn behind(&self, ticket: Ticket, max: usize) -> usize {
        let mut count = 0;
        let mut at = self.live(ticket).map_or(NONE, |entry| entry.next);
        while at != NONE && count < max {
            count += 1;
            at = self
                .slots
                .get(at as usize)
                .and_then(|slot| slot.entry.as_ref())
                .map_or(NONE, |entry| entry.next);
        }
        count
    }

    /// Whether a live entry is the head of its key's line.
    #[cfg(test)]
    pub fn is_head(&self, ticket: Ticket) -> bool {
        self.live(ticket).is_some_and(|entry| entry.prev == NONE)
    }

    /// The head of a busy key's line.
    pub fn head(&self, line: LineId) -> Option<Ticket> {
        self.line(line.0).map(|line| self.ticket_at(line.head))
    }

    /// The last entry of a busy key's line.
    pub fn last(&self, line: LineId) -> Option<Ticket> {
        self.line(line.0).map(|line| self.ticket_at(line.tail))
    }

    /// The data of a busy key's line.
    pub fn line_data_mut(&mut self, line: LineId) -> Option<&mut L> {
        self.lines
            .get_mut(line.0 as usize)?
            .as_mut()
            .map(|line| &mut line.data)
    }

    /// The data of a busy key's line.
    pub fn line_data(&self, line: LineId) -> Option<&L> {
        self.line(line.0).map(|line| &line.data)
    }

    /// How many entries wait in a line, its head included; 0 for an idle one.
    pub fn line_len(&self, line: LineId) -> usize {
        self.head(line)
            .map_or(0, |head| 1 + self.behind(head, usize::MAX))
    }

    /// Removes a live entry from anywhere in its line; `None` for a stale ticket. When it was
    /// the head, the next entry (if any) becomes the head and is returned in [`Removed::next`].
    pub fn remove(&mut self, ticket: Ticket) -> Option<Removed<P>> {
        self.live(ticket)?;
        let entry = self.slots.get_mut(ticket.index as usize)?.entry.take()?;
        self.free.push(ticket.index);
        self.len -= 1;
        if let Some(next) = self.entry_mut(entry.next) {
            next.prev = entry.prev;
        }
        if let Some(prev) = self.entry_mut(entry.prev) {
            prev.next = entry.next;
        }
        let mut next = None;
        let mut idle = false;
        if let Some(Some(line)) = self.lines.get_mut(entry.line as usize) {
            if entry.prev == NONE {
                line.head = entry.next;
            }
            if entry.next == NONE {
                line.tail = entry.prev;
            }
            if line.head == NONE {
                idle = true;
            } else if entry.prev == NONE {
                next = Some(line.head);
            }
        }
        if idle {
            if let Some(line) = self.lines.get_mut(entry.line as usize) {
                *line = None;
            }
            self.free_lines.push(entry.line);
            self.busy -= 1;
        }
        let next = next.map(|head| self.ticket_at(head));
        if self.len == 0 {
            self.release_idle_memory();
        }
        Some(Removed {
            payload: entry.payload,
            next,
            idle,
        })
    }

    fn release_idle_memory(&mut self) {
        if self.slots.capacity() > KEEP_WHEN_IDLE {
            // SAFETY: a shorter length only forgets elements, and none owns anything: with no
            // entry live, every slot is empty. (So no drop walks the whole slab.)
            unsafe { self.slots.set_len(0) };
            self.slots = Vec::new();
            self.free = Vec::new();
        }
        if self.lines.capacity() > KEEP_WHEN_IDLE {
            // SAFETY: as above: with no entry live, no line is open.
            unsafe { self.lines.set_len(0) };
            self.lines = Vec::new();
            self.free_lines = Vec::new();
        }
    }

    /// The number of busy keys (open lines).
    pub fn keys(&self) -> usize {
        self.busy
    }

    /// The number of entries, in every line.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key is busy.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots of slab and index capacity held, for tests that an idle queue gives memory back.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.slots.capacity()
            + self.free.capacity()
            + self.lines.capacity()
            + self.free_lines.capacity()
    }
}

#[cfg(test)]
mod tests;

/// [`Lines`] with a key index: per-key FIFO lines found by key.
pub struct KeyedQueue<P, L = ()> {
    lines: Lines<P, L>,
    index: KeyMap,
}

impl<P, L: Default> Default for KeyedQueue<P, L> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P, L> core::fmt::Debug for KeyedQueue<P, L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.lines.fmt(f)
    }
}

impl<P, L> core::ops::Deref for KeyedQueue<P, L> {
    type Target = Lines<P, L>;
    fn deref(&self) -> &Lines<P, L> {
        &self.lines
    }
}

impl<P, L: Default> KeyedQueue<P, L> {
    /// An empty queue.
    pub fn new() -> Self {
        KeyedQueue {
            lines: Lines::new(),
            index: KeyMap::default(),
        }
    }

    /// Appends `payload` to `key`'s line, opening the line if the key was idle.
    pub fn push(&mut self, key: &str, payload: P) -> Pushed {
        self.push_key(key, None, payload)
    }

    /// [`KeyedQueue::push`] with the key as a shared string the caller already has, which an
    /// opened line keeps instead of a copy.
    pub fn push_shared(&mut self, key: &Rc<str>, payload: P) -> Pushed {
        self.push_key(key, Some(key), payload)
    }

    /// One body for both pushes (not generic over the key: one copy in each wasm module).
    fn push_key(&mut self, key: &str, shared: Option<&Rc<str>>, payload: P) -> Pushed {
        // A key in the index has a busy line (`remove` unindexes a key whose line goes idle).
        let busy = self.index.get(key).map(|&line| LineId(line));
        if let Some((line, prev)) = busy.and_then(|line| Some((line, self.lines.tail(line)?))) {
            return Pushed {
                ticket: self.lines.append(line, prev, payload),
                line,
                is_head: false,
            };
        }
        let key: Rc<str> = match shared {
            Some(shared) => shared.clone(),
            None => Rc::from(key),
        };
        let pushed = self.lines.open(key, payload);
        if let Some(key) = self.lines.key(pushed.ticket) {
            self.index.insert(key.clone(), pushed.line.0);
        }
        pushed
    }

    /// Appends `payload` to a busy key's line; `None` (and nothing pushed) if the line is idle.
    #[cfg(test)]
    pub fn push_on(&mut self, line: LineId, payload: P) -> Option<Ticket> {
        self.lines.push_on(line, payload)
    }

    /// The line of `key`, if the key is busy.
    pub fn line_id(&self, key: &str) -> Option<LineId> {
        self.index.get(key).map(|&line| LineId(line))
    }

    /// The payload of a live entry, mutably.
    pub fn get_mut(&mut self, ticket: Ticket) -> Option<&mut P> {
        self.lines.get_mut(ticket)
    }

    /// The data of a busy key's line.
    pub fn line_data_mut(&mut self, line: LineId) -> Option<&mut L> {
        self.lines.line_data_mut(line)
    }

    /// Removes a live entry from anywhere in its line, as [`Lines::remove`].
    pub fn remove(&mut self, ticket: Ticket) -> Option<Removed<P>> {
        let key = self.lines.key(ticket)?.clone();
        let removed = self.lines.remove(ticket)?;
        if removed.idle {
            self.index.remove(&key);
            if self.index.is_empty() && self.index.capacity() > KEEP_WHEN_IDLE {
                self.index = KeyMap::default();
            }
        }
        Some(removed)
    }

    /// Slots of slab and index capacity held, for tests that an idle queue gives memory back.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.lines.capacity() + self.index.capacity()
    }
}
