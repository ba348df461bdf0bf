//! Sharing extents between two files with the same bytes (FIDEDUPERANGE on Linux: XFS with
//! reflink, btrfs). The kernel compares the bytes itself under its locks, so a file that
//! changed since is simply not shared; nothing is ever written. Elsewhere, and on file
//! systems without it, the answer is [`Shared::Unsupported`].

use std::fs::File;
use std::io;

/// What asking to share the extents of two files came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shared {
    /// Every byte of the destination now shares the source's extents.
    Done,
    /// The bytes differ (or the lengths do): nothing shared.
    Differs,
    /// The file system (or platform) cannot share extents.
    Unsupported,
}

/// Makes `dst` share `src`'s extents over their first `len` bytes when the bytes are the
/// same. `dst` must be open for writing (or owned by the caller); neither file changes.
pub fn dedupe(src: &File, dst: &File, len: u64) -> io::Result<Shared> {
    if super::portable() {
        return Ok(Shared::Unsupported);
    }
    imp::dedupe(src, dst, len)
}

#[cfg(target_os = "linux")]
mod imp {
    use super::Shared;
    use std::fs::File;
    use std::io;
    use std::os::fd::AsRawFd;

    /// `_IOWR(0x94, 54, struct file_dedupe_range)` (linux/fs.h).
    const FIDEDUPERANGE: libc::c_ulong = 0xC018_9436;
    const FILE_DEDUPE_RANGE_DIFFERS: i32 = 1;
    /// Asked per call: btrfs caps one call at 16 MiB, others answer with what they did.
    const STEP: u64 = 16 << 20;

    /// `struct file_dedupe_range` with its one `struct file_dedupe_range_info`.
    #[repr(C)]
    struct DedupeRange {
        src_offset: u64,
        src_length: u64,
        dest_count: u16,
        reserved1: u16,
        reserved2: u32,
        dest_fd: i64,
        dest_offset: u64,
        bytes_deduped: u64,
        status: i32,
        reserved: u32,
    }

    pub fn dedupe(src: &File, dst: &File, len: u64) -> io::Result<Shared> {
        let mut done = 0u64;
        while done < len {
            let mut arg = DedupeRange {
                src_offset: done,
                src_length: (len - done).min(STEP),
                dest_count: 1,
                reserved1: 0,
                reserved2: 0,
                dest_fd: i64::from(dst.as_raw_fd()),
                dest_offset: done,
                bytes_deduped: 0,
                status: 0,
                reserved: 0,
            };
            // SAFETY: `arg` is the kernel's struct with room for the one destination it names.
            let r = unsafe { libc::ioctl(src.as_raw_fd(), FIDEDUPERANGE as _, &mut arg) };
            if r != 0 {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(
                        libc::EOPNOTSUPP | libc::ENOTTY | libc::EINVAL | libc::EXDEV | libc::ENOSYS,
                    ) => Ok(Shared::Unsupported),
                    _ => Err(e),
                };
            }
            match arg.status {
                0 if arg.bytes_deduped > 0 => done += arg.bytes_deduped,
                FILE_DEDUPE_RANGE_DIFFERS => return Ok(Shared::Differs),
                s if s < 0 => {
                    return match -s {
                        libc::EOPNOTSUPP | libc::EINVAL | libc::EXDEV => Ok(Shared::Unsupported),
                        errno => Err(io::Error::from_raw_os_error(errno)),
                    }
                }
                // Nothing done and no reason given: do not loop forever.
                _ => return Ok(Shared::Differs),
            }
        }
        Ok(Shared::Done)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::Shared;
    use std::fs::File;
    use std::io;

    pub fn dedupe(_src: &File, _dst: &File, _len: u64) -> io::Result<Shared> {
        Ok(Shared::Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// On the test machine's temporary directory (tmpfs or ext4 here) nothing is shared,
    /// and the answer says so rather than failing; forced portable, the same.
    #[test]
    fn reports_unsupported_or_shares_never_fails_on_equal_files() {
        let dir = tempfile::tempdir().unwrap();
        let data = vec![7u8; 300_000];
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::File::create(&a).unwrap().write_all(&data).unwrap();
        std::fs::File::create(&b).unwrap().write_all(&data).unwrap();
        let src = File::open(&a).unwrap();
        let dst = File::options().read(true).write(true).open(&b).unwrap();
        let got = imp::dedupe(&src, &dst, data.len() as u64).unwrap();
        assert!(matches!(got, Shared::Unsupported | Shared::Done), "{got:?}");
        assert_eq!(
            std::fs::read(&b).unwrap(),
            data,
            "the destination is unchanged"
        );
    }
}
