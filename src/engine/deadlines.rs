//! A min-heap of `(time, id)` with lazy deletion: what one shared timer needs to know.
//!
//! Entries are never removed from the middle. The owner says which entries are still live
//! (the ticket still waits for that time); dead ones are dropped when they reach the top, and
//! when they outnumber the live ones twice over the heap is rebuilt from the live ones. So it
//! holds at most about three entries per live one, and a push costs amortised O(1) when times
//! mostly come in rising order (they do: deadlines are "now + a constant" more often than not).

use crate::engine::queue::Ticket;

/// Times by id (a ticket, by default), earliest first.
#[derive(Debug)]
pub(crate) struct Deadlines<T = Ticket> {
    heap: Vec<(f64, T)>,
}

impl<T> Default for Deadlines<T> {
    fn default() -> Self {
        Deadlines { heap: Vec::new() }
    }
}

impl<T: Copy> Deadlines<T> {
    /// Adds `id`'s time. `live` entries number `live_count`; `is_live` tells one apart.
    pub(crate) fn push(
        &mut self,
        at: f64,
        ticket: T,
        live_count: usize,
        is_live: impl Fn((f64, T)) -> bool,
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
    pub(crate) fn first(&mut self, is_live: impl Fn((f64, T)) -> bool) -> Option<(f64, T)> {
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
        let Some(last) = self.heap.pop() else {
            return;
        };
        if let Some(top) = self.heap.first_mut() {
            *top = last;
            sift_down(&mut self.heap, 0);
        }
    }

    /// Entries held, dead ones included (for tests of the bound).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

/// The time of the entry at `at`; `+∞` past the end (so no path panics: an index past it is
/// never the lesser).
fn time<T>(heap: &[(f64, T)], at: usize) -> f64 {
    heap.get(at).map_or(f64::INFINITY, |entry| entry.0)
}

/// Swaps the entries at `a` and `b`, both within the heap.
fn swap<T>(heap: &mut [(f64, T)], a: usize, b: usize) {
    if a < heap.len() && b < heap.len() {
        heap.swap(a, b);
    }
}

fn sift_up<T>(heap: &mut [(f64, T)], mut at: usize) {
    while at > 0 {
        let parent = (at - 1) / 2;
        if time(heap, parent) <= time(heap, at) {
            break;
        }
        swap(heap, parent, at);
        at = parent;
    }
}

fn sift_down<T>(heap: &mut [(f64, T)], mut at: usize) {
    loop {
        let (left, right) = (2 * at + 1, 2 * at + 2);
        let mut least = at;
        if time(heap, left) < time(heap, least) {
            least = left;
        }
        if time(heap, right) < time(heap, least) {
            least = right;
        }
        if least == at {
            return;
        }
        swap(heap, at, least);
        at = least;
    }
}
