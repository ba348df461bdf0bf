//! The file system against a real git repository: the tree at two revisions, git blobs,
//! symlinks, executable bits, and LFS objects read from `.git/lfs/objects` with no request
//! (the source refuses every fetch) or through the source when absent.

use super::*;
use git_xet_core::lfs::pointer::{Oid, Pointer};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Serves LFS ranges from memory and counts the requests.
#[derive(Default)]
struct Remote {
    objects: HashMap<Oid, Vec<u8>>,
    requests: AtomicUsize,
}

impl RangeSource for Remote {
    fn fetch(&self, object: &Pointer, start: u64, len: u64) -> Result<Vec<u8>, MountError> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let data = self.objects.get(&object.oid).ok_or(MountError::NotFound)?;
        Ok(data[start as usize..(start + len) as usize].to_vec())
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    Git::in_dir(dir)
        .with_env("GIT_CONFIG_GLOBAL", "/dev/null")
        .with_env("GIT_CONFIG_NOSYSTEM", "1")
        .run(args)
        .unwrap()
}

/// A repository with a first commit (small files, a symlink, an executable, two LFS
/// pointers: one object present locally, one not) and a second that changes a file.
fn repo() -> (tempfile::TempDir, Vec<u8>, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    git(d, &["config", "user.email", "t@example.com"]);
    git(d, &["config", "user.name", "t"]);
    std::fs::create_dir_all(d.join("dir/sub")).unwrap();
    std::fs::write(d.join("README"), "first\n").unwrap();
    std::fs::write(d.join("dir/sub/run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    let mut perms = std::fs::metadata(d.join("dir/sub/run.sh"))
        .unwrap()
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(d.join("dir/sub/run.sh"), perms).unwrap();
    std::os::unix::fs::symlink("dir/sub/run.sh", d.join("link")).unwrap();
    let local: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let remote: Vec<u8> = (0..5_000_000u32).map(|i| (i * 13 % 253) as u8).collect();
    for (name, data) in [("local.bin", &local), ("remote.bin", &remote)] {
        let pointer = Pointer::new(Oid::of(data), data.len() as u64);
        std::fs::write(d.join(name), pointer.to_text()).unwrap();
    }
    // Only local.bin's object is in the store.
    let stored = d
        .join(".git/lfs/objects")
        .join(Oid::of(&local).storage_path());
    std::fs::create_dir_all(stored.parent().unwrap()).unwrap();
    std::fs::write(&stored, &local).unwrap();
    git(d, &["add", "."]);
    git(d, &["commit", "-qm", "first"]);
    git(d, &["tag", "v1"]);
    std::fs::write(d.join("README"), "second version\n").unwrap();
    std::fs::remove_file(d.join("link")).unwrap();
    git(d, &["commit", "-qam", "second"]);
    (dir, local, remote)
}

fn mount(dir: &Path, rev: &str, remote: Remote) -> MountFs<Remote> {
    let store = LfsStore::in_dir(&dir.join(".git/lfs"));
    MountFs::new(Git::in_dir(dir), store, rev, remote, Duration::from_secs(5)).unwrap()
}

fn read_all<S: RangeSource>(fs: &MountFs<S>, path: &str) -> Vec<u8> {
    let ino = fs.table().resolve(path).unwrap();
    let size = fs.attr(ino).unwrap().size;
    let mut out = Vec::new();
    while (out.len() as u64) < size {
        let piece = fs.read(ino, out.len() as u64, 131_072).unwrap();
        assert!(!piece.is_empty());
        out.extend_from_slice(&piece);
    }
    out
}

#[test]
fn a_revision_shows_its_tree_with_real_sizes_modes_and_links() {
    let (dir, local, remote) = repo();
    let fs = mount(dir.path(), "v1", Remote::default());
    let root = fs.children(tree::ROOT).unwrap();
    let names: Vec<_> = root.iter().map(|c| c.2.to_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            ".",
            "..",
            "README",
            "dir",
            "link",
            "local.bin",
            "remote.bin"
        ]
    );
    let sub = fs.table().resolve("dir/sub").unwrap();
    assert_eq!(fs.attr(sub).unwrap().kind, Kind::Dir);
    let dir_ino = fs.table().resolve("dir").unwrap();
    assert_eq!(fs.children(sub).unwrap()[1].0, dir_ino, "`..` of dir/sub");
    let run = fs.lookup(sub, OsStr::new("run.sh")).unwrap();
    assert!(run.executable && run.kind == Kind::File);
    assert!(
        !fs.lookup(tree::ROOT, OsStr::new("README"))
            .unwrap()
            .executable
    );
    let link = fs.table().resolve("link").unwrap();
    assert_eq!(fs.attr(link).unwrap().kind, Kind::Symlink);
    assert_eq!(fs.readlink(link).unwrap(), b"dir/sub/run.sh");
    // LFS files have their objects' sizes, not their pointers'.
    for (name, data) in [("local.bin", &local), ("remote.bin", &remote)] {
        let a = fs.lookup(tree::ROOT, OsStr::new(name)).unwrap();
        assert_eq!(a.size, data.len() as u64, "{name}");
    }
    assert_eq!(read_all(&fs, "README"), b"first\n");
    assert_eq!(read_all(&fs, "dir/sub/run.sh"), b"#!/bin/sh\necho hi\n");
    assert!(fs.lookup(tree::ROOT, OsStr::new("missing")).is_none());
    assert!(fs.children(fs.table().resolve("README").unwrap()).is_none());
}

#[test]
fn head_is_another_tree_than_an_older_revision() {
    let (dir, ..) = repo();
    let fs = mount(dir.path(), "HEAD", Remote::default());
    assert_eq!(read_all(&fs, "README"), b"second version\n");
    assert!(fs.table().resolve("link").is_none());
    let err = MountFs::new(
        Git::in_dir(dir.path()),
        LfsStore::in_dir(&dir.path().join(".git/lfs")),
        "no-such-rev",
        Remote::default(),
        Duration::from_secs(1),
    );
    assert!(matches!(err, Err(MountError::Revision { .. })));
}

#[test]
fn local_objects_are_read_from_disk_and_others_through_the_source() {
    let (dir, local, remote) = repo();
    let mut source = Remote::default();
    source.objects.insert(Oid::of(&remote), remote.clone());
    let fs = mount(dir.path(), "v1", source);
    assert_eq!(read_all(&fs, "local.bin"), local);
    let ino = fs.table().resolve("local.bin").unwrap();
    assert_eq!(*fs.read(ino, 299_990, 100).unwrap(), local[299_990..]);
    assert_eq!(fs.blocks().source().requests.load(Ordering::SeqCst), 0);

    let ino = fs.table().resolve("remote.bin").unwrap();
    assert_eq!(
        *fs.read(ino, 2_097_000, 5000).unwrap(),
        remote[2_097_000..2_102_000]
    );
    assert_eq!(read_all(&fs, "remote.bin"), remote);
    // 5 MB in 128 KiB blocks: each fetched once, on its own (the read-ahead of so short a
    // run is one block), except that the first read spans blocks 15 and 16, fetched as
    // one range.
    let blocks = (remote.len() as u64).div_ceil(crate::blocks::BLOCK_SIZE);
    assert_eq!(
        fs.blocks().source().requests.load(Ordering::SeqCst) as u64,
        blocks - 1
    );
    assert!(fs.read(ino, 10_000_000, 10).unwrap().is_empty());
}
