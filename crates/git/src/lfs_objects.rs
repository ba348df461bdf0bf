//! The LFS objects a repository references: every pointer blob reachable from the given
//! revisions (all refs for `migrate`), or from the commits a push may send, found with git's
//! own object walk.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::repo::Repo;
use crate::GitError;
use git_xet_lfs::pointer::{Oid, Pointer, MAX_POINTER_SIZE};

/// One LFS object and a path it appears under (the first the walk met).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LfsObject {
    pub oid: Oid,
    pub size: u64,
    pub path: String,
}

/// Every LFS object referenced by blobs reachable from `revs` (e.g. `["--all"]`), in oid
/// order, each once.
pub fn reachable_objects(repo: &Repo, revs: &[&str]) -> Result<Vec<LfsObject>, GitError> {
    let git = repo.git();
    let mut args = vec!["rev-list", "--objects"];
    args.extend_from_slice(revs);
    let listing = git.run(&args)?;
    // object id -> path (commits and trees have none or are not blobs; cat-file tells).
    let mut paths: HashMap<String, String> = HashMap::new();
    let mut ids = String::new();
    for line in listing.lines() {
        let (id, path) = line.split_once(' ').unwrap_or((line, ""));
        if paths.insert(id.to_string(), path.to_string()).is_none() {
            ids.push_str(id);
            ids.push('\n');
        }
    }
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let checked = git.run_with_input(
        [
            "cat-file",
            "--batch-check=%(objectname) %(objecttype) %(objectsize)",
        ],
        Some(ids.as_bytes()),
    )?;
    let mut candidates = String::new();
    for line in checked.lines() {
        let mut parts = line.split(' ');
        let (Some(id), Some("blob"), Some(size)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if size.parse::<usize>().is_ok_and(|s| s <= MAX_POINTER_SIZE) {
            candidates.push_str(id);
            candidates.push('\n');
        }
    }
    let mut found: BTreeMap<Oid, LfsObject> = BTreeMap::new();
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let contents = git.run_bytes(["cat-file", "--batch"], Some(candidates.as_bytes()))?;
    for entry in BatchReader::new(&contents) {
        if let Some(pointer) = Pointer::detect(entry.content) {
            let path = paths.get(entry.id).cloned().unwrap_or_default();
            found.entry(pointer.oid).or_insert(LfsObject {
                oid: pointer.oid,
                size: pointer.size,
                path,
            });
        }
    }
    Ok(found.into_values().collect())
}

/// The LFS objects (oid, size) a push to `remote` may contain: those whose pointers are blobs
/// reachable from the local branches or `HEAD` and not from `remote`'s remote-tracking
/// branches (`refs/remotes/<remote>/*`). git-lfs tells its agents nothing of the refs it
/// pushes, so this covers every local branch not yet on the remote, pushed now or not; tags,
/// the stash, other remotes' branches, and commits no branch reaches any more are left out
/// (their objects still go when git-lfs hands them over). One object walk that skips blobs
/// too big to be pointers, and one `cat-file --batch`.
pub fn outgoing_objects(repo: &Repo, remote: &str) -> Result<HashSet<(Oid, u64)>, GitError> {
    let git = repo.git();
    let small_blobs = format!("--filter=blob:limit={}", MAX_POINTER_SIZE + 1);
    let remote_branches = format!("--remotes={remote}");
    let listing = git.run_bytes(
        [
            "rev-list",
            "--objects",
            "--no-object-names",
            &small_blobs,
            "--filter=object:type=blob",
            // An unborn HEAD is no error: there is nothing to push from it.
            "--ignore-missing",
            "--branches",
            "HEAD",
            "--not",
            &remote_branches,
            "--",
        ],
        None,
    )?;
    if listing.is_empty() {
        return Ok(HashSet::new());
    }
    // The listing holds the walk's commits too: cat-file says which are blobs.
    let contents = git.run_bytes(["cat-file", "--batch"], Some(&listing))?;
    Ok(BatchReader::new(&contents)
        .filter(|entry| entry.kind == "blob")
        .filter_map(|entry| Pointer::detect(entry.content))
        .map(|pointer| (pointer.oid, pointer.size))
        .collect())
}

/// The LFS files in the tree of `rev` (e.g. `HEAD`): every path whose blob is a pointer.
pub fn tracked_files(repo: &Repo, rev: &str) -> Result<Vec<LfsObject>, GitError> {
    let git = repo.git();
    let Some(listing) = git.try_run(["ls-tree", "-r", "-z", "--long", "--full-tree", rev])? else {
        return Ok(Vec::new());
    };
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut candidates = String::new();
    for record in listing.split('\0').filter(|r| !r.is_empty()) {
        let Some((meta, path)) = record.split_once('\t') else {
            continue;
        };
        let fields: Vec<&str> = meta.split_whitespace().collect();
        let [_, "blob", id, size] = fields.as_slice() else {
            continue;
        };
        if size.parse::<usize>().is_ok_and(|s| s <= MAX_POINTER_SIZE) {
            entries.push((id.to_string(), path.to_string()));
            candidates.push_str(id);
            candidates.push('\n');
        }
    }
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let contents = git.run_bytes(["cat-file", "--batch"], Some(candidates.as_bytes()))?;
    let pointers: HashMap<&str, Pointer> = BatchReader::new(&contents)
        .filter_map(|entry| Some((entry.id, Pointer::detect(entry.content)?)))
        .collect();
    Ok(entries
        .into_iter()
        .filter_map(|(id, path)| {
            let p = pointers.get(id.as_str())?;
            Some(LfsObject {
                oid: p.oid,
                size: p.size,
                path,
            })
        })
        .collect())
}

/// Iterates `git cat-file --batch` output: `<id> <type> <size>\n<content>\n`.
struct BatchReader<'a> {
    rest: &'a [u8],
}

/// One object of `git cat-file --batch` output.
#[derive(Debug, PartialEq, Eq)]
struct BatchEntry<'a> {
    id: &'a str,
    /// `blob`, `tree`, `commit` or `tag`.
    kind: &'a str,
    content: &'a [u8],
}

impl<'a> BatchReader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        BatchReader { rest: bytes }
    }
}

impl<'a> Iterator for BatchReader<'a> {
    type Item = BatchEntry<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let newline = self.rest.iter().position(|&b| b == b'\n')?;
        let header = std::str::from_utf8(&self.rest[..newline]).ok()?;
        let mut parts = header.split(' ');
        let id = parts.next()?;
        let kind = parts.next()?;
        if kind == "missing" {
            self.rest = &self.rest[newline + 1..];
            return self.next();
        }
        let size: usize = parts.next()?.parse().ok()?;
        let start = newline + 1;
        let end = start.checked_add(size)?;
        if end + 1 > self.rest.len() {
            return None;
        }
        let content = &self.rest[start..end];
        self.rest = &self.rest[end + 1..];
        Some(BatchEntry { id, kind, content })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Git;

    /// A push may contain the pointers of the local branches and `HEAD` that the remote's
    /// remote-tracking branches do not reach, and no other: not those of tags, the stash,
    /// another remote's branches or commits no ref reaches. Commits made with git's plumbing.
    #[test]
    fn a_push_may_contain_the_pointers_of_local_branches_not_on_the_remote() {
        let root = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(root.path()).unwrap();
        let git = Git::in_dir(&top)
            .with_env("GIT_CONFIG_GLOBAL", "/dev/null")
            .with_env("GIT_CONFIG_NOSYSTEM", "1")
            .with_env("GIT_AUTHOR_NAME", "t")
            .with_env("GIT_AUTHOR_EMAIL", "t@localhost")
            .with_env("GIT_COMMITTER_NAME", "t")
            .with_env("GIT_COMMITTER_EMAIL", "t@localhost");
        git.run(["init", "-q", "repo"]).unwrap();
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
        // A blob too big to be a pointer, one that is no pointer, and two pointers.
        let big = [b"version https://git-lfs.github.com/spec/v1\n".repeat(30)].concat();
        let main = commit(
            &[
                ("old.bin", text(1)),
                ("new.bin", text(2)),
                ("big.txt", big),
                ("plain.txt", b"plain".to_vec()),
            ],
            Some(&on_remote),
        );
        set_ref("refs/remotes/origin/main", &on_remote);
        set_ref("refs/heads/main", &main);
        set_ref(
            "refs/heads/feature",
            &commit(&[("f.bin", text(3))], Some(&main)),
        );
        set_ref("refs/tags/v1", &commit(&[("t.bin", text(4))], Some(&main)));
        set_ref("refs/stash", &commit(&[("s.bin", text(5))], Some(&main)));
        let theirs = commit(&[("u.bin", text(6))], Some(&main));
        set_ref("refs/remotes/upstream/main", &theirs);
        let dropped = commit(&[("d.bin", text(7))], Some(&main));
        let repo = Repo::discover_with(&git).unwrap();
        let expect = |ns: &[u8]| ns.iter().map(|n| pointer(*n)).collect::<HashSet<_>>();
        // HEAD is unborn (`master`, git's default here): nothing to push from it.
        assert_eq!(outgoing_objects(&repo, "origin").unwrap(), expect(&[2, 3]));
        set_ref("HEAD", &dropped);
        assert_eq!(
            outgoing_objects(&repo, "origin").unwrap(),
            expect(&[2, 3, 7])
        );
        // A remote git-lfs was given as a URL has no remote-tracking branches.
        assert_eq!(
            outgoing_objects(&repo, "https://example.com/r.git").unwrap(),
            expect(&[1, 2, 3, 7])
        );
        // All of it on the remote: nothing.
        set_ref("refs/remotes/origin/feature", &dropped);
        let feature = git.run(["rev-parse", "feature"]).unwrap();
        set_ref("refs/remotes/origin/more", feature.trim());
        assert_eq!(outgoing_objects(&repo, "origin").unwrap(), expect(&[]));
    }

    #[test]
    fn batch_output_is_split_by_declared_sizes() {
        let data = b"aaa blob 3\nx\ny\nbbb missing\nccc blob 0\n\n";
        let items: Vec<_> = BatchReader::new(data)
            .map(|e| (e.id, e.kind, e.content))
            .collect();
        assert_eq!(
            items,
            vec![("aaa", "blob", &b"x\ny"[..]), ("ccc", "blob", &b""[..])]
        );
        // Truncated output ends the iteration instead of reading out of bounds.
        assert_eq!(BatchReader::new(b"aaa blob 99\nshort\n").count(), 0);
    }
}
