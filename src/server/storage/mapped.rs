//! Read-only memory mappings of byte ranges of stored objects, as `Bytes`.
//!
//! Serving xorb data from a mapping sends page-cache pages to the socket without first
//! copying them into a buffer. Mappings are made with `MAP_POPULATE` on a blocking thread,
//! so the pages are resident before an async task touches them (no disk wait on the
//! runtime's workers), and are small (a few MiB), so memory stays bounded by the number of
//! blocks in flight. Stored objects are immutable and replaced only by rename, never
//! truncated, so a mapping cannot lose its pages underneath.

use std::fs::File;
use std::os::fd::AsRawFd;

use bytes::Bytes;

struct Mapping {
    ptr: *mut libc::c_void,
    map_len: usize,
    /// Where the requested bytes start inside the (page-aligned) mapping.
    skip: usize,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value until dropped.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Mapping {}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `skip + len <= map_len` bytes were mapped readable at `ptr`.
        unsafe { std::slice::from_raw_parts((self.ptr as *const u8).add(self.skip), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what mmap returned.
        unsafe {
            libc::munmap(self.ptr, self.map_len);
        }
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

/// Maps `len` bytes of `file` from `offset`, which the caller has checked against the
/// file's size. Blocks until the pages are read in: call it on a blocking thread.
pub fn map_range(file: &File, offset: u64, len: usize) -> std::io::Result<Bytes> {
    if len == 0 {
        return Ok(Bytes::new());
    }
    let aligned = offset - offset % page_size();
    let skip = (offset - aligned) as usize;
    let map_len = skip + len;
    let file_offset = libc::off_t::try_from(aligned).map_err(std::io::Error::other)?;
    // SAFETY: a fresh read-only private mapping of an open file descriptor; the kernel
    // picks the address. The result is checked before use.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_POPULATE,
            file.as_raw_fd(),
            file_offset,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Bytes::from_owner(Mapping {
        ptr,
        map_len,
        skip,
        len,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn maps_unaligned_ranges() {
        let mut file = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&data).unwrap();
        for (offset, len) in [
            (0, 1),
            (1, 4095),
            (4095, 2),
            (5000, 15_000),
            (0, 20_000),
            (19_999, 1),
            (7, 0),
        ] {
            let bytes = map_range(&file, offset as u64, len).unwrap();
            assert_eq!(&bytes[..], &data[offset..offset + len], "{offset}+{len}");
        }
    }
}
