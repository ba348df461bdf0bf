//! File calls: positioned reads into a vector's spare capacity, advisory locks, early
//! writeback, and the space left on a file system.

use std::fs::File;
use std::io;

/// Appends `len` bytes of `file` at `offset` to `buf`. With pread(2) it reads straight into
/// the vector's spare capacity: zero-filling it first would write every byte twice. The
/// portable fallback zero-fills and reads with std's `read_exact_at`.
pub fn append_at(buf: &mut Vec<u8>, file: &File, offset: u64, len: usize) -> io::Result<()> {
    if super::portable() {
        append_at_portable(buf, file, offset, len)
    } else {
        append_at_pread(buf, file, offset, len)
    }
}

fn shorter() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the source file is shorter than when it was chunked",
    )
}

fn append_at_pread(buf: &mut Vec<u8>, file: &File, offset: u64, len: usize) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    buf.reserve(len);
    let start = buf.len();
    let mut done = 0;
    while done < len {
        let spare = &mut buf.spare_capacity_mut()[done..len];
        let at = libc::off_t::try_from(offset + done as u64).map_err(io::Error::other)?;
        // SAFETY: pread writes at most `spare.len()` bytes into capacity this vector owns.
        let n =
            unsafe { libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len(), at) };
        match n {
            n if n > 0 => done += n as usize,
            0 => return Err(shorter()),
            _ => {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
    // SAFETY: the `len` bytes after `start` were all written by pread above.
    unsafe { buf.set_len(start + len) };
    Ok(())
}

fn append_at_portable(buf: &mut Vec<u8>, file: &File, offset: u64, len: usize) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let start = buf.len();
    buf.resize(start + len, 0);
    let read = file.read_exact_at(&mut buf[start..], offset);
    if let Err(e) = read {
        buf.truncate(start);
        return Err(if e.kind() == io::ErrorKind::UnexpectedEof {
            shorter()
        } else {
            e
        });
    }
    Ok(())
}

/// How [`lock`] locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Exclusive; fails at once with `WouldBlock` if another holder exists.
    ExclusiveNow,
    /// Shared; waits for an exclusive holder.
    Shared,
}

/// An advisory lock on `file` (flock(2), held until the file is closed or locked anew). std's
/// `File::lock*` is newer than this crate's minimum Rust.
pub fn lock(file: &File, how: Lock) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let operation = match how {
        Lock::ExclusiveNow => libc::LOCK_EX | libc::LOCK_NB,
        Lock::Shared => libc::LOCK_SH,
    };
    loop {
        // SAFETY: flock on a descriptor `file` owns, with an integer operation.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Starts writing bytes `offset..offset + len` of `file` back to its disk without waiting
/// (Linux's sync_file_range(2) with `SYNC_FILE_RANGE_WRITE`), so that a large file written
/// over seconds reaches the disk while it is written rather than all at the next sync or
/// flush. A hint, not durability (that still takes fsync): failures are ignored. Elsewhere,
/// and with the portable fallbacks, it does nothing.
pub fn start_writeback(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    if !super::portable() {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        // SAFETY: a system call on a descriptor `file` owns, with no memory passed.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
        };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

/// Bytes available to this process on the file system holding `dir` (statvfs(2)); `None`
/// where that cannot be told.
pub fn available_space(dir: &std::path::Path) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
        let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
        // SAFETY: `path` is NUL-terminated and `stat` is written by statvfs before it is read.
        let stat = unsafe {
            if libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) != 0 {
                return None;
            }
            stat.assume_init()
        };
        #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
        Some((stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// Whether the file `meta` describes belongs to the user this process runs as. Elsewhere
/// than unix: never (callers then take their slower, general path).
pub fn owned_by_this_user(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions.
        meta.uid() == unsafe { libc::geteuid() }
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

/// Whether `meta` describes a directory of this user that no one else may enter or list
/// (no group or other permission bits). Elsewhere than unix: never.
pub fn private_to_this_user(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.is_dir() && owned_by_this_user(meta) && meta.mode() & 0o077 == 0
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn early_writeback_of_any_range_leaves_the_file_as_it_was() {
        let mut file = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
        file.write_all(&data).unwrap();
        // Within the file, past its end, and offsets no off_t holds: a hint, never an error.
        for (offset, len) in [
            (0, 100_000),
            (4096, 10),
            (200_000, 4096),
            (u64::MAX, 1),
            (0, u64::MAX),
        ] {
            start_writeback(&file, offset, len);
        }
        let mut back = Vec::new();
        append_at(&mut back, &file, 0, data.len()).unwrap();
        assert_eq!(back, data);
        assert_eq!(file.metadata().unwrap().len(), data.len() as u64);
    }

    #[test]
    fn available_space_is_told_for_a_directory_and_not_for_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        assert!(available_space(dir.path()).is_some_and(|bytes| bytes > 0));
        assert_eq!(available_space(&dir.path().join("missing")), None);
    }

    #[test]
    fn both_reads_append_the_same_bytes_and_refuse_a_short_file() {
        let mut file = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
        file.write_all(&data).unwrap();
        type Append = fn(&mut Vec<u8>, &File, u64, usize) -> io::Result<()>;
        for append in [append_at_pread as Append, append_at_portable] {
            let mut buf = b"head".to_vec();
            append(&mut buf, &file, 100, 5000).unwrap();
            assert_eq!(&buf[..4], b"head");
            assert_eq!(&buf[4..], &data[100..5100]);
            let err = append(&mut buf, &file, 9000, 2000).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
            assert_eq!(buf.len(), 5004, "a failed read appends nothing");
        }
    }

    #[test]
    fn an_exclusive_lock_is_refused_while_another_holds_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let a = File::create(&path).unwrap();
        let b = File::open(&path).unwrap();
        lock(&a, Lock::Shared).unwrap();
        let err = lock(&b, Lock::ExclusiveNow).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        drop(a);
        // A test running in parallel may fork between our open and our close; its child holds
        // a copy of `a`'s descriptor (and so the lock) until it execs, which closes it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match lock(&b, Lock::ExclusiveNow) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the lock was never released"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
}
