//! The LFS objects a repository references: every pointer blob reachable from the given
//! revisions (all refs for `migrate`), found with git's own object walk.

use std::collections::{BTreeMap, HashMap};

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
    for (id, blob) in BatchReader::new(&contents) {
        if let Some(pointer) = Pointer::detect(blob) {
            let path = paths.get(id).cloned().unwrap_or_default();
            found.entry(pointer.oid).or_insert(LfsObject {
                oid: pointer.oid,
                size: pointer.size,
                path,
            });
        }
    }
    Ok(found.into_values().collect())
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
        .filter_map(|(id, blob)| Some((id, Pointer::detect(blob)?)))
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

impl<'a> BatchReader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        BatchReader { rest: bytes }
    }
}

impl<'a> Iterator for BatchReader<'a> {
    type Item = (&'a str, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let newline = self.rest.iter().position(|&b| b == b'\n')?;
        let header = std::str::from_utf8(&self.rest[..newline]).ok()?;
        let mut parts = header.split(' ');
        let id = parts.next()?;
        if parts.next() == Some("missing") {
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
        Some((id, content))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_output_is_split_by_declared_sizes() {
        let data = b"aaa blob 3\nx\ny\nbbb missing\nccc blob 0\n\n";
        let items: Vec<_> = BatchReader::new(data).collect();
        assert_eq!(items, vec![("aaa", &b"x\ny"[..]), ("ccc", &b""[..])]);
        // Truncated output ends the iteration instead of reading out of bounds.
        assert_eq!(BatchReader::new(b"aaa blob 99\nshort\n").count(), 0);
    }
}
