//! The process's allocator: mimalloc, asked the way `malloc` is asked whenever `malloc`'s own
//! alignment is enough.
//!
//! Why not the `mimalloc` crate's `MiMalloc`: it passes every allocation to
//! `mi_malloc_aligned`, and mimalloc 3 serves an aligned request above 1 KiB whose size is not a
//! power of two by over-allocating and aligning inside the block, even for an alignment of 8
//! (`alloc-aligned.c`). A request's future, hyper's read buffer and a JSON body are such
//! allocations, several per request, and that path is many times slower than `mi_malloc`'s.
//! `mi_malloc` returns blocks aligned to 16 bytes whenever
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

/// SQLite's allocations served by mimalloc too. The bundled SQLite allocates through C's
/// `malloc` (glibc's) and, with its default memory statistics, takes a process-wide mutex around
/// each call to count it: in a scheduler round's profile, allocation was a fifth of the SQLite
/// writer thread's samples (glibc's `_int_malloc`, `malloc_consolidate`, the mutex). The
/// statistics are compiled out (`SQLITE_DEFAULT_MEMSTATUS=0` in `.cargo/config.toml`) and the
/// calls come here, to the allocator the rest of the process uses.
///
/// Must run before SQLite is first used (its first connection initialises it); returns whether
/// SQLite took the methods (it refuses once initialised, and then keeps its own allocator).
pub fn route_sqlite_allocations() -> bool {
    use libsqlite3_sys as sq;
    use std::ffi::c_int;

    unsafe extern "C" fn sqlite_malloc(n: c_int) -> *mut c_void {
        // SAFETY: SQLite asks for a positive size; mimalloc's blocks are 8-byte aligned or more.
        unsafe { mi::mi_malloc(usize::try_from(n).unwrap_or(0)) }
    }
    unsafe extern "C" fn sqlite_free(p: *mut c_void) {
        // SAFETY: `p` came from `sqlite_malloc` or `sqlite_realloc` (or is null).
        unsafe { mi::mi_free(p) }
    }
    unsafe extern "C" fn sqlite_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
        // SAFETY: as `sqlite_free`; the old block's bytes move with it.
        unsafe { mi::mi_realloc(p, usize::try_from(n).unwrap_or(0)) }
    }
    unsafe extern "C" fn sqlite_size(p: *mut c_void) -> c_int {
        // SAFETY: `p` is a live block of ours. SQLite's blocks stay far below 2 GiB.
        unsafe { c_int::try_from(mi::mi_usable_size(p)).unwrap_or(c_int::MAX) }
    }
    unsafe extern "C" fn sqlite_roundup(n: c_int) -> c_int {
        // What SQLite's own allocator answers: the size rounded up to 8.
        n.saturating_add(7) & !7
    }
    unsafe extern "C" fn sqlite_init(_: *mut c_void) -> c_int {
        sq::SQLITE_OK
    }
    unsafe extern "C" fn sqlite_shutdown(_: *mut c_void) {}

    let methods = sq::sqlite3_mem_methods {
        xMalloc: Some(sqlite_malloc),
        xFree: Some(sqlite_free),
        xRealloc: Some(sqlite_realloc),
        xSize: Some(sqlite_size),
        xRoundup: Some(sqlite_roundup),
        xInit: Some(sqlite_init),
        xShutdown: Some(sqlite_shutdown),
        pAppData: std::ptr::null_mut(),
    };
    // SAFETY: `SQLITE_CONFIG_MALLOC` takes a pointer to methods SQLite copies before it returns;
    // the call fails harmlessly (SQLITE_MISUSE) once SQLite is initialised.
    unsafe { sq::sqlite3_config(sq::SQLITE_CONFIG_MALLOC, &raw const methods) == sq::SQLITE_OK }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every layout a program asks for comes back aligned, zeroed when asked, and keeps its
    /// bytes across a reallocation: small and large, naturally and over-aligned.
    #[test]
    fn blocks_meet_their_layouts() {
        let a = Mimalloc;
        for size in [
            1usize,
            3,
            8,
            15,
            16,
            24,
            40,
            1000,
            1025,
            1500,
            4097,
            70_000,
            1 << 20,
        ] {
            for align in [1usize, 2, 8, 16, 32, 64, 128, 4096] {
                let layout = Layout::from_size_align(size, align).unwrap();
                unsafe {
                    let p = a.alloc(layout);
                    assert!(
                        !p.is_null() && (p as usize).is_multiple_of(align),
                        "{size} bytes aligned to {align}"
                    );
                    p.write_bytes(0xab, size);
                    let grown = a.realloc(p, layout, size * 3);
                    assert!(
                        !grown.is_null() && (grown as usize).is_multiple_of(align),
                        "{size} → {} aligned to {align}",
                        size * 3
                    );
                    assert!(
                        (0..size).all(|i| *grown.add(i) == 0xab),
                        "realloc kept the bytes of {size}/{align}"
                    );
                    a.dealloc(grown, Layout::from_size_align(size * 3, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert!(!z.is_null() && (z as usize).is_multiple_of(align));
                    assert!((0..size).all(|i| *z.add(i) == 0), "zeroed {size}/{align}");
                    a.dealloc(z, layout);
                }
            }
        }
    }

    /// SQLite takes the methods when asked first (this test binary opens no other SQLite),
    /// its blocks then come from mimalloc, it keeps no statistics, and it still works: a table
    /// of rows of many sizes, grown text (reallocations) and a sort.
    #[test]
    fn sqlite_allocates_from_mimalloc() {
        use libsqlite3_sys as sq;
        assert!(route_sqlite_allocations(), "SQLite refused the methods");
        unsafe {
            let block = sq::sqlite3_malloc(1000);
            assert!(
                mi::mi_check_owned(block.cast_const()),
                "a SQLite block from mimalloc's heap"
            );
            sq::sqlite3_free(block);

            let mut db = std::ptr::null_mut();
            assert_eq!(
                sq::sqlite3_open(c":memory:".as_ptr(), &raw mut db),
                sq::SQLITE_OK
            );
            let sql = c"CREATE TABLE t (n INTEGER, b BLOB, s TEXT);
                WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 5000)
                INSERT INTO t SELECT n, randomblob(n % 3000), printf('%.*c', n % 700, 'x') FROM k;
                UPDATE t SET s = s || s || s WHERE n % 7 = 0;
                CREATE TABLE r AS SELECT count(*) AS c, sum(length(b)) AS lb, sum(length(s)) AS ls FROM (SELECT * FROM t ORDER BY b);";
            assert_eq!(
                sq::sqlite3_exec(
                    db,
                    sql.as_ptr(),
                    None,
                    std::ptr::null_mut(),
                    std::ptr::null_mut()
                ),
                sq::SQLITE_OK
            );
            // `randomblob(0)` and `printf('%.0c', …)` are one byte long: hence the `max(1)`s.
            let mut stmt = std::ptr::null_mut();
            assert_eq!(
                sq::sqlite3_prepare_v2(
                    db,
                    c"SELECT c, lb, ls FROM r".as_ptr(),
                    -1,
                    &raw mut stmt,
                    std::ptr::null_mut()
                ),
                sq::SQLITE_OK
            );
            assert_eq!(sq::sqlite3_step(stmt), sq::SQLITE_ROW);
            let column = |i| sq::sqlite3_column_int64(stmt, i);
            let (blobs, texts): (i64, i64) = (1..=5000)
                .map(|n: i64| {
                    (
                        (n % 3000).max(1),
                        (n % 700).max(1) * if n % 7 == 0 { 3 } else { 1 },
                    )
                })
                .fold((0, 0), |(b, t), (x, y)| (b + x, t + y));
            assert_eq!((column(0), column(1), column(2)), (5000, blobs, texts));
            assert_eq!(
                sq::sqlite3_memory_used(),
                0,
                "SQLITE_DEFAULT_MEMSTATUS=0 reached the build (.cargo/config.toml)"
            );
            sq::sqlite3_finalize(stmt);
            assert_eq!(sq::sqlite3_close(db), sq::SQLITE_OK);
        }
    }
}
