//! The random pool serves the source's bytes in order, each once, and draws whole blocks.

use std::cell::Cell;

// The same tests on wasm (Node and browsers), as smol-rs does.
#[cfg(target_family = "wasm")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::{Pool, POOL_BYTES};

/// A source that counts: byte i of its stream is i mod 251, and it records each draw's size.
struct Counter {
    next: Cell<usize>,
    draws: std::cell::RefCell<Vec<usize>>,
}

impl Counter {
    fn new() -> Self {
        Counter {
            next: Cell::new(0),
            draws: Default::default(),
        }
    }
    fn source(&self) -> impl Fn(&mut [u8]) + '_ {
        move |bytes: &mut [u8]| {
            self.draws.borrow_mut().push(bytes.len());
            for b in bytes.iter_mut() {
                *b = (self.next.get() % 251) as u8;
                self.next.set(self.next.get() + 1);
            }
        }
    }
}

#[test]
fn serves_the_stream_in_order_across_blocks_each_byte_once() {
    let counter = Counter::new();
    let mut pool = Pool::new();
    let mut served = Vec::new();
    // Sizes that straddle block boundaries.
    for size in [16, 16, 4, 100, 200, 16, 3, 4000, 1, POOL_BYTES]
        .iter()
        .cycle()
        .take(200)
    {
        let mut bytes = vec![0xAA; *size];
        pool.take(&mut bytes, counter.source());
        served.extend(bytes);
    }
    let expected: Vec<u8> = (0..served.len()).map(|i| (i % 251) as u8).collect();
    assert_eq!(
        served, expected,
        "every byte of the source, in order, none skipped or repeated"
    );
    assert!(counter.draws.borrow().iter().all(|&n| n == POOL_BYTES));
    assert_eq!(
        counter.draws.borrow().len(),
        served.len().div_ceil(POOL_BYTES)
    );
}

#[test]
fn a_request_bigger_than_a_block_goes_to_the_source() {
    let counter = Counter::new();
    let mut pool = Pool::new();
    let mut small = [0u8; 8];
    pool.take(&mut small, counter.source());
    let mut big = vec![0u8; POOL_BYTES + 1];
    pool.take(&mut big, counter.source());
    assert_eq!(*counter.draws.borrow(), vec![POOL_BYTES, POOL_BYTES + 1]);
    // The big request got fresh bytes, after the pool's block.
    assert_eq!(big[0], (POOL_BYTES % 251) as u8);
    // And the pool goes on where it was.
    pool.take(&mut small, counter.source());
    assert_eq!(small, [8, 9, 10, 11, 12, 13, 14, 15]);
}
