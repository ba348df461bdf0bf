//! Read-only memory mappings of byte ranges of files, as `Bytes`, or reads of them: the
//! caller chooses, as ripgrep's `MmapChoice` makes its caller opt in.
//!
//! Mapping saves copying every byte out of the page cache: hashing a cached file, comparing
//! with a stored object, serving xorb bytes to a socket. It is unsafe in one way the type
//! system cannot see: if the file shrinks while it is mapped, touching the lost pages kills
//! the process with SIGBUS. So git-xet maps only files it owns and never truncates:
//!
//! - git-lfs objects in `.git/lfs/objects` (written once under their oid, replaced only by
//!   rename), which the agent uploads and the filter compares with;
//! - the server's stored xorbs and shards (staged, then linked into place, never rewritten).
//!
//! Files a user names (`git xet hash FILE`, `git xet upload FILE`, `UploadSession::add_file`)
//! and working-tree files are read (pread), never mapped: another process may truncate them
//! at any time, and then the read fails or stops instead of the process dying.

use std::fs::File;

use bytes::Bytes;

/// Ranges shorter than this are read even by a mapper that maps.
pub const MAP_MIN_BYTES: usize = 256 * 1024;

/// How a file's bytes are reached: mapped (only through the `unsafe` [`Mapper::new`], for
/// files git-xet owns, see the module documentation) or read ([`Mapper::reading`], safe,
/// for everything else).
#[derive(Debug, Clone, Copy)]
pub struct Mapper {
    portable: bool,
}

impl Mapper {
    /// A mapper that maps files, or reads them when the portable fallbacks are forced
    /// ([`super::portable`]).
    ///
    /// # Safety
    ///
    /// The one condition of every mapping git-xet makes: no file mapped through this value
    /// may be truncated (or otherwise shrink) while a returned `Bytes`, or any slice of it,
    /// lives, or the process gets SIGBUS on touching the lost pages. Only files git-xet owns
    /// and never truncates qualify (git-lfs objects, stored xorbs and shards); never a file
    /// a user named or a working-tree file: use [`Mapper::reading`] for those.
    pub unsafe fn new() -> Mapper {
        Mapper {
            portable: super::portable(),
        }
    }

    /// A mapper that never maps: every range is read into memory. Safe, as nothing is mapped.
    pub fn reading() -> Mapper {
        Mapper { portable: true }
    }

    /// Whether this value maps (false: it reads).
    pub fn maps(&self) -> bool {
        !self.portable
    }

    /// Bytes `offset..offset + len` of `file` (any offset), read-only. With `populate`, the
    /// pages are read in before this returns (`MAP_POPULATE` on Linux; elsewhere they are read
    /// when touched); without it, slicing a few chunks out of a large range reads only those.
    /// The caller checks the range against the file's size. Ranges under [`MAP_MIN_BYTES`]
    /// are read, not mapped.
    pub fn map_range(
        &self,
        file: &File,
        offset: u64,
        len: usize,
        populate: bool,
    ) -> std::io::Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        // A small range is cheaper read than mapped: a mapping costs three system calls, and
        // its unmapping interrupts every core running one of the process's threads.
        if self.portable || len < MAP_MIN_BYTES {
            return read_range(file, offset, len);
        }
        let mut options = memmap2::MmapOptions::new();
        options.offset(offset).len(len);
        if populate {
            options.populate();
        }
        // SAFETY: the caller of `Mapper::new` promised the file does not shrink while the
        // mapping lives; the mapping is private and read-only.
        let map = unsafe { options.map_copy_read_only(file)? };
        Ok(Bytes::from_owner(map))
    }
}

/// The fallback: the range read into memory.
fn read_range(file: &File, offset: u64, len: usize) -> std::io::Result<Bytes> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn maps_and_reads_unaligned_ranges_alike() {
        let mut file = tempfile::tempfile().unwrap();
        let total = 3 * MAP_MIN_BYTES + 20_000;
        let data: Vec<u8> = (0..total as u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&data).unwrap();
        // Constructed directly: a mapping whatever the environment asks (the file is not
        // truncated while the test runs).
        let mapper = Mapper { portable: false };
        for m in [mapper, Mapper::reading()] {
            for (offset, len) in [
                (0, 1),
                (1, 4095),
                (4095, 2),
                (5000, 15_000),
                (7, 0),
                // Mapped by a mapper that maps (at least MAP_MIN_BYTES).
                (4095, MAP_MIN_BYTES),
                (1, total - 1),
                (0, total),
                (total - MAP_MIN_BYTES - 3, MAP_MIN_BYTES + 3),
                (total - 1, 1),
            ] {
                for populate in [false, true] {
                    let bytes = m.map_range(&file, offset as u64, len, populate).unwrap();
                    assert_eq!(
                        &bytes[..],
                        &data[offset..offset + len],
                        "{m:?} {offset}+{len}"
                    );
                }
            }
        }
    }

    #[test]
    fn reading_past_the_end_fails() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[1u8; 100]).unwrap();
        let err = Mapper::reading()
            .map_range(&file, 50, 100, false)
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
