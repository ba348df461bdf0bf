//! Pipe calls of the filter-process: a larger pipe buffer and splice(2) from a file into a
//! pipe. Both are Linux-only; elsewhere (or with the portable fallbacks forced) the pipe keeps
//! its size and [`splice_from_file`] answers `Unsupported`, and the caller copies the bytes.

use std::fs::File;
use std::os::fd::BorrowedFd;

/// Asks the kernel to make the pipe behind `fd` hold `bytes`. Returns whether it did; failure
/// (not a pipe, an older kernel, another system) only costs speed.
pub fn enlarge(fd: BorrowedFd<'_>, bytes: usize) -> std::io::Result<bool> {
    if super::portable() {
        return Ok(false);
    }
    enlarge_linux(fd, bytes)
}

#[cfg(target_os = "linux")]
fn enlarge_linux(fd: BorrowedFd<'_>, bytes: usize) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let size = libc::c_int::try_from(bytes).map_err(std::io::Error::other)?;
    // SAFETY: fcntl on a descriptor the caller keeps open, with an integer argument.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, size) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(true)
}

#[cfg(not(target_os = "linux"))]
fn enlarge_linux(_fd: BorrowedFd<'_>, _bytes: usize) -> std::io::Result<bool> {
    Ok(false)
}

/// Moves up to `len` bytes of `file` from `*offset` into the pipe `pipe` without copying them
/// through this process, and advances `*offset`. Returns the bytes moved (0 at the end of the
/// file). An error of kind `Unsupported` means this file or system cannot splice: the caller
/// should copy instead (nothing was moved).
pub fn splice_from_file(
    file: &File,
    offset: &mut u64,
    pipe: BorrowedFd<'_>,
    len: usize,
) -> std::io::Result<usize> {
    if super::portable() {
        return Err(std::io::ErrorKind::Unsupported.into());
    }
    splice_linux(file, offset, pipe, len)
}

#[cfg(target_os = "linux")]
fn splice_linux(
    file: &File,
    offset: &mut u64,
    pipe: BorrowedFd<'_>,
    len: usize,
) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let mut off = libc::loff_t::try_from(*offset).map_err(std::io::Error::other)?;
    loop {
        // SAFETY: both descriptors are open for the call; `off` is a valid loff_t.
        let n = unsafe {
            libc::splice(
                file.as_raw_fd(),
                &mut off,
                pipe.as_raw_fd(),
                std::ptr::null_mut(),
                len,
                libc::SPLICE_F_MORE,
            )
        };
        if n >= 0 {
            *offset = off as u64;
            return Ok(n as usize);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => {
                return Err(std::io::Error::new(std::io::ErrorKind::Unsupported, e))
            }
            _ => return Err(e),
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn splice_linux(
    _file: &File,
    _offset: &mut u64,
    _pipe: BorrowedFd<'_>,
    _len: usize,
) -> std::io::Result<usize> {
    Err(std::io::ErrorKind::Unsupported.into())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    fn pipe() -> (File, File) {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) fills two fresh descriptors that the Files below then own.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        use std::os::fd::FromRawFd;
        // SAFETY: the descriptors were just created and are owned by nothing else.
        unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
    }

    #[test]
    fn splices_a_file_into_a_pipe_and_advances_the_offset() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"hello, pipe").unwrap();
        let (mut rx, tx) = pipe();
        let mut offset = 7;
        let n = splice_linux(&file, &mut offset, tx.as_fd(), 100).unwrap();
        assert_eq!((n, offset), (4, 11));
        assert_eq!(
            splice_linux(&file, &mut offset, tx.as_fd(), 100).unwrap(),
            0
        );
        drop(tx);
        let mut got = String::new();
        rx.read_to_string(&mut got).unwrap();
        assert_eq!(got, "pipe");
    }

    #[test]
    fn enlarges_a_pipe_and_refuses_a_file() {
        let (_rx, tx) = pipe();
        assert!(enlarge_linux(tx.as_fd(), 1 << 20).unwrap());
        let file = tempfile::tempfile().unwrap();
        assert!(enlarge_linux(file.as_fd(), 1 << 20).is_err());
    }
}
