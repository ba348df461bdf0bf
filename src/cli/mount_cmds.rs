//! `git xet mount` and `git xet unmount`: argument parsing, starting in the background, the
//! watcher that unmounts after a killed mount process, and messages. The file system is
//! `git_xet_mount`'s.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::common::logging;
use git_xet_client::chunk_cache::{default_cache_root, DEFAULT_CHUNK_CACHE_BYTES};
use git_xet_git::repo::Repo;
use git_xet_mount::fs::MountFs;
use git_xet_mount::remote::XetRemote;

/// How long the background process may take to mount before the command gives up.
const MOUNT_WAIT: Duration = Duration::from_secs(60);

#[derive(clap::Args, Debug)]
pub struct MountArgs {
    /// The directory to mount on (an existing, empty directory).
    dir: PathBuf,
    /// The revision to show (a branch, tag or commit).
    #[arg(long, default_value = "HEAD")]
    rev: String,
    /// Stay in the foreground until unmounted (Ctrl-C unmounts).
    #[arg(long)]
    foreground: bool,
    /// Size bound of the chunk cache (e.g. 500M, 20G; least recently used chunks go first).
    #[arg(long, value_name = "SIZE", value_parser = git_xet_io::human::parse_size)]
    cache_size: Option<u64>,
    /// Seconds a read waits for the server before it fails with EIO.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    timeout: u64,
}

#[derive(clap::Args, Debug)]
pub struct UnmountArgs {
    /// The directory a `git xet mount` is mounted on.
    dir: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct MountWatcherArgs {
    /// The mount process.
    #[arg(long)]
    pid: u32,
    /// The mount's device (`major:minor` in /proc/self/mountinfo).
    #[arg(long)]
    device: String,
    /// The directory it is mounted on (canonical).
    dir: PathBuf,
}

pub fn mount(args: MountArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    git_xet_mount::fuse::check_available()?;
    let dir = std::fs::canonicalize(&args.dir)
        .with_context(|| format!("mount point {}", args.dir.display()))?;
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    if git_xet_mount::is_mounted(&dir) {
        bail!(
            "{} is already a mount point (git xet unmount {} first)",
            dir.display(),
            dir.display()
        );
    }
    if !args.foreground {
        return start_in_background(&args, &dir);
    }
    let repo = Repo::current()?;
    let cache_dir = default_cache_root().map(|root| root.join("chunks"));
    let cache = cache_dir.map(|d| (d, args.cache_size.unwrap_or(DEFAULT_CHUNK_CACHE_BYTES)));
    let timeout = Duration::from_secs(args.timeout.max(1));
    let remote = XetRemote::new(repo.clone(), cache, timeout)?;
    let fs = MountFs::new(
        repo.git().clone(),
        repo.lfs_store(),
        &args.rev,
        remote,
        timeout,
    )?;
    let name = format!("git-xet:{}", args.rev);
    let shown = dir.display().to_string();
    let rev = args.rev.clone();
    let watched = dir.clone();
    git_xet_mount::fuse::serve(fs, &dir, &name, move || {
        start_watcher(&watched);
        eprintln!("git-xet: {rev} mounted on {shown} (unmount: git xet unmount {shown})");
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Starts `git xet mount-watcher` for the mount on `dir`, so that a kill of this process
/// does not leave a dead mount behind. Without it, says how to clean up by hand.
fn start_watcher(dir: &Path) {
    use std::os::unix::process::CommandExt;
    let started = git_xet_mount::mount_device(dir)
        .context("the new mount is not in /proc/self/mountinfo")
        .and_then(|device| {
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.args(["mount-watcher", "--pid", &std::process::id().to_string()])
                .args(["--device", &device])
                .arg(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                // It outlives the mount: it must not keep the directory it was started in busy.
                .current_dir("/")
                // Its own process group: a Ctrl-C meant for the mount must not stop it
                // first (the mount unmounts itself then, and the watcher finds it gone).
                .process_group(0);
            // Not waited for: it outlives this process by design (init reaps it).
            cmd.spawn().context("starting the watcher")
        });
    if let Err(e) = started {
        eprintln!(
            "git-xet: {e:#}: if this process is killed, run fusermount3 -u {}",
            dir.display()
        );
    }
}

pub fn mount_watcher(args: MountWatcherArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    git_xet_mount::fuse::unmount_when_gone(args.pid, &args.dir, &args.device)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs this command again with `--foreground`, detached, and returns once the directory is
/// mounted (or with the error the background process printed).
fn start_in_background(args: &MountArgs, dir: &Path) -> anyhow::Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    let log = tempfile::NamedTempFile::new().context("creating a log file for the mount")?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("mount")
        .arg(dir)
        .args(["--rev", &args.rev, "--foreground"])
        .args(["--timeout", &args.timeout.to_string()]);
    if let Some(size) = args.cache_size {
        cmd.args(["--cache-size", &size.to_string()]);
    }
    // Its own process group: a Ctrl-C in this terminal is not meant for it.
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen()?)
        .process_group(0)
        .spawn()
        .context("starting the mount process")?;
    let started = Instant::now();
    loop {
        if git_xet_mount::is_mounted(dir) {
            eprintln!(
                "git-xet: {} mounted on {} (unmount: git xet unmount {})",
                args.rev,
                dir.display(),
                dir.display()
            );
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(status) = child.try_wait()? {
            let said = std::fs::read_to_string(log.path()).unwrap_or_default();
            eprint!("{said}");
            bail!("the mount process stopped ({status})");
        }
        if started.elapsed() > MOUNT_WAIT {
            let _ = child.kill();
            bail!(
                "{} was not mounted within {} s",
                dir.display(),
                MOUNT_WAIT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn unmount(args: UnmountArgs) -> anyhow::Result<ExitCode> {
    logging::init("warn");
    let dir = std::fs::canonicalize(&args.dir)
        .with_context(|| format!("mount point {}", args.dir.display()))?;
    if !git_xet_mount::is_mounted(&dir) {
        bail!("{} is not mounted", dir.display());
    }
    let out = Command::new("fusermount3")
        .arg("-u")
        .arg(&dir)
        .output()
        .context("running fusermount3 (install fuse3)")?;
    if !out.status.success() {
        bail!(
            "fusermount3 -u {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(ExitCode::SUCCESS)
}
