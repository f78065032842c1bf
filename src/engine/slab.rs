//! A table of live things named by [`Ticket`]s: the engine's calls, lease acquisitions and store
//! calls. A removed entry's ticket goes stale (its slot's next entry has another push number),
//! so an answer or an event that comes late names nothing instead of whoever took the slot.

use crate::engine::queue::Ticket;

/// Entries by ticket.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<(u32, Option<T>)>,
    free: Vec<u32>,
    pushes: u32,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            pushes: 0,
            len: 0,
        }
    }
}

impl<T> Slab<T> {
    /// Puts `value` in a free slot: its ticket.
    pub(crate) fn insert(&mut self, value: T) -> Ticket {
        self.pushes = self.pushes.wrapping_add(1);
        let generation = self.pushes;
        self.len += 1;
        if let Some(index) = self.free.pop() {
            if let Some(slot) = self.slots.get_mut(index as usize) {
                *slot = (generation, Some(value));
                return Ticket::new(index, generation);
            }
        }
        let index = self.slots.len() as u32;
        self.slots.push((generation, Some(value)));
        Ticket::new(index, generation)
    }

    pub(crate) fn get(&self, ticket: Ticket) -> Option<&T> {
        let (index, generation) = ticket.parts();
        match self.slots.get(index as usize)? {
            (live, Some(value)) if *live == generation => Some(value),
            _ => None,
        }
    }

    pub(crate) fn get_mut(&mut self, ticket: Ticket) -> Option<&mut T> {
        let (index, generation) = ticket.parts();
        match self.slots.get_mut(index as usize)? {
            (live, Some(value)) if *live == generation => Some(value),
            _ => None,
        }
    }

    /// Takes the entry out; its ticket goes stale.
    pub(crate) fn remove(&mut self, ticket: Ticket) -> Option<T> {
        let (index, generation) = ticket.parts();
        let slot = self.slots.get_mut(index as usize)?;
        if slot.0 != generation {
            return None;
        }
        let value = slot.1.take()?;
        self.len -= 1;
        if self.len == 0 {
            // Drained: a busy past leaves no memory behind.
            self.slots.clear();
            self.free.clear();
        } else {
            self.free.push(index);
        }
        Some(value)
    }

    /// The live ticket a [`Ticket::pack`]ed number names, if any.
    pub(crate) fn unpack(&self, packed: f64) -> Option<Ticket> {
        let (index, generation) = Ticket::unpacked(packed)?;
        match self.slots.get(index as usize)? {
            (live, Some(_)) => {
                let ticket = Ticket::new(index, *live);
                ticket.same_generation(generation).then_some(ticket)
            }
            _ => None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_entry_names_nothing_even_once_its_slot_is_reused() {
        let mut slab = Slab::default();
        let a = slab.insert("a");
        let b = slab.insert("b");
        assert_eq!(slab.remove(a), Some("a"));
        let c = slab.insert("c");
        assert_eq!(slab.get(a), None, "a's slot holds c now");
        assert_eq!(slab.get(c), Some(&"c"));
        assert_eq!(slab.unpack(a.pack()), None);
        assert_eq!(slab.unpack(c.pack()), Some(c));
        assert_eq!(slab.remove(b), Some("b"));
        assert_eq!(slab.remove(c), Some("c"));
        assert_eq!(slab.len(), 0);
        assert_eq!(slab.unpack(c.pack()), None);
    }
}
