//! `git xet mount` through real FUSE: a pointer-only clone (GIT_LFS_SKIP_SMUDGE=1) of a
//! repository on our server, mounted, listed and read (whole files and random ranges,
//! bit-exact), at HEAD and at an older revision, by several reader processes at once;
//! reads fail with EIO while the server is down and work again when it is back; unmount
//! (command or SIGTERM) leaves nothing mounted. Needs /dev/fuse and fusermount3: without
//! them the tests skip, except under CI=true, where they fail.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::env::{ok, remote_url, stderr, GitEnv};
use crate::support::{lfs_objects, random_bytes, write_file, TestServer};

pub(super) const XORB_SERVED: &str = "git_xet_xorb_bytes_served_total";

/// Whether FUSE can be used here; under CI its absence fails the test.
pub(super) fn have_fuse() -> bool {
    let fusermount = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("fusermount3").is_file()));
    let why = if !Path::new("/dev/fuse").exists() {
        "/dev/fuse does not exist"
    } else if !fusermount {
        "fusermount3 is not installed (.ci/deps/00-fuse3.sh installs fuse3)"
    } else {
        return true;
    };
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipping: {why}");
    false
}

/// Whether `dir` is a mount point, from /proc/mounts. Only its parent is resolved: a file
/// system call on the mount point itself waits for the mount process, which may be starting,
/// stopping or killed.
pub(super) fn mounted(dir: &Path) -> bool {
    let parent = std::fs::canonicalize(dir.parent().unwrap()).unwrap();
    let dir = parent.join(dir.file_name().unwrap());
    std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(dir.to_str().unwrap()))
}

/// Unmounts on drop whatever a failing test left mounted.
pub(super) struct Mounted(pub(super) PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        // The mount's watcher may unmount it between the check and this command: then
        // fusermount3 fails, and its message must not look like a failure of the test.
        if mounted(&self.0) {
            let _ = std::process::Command::new("fusermount3")
                .arg("-uz")
                .arg(&self.0)
                .output();
        }
    }
}

pub(super) struct Fixture {
    pub(super) server: TestServer,
    pub(super) env: GitEnv,
    pub(super) clone: PathBuf,
    pub(super) v1: Vec<u8>,
    pub(super) v2: Vec<u8>,
    pub(super) small: Vec<u8>,
}

/// A repository with two commits of an LFS file (`v1` tagged), a small LFS file, a git
/// file, an executable and a symlink, pushed; and a pointer-only clone of it.
pub(super) fn fixture() -> Fixture {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/models", "write");
    fixture_on(server, &remote, GitEnv::with_agent(&[]))
}

/// [`fixture`] on a given server, through `remote`, in `env`.
pub(super) fn fixture_on(server: TestServer, remote: &str, env: GitEnv) -> Fixture {
    let remote = remote.to_string();
    let a = env.lfs_repo("a", &remote);
    let v1 = random_bytes(5 << 20, 11);
    let small = random_bytes(70_000, 12);
    write_file(&a.join("weights/model.bin"), &v1);
    write_file(&a.join("small.bin"), &small);
    std::fs::write(a.join("README"), "models\n").unwrap();
    write_file(&a.join("tools/run.sh"), b"#!/bin/sh\necho run\n");
    let mut perms = std::fs::metadata(a.join("tools/run.sh"))
        .unwrap()
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(a.join("tools/run.sh"), perms).unwrap();
    std::os::unix::fs::symlink("weights/model.bin", a.join("latest")).unwrap();
    env.git(&a, &["add", "."]);
    env.git(&a, &["commit", "-qm", "first"]);
    env.git(&a, &["tag", "v1"]);
    let v2 = random_bytes(9 << 20, 13);
    write_file(&a.join("weights/model.bin"), &v2);
    env.git(&a, &["commit", "-qam", "second"]);
    // Pushed as if from another machine: uploads fill the pusher's chunk store, and the mount
    // reads what its store holds without a request, so the mount's store starts empty.
    let push = env
        .command("git", &a)
        .args(["push", "-q", "origin", "main", "v1"])
        .env("GIT_XET_STORE", env.dir("pusher-store"))
        .output()
        .expect("run git push");
    ok(push, "push");
    let clone = env.dir("clone");
    let out = env
        .command("git", &env.dir("."))
        .args(["clone", "-q", &remote, clone.to_str().unwrap()])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    ok(out, "pointer-only clone");
    assert_eq!(lfs_objects(&clone), 0, "the clone holds pointers only");
    Fixture {
        server,
        env,
        clone,
        v1,
        v2,
        small,
    }
}

pub(super) fn mount(f: &Fixture, name: &str, extra: &[&str]) -> Mounted {
    let dir = f.env.dir(name);
    let mut args = vec!["mount", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    ok(f.env.xet_output(&f.clone, &args), "git xet mount");
    assert!(mounted(&dir), "{} is mounted", dir.display());
    Mounted(dir)
}

pub(super) fn read_range(path: &Path, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0; len];
    file.read_exact(&mut buf)?;
    Ok(buf)
}

#[test]
fn a_pointer_only_clone_mounts_lists_and_reads_bit_exact() {
    if !have_fuse() {
        return;
    }
    let f = fixture();
    let served_before = f.server.metric(XORB_SERVED);
    let view = mount(&f, "view", &["--cache-size", "64M"]);
    let v = &view.0;

    // The tree, with real sizes, modes and links; no LFS byte fetched to list it.
    let mut names: Vec<String> = std::fs::read_dir(v)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ".gitattributes",
            "README",
            "latest",
            "small.bin",
            "tools",
            "weights"
        ]
    );
    let model = v.join("weights/model.bin");
    assert_eq!(std::fs::metadata(&model).unwrap().len(), f.v2.len() as u64);
    assert_eq!(
        std::fs::read_link(v.join("latest")).unwrap(),
        Path::new("weights/model.bin")
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(v.join("tools/run.sh"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o111, 0o111, "executable");
    assert_eq!(std::fs::read(v.join("README")).unwrap(), b"models\n");
    assert_eq!(f.server.metric(XORB_SERVED), served_before);

    // A random range fetches about its blocks, not the file.
    let got = read_range(&model, 6_000_000, 100_000).unwrap();
    assert!(got == f.v2[6_000_000..6_100_000]);
    let served = f.server.metric(XORB_SERVED) - served_before;
    assert!(
        served > 0.0 && served < (f.v2.len() / 2) as f64,
        "a 100 kB read fetched {served} bytes of a {} byte file",
        f.v2.len()
    );
    // Ranges at block edges, the end and past it; whole files.
    for (offset, len) in [
        (0, 1),
        (2_097_100, 300),
        (4_194_300, 9),
        (f.v2.len() as u64 - 7, 7),
    ] {
        let got = read_range(&model, offset, len).unwrap();
        assert!(
            got == f.v2[offset as usize..offset as usize + len],
            "{offset}+{len}"
        );
    }
    assert!(
        read_range(&model, f.v2.len() as u64, 1).is_err(),
        "past the end"
    );
    assert!(std::fs::read(&model).unwrap() == f.v2);
    assert!(std::fs::read(v.join("small.bin")).unwrap() == f.small);

    // Several reader processes at once, disjoint ranges (1 MiB each).
    let readers: Vec<(u64, Child)> = (0..6u64)
        .map(|i| {
            let child = std::process::Command::new("dd")
                .arg(format!("if={}", model.display()))
                .args([
                    "bs=1M",
                    &format!("skip={}", i + 1),
                    "count=1",
                    "status=none",
                ])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            (i + 1, child)
        })
        .collect();
    for (i, child) in readers {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let start = (i << 20) as usize;
        assert!(out.stdout == f.v2[start..start + (1 << 20)], "reader {i}");
    }

    // Another revision, mounted beside it. Four processes read the same MiB of it at once:
    // its block is fetched once (single flight), not four times.
    let old = mount(&f, "old", &["--rev", "v1"]);
    let before = f.server.metric(XORB_SERVED);
    let old_model = old.0.join("weights/model.bin");
    let same: Vec<Child> = (0..4)
        .map(|_| {
            std::process::Command::new("dd")
                .arg(format!("if={}", old_model.display()))
                .args(["bs=1M", "skip=1", "count=1", "status=none"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in same {
        let out = child.wait_with_output().unwrap();
        assert!(out.stdout == f.v1[1 << 20..2 << 20]);
    }
    // Its blocks once, and what the kernel's read-ahead asks beyond: under 6 MiB. Without
    // single flight the four readers would each fetch the MiB and more (8+ MiB).
    let served = f.server.metric(XORB_SERVED) - before;
    assert!(
        served < (6 << 20) as f64,
        "4 readers of one MiB made the server send {served} bytes"
    );
    assert_eq!(
        std::fs::metadata(old.0.join("weights/model.bin"))
            .unwrap()
            .len(),
        f.v1.len() as u64
    );
    assert!(std::fs::read(old.0.join("weights/model.bin")).unwrap() == f.v1);
    assert!(
        read_range(&old.0.join("weights/model.bin"), 3_333_333, 4444).unwrap()
            == f.v1[3_333_333..3_333_333 + 4444]
    );

    // Unmounted, nothing is left; the clone still holds no second copy of any object.
    for m in [&view, &old] {
        ok(
            f.env
                .xet_output(&f.clone, &["unmount", m.0.to_str().unwrap()]),
            "git xet unmount",
        );
        assert!(!mounted(&m.0));
    }
    assert_eq!(lfs_objects(&f.clone), 0);
    // Not mounted any more: unmount says so.
    let again = f
        .env
        .xet_output(&f.clone, &["unmount", view.0.to_str().unwrap()]);
    assert!(!again.status.success() && stderr(&again).contains("not mounted"));
}

/// `git xet mount DIR --foreground EXTRA...` in the clone, run as a child process with its
/// stderr to `stderr`, once mounted; DIR is unmounted on drop of the guard.
pub(super) fn mount_foreground(
    f: &Fixture,
    name: &str,
    extra: &[&str],
    stderr: Stdio,
) -> (Mounted, Child) {
    let dir = f.env.dir(name);
    let guard = Mounted(dir.clone());
    let mut child = f
        .env
        .command(crate::support::git_xet_bin(), &f.clone)
        .args(["mount", dir.to_str().unwrap(), "--foreground"])
        .args(extra)
        .stderr(stderr)
        .spawn()
        .unwrap();
    wait_mounted(&dir, &mut child);
    (guard, child)
}

/// The pid of the `git xet mount-watcher` started by the mount process `mount` (waits for it
/// at most 20 s: the mount starts it once the mount is in place).
fn watcher_of(mount: u32) -> u32 {
    let wanted = ["mount-watcher", "--pid", &mount.to_string()].join("\0");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&wanted) {
                return pid;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no watcher for mount process {mount}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `dir` is mounted or `child` exits (at most 30 s).
fn wait_mounted(dir: &Path, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !mounted(dir) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the mount process exited"
        );
        assert!(Instant::now() < deadline, "not mounted in 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn reads_fail_with_eio_while_the_server_is_down_and_work_when_it_returns() {
    if !have_fuse() {
        return;
    }
    let mut f = fixture();
    let (guard, mut child) = mount_foreground(&f, "view", &["--timeout", "5"], Stdio::null());
    let dir = guard.0.clone();
    let model = dir.join("weights/model.bin");
    // The mount works; then the server goes before any byte of model.bin was asked for, so
    // no read-ahead or cache can answer the next read (an earlier version read model.bin's
    // first block here, and a read 7 MB further was once answered from what was fetched).
    assert!(read_range(&dir.join("small.bin"), 0, 1000).unwrap() == f.small[..1000]);

    f.server.stop();
    let started = Instant::now();
    let err = read_range(&model, 7_000_000, 1000).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "EIO after {:?}",
        started.elapsed()
    );
    // The mount survives: the server back, the same range reads.
    f.server.restart();
    assert!(read_range(&model, 7_000_000, 1000).unwrap() == f.v2[7_000_000..7_001_000]);

    // SIGTERM unmounts cleanly and the process exits.
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "still running 20 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!mounted(&dir), "nothing left mounted");

    // A mount process that dies (SIGKILL) leaves nothing mounted either: its watcher
    // unmounts. A directory of its own: fusermount3's auto_unmount helper of the mount above
    // may still be running, and it unmounts by path.
    let (guard, mut child) = mount_foreground(&f, "view-killed", &[], Stdio::null());
    let dir = guard.0.clone();
    // Listed in /proc/mounts is not yet served (fusermount3 mounts, then hands the
    // connection over). An answer says the mount is served.
    assert!(dir.join("small.bin").metadata().unwrap().is_file());
    // The watcher outlives the mount: it must not hold the directory it was started from.
    let watcher = watcher_of(child.id());
    assert_eq!(
        std::fs::read_link(format!("/proc/{watcher}/cwd")).unwrap(),
        Path::new("/"),
        "the watcher's working directory"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // The watcher is a process of its own, scheduled late on a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(20);
    while mounted(&dir) {
        assert!(
            Instant::now() < deadline,
            "still mounted 20 s after SIGKILL"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn without_fuse_the_error_says_what_to_install() {
    let env = GitEnv::new();
    let repo = env.init_repo("r");
    let dir = env.dir("view");
    let out = env
        .command(crate::support::git_xet_bin(), &repo)
        .args(["mount", dir.to_str().unwrap()])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.contains("FUSE is not available") && said.contains("fuse3"),
        "{said}"
    );
}
