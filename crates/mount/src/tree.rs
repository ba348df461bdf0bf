//! The tree at a revision, from git's objects, as an inode table: one `ls-tree` for the
//! whole tree, one `cat-file --batch` for the blobs small enough to be LFS pointers and for
//! symlink targets. Nothing of an LFS object is read.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use crate::MountError;
use git_xet_core::lfs::pointer::{Pointer, MAX_POINTER_SIZE};
use git_xet_git::command::Git;

/// Inode number of the root directory (FUSE's).
pub const ROOT: u64 = 1;

/// What a file's bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    /// A git blob (hex object id), read from git's objects.
    Blob(String),
    /// An LFS object; the blob was its pointer.
    Lfs(Pointer),
}

/// One node of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Dir {
        parent: u64,
        children: BTreeMap<OsString, u64>,
    },
    File {
        size: u64,
        executable: bool,
        content: Content,
    },
    Symlink {
        target: Vec<u8>,
    },
}

/// The nodes of a tree; inode `n` is `nodes[n - 1]`.
#[derive(Debug, Default)]
pub struct InodeTable {
    nodes: Vec<Node>,
}

impl InodeTable {
    fn new() -> InodeTable {
        InodeTable {
            nodes: vec![Node::Dir {
                parent: ROOT,
                children: BTreeMap::new(),
            }],
        }
    }

    pub fn get(&self, ino: u64) -> Option<&Node> {
        let index = usize::try_from(ino).ok()?.checked_sub(1)?;
        self.nodes.get(index)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn lookup(&self, parent: u64, name: &OsStr) -> Option<u64> {
        match self.get(parent)? {
            Node::Dir { children, .. } => children.get(name).copied(),
            _ => None,
        }
    }

    /// The inode of `path` (`a/b/c`, relative to the root).
    pub fn resolve(&self, path: &str) -> Option<u64> {
        path.split('/')
            .filter(|p| !p.is_empty())
            .try_fold(ROOT, |ino, name| self.lookup(ino, OsStr::new(name)))
    }

    /// Adds `node` at `path`, creating the directories on the way.
    fn insert(&mut self, path: &[u8], node: Node) -> Result<(), MountError> {
        let mut dir = ROOT;
        let mut parts = path.split(|&b| b == b'/').peekable();
        while let Some(name) = parts.next() {
            if name.is_empty() || name == b"." || name == b".." {
                return Err(MountError::BadTree(format!(
                    "path {:?} has an empty or relative component",
                    String::from_utf8_lossy(path)
                )));
            }
            let name = OsStr::from_bytes(name).to_os_string();
            let last = parts.peek().is_none();
            let existing = self.lookup(dir, &name);
            dir = match (existing, last) {
                (Some(ino), false) => ino,
                // ls-tree -t names a directory before its entries: the node is there.
                (Some(_), true) => return Ok(()),
                (None, _) => {
                    let node = if last {
                        node.clone()
                    } else {
                        Node::Dir {
                            parent: dir,
                            children: BTreeMap::new(),
                        }
                    };
                    self.nodes.push(node);
                    let ino = self.nodes.len() as u64;
                    match &mut self.nodes[(dir - 1) as usize] {
                        Node::Dir { children, .. } => {
                            children.insert(name, ino);
                        }
                        _ => {
                            return Err(MountError::BadTree(format!(
                                "{:?} is inside a file",
                                String::from_utf8_lossy(path)
                            )))
                        }
                    }
                    ino
                }
            };
        }
        Ok(())
    }
}

/// One `ls-tree -l` entry.
#[derive(Debug, PartialEq, Eq)]
struct Entry<'a> {
    mode: &'a str,
    kind: &'a str,
    oid: &'a str,
    size: Option<u64>,
    path: &'a [u8],
}

/// Parses `<mode> SP <type> SP <object> SP+ <size> TAB <path>` (NUL-terminated records).
fn parse_entry(record: &[u8]) -> Option<Entry<'_>> {
    let tab = record.iter().position(|&b| b == b'\t')?;
    let (head, path) = (
        std::str::from_utf8(&record[..tab]).ok()?,
        &record[tab + 1..],
    );
    let mut fields = head.split_whitespace();
    let (mode, kind, oid, size) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    if fields.next().is_some() || path.is_empty() {
        return None;
    }
    let size = match size {
        "-" => None,
        s => Some(s.parse().ok()?),
    };
    Some(Entry {
        mode,
        kind,
        oid,
        size,
        path,
    })
}

/// Splits `cat-file --batch` output into (oid, content) pairs, checking every length.
fn parse_batch(mut out: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, MountError> {
    let bad = |why: &str| MountError::BadTree(format!("git cat-file --batch: {why}"));
    let mut blobs = BTreeMap::new();
    while !out.is_empty() {
        let nl = out
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| bad("header without newline"))?;
        let header = std::str::from_utf8(&out[..nl]).map_err(|_| bad("header not UTF-8"))?;
        let mut f = header.split(' ');
        let (oid, _kind, size) = match (f.next(), f.next(), f.next()) {
            (Some(o), Some(k), Some(s)) => (o, k, s),
            _ => return Err(bad(&format!("unexpected header {header:?}"))),
        };
        let size: usize = size.parse().map_err(|_| bad("bad size"))?;
        let rest = &out[nl + 1..];
        // content, then a newline
        if size >= rest.len() {
            return Err(bad("content shorter than announced"));
        }
        blobs.insert(oid.to_string(), rest[..size].to_vec());
        out = &rest[size + 1..];
    }
    Ok(blobs)
}

/// The tree of `rev` in the repository `git` runs in.
pub fn load(git: &Git, rev: &str) -> Result<InodeTable, MountError> {
    let commit = git
        .run([
            "rev-parse",
            "--verify",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
        ])
        .map_err(|e| MountError::Revision {
            rev: rev.to_string(),
            source: Box::new(e),
        })?;
    let listing = git.run_bytes(
        ["ls-tree", "-r", "-t", "-l", "-z", "--full-tree", &commit],
        None,
    )?;
    let entries: Vec<Entry> = listing
        .split(|&b| b == 0)
        .filter(|r| !r.is_empty())
        .map(|r| {
            parse_entry(r).ok_or_else(|| {
                MountError::BadTree(format!(
                    "unexpected ls-tree line {:?}",
                    String::from_utf8_lossy(r)
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    // Blobs small enough to be pointers, and symlink targets.
    let wanted: Vec<&str> = entries
        .iter()
        .filter(|e| {
            e.kind == "blob"
                && (e.mode == "120000" || e.size.is_some_and(|s| s <= MAX_POINTER_SIZE as u64))
        })
        .map(|e| e.oid)
        .collect();
    let small = if wanted.is_empty() {
        BTreeMap::new()
    } else {
        let input = wanted.join("\n") + "\n";
        parse_batch(&git.run_bytes(["cat-file", "--batch"], Some(input.as_bytes()))?)?
    };
    let mut table = InodeTable::new();
    for e in &entries {
        let node = match (e.kind, e.mode) {
            ("tree", _) | ("commit", _) => Node::Dir {
                parent: ROOT, // fixed below
                children: BTreeMap::new(),
            },
            ("blob", "120000") => Node::Symlink {
                target: small.get(e.oid).cloned().unwrap_or_default(),
            },
            ("blob", mode) => {
                let size = e.size.unwrap_or(0);
                let pointer = small.get(e.oid).and_then(|b| Pointer::parse(b).ok());
                Node::File {
                    size: pointer.as_ref().map_or(size, |p| p.size),
                    executable: mode == "100755",
                    content: match pointer {
                        Some(p) => Content::Lfs(p),
                        None => Content::Blob(e.oid.to_string()),
                    },
                }
            }
            _ => continue,
        };
        table.insert(e.path, node)?;
    }
    // Directories from ls-tree were inserted with a placeholder parent: set the real one.
    let mut parents = Vec::new();
    for (i, node) in table.nodes.iter().enumerate() {
        if let Node::Dir { children, .. } = node {
            parents.extend(children.values().map(|&c| (c, i as u64 + 1)));
        }
    }
    for (child, parent) in parents {
        if let Some(Node::Dir { parent: p, .. }) = table.nodes.get_mut((child - 1) as usize) {
            *p = parent;
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ls_tree_entries_parse_strictly() {
        let e = parse_entry(b"100755 blob 0123abcd     1234\tbin/run.sh").unwrap();
        assert_eq!(
            (e.mode, e.kind, e.oid, e.size, e.path),
            ("100755", "blob", "0123abcd", Some(1234), &b"bin/run.sh"[..])
        );
        let t = parse_entry(b"040000 tree abcd       -\tbin").unwrap();
        assert_eq!(t.size, None);
        for bad in [
            &b"100644 blob abc 12"[..],
            b"100644 blob abc x\tp",
            b"100644 blob abc 1 2\tp",
            b"100644 blob abc 1\t",
            b"",
        ] {
            assert!(parse_entry(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn batch_output_is_length_checked() {
        let ok = parse_batch(b"aa blob 3\nabc\nbb blob 0\n\n").unwrap();
        assert_eq!(ok["aa"], b"abc");
        assert_eq!(ok["bb"], b"");
        assert!(parse_batch(b"aa blob 5\nabc\n").is_err());
        assert!(parse_batch(b"aa blob x\nabc\n").is_err());
        assert!(parse_batch(b"aa blob 3").is_err());
    }

    #[test]
    fn inserting_builds_directories_and_refuses_odd_paths() {
        let mut t = InodeTable::new();
        let file = Node::Symlink {
            target: b"x".to_vec(),
        };
        t.insert(b"a/b/c", file.clone()).unwrap();
        assert_eq!(t.get(t.resolve("a/b/c").unwrap()), Some(&file));
        assert!(t.resolve("a/x").is_none());
        assert!(t.insert(b"a/../c", file.clone()).is_err());
        assert!(t.insert(b"a//c", file.clone()).is_err());
        assert!(t.insert(b"a/b/c/d", file).is_err(), "c is a file");
        assert!(t.get(0).is_none() && t.get(99).is_none());
    }
}
