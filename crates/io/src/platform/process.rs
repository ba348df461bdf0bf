//! Process calls: running a child with input and collecting its output, a polite stop for a
//! child, the file mode creation mask, a descriptor kept across exec, replacing this
//! process with another program, and waiting for this process's parent to end. All plain
//! POSIX, the same on every unix, except that Linux waits for the parent with a pidfd.

use std::io::Write;
use std::process::{Child, Command, Output, Stdio};

/// Why [`run_with_input`] got no output: the child did not start, or waiting for it failed.
#[derive(Debug)]
pub enum RunError {
    Spawn(std::io::Error),
    Wait(std::io::Error),
}

/// Runs `cmd` with `input` on its stdin (or none: stdin reads nothing), and collects its
/// exit status, stdout and stderr.
pub fn run_with_input(cmd: &mut Command, input: Option<&[u8]>) -> Result<Output, RunError> {
    cmd.stdin(match input {
        Some(_) => Stdio::piped(),
        None => Stdio::null(),
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    // Feed stdin from another thread: a child that writes while we write would otherwise
    // fill both pipes and deadlock.
    let writer = match (input, child.stdin.take()) {
        (Some(input), Some(mut stdin)) => {
            let input = input.to_vec();
            Some(std::thread::spawn(move || {
                // A child that exits early closes its stdin; its exit status tells the story.
                let _ = stdin.write_all(&input);
            }))
        }
        _ => None,
    };
    let out = child.wait_with_output().map_err(RunError::Wait)?;
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    Ok(out)
}

/// What a failed child said: its stderr, trimmed, or its exit status when it said nothing.
pub fn failure_text(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if stderr.is_empty() {
        out.status.to_string() // "exit status: 3", "signal: 9 (SIGKILL)"
    } else {
        stderr
    }
}

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

/// For `CommandExt::pre_exec`: clears close-on-exec on `fd` in the forked child, so that the
/// program it runs (and what that program starts) inherits the descriptor, and any `flock`
/// held through it, for as long as it runs.
pub fn keep_open_across_exec(
    fd: std::os::fd::RawFd,
) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    move || {
        // SAFETY: fcntl is async-signal-safe; `fd` is open in the forked child (it was
        // open in the parent, and only exec closes it).
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } == -1 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Returns once process `parent`, this process's parent when called, has ended (at once if
/// it already has), with its files closed. On Linux a pidfd wakes it; elsewhere it looks
/// every 100 ms whether it was handed to another parent. Both happen only after the dying
/// process's files were released: a device it held is closed by then.
pub fn wait_for_parent_exit(parent: u32) -> std::io::Result<()> {
    let parent = libc::pid_t::try_from(parent).map_err(std::io::Error::other)?;
    #[cfg(target_os = "linux")]
    if !super::portable() {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, parent, 0) };
        if fd >= 0 {
            use std::os::fd::FromRawFd;
            // SAFETY: a descriptor just returned to us and owned by nobody else.
            let pidfd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) };
            // The pid may have been another process's by the time it was opened; while
            // it is still our parent, the pidfd is that parent's.
            // SAFETY: getppid cannot fail.
            if unsafe { libc::getppid() } != parent {
                return Ok(());
            }
            return wait_readable(&pidfd);
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ESRCH) {
            return Ok(());
        }
        // ENOSYS (a kernel before 5.3): the portable way below.
    }
    // SAFETY: getppid cannot fail.
    while unsafe { libc::getppid() } == parent {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Ok(())
}

/// Blocks until `fd` is readable (a pidfd is once its process has ended).
#[cfg(target_os = "linux")]
fn wait_readable(fd: &std::os::fd::OwnedFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one pollfd that lives across the call; no timeout.
        if unsafe { libc::poll(&mut poll, 1, -1) } >= 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_with_input_feeds_stdin_and_collects_both_outputs() {
        // More than a pipe holds both ways: written while the child writes, no deadlock.
        let input = vec![b'x'; 1 << 20];
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "cat; echo done >&2"]);
        let out = run_with_input(&mut cmd, Some(&input)).unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, input);
        assert_eq!(out.stderr, b"done\n");
    }

    #[test]
    fn a_silent_failure_is_told_by_its_exit_status() {
        let out = run_with_input(Command::new("sh").args(["-c", "exit 3"]), None).unwrap();
        assert_eq!(failure_text(&out), "exit status: 3");
        let out = run_with_input(
            Command::new("sh").args(["-c", "echo ' no '>&2; exit 1"]),
            None,
        )
        .unwrap();
        assert_eq!(failure_text(&out), "no");
        let missing = run_with_input(&mut Command::new("/nonexistent/program"), None);
        assert!(matches!(missing, Err(RunError::Spawn(_))), "{missing:?}");
    }

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
    fn waiting_for_a_process_that_is_not_the_parent_returns_at_once() {
        // Not (or no longer) our parent: nothing to wait for, whatever the pid is now.
        wait_for_parent_exit(std::process::id()).unwrap();
        wait_for_parent_exit(i32::MAX as u32).unwrap();
        assert!(wait_for_parent_exit(u32::MAX).is_err(), "not a pid");
    }

    #[test]
    fn umask_reads_the_mask_and_leaves_it() {
        let first = umask();
        assert_eq!(first & !0o777, 0, "only permission bits");
        assert_eq!(umask(), first, "reading did not change it");
    }
}
