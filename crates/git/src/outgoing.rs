//! What a push may contain, for the upload coordinator's read-ahead (`lfs/coordinator`): it
//! uploads an object a server's Batch API answer lists before git-lfs hands it over only if
//! the push may contain it, so that a server cannot have any local object sent by naming it.
//!
//! git-lfs tells its agents nothing of the refs it pushes (its pre-push hook reads them from
//! git on its stdin), so the rule covers what any push from here to the remote could send:
//! the blobs reachable from the local branches or `HEAD` and not from the remote's
//! remote-tracking branches. An LFS object is in the push if the pointer git-lfs writes for it
//! is one of those blobs: its id is computed here, so git lists object ids only and reads no
//! blob (one `rev-list` that walks commits and trees).

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::git_index::ObjectFormat;
use crate::repo::Repo;
use crate::GitError;
use git_xet_lfs::objects::PushContents;
use git_xet_lfs::pointer::{Oid, Pointer};

/// The most ids kept (the blobs and the commits: their set takes up to about 70 MiB): a push of
/// commits holding more (a first push of a long history) gets no read-ahead rather than that
/// much memory.
const MAX_IDS: usize = 1 << 20;

/// The blobs a push to a remote may contain, by id.
pub struct OutgoingBlobs {
    format: ObjectFormat,
    /// The blobs' ids and their commits' (SHA-1 ones padded with zeros).
    ids: HashSet<[u8; 32]>,
}

impl OutgoingBlobs {
    /// The blobs reachable from the local branches or `HEAD` (an unborn `HEAD` adds none) and
    /// not from `remote`'s remote-tracking branches (`refs/remotes/<remote>/*`; a remote given
    /// as a URL has none). Tags, the stash, other remotes' branches and commits no branch
    /// reaches any more add nothing.
    pub fn list(repo: &Repo, remote: &str) -> Result<OutgoingBlobs, GitError> {
        OutgoingBlobs::list_at_most(repo, remote, MAX_IDS)
    }

    /// [`list`](Self::list), failing beyond `max` ids.
    fn list_at_most(repo: &Repo, remote: &str, max: usize) -> Result<OutgoingBlobs, GitError> {
        let key = "extensions.objectformat";
        let configured = repo.config().get(None, key)?;
        let format = ObjectFormat::from_config(configured.as_deref()).ok_or_else(|| {
            GitError::BadConfigValue {
                expected: "object format",
                value: configured.unwrap_or_default(),
                key: key.into(),
            }
        })?;
        let remote_branches = format!("--remotes={remote}");
        let args = [
            "rev-list",
            "--objects",
            "--no-object-names",
            "--filter=object:type=blob",
            // An unborn HEAD is no error: there is nothing to push from it.
            "--ignore-missing",
            "--branches",
            "HEAD",
            "--not",
            &remote_branches,
            "--",
        ];
        let shown = args.join(" ");
        let mut child = repo.git().spawn(args, Stdio::null())?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let read = read_ids(stdout, format, max);
        if !matches!(read, Ok(Some(_))) {
            let _ = child.kill();
        }
        let status = child
            .wait()
            .map_err(|e| GitError::io("waiting for `git rev-list`", e))?;
        let ids = read
            .map_err(|e| GitError::io("reading `git rev-list`", e))?
            .ok_or(GitError::TooManyOutgoing { limit: max })?;
        if !status.success() {
            return Err(GitError::Command {
                command: format!("git {shown}"),
                stderr: format!("exited with {status} (its message went to stderr)"),
            });
        }
        Ok(OutgoingBlobs { format, ids })
    }

    /// Whether the pointer git-lfs writes for `oid` of `size` bytes is one of the blobs.
    pub fn has_pointer(&self, oid: &Oid, size: u64) -> bool {
        let text = Pointer::new(*oid, size).to_text();
        self.ids
            .contains(&padded(&self.format.blob_id(text.as_bytes())))
    }

    /// How many ids (the blobs and their commits).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

impl PushContents for OutgoingBlobs {
    fn may_contain(&self, oid: &Oid, size: u64) -> bool {
        self.has_pointer(oid, size)
    }
}

/// The ids `git rev-list` prints, one a line; `None` beyond `max`.
fn read_ids(
    out: impl std::io::Read,
    format: ObjectFormat,
    max: usize,
) -> std::io::Result<Option<HashSet<[u8; 32]>>> {
    let mut ids = HashSet::new();
    for line in BufReader::new(out).split(b'\n') {
        let line = line?;
        if ids.len() == max {
            return Ok(None);
        }
        // Commits are listed too: their ids never match a pointer's.
        if let Some(id) = decode_id(&line, format) {
            ids.insert(id);
        }
    }
    Ok(Some(ids))
}

/// An object id of `format` from its lowercase hex, as git prints it.
fn decode_id(hex: &[u8], format: ObjectFormat) -> Option<[u8; 32]> {
    if hex.len() != 2 * format.len() {
        return None;
    }
    let mut id = [0u8; 32];
    for (byte, pair) in id.iter_mut().zip(hex.chunks(2)) {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(id)
}

fn padded(id: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out[..id.len()].copy_from_slice(id);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Git;

    #[test]
    fn ids_decode_as_git_prints_them() {
        let sha1 = "0123456789abcdef0123456789abcdef01234567";
        let id = decode_id(sha1.as_bytes(), ObjectFormat::Sha1).unwrap();
        assert_eq!(&id[..3], &[0x01, 0x23, 0x45]);
        assert_eq!(id[20..], [0; 12]);
        assert_eq!(decode_id(sha1.as_bytes(), ObjectFormat::Sha256), None);
        let upper = sha1.to_ascii_uppercase();
        assert_eq!(decode_id(upper.as_bytes(), ObjectFormat::Sha1), None);
        assert_eq!(decode_id(b"", ObjectFormat::Sha1), None);
    }

    /// A push may contain the pointers of the local branches and `HEAD` that the remote's
    /// remote-tracking branches do not reach, and no other: not those of tags, the stash,
    /// another remote's branches or commits no ref reaches, nor a pointer at another size.
    /// Commits made with git's plumbing, in both object formats.
    #[test]
    fn a_push_may_contain_the_pointers_of_local_branches_not_on_the_remote() {
        for format in ["sha1", "sha256"] {
            let root = tempfile::tempdir().unwrap();
            let top = std::fs::canonicalize(root.path()).unwrap();
            let git = Git::in_dir(&top)
                .with_env("GIT_CONFIG_GLOBAL", "/dev/null")
                .with_env("GIT_CONFIG_NOSYSTEM", "1")
                .with_env("GIT_AUTHOR_NAME", "t")
                .with_env("GIT_AUTHOR_EMAIL", "t@localhost")
                .with_env("GIT_COMMITTER_NAME", "t")
                .with_env("GIT_COMMITTER_EMAIL", "t@localhost");
            let object_format = format!("--object-format={format}");
            git.run(["init", "-q", &object_format, "repo"]).unwrap();
            let git = git.moved_to(top.join("repo"));
            let pointer = |n: u8| (Oid([n; 32]), 100 + u64::from(n));
            let text = |n: u8| {
                let (oid, size) = pointer(n);
                Pointer::new(oid, size).to_text().into_bytes()
            };
            let commit = |files: &[(&str, Vec<u8>)], parent: Option<&str>| -> String {
                let mut listing = String::new();
                for (name, bytes) in files {
                    let id = git
                        .run_with_input(["hash-object", "-w", "--stdin"], Some(bytes))
                        .unwrap();
                    listing.push_str(&format!("100644 blob {}\t{name}\n", id.trim()));
                }
                let tree = git
                    .run_with_input(["mktree"], Some(listing.as_bytes()))
                    .unwrap();
                let mut args = vec!["commit-tree", tree.trim(), "-m", "c"];
                if let Some(parent) = parent {
                    args.extend(["-p", parent]);
                }
                git.run(args).unwrap().trim().to_string()
            };
            let set_ref = |name: &str, commit: &str| {
                git.run(["update-ref", "--no-deref", name, commit]).unwrap();
            };
            let on_remote = commit(&[("old.bin", text(1))], None);
            let main = commit(
                &[
                    ("old.bin", text(1)),
                    ("new.bin", text(2)),
                    ("plain.txt", b"plain".to_vec()),
                ],
                Some(&on_remote),
            );
            set_ref("refs/remotes/origin/main", &on_remote);
            set_ref("refs/heads/main", &main);
            let feature = commit(&[("f.bin", text(3))], Some(&main));
            set_ref("refs/heads/feature", &feature);
            set_ref("refs/tags/v1", &commit(&[("t.bin", text(4))], Some(&main)));
            set_ref("refs/stash", &commit(&[("s.bin", text(5))], Some(&main)));
            let theirs = commit(&[("u.bin", text(6))], Some(&main));
            set_ref("refs/remotes/upstream/main", &theirs);
            let dropped = commit(&[("d.bin", text(7))], Some(&main));
            let repo = Repo::discover_with(&git).unwrap();
            let holds = |remote: &str| -> Vec<u8> {
                let blobs = OutgoingBlobs::list(&repo, remote).unwrap();
                (1..=7)
                    .filter(|n| blobs.may_contain(&pointer(*n).0, pointer(*n).1))
                    .collect()
            };
            // HEAD is unborn (`master`, git's default here): nothing to push from it.
            assert_eq!(holds("origin"), [2, 3], "{format}");
            let blobs = OutgoingBlobs::list(&repo, "origin").unwrap();
            assert!(!blobs.has_pointer(&pointer(2).0, pointer(2).1 + 1));
            set_ref("HEAD", &dropped);
            assert_eq!(holds("origin"), [2, 3, 7], "{format}");
            // A remote git-lfs was given as a URL has no remote-tracking branches.
            assert_eq!(holds("https://example.com/r.git"), [1, 2, 3, 7], "{format}");
            // Beyond the bound, an error. Seven ids: the commits main, feature and dropped,
            // and new.bin, plain.txt, f.bin and d.bin.
            let bounded = OutgoingBlobs::list_at_most(&repo, "origin", 6);
            assert!(matches!(
                bounded,
                Err(GitError::TooManyOutgoing { limit: 6 })
            ));
            assert_eq!(
                OutgoingBlobs::list_at_most(&repo, "origin", 7)
                    .unwrap()
                    .len(),
                7
            );
            // All of it on the remote: nothing.
            set_ref("refs/remotes/origin/feature", &dropped);
            set_ref("refs/remotes/origin/more", &feature);
            assert_eq!(holds("origin"), Vec::<u8>::new(), "{format}");
        }
    }
}
