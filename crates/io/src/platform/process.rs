//! Process calls: a polite stop for a child, the file mode creation mask, and replacing
//! this process with another program. All plain POSIX, the same on every unix.

use std::process::{Child, Command};

/// Replaces this process with `cmd` (execvp: same pid, stdin/stdout/stderr and signals pass
/// straight to the new program, as git and git-lfs expect of the process they started).
/// Returns only when that fails.
pub fn exec(cmd: &mut Command) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    cmd.exec()
}

/// Asks `child` to stop with SIGTERM, so it can clean up (`Child::kill` sends SIGKILL).
pub fn terminate(child: &Child) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(child.id()).map_err(std::io::Error::other)?;
    // SAFETY: signalling a child process this process started and has not reaped.
    if unsafe { libc::kill(pid, libc::SIGTERM) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The process's file mode creation mask (the permission bits new files lose).
// mode_t is u32 on Linux but u16 on macOS and the BSDs: the conversion is needed there.
#[allow(clippy::useless_conversion)]
pub fn umask() -> u32 {
    // SAFETY: umask only swaps the process's mask; it is set back at once.
    let mask = unsafe {
        let mask = libc::umask(0o022);
        libc::umask(mask);
        mask
    };
    u32::from(mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminate_stops_a_child_with_sigterm() {
        use std::os::unix::process::ExitStatusExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        terminate(&child).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM));
    }

    #[test]
    fn umask_reads_the_mask_and_leaves_it() {
        let first = umask();
        assert_eq!(first & !0o777, 0, "only permission bits");
        assert_eq!(umask(), first, "reading did not change it");
    }
}
