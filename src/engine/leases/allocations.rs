//! What an uncontended acquire+release allocates, through the synchronous steps the JS binding
//! drives. Native only: a counting global allocator wraps the system one for the crate's unit
//! tests, counting per thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use super::{Answer, LockCore, Now, Step};
use crate::engine::options::LockOptions;
use crate::engine::random::SeededRandom;

struct Counting;

thread_local! {
    // Per thread: the test harness's own threads allocate now and then while a test runs, and
    // those are not the lock's. (A const-initialized `Cell` needs no allocation to access.)
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// An uncontended acquire+release, as the JS binding drives the core (versions are numbers here,
/// as the binding's JS values cost the core no allocation): what is counted is the lock's own.
#[test]
fn an_uncontended_acquire_and_release_of_a_name_used_before_allocates_only_its_token_and_records() {
    let random = SeededRandom::new(3);
    let mut core: LockCore<u64, ()> = LockCore::new();
    let mut version = 0u64;
    let mut now = 0.0;
    let mut cycle = || {
        let (ticket, step) = core
            .acquire("board:1", (), LockOptions::default(), at(now), &random)
            .unwrap();
        let answer = match step {
            Step::Create { .. } if version == 0 => Answer::Created(Some(version + 1)),
            Step::Replace { version: v, .. } if v == version => Answer::Replaced(Some(version + 1)),
            other => panic!("uncontended: {other:?}"),
        };
        version += 1;
        assert_eq!(core.step(ticket, answer, at(now), &random), Step::Held);
        let Step::Replace { version: v, .. } = core.release(ticket, at(now), &random) else {
            panic!("a CAS to free the record");
        };
        assert_eq!(v, version);
        version += 1;
        assert_eq!(
            core.step(ticket, Answer::Replaced(Some(version)), at(now), &random),
            Step::Done
        );
        now += 1.0;
    };
    // The first cycles open the maps and slabs and allocate the name once; after that a cycle
    // allocates its token and the two records it writes, nothing more: the name is shared by
    // its line and the memory of the freed record.
    for _ in 0..3 {
        cycle();
    }
    let before = allocations();
    for _ in 0..100 {
        cycle();
    }
    let per_cycle = (allocations() - before) as f64 / 100.0;
    assert!(per_cycle <= 3.0, "{per_cycle} allocations per cycle");
    assert_eq!(core.local_line("board:1"), 0);
}

fn at(t: f64) -> Now {
    Now { wall: t, mono: t }
}
