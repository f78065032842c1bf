//! The modules' allocator: blocks of a power of two bytes, from 16, each size with a list of
//! its freed blocks; new blocks are cut from the top of the memory, which grows by whole pages.
//!
//! Why not a general allocator: the modules allocate small strings and the vectors of their
//! maps and queues, over and over in the same sizes, and never need a block back in another
//! size. Every allocation and free is a few instructions, and the whole is half a kilobyte of
//! wasm where talc was two (`bench/README.md`, Sizes). What it costs: a block is up to twice
//! what was asked for, and a freed block serves only its own size again. Single threaded: the
//! modules are.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;
use core::ptr::null_mut;

const PAGE: usize = 65_536;

/// The smallest block: room for the free list's link, and what most strings need.
const MIN_BLOCK: usize = 16;

pub struct SizeClasses {
    /// The first freed block of each size (its first word links to the next), by log2 size.
    free: [Cell<usize>; usize::BITS as usize],
    /// Where the next new block is cut, and where the memory ends.
    top: Cell<usize>,
    end: Cell<usize>,
}

// SAFETY: the modules are single threaded (no `atomics` target feature: see lib.rs).
unsafe impl Sync for SizeClasses {}

impl SizeClasses {
    pub const fn new() -> Self {
        SizeClasses {
            free: [const { Cell::new(0) }; usize::BITS as usize],
            top: Cell::new(0),
            end: Cell::new(0),
        }
    }

    /// The block size for `layout` (its log2), or `None` past what a wasm32 memory holds.
    fn class(layout: Layout) -> Option<usize> {
        let size = layout.size().max(layout.align()).max(MIN_BLOCK);
        let block = size.checked_next_power_of_two()?;
        Some(block.trailing_zeros() as usize)
    }

    /// A new block of `2^class` bytes, aligned to its size (up to a page), from the top.
    #[inline(never)]
    fn cut(&self, class: usize) -> *mut u8 {
        let size = 1usize << class;
        let align = size.min(PAGE);
        let mut top = self.top.get();
        if top == 0 {
            // The first block: the memory as it is now is the modules' own (stack and data).
            top = core::arch::wasm32::memory_size(0) * PAGE;
            self.end.set(top);
        }
        let start = (top + align - 1) & !(align - 1);
        let Some(stop) = start.checked_add(size) else {
            return null_mut();
        };
        if stop > self.end.get() {
            let pages = (stop - self.end.get()).div_ceil(PAGE);
            if core::arch::wasm32::memory_grow(0, pages) == usize::MAX {
                return null_mut();
            }
            self.end.set(self.end.get() + pages * PAGE);
        }
        self.top.set(stop);
        start as *mut u8
    }
}

// Out of line: inlined at every allocation and drop, the modules grew by kilobytes.
unsafe impl GlobalAlloc for SizeClasses {
    #[inline(never)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(class) = Self::class(layout) else {
            return null_mut();
        };
        let Some(list) = self.free.get(class) else {
            return null_mut();
        };
        match list.get() {
            0 => self.cut(class),
            block => {
                // SAFETY: a freed block of this size, whose first word links to the next.
                list.set(unsafe { *(block as *const usize) });
                block as *mut u8
            }
        }
    }

    #[inline(never)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Some(list) = Self::class(layout).and_then(|class| self.free.get(class)) {
            // SAFETY: `ptr` is a block of this size, ours again: its first word is free.
            unsafe { *(ptr as *mut usize) = list.get() };
            list.set(ptr as usize);
        }
    }

    #[inline(never)]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as the trait's contract gives them.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if Self::class(layout) == Self::class(new) {
            return ptr;
        }
        // SAFETY: a block of the new size, the old one's bytes copied, then the old freed.
        unsafe {
            let block = self.alloc(new);
            if !block.is_null() {
                core::ptr::copy_nonoverlapping(ptr, block, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            block
        }
    }
}
