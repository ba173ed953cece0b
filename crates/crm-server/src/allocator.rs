//! The process's allocator: mimalloc, asked the way `malloc` is asked whenever `malloc`'s own
//! alignment is enough.
//!
//! Why not the `mimalloc` crate's `MiMalloc`: it passes every allocation to
//! `mi_malloc_aligned`, and mimalloc 3 serves an aligned request above 1 KiB whose size is not a
//! power of two by over-allocating and aligning inside the block, even for an alignment of 8
//! (`alloc-aligned.c`). A request's future, hyper's read buffer and a JSON body are such
//! allocations: 2.6 of them per cached request went that way, 580 instructions each
//! (callgrind, docs/performance.md). `mi_malloc` returns blocks aligned to 16 bytes whenever
//! the size is at least 16 (`MI_MAX_ALIGN_SIZE`, as C's `malloc` must), and smaller blocks to
//! their size rounded up to a word; the same rule as the standard library's `System`
//! allocator decides which call a layout needs.
//!
//! The workspace denies unsafe code; this module alone allows it (`cargo xtask test` checks).

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// mimalloc's guaranteed alignment of a `mi_malloc` block of at least this many bytes.
const MALLOC_ALIGN: usize = 16;

pub struct Mimalloc;

/// Whether `mi_malloc(size)` is aligned enough for `align`.
fn malloc_aligns(size: usize, align: usize) -> bool {
    align <= MALLOC_ALIGN && align <= size
}

// SAFETY: every block comes from mimalloc and goes back to it through `mi_free`, which takes
// blocks from both `mi_malloc` and `mi_malloc_aligned`; each call meets the layout's alignment.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(layout.size(), layout.align()) {
            mi::mi_malloc(layout.size()).cast()
        } else {
            mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(layout.size(), layout.align()) {
            mi::mi_zalloc(layout.size()).cast()
        } else {
            mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        mi::mi_free(ptr.cast::<c_void>());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if malloc_aligns(new_size, layout.align()) {
            mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
        } else {
            mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every layout a program asks for comes back aligned, zeroed when asked, and keeps its
    /// bytes across a reallocation: small and large, naturally and over-aligned.
    #[test]
    fn blocks_meet_their_layouts() {
        let a = Mimalloc;
        for size in [1usize, 3, 8, 15, 16, 24, 40, 1000, 1025, 1500, 4097, 70_000, 1 << 20] {
            for align in [1usize, 2, 8, 16, 32, 64, 128, 4096] {
                let layout = Layout::from_size_align(size, align).unwrap();
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null() && (p as usize).is_multiple_of(align), "{size} bytes aligned to {align}");
                    p.write_bytes(0xab, size);
                    let grown = a.realloc(p, layout, size * 3);
                    assert!(!grown.is_null() && (grown as usize).is_multiple_of(align), "{size} → {} aligned to {align}", size * 3);
                    assert!((0..size).all(|i| *grown.add(i) == 0xab), "realloc kept the bytes of {size}/{align}");
                    a.dealloc(grown, Layout::from_size_align(size * 3, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert!(!z.is_null() && (z as usize).is_multiple_of(align));
                    assert!((0..size).all(|i| *z.add(i) == 0), "zeroed {size}/{align}");
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
