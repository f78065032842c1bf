//! A min-heap of `(time, ticket)` with lazy deletion: what one shared timer needs to know.
//!
//! Entries are never removed from the middle. The owner says which entries are still live
//! (the ticket still waits for that time); dead ones are dropped when they reach the top, and
//! when they outnumber the live ones twice over the heap is rebuilt from the live ones. So it
//! holds at most about three entries per live one, and a push costs amortised O(1) when times
//! mostly come in rising order (they do: deadlines are "now + a constant" more often than not).

use crate::queue::Ticket;

/// Times by ticket, earliest first.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    heap: Vec<(f64, Ticket)>,
}

impl Deadlines {
    /// Adds `ticket`'s time. `live` entries number `live_count`; `is_live` tells one apart.
    pub(crate) fn push(
        &mut self,
        at: f64,
        ticket: Ticket,
        live_count: usize,
        is_live: impl Fn((f64, Ticket)) -> bool,
    ) {
        if self.heap.len() >= 2 * live_count + 64 {
            self.heap.retain(|&entry| is_live(entry));
            for at in (0..self.heap.len() / 2).rev() {
                sift_down(&mut self.heap, at);
            }
        }
        let last = self.heap.len();
        self.heap.push((at, ticket));
        sift_up(&mut self.heap, last);
    }

    /// The earliest live entry, dead ones above it dropped.
    pub(crate) fn first(
        &mut self,
        is_live: impl Fn((f64, Ticket)) -> bool,
    ) -> Option<(f64, Ticket)> {
        while let Some(&top) = self.heap.first() {
            if is_live(top) {
                return Some(top);
            }
            self.pop();
        }
        None
    }

    /// Drops the top entry.
    pub(crate) fn pop(&mut self) {
        if self.heap.is_empty() {
            return;
        }
        let last = self.heap.len() - 1;
        self.heap.swap(0, last);
        self.heap.pop();
        sift_down(&mut self.heap, 0);
    }

    /// Entries held, dead ones included (for tests of the bound).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

fn sift_up(heap: &mut [(f64, Ticket)], mut at: usize) {
    while at > 0 {
        let parent = (at - 1) / 2;
        if heap[parent].0 <= heap[at].0 {
            break;
        }
        heap.swap(parent, at);
        at = parent;
    }
}

fn sift_down(heap: &mut [(f64, Ticket)], mut at: usize) {
    loop {
        let (left, right) = (2 * at + 1, 2 * at + 2);
        let mut least = at;
        if left < heap.len() && heap[left].0 < heap[least].0 {
            least = left;
        }
        if right < heap.len() && heap[right].0 < heap[least].0 {
            least = right;
        }
        if least == at {
            return;
        }
        heap.swap(at, least);
        at = least;
    }
}
