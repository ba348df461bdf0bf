//! The checked-out version and file systems (docs/store.md, "File systems"): the objects of
//! checked-out files stay whole in `.git/lfs/objects`, so `git lfs fsck` and `git lfs
//! checkout` work as-is; on XFS with reflink (a real file system on a loop device) they share
//! their extents with the working tree (no extra disk), on ext4 and tmpfs they are a second
//! copy. `xet.keepCheckedOut=false` keeps none, and says what that costs.
//! Making the XFS needs root and mkfs.xfs: without them the test skips, except under
//! CI=true, where it fails (.ci/deps/00-xfsprogs.sh installs the tools).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::env::{assert_file_is, ok, remote_url, stderr, stdout, GitEnv};
use crate::store::{has_whole, object_of, push_versions, version};
use crate::support::{lfs_objects, random_bytes, write_file, TestServer};
use git_xet_git::store::KeepCheckedOut;

/// A 1 GiB XFS (reflink on) mounted from an image file; unmounted and deleted on drop,
/// also when the test fails.
pub(crate) struct Xfs {
    dir: tempfile::TempDir,
}

impl Xfs {
    /// `None` (said) when it cannot be made here outside CI.
    pub(crate) fn make() -> Option<Xfs> {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let mkfs = Command::new("mkfs.xfs").arg("-V").output().is_ok();
        if !root || !mkfs {
            let why = "making an XFS needs root and mkfs.xfs (run .ci/deps/00-xfsprogs.sh)";
            assert!(std::env::var_os("CI").is_none(), "{why}");
            eprintln!("skipping: {why}");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("xfs.img");
        let run = |cmd: &mut Command| {
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{cmd:?}: {}", stderr(&out));
        };
        run(Command::new("truncate").arg("-s").arg("1G").arg(&image));
        run(Command::new("mkfs.xfs")
            .args(["-q", "-m", "reflink=1"])
            .arg(&image));
        std::fs::create_dir(dir.path().join("mnt")).unwrap();
        let xfs = Xfs { dir };
        run(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(xfs.mount()));
        Some(xfs)
    }

    pub(crate) fn mount(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for Xfs {
    fn drop(&mut self) {
        let umount = |args: &[&str]| {
            Command::new("umount")
                .args(args)
                .arg(self.mount())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !umount(&[]) {
            std::thread::sleep(std::time::Duration::from_millis(500));
            if !umount(&[]) {
                umount(&["-l"]);
            }
        }
        // The image and directories go with `dir`.
    }
}

/// Bytes in use on the file system holding `dir`, after a sync.
fn used_bytes(dir: &Path) -> u64 {
    let _ = Command::new("sync").arg("-f").arg(dir).status();
    let out = Command::new("df")
        .args(["-B1", "--output=used"])
        .arg(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().nth(1).unwrap().trim().parse().unwrap()
}

/// Whether every extent of `file` is shared (FIEMAP's flags, as filefrag prints them).
fn all_extents_shared(file: &Path) -> bool {
    let out = Command::new("filefrag")
        .arg("-v")
        .arg(file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let extents: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.trim_start()
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        })
        .collect();
    !extents.is_empty() && extents.iter().all(|l| l.contains("shared"))
}

#[test]
fn the_checked_out_objects_stay_whole_sharing_extents_on_xfs_a_copy_elsewhere() {
    let server = TestServer::start();
    let remote = remote_url(&server, "org/reflink", "write");
    let alice = GitEnv::with_agent(&[]);
    let bob = GitEnv::with_agent(&[]);
    let (_, commits) = push_versions(&alice, &remote, 2);
    let model = version(1).len() as u64;

    // On the temporary directory's file system (ext4 here) and on tmpfs: HEAD's objects
    // stay whole (a second copy), and git-lfs's fsck passes.
    let plain = bob.clone_ok(&remote, "plain");
    assert_file_is(&plain.join("model.bin"), &version(1));
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let on_shm = shm.path().join("c");
    ok(
        bob.git_logged(
            &bob.dir("."),
            &["clone", "-q", &remote, on_shm.to_str().unwrap()],
        ),
        "clone on tmpfs",
    );
    for clone in [&plain, &on_shm] {
        assert_eq!(lfs_objects(clone), 2, "model.bin and small.bin of HEAD");
        assert!(object_of(&bob, clone, "HEAD", "model.bin").is_file());
        ok(bob.git_output(clone, &["lfs", "fsck"]), "fsck");
    }
    // Another version: its objects replace the former ones.
    ok(
        bob.git_logged(&plain, &["checkout", "-q", &commits[0]]),
        "checkout",
    );
    assert!(has_whole(&plain, &bob, &commits[0], "model.bin"));
    assert!(!has_whole(&plain, &bob, &commits[1], "model.bin"));
    ok(
        bob.git_output(&plain, &["lfs", "fsck"]),
        "fsck after checkout",
    );

    // `false` keeps none: the smallest disk, and status names what needs materialize.
    bob.git(&plain, &["config", "xet.keepCheckedOut", "false"]);
    ok(
        bob.git_logged(&plain, &["checkout", "-q", "main"]),
        "checkout",
    );
    assert_file_is(&plain.join("model.bin"), &version(1));
    assert_eq!(lfs_objects(&plain), 0, "false keeps nothing whole");
    // The git-lfs commands status names: fsck fails, checkout leaves a pointer it has no
    // object for. ls-files (which looks at the working tree file) and a push of a new commit
    // (what `git add` cleaned stays whole until pushed) are unaffected.
    let fsck = bob.git_output(&plain, &["lfs", "fsck"]);
    assert!(!fsck.status.success(), "nothing for git-lfs to read");
    std::fs::remove_file(plain.join("model.bin")).unwrap();
    let out = bob
        .command("git", &plain)
        .args(["checkout", "--", "model.bin"])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    ok(out, "checkout of the pointer");
    ok(
        bob.git_output(&plain, &["lfs", "checkout"]),
        "git lfs checkout",
    );
    let left = std::fs::metadata(plain.join("model.bin")).unwrap().len();
    assert!(left < 200, "git lfs checkout wrote {left} bytes");
    // Removed first: the pointer's stat is in the index, so git would not rewrite it.
    std::fs::remove_file(plain.join("model.bin")).unwrap();
    bob.git(&plain, &["checkout", "-q", "--", "model.bin"]);
    assert_file_is(&plain.join("model.bin"), &version(1));
    let listed = stdout(&ok(
        bob.git_output(&plain, &["lfs", "ls-files"]),
        "ls-files",
    ));
    assert!(listed.contains(" * model.bin"), "{listed}");
    write_file(&plain.join("small.bin"), &random_bytes(50 << 10, 4343));
    bob.git(&plain, &["commit", "-qam", "local edit"]);
    ok(
        bob.git_logged(&plain, &["lfs", "push", "origin", "main"]),
        "git lfs push of the current branch",
    );
    let status = stdout(&ok(
        bob.xet_output(&plain, &["status", "--offline"]),
        "status",
    ));
    assert!(
        status.contains("none (xet.keepCheckedOut=false)")
            && status.contains(KeepCheckedOut::NEEDS_MATERIALIZE),
        "{status}"
    );
    assert!(
        status.contains("model.bin  (working tree, chunk store)"),
        "{status}"
    );
    bob.xet(&plain, &["materialize"]);
    ok(
        bob.git_output(&plain, &["lfs", "fsck"]),
        "fsck after materialize",
    );

    let Some(xfs) = Xfs::make() else { return };
    let before = used_bytes(&xfs.mount());
    let x = xfs.mount().join("x");
    ok(
        bob.git_logged(
            &bob.dir("."),
            &["clone", "-q", &remote, x.to_str().unwrap()],
        ),
        "clone on XFS",
    );
    assert_file_is(&x.join("model.bin"), &version(1));
    let object = object_of(&bob, &x, "HEAD", "model.bin");
    assert!(
        object.is_file(),
        "the checked-out object stays whole on XFS"
    );
    assert!(all_extents_shared(&object) && all_extents_shared(&x.join("model.bin")));
    let used = used_bytes(&xfs.mount()) - before;
    assert!(
        used < model + model / 2,
        "the object and the working tree file share their extents: {used} bytes used for a \
         {model}-byte file"
    );
    // git-lfs's own commands read the whole objects: no materialize needed.
    ok(bob.git_output(&x, &["lfs", "fsck"]), "lfs fsck");
    std::fs::remove_file(x.join("model.bin")).unwrap();
    let out = bob
        .command("git", &x)
        .args(["checkout", "--", "model.bin"])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    ok(out, "checkout of the pointer");
    ok(bob.git_output(&x, &["lfs", "checkout"]), "lfs checkout");
    assert_file_is(&x.join("model.bin"), &version(1));

    // Another version: its object is kept and shared, the old version's goes.
    ok(
        bob.git_logged(&x, &["checkout", "-q", &commits[0]]),
        "checkout v0",
    );
    assert_file_is(&x.join("model.bin"), &version(0));
    assert!(!object.exists(), "the old version's whole object is gone");
    let now = object_of(&bob, &x, "HEAD", "model.bin");
    assert!(now.is_file() && all_extents_shared(&x.join("model.bin")));
    ok(
        bob.git_output(&x, &["lfs", "fsck"]),
        "lfs fsck after checkout",
    );
    assert!(!has_whole(&x, &bob, &commits[1], "model.bin"));
    assert_eq!(lfs_objects(&x), 2, "model.bin and small.bin of HEAD only");
    drop(xfs);
}
