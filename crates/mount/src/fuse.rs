//! The FUSE front end of [`MountFs`]: `fuser` without libfuse (it mounts through
//! `fusermount3`), several request threads so that concurrent readers are served at once,
//! a clean unmount on SIGINT/SIGTERM, and [`unmount_when_gone`] for a process of its own
//! that unmounts when the mount process dies.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, LockOwner,
    MountOption, OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEntry,
    ReplyOpen, Request, SessionACL,
};

use crate::blocks::RangeSource;
use crate::fs::{Attr, Kind, MountFs};
use crate::MountError;

/// The tree never changes: the kernel may keep what it was told.
const TTL: Duration = Duration::from_secs(3600);
/// Request threads: readers served at once.
const THREADS: usize = 8;

struct Fuse<S: RangeSource> {
    fs: Arc<MountFs<S>>,
    uid: u32,
    gid: u32,
    /// Whether files are opened for direct I/O (the kernel can still map them).
    direct: bool,
}

impl<S: RangeSource> Fuse<S> {
    fn attr(&self, a: Attr) -> FileAttr {
        let (kind, perm) = match a.kind {
            Kind::Dir => (FileType::Directory, 0o555),
            Kind::Symlink => (FileType::Symlink, 0o777),
            Kind::File if a.executable => (FileType::RegularFile, 0o555),
            Kind::File => (FileType::RegularFile, 0o444),
        };
        FileAttr {
            ino: INodeNo(a.ino),
            size: a.size,
            blocks: a.size.div_ceil(512),
            atime: a.mtime,
            mtime: a.mtime,
            ctime: a.mtime,
            crtime: a.mtime,
            kind,
            perm,
            nlink: if a.kind == Kind::Dir { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 128 * 1024,
            flags: 0,
        }
    }
}

fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::Dir => FileType::Directory,
        Kind::File => FileType::RegularFile,
        Kind::Symlink => FileType::Symlink,
    }
}

impl<S: RangeSource> fuser::Filesystem for Fuse<S> {
    /// Reads answered straight into the reader's buffer, not through the page cache: the
    /// blocks are this process's cache already, and a cold read of a large file would
    /// otherwise copy every byte twice and fill the page cache with it. Only where the
    /// kernel also lets such files be mapped (`safetensors` maps them; Linux 6.6 on).
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        self.direct = config
            .add_capabilities(fuser::InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
            .is_ok();
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.fs.lookup(parent.0, name) {
            Some(a) => reply.entry(&TTL, &self.attr(a), Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.fs.attr(ino.0) {
            Some(a) => reply.attr(&TTL, &self.attr(a)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.fs.readlink(ino.0) {
            Some(target) => reply.data(target),
            None => reply.error(Errno::EINVAL),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.acc_mode() != OpenAccMode::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        match self.fs.attr(ino.0) {
            Some(_) if self.direct => reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
            // The content never changes: the kernel's page cache may keep it.
            Some(_) => reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.fs.read(ino.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(MountError::NotFound) => reply.error(Errno::ENOENT),
            Err(e) => {
                tracing::warn!("read of inode {} at {offset}: {e}", ino.0);
                reply.error(Errno::EIO)
            }
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(children) = self.fs.children(ino.0) else {
            return reply.error(Errno::ENOTDIR);
        };
        for (i, (child, kind, name)) in children.into_iter().enumerate().skip(offset as usize) {
            // The offset given is that of the next entry.
            if reply.add(INodeNo(child), (i + 1) as u64, file_type(kind), &name) {
                break;
            }
        }
        reply.ok()
    }
}

/// Checks that FUSE can be used here, saying what to install when it cannot.
pub fn check_available() -> Result<(), MountError> {
    if !Path::new("/dev/fuse").exists() {
        return Err(MountError::NoFuse("/dev/fuse does not exist".into()));
    }
    let found = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|p| p.join("fusermount3").is_file())
    });
    if !found {
        return Err(MountError::NoFuse("fusermount3 is not on PATH".into()));
    }
    Ok(())
}

/// Mounts `fs` on `dir` and serves it until it is unmounted (`git xet unmount`,
/// `fusermount3 -u`) or the process gets SIGINT or SIGTERM, which unmount it first.
/// `on_mounted` runs once the mount is in place. If the process is killed, fusermount3's
/// `auto_unmount` helper (where allowed) may unmount; [`unmount_when_gone`], run by another
/// process, does.
pub fn serve<S: RangeSource>(
    fs: MountFs<S>,
    dir: &Path,
    name: &str,
    on_mounted: impl FnOnce(),
) -> Result<(), MountError> {
    check_available()?;
    // Caught from here on by a handler that only wakes the thread that unmounts, so a signal
    // that comes before the mount is in place unmounts it as soon as it is.
    let mut signals = Signals::new([SIGINT, SIGTERM]).map_err(MountError::Signals)?;
    // A cold read frees and allocates a chunk's buffer for every 64 KiB it reads and a
    // block's for every 2 MiB.
    git_xet_io::platform::heap::keep_large_buffers();
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::RO,
        MountOption::FSName(name.to_string()),
        MountOption::Subtype("git-xet".into()),
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::DefaultPermissions,
    ];
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // auto_unmount makes fuser mount through fusermount3 for root too (type fuse.git-xet,
    // as for other users, rather than a plain mount(2) of type fuse). It needs allow_root,
    // which other users may ask for only when /etc/fuse.conf says user_allow_other.
    if uid == 0 || user_allow_other() {
        config.mount_options.push(MountOption::AutoUnmount);
        config.acl = SessionACL::RootAndOwner;
    }
    config.n_threads = Some(THREADS);
    let fuse = Fuse {
        fs: Arc::new(fs),
        uid,
        gid,
        direct: false,
    };
    let mut session =
        fuser::Session::new(fuse, dir, &config).map_err(|e| MountError::io(dir, e))?;
    let mut unmounter = session.unmount_callable();
    let mountpoint = dir.to_path_buf();
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            tracing::info!("signal {signal}: unmounting {}", mountpoint.display());
            if let Err(said) = lazy_unmount(&mountpoint) {
                tracing::debug!("{said}: unmounting through the session instead");
                if let Err(e) = unmounter.unmount() {
                    eprintln!(
                        "git-xet: could not unmount {}: {e} ({said})",
                        mountpoint.display()
                    );
                }
            }
        }
    });
    on_mounted();
    session.run().map_err(|e| MountError::io(dir, e))
}

/// Waits for the mount process `pid` (this process's parent) to end, then unmounts `dir`
/// lazily if the mount there is still the one it made (`device`, from
/// [`crate::mount_device`] once it was mounted).
///
/// fusermount3's `auto_unmount` helper does the same job, for root and where
/// /etc/fuse.conf allows it, but unmounts only when opening the directory fails with
/// ENOTCONN, and it wakes when the process's socket closes, which can be before the FUSE
/// device is released: under load it was seen to leave the mount in place. Waiting for the
/// whole process to end first (see `git_xet_io::platform::process::wait_for_parent_exit`)
/// leaves no such window. Whichever comes first unmounts; the other finds nothing to do.
pub fn unmount_when_gone(pid: u32, dir: &Path, device: &str) -> Result<(), MountError> {
    git_xet_io::platform::process::wait_for_parent_exit(pid).map_err(|e| MountError::io(dir, e))?;
    if crate::mount_device(dir).as_deref() != Some(device) {
        return Ok(()); // unmounted cleanly, or another mount is there now
    }
    tracing::info!("mount process {pid} ended: unmounting {}", dir.display());
    match lazy_unmount(dir) {
        // fusermount3's helper may have unmounted it meanwhile.
        Err(said) if crate::mount_device(dir).as_deref() == Some(device) => {
            Err(MountError::Unavailable(said))
        }
        _ => Ok(()),
    }
}

/// `fusermount3 -u -z dir`: lazily, so that a reader still inside does not keep the mount
/// process alive. On failure, what went wrong.
fn lazy_unmount(dir: &Path) -> Result<(), String> {
    use git_xet_io::platform::process::{failure_text, run_with_input};
    let mut cmd = std::process::Command::new("fusermount3");
    cmd.args(["-u", "-z"]).arg(dir);
    match run_with_input(&mut cmd, None) {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "fusermount3 -u -z {} failed: {}",
            dir.display(),
            failure_text(&out)
        )),
        Err(e) => Err(format!(
            "running fusermount3 -u -z {}: {e:?}",
            dir.display()
        )),
    }
}

/// Whether /etc/fuse.conf lets users other than root ask for allow_other/allow_root.
fn user_allow_other() -> bool {
    std::fs::read_to_string("/etc/fuse.conf")
        .is_ok_and(|conf| conf.lines().any(|l| l.trim() == "user_allow_other"))
}
