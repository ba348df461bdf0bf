//! How much freed memory the C heap keeps. glibc hands the free memory at the top of each
//! heap back to the kernel once more than 128 KiB of it is there, so a transfer that keeps
//! allocating and freeing chunk-sized buffers gets fresh pages again and again, each faulted
//! in and zeroed: about 120,000 page faults (450 MiB) per GiB downloaded. Keeping 16 MiB at
//! the top of each heap lets those buffers reuse their pages, for a few MiB more resident
//! memory.

/// Free memory kept at the top of each heap.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TOP_PAD: libc::c_int = 16 << 20;

/// Keeps [`TOP_PAD`] of freed memory at the top of each of glibc's heaps (`M_TOP_PAD`, which
/// also fixes the sizes glibc maps and gives back directly). Does nothing with another C
/// library or with the portable fallbacks (the allocator's defaults stay).
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // Called before logging is set up: `portable()` would log its switch to nowhere.
    if !super::portable_requested() {
        // SAFETY: mallopt sets one of the allocator's parameters; nothing is allocated yet
        // that depends on it.
        unsafe { libc::mallopt(libc::M_TOP_PAD, TOP_PAD) };
    }
}

/// For a process that frees and allocates buffers of up to a few MiB all the time (the mount:
/// a chunk's every 64 KiB, a block's every 2 MiB): buffers up to 32 MiB come from the heap
/// and up to 256 MiB of freed memory stays there, rather than each being mapped, given back
/// and faulted in again (a few per cent of a cold read's CPU). Setting one threshold turns
/// off glibc's adaptive ones, so both are set; the process's peak is bounded by the blocks
/// it keeps anyway. Does nothing with another C library or with the portable fallbacks.
pub fn keep_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if !super::portable_requested() {
        // SAFETY: mallopt sets parameters of the allocator.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        }
    }
}
