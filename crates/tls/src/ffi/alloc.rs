//! The process's global allocator: mimalloc's calls behind Rust's `GlobalAlloc` (part of the
//! FFI module: the only place with `unsafe`). See [`Allocator`] for why not the `mimalloc`
//! crate's own.

/// The process's allocator: mimalloc (the binary names it `#[global_allocator]`), asked the way
/// its version 3 serves fastest. The `mimalloc` crate's allocator passes every request to
/// `mi_malloc_aligned`, and mimalloc v3 serves an aligned request larger than its small sizes
/// (1 KiB) by over-allocation unless the size class is a power of two — even at the 8 or 16
/// bytes every block has anyway (v2 checked that first; v3 lost the check). Every boxed future,
/// `HeaderMap` and frame buffer over 1 KiB took that path: about 300 instructions each instead of
/// a free-list pop, and a block of the next size class (a 1,280-byte connection took 1,536).
/// Here a request for at most the alignment every block of its size has is a plain `mi_malloc`;
/// larger alignments (rare: cache-padded types) still go to `mi_malloc_aligned`.
pub struct Allocator;

/// The alignment mimalloc gives every block of at least this size (`MI_MAX_ALIGN_SIZE`).
const PLAIN_ALIGN: usize = 16;

/// Whether a request of `size` bytes aligned to `align` goes to the plain calls: the alignment
/// is one mimalloc's blocks of that size have (checked again on the pointer: see [`aligned`]).
fn plain(size: usize, align: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

/// Whether `p` meets `align`.
fn aligned(p: *mut std::ffi::c_void, align: usize) -> bool {
    (p as usize) & (align - 1) == 0
}

/// A block for `layout` from `plain_call` (mimalloc's call by size: `mi_malloc` or `mi_zalloc`)
/// when its alignment is an ordinary one ([`plain`]), else from `aligned_call` (the same call
/// with an alignment). A null block (out of memory) passes the alignment check and is returned.
#[inline(always)]
fn block(
    layout: std::alloc::Layout,
    plain_call: unsafe extern "C" fn(usize) -> *mut std::ffi::c_void,
    aligned_call: unsafe extern "C" fn(usize, usize) -> *mut std::ffi::c_void,
) -> *mut u8 {
    let (size, align) = (layout.size(), layout.align());
    if plain(size, align) {
        // SAFETY: the call takes a size only; the block is checked before it is returned.
        let p = unsafe { plain_call(size) };
        if aligned(p, align) {
            return p.cast();
        }
        // SAFETY: `p` came from mimalloc just above and is not used again.
        unsafe { libmimalloc_sys::mi_free(p) };
    }
    // SAFETY: `align` is a power of two (a `Layout`'s), as mimalloc's aligned calls require.
    unsafe { aligned_call(size, align).cast() }
}

// SAFETY: every method hands the request to mimalloc, which returns blocks that stay valid until
// freed and never overlap; a block from the plain calls is used only after its address was
// checked against the layout's alignment (else it is freed and the aligned call serves the
// request), so each returned block meets `layout` as `GlobalAlloc` requires. `dealloc` and
// `realloc` receive only blocks these methods returned, which `mi_free` and `mi_realloc_aligned`
// accept whichever of mimalloc's calls made them.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        block(layout, libmimalloc_sys::mi_malloc, libmimalloc_sys::mi_malloc_aligned)
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        block(layout, libmimalloc_sys::mi_zalloc, libmimalloc_sys::mi_zalloc_aligned)
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        // SAFETY: the caller passes a block this allocator returned and does not use it again.
        unsafe { libmimalloc_sys::mi_free(ptr.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // mimalloc's aligned reallocation is a plain one for alignments up to 8 (nearly every
        // growing buffer: bytes, vectors, strings).
        // SAFETY: `ptr` is a live block of this allocator (the caller's contract); on success its
        // contents move into the returned block, on failure (null) it is left as it was.
        unsafe { libmimalloc_sys::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast() }
    }
}

#[cfg(test)]
mod tests {
    use super::Allocator;
    use std::alloc::{GlobalAlloc, Layout};

    /// The bytes mimalloc set aside for the block at `p`.
    fn usable(p: *mut u8) -> usize {
        // SAFETY: `p` is a live block of mimalloc's (the tests' allocations below).
        unsafe { libmimalloc_sys::mi_usable_size(p.cast()) }
    }

    #[test]
    fn every_block_meets_its_layout_and_keeps_its_bytes() {
        let a = Allocator;
        for align in [1, 2, 8, 16, 32, 64, 4096] {
            for size in [1, 7, 8, 24, 100, 1024, 1025, 1280, 3333, 8192, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: the layout's size is not zero; each block is used within its size and
                // freed once, with its own layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(
                        !p.is_null() && (p as usize).is_multiple_of(align),
                        "{size} bytes aligned to {align}"
                    );
                    std::ptr::write_bytes(p, 0xa5, size);
                    let z = a.alloc_zeroed(layout);
                    assert!(
                        !z.is_null() && (z as usize).is_multiple_of(align),
                        "zeroed {size} aligned to {align}"
                    );
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                    let grown = a.realloc(p, layout, size * 3);
                    assert!(
                        !grown.is_null() && (grown as usize).is_multiple_of(align),
                        "{size} grown, aligned to {align}"
                    );
                    assert!(std::slice::from_raw_parts(grown, size).iter().all(|&b| b == 0xa5));
                    a.dealloc(grown, Layout::from_size_align(size * 3, align).unwrap());
                    a.dealloc(z, layout);
                }
            }
        }
    }

    #[test]
    fn a_block_of_ordinary_alignment_takes_its_own_size_class() {
        // Sizes that are mimalloc size classes: its aligned call over-allocates them (size +
        // alignment - 1, the next class): a 1,280-byte block in a 1,536-byte one.
        let a = Allocator;
        for size in [1280, 1536, 3584, 5120] {
            // SAFETY: `mi_good_size` only computes.
            let class = unsafe { libmimalloc_sys::mi_good_size(size) };
            assert_eq!(class, size, "{size}: a size class");
            for align in [8, 16] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; the block is freed once with its layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert_eq!(usable(p), size, "a {size}-byte block aligned to {align}");
                    a.dealloc(p, layout);
                }
            }
        }
    }
}
