//! The per-key FIFO: order, heads, removal from anywhere, stale tickets, idle memory.

// The same tests on wasm (Node and browsers), as smol-rs does.
#[cfg(target_family = "wasm")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::collections::{HashMap, VecDeque};

use super::{KeyedQueue, LineId, Ticket};

#[test]
fn first_push_of_an_idle_key_is_its_head() {
    let mut queue: KeyedQueue<u32> = KeyedQueue::new();
    let a = queue.push("a", 1);
    let b = queue.push("a", 2);
    let c = queue.push("b", 3);
    assert!(a.is_head && !b.is_head && c.is_head);
    assert_eq!(a.line, b.line);
    assert_ne!(a.line, c.line);
    assert_eq!(queue.keys(), 2);
    assert_eq!(queue.len(), 3);
    assert_eq!(queue.line_len(a.line), 2);
    assert_eq!(queue.head(a.line), Some(a.ticket));
    assert_eq!(queue.key(b.ticket).map(|key| &**key), Some("a"));
}

#[test]
fn removing_the_head_hands_the_turn_to_the_next_in_order() {
    let mut queue: KeyedQueue<u32> = KeyedQueue::new();
    let tickets: Vec<Ticket> = (0..4).map(|i| queue.push("k", i).ticket).collect();
    for (i, ticket) in tickets.iter().enumerate() {
        let removed = queue.remove(*ticket).expect("live");
        assert_eq!(removed.payload, i as u32);
        assert_eq!(removed.next, tickets.get(i + 1).copied());
        assert_eq!(removed.idle, i == 3);
    }
    assert_eq!(queue.keys(), 0);
    assert!(queue.is_empty());
}

#[test]
fn removing_from_the_middle_keeps_the_order_and_the_head() {
    let mut queue: KeyedQueue<u32> = KeyedQueue::new();
    let a = queue.push("k", 0).ticket;
    let b = queue.push("k", 1).ticket;
    let c = queue.push("k", 2).ticket;
    let removed = queue.remove(b).expect("live");
    assert_eq!(
        (removed.payload, removed.next, removed.idle),
        (1, None, false)
    );
    assert!(queue.is_head(a));
    assert_eq!(queue.remove(a).expect("live").next, Some(c));
    // The tail was fixed too: a new push goes behind c.
    let d = queue.push("k", 3).ticket;
    assert_eq!(queue.remove(c).expect("live").next, Some(d));
}

#[test]
fn behind_counts_the_entries_after_one_up_to_a_bound() {
    let mut queue: KeyedQueue<u32> = KeyedQueue::new();
    let tickets: Vec<Ticket> = (0..5).map(|i| queue.push("k", i).ticket).collect();
    queue.push("other", 9);
    assert_eq!(queue.behind(tickets[0], 100), 4);
    assert_eq!(queue.behind(tickets[0], 2), 2);
    assert_eq!(queue.behind(tickets[3], 100), 1);
    assert_eq!(queue.behind(tickets[4], 100), 0);
    queue.remove(tickets[2]);
    assert_eq!(queue.behind(tickets[0], 100), 3);
    assert_eq!(
        queue.behind(tickets[2], 100),
        0,
        "a stale ticket has nobody behind it"
    );
}

#[test]
fn a_removed_entry_is_stale_even_when_its_slot_is_reused() {
    let mut queue: KeyedQueue<u32> = KeyedQueue::new();
    let old = queue.push("k", 1).ticket;
    queue.remove(old);
    let new = queue.push("k", 2).ticket;
    assert_ne!(old, new);
    assert!(queue.get(old).is_none());
    assert!(queue.remove(old).is_none());
    assert_eq!(queue.get(new), Some(&2));
}

#[test]
fn push_on_an_idle_line_pushes_nothing() {
    let mut queue: KeyedQueue<u32> = KeyedQueue::new();
    let a = queue.push("a", 1);
    assert!(queue.push_on(a.line, 2).is_some());
    queue.remove(a.ticket);
    let second = queue.head(a.line).expect("busy");
    queue.remove(second);
    assert_eq!(queue.push_on(a.line, 3), None);
    assert_eq!(queue.push_on(LineId(999), 3), None);
    assert!(queue.is_empty());
}

#[test]
fn an_idle_queue_gives_its_memory_back() {
    let mut queue: KeyedQueue<u64> = KeyedQueue::new();
    let tickets: Vec<Ticket> = (0..20_000)
        .map(|i| queue.push(&format!("key-{i}"), i).ticket)
        .collect();
    assert_eq!(queue.keys(), 20_000);
    assert!(queue.capacity() >= 60_000);
    for ticket in tickets {
        queue.remove(ticket);
    }
    assert_eq!(queue.keys(), 0);
    assert_eq!(queue.capacity(), 0, "a drained queue keeps no slab");
}

/// xorshift64*: deterministic randomness for model tests, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn matches_a_model_of_per_key_fifos_under_random_operations() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut queue: KeyedQueue<u64> = KeyedQueue::new();
    let mut model: HashMap<String, VecDeque<(Ticket, u64)>> = HashMap::new();
    for step in 0..50_000u64 {
        let key = format!("k{}", rng.below(12));
        match rng.below(3) {
            0 | 1 => {
                let pushed = queue.push(&key, step);
                let line = model.entry(key.clone()).or_default();
                assert_eq!(pushed.is_head, line.is_empty());
                line.push_back((pushed.ticket, step));
            }
            _ => {
                let Some(line) = model.get_mut(&key) else {
                    continue;
                };
                let at = rng.below(line.len() as u64) as usize;
                let (ticket, payload) = line.remove(at).expect("in range");
                let removed = queue.remove(ticket).expect("live");
                assert_eq!(removed.payload, payload);
                let expected_next = if at == 0 {
                    line.front().map(|(t, _)| *t)
                } else {
                    None
                };
                assert_eq!(removed.next, expected_next);
                assert_eq!(removed.idle, line.is_empty());
                if line.is_empty() {
                    model.remove(&key);
                }
            }
        }
        assert_eq!(queue.keys(), model.len());
        if step % 1000 == 0 {
            for (key, line) in &model {
                let id = queue.line_id(key).expect("busy key has a line");
                assert_eq!(queue.line_len(id), line.len());
                assert_eq!(queue.head(id), line.front().map(|(t, _)| *t));
            }
        }
    }
}
