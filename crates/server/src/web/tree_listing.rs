//! A directory's entries for the listing pages, from its raw tree object (`git cat-file
//! tree`: no formatting in git, and about half of `ls-tree`'s bytes), parsed here and
//! ordered directories first, then by name. Large directories are kept (a commit and a path
//! name one tree forever, so a kept listing never goes stale): paging through a directory
//! of 100,000 files reads its tree once, and memory stays under [`KEPT_BYTES`]. The last
//! commit that changed a directory is kept the same way.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use hashlink::LruCache;

use super::gitview::{Commit, Kind};
use crate::error::ServerResult;
use crate::hub::gitread::run;

/// Directories with fewer entries are read again each time (cheap, and not worth a place).
const KEEP_FROM: usize = 2_000;
/// The most bytes kept listings take, all repositories together.
const KEPT_BYTES: usize = 64 << 20;

/// A directory's entries, in page order.
pub struct Entries {
    raw: Vec<u8>,
    order: Vec<Record>,
    /// Files whose names start with `readme` (any case): index into `order`.
    readmes: Vec<usize>,
}

#[derive(Clone)]
struct Record {
    kind: Kind,
    name: Range<usize>,
    oid: Range<usize>,
}

/// One entry as a page uses it.
pub struct Entry<'a> {
    pub kind: Kind,
    pub name: &'a str,
    pub oid: String,
}

impl Entries {
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Entries `range` (clamped to the directory).
    pub fn slice(&self, range: Range<usize>) -> Vec<Entry<'_>> {
        let end = range.end.min(self.order.len());
        let start = range.start.min(end);
        self.order[start..end]
            .iter()
            .map(|r| self.entry(r))
            .collect()
    }

    /// The files whose names start with `readme`, any case.
    pub fn readmes(&self) -> Vec<Entry<'_>> {
        self.readmes
            .iter()
            .map(|&i| self.entry(&self.order[i]))
            .collect()
    }

    fn entry(&self, r: &Record) -> Entry<'_> {
        Entry {
            kind: r.kind,
            // Checked to be UTF-8 when parsed.
            name: std::str::from_utf8(&self.raw[r.name.clone()]).unwrap_or_default(),
            oid: self.raw[r.oid.clone()]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        }
    }

    fn bytes(&self) -> usize {
        self.raw.len() + self.order.len() * std::mem::size_of::<Record>()
    }
}

/// Parses a raw tree object whose object ids are `hash_len` bytes (20 for SHA-1, 32 for
/// SHA-256). Entries whose name is not UTF-8 are left out (the Hub and these pages name
/// files by strings), and so are unknown modes; a truncated record ends the listing.
pub fn parse(raw: Vec<u8>, hash_len: usize) -> Entries {
    let mut order = Vec::new();
    let mut at = 0;
    while at < raw.len() {
        let Some(space) = raw[at..].iter().position(|&b| b == b' ') else {
            break;
        };
        let mode = &raw[at..at + space];
        let name_start = at + space + 1;
        let Some(nul) = raw[name_start..].iter().position(|&b| b == 0) else {
            break;
        };
        let name = name_start..name_start + nul;
        let oid = name.end + 1..name.end + 1 + hash_len;
        if oid.end > raw.len() {
            break;
        }
        at = oid.end;
        let kind = match mode {
            b"40000" => Kind::Dir,
            b"160000" => Kind::Submodule,
            b"120000" => Kind::Symlink,
            b"100644" | b"100755" | b"100664" => Kind::File,
            _ => continue,
        };
        if std::str::from_utf8(&raw[name.clone()]).is_ok() {
            order.push(Record { kind, name, oid });
        }
    }
    // git keeps a tree sorted by name (a directory's with a `/` after it), so this is
    // close to linear.
    order.sort_by(|a, b| {
        (a.kind != Kind::Dir)
            .cmp(&(b.kind != Kind::Dir))
            .then_with(|| raw[a.name.clone()].cmp(&raw[b.name.clone()]))
    });
    let readmes = order
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.kind == Kind::File
                && raw[r.name.clone()]
                    .get(..6)
                    .is_some_and(|p| p.eq_ignore_ascii_case(b"readme"))
        })
        .map(|(i, _)| i)
        .collect();
    Entries {
        raw,
        order,
        readmes,
    }
}

/// (repository, commit, path): one tree forever.
type Key = (PathBuf, String, String);

struct Kept {
    lru: LruCache<Key, Arc<Entries>>,
    bytes: usize,
}

static KEPT: LazyLock<Mutex<Kept>> = LazyLock::new(|| {
    Mutex::new(Kept {
        lru: LruCache::new_unbounded(),
        bytes: 0,
    })
});

/// The entries of the directory `path` ("" the root) of `commit` (a full commit id) in the
/// bare repository `dir`; `None` when that is not a directory.
pub async fn entries(dir: &Path, commit: &str, path: &str) -> ServerResult<Option<Arc<Entries>>> {
    let key: Key = (dir.to_path_buf(), commit.to_string(), path.to_string());
    if let Some(kept) = KEPT.lock().ok().and_then(|mut k| k.lru.get(&key).cloned()) {
        return Ok(Some(kept));
    }
    let treeish = match path {
        "" => format!("{commit}^{{tree}}"),
        p => format!("{commit}:{p}"),
    };
    let out = run(dir, &["cat-file", "tree", &treeish]).await?;
    if !out.status.success() {
        return Ok(None);
    }
    // A commit id is the repository's hash in hex: 40 digits (SHA-1) or 64 (SHA-256).
    let entries = Arc::new(parse(out.stdout, commit.len() / 2));
    if entries.len() >= KEEP_FROM && entries.bytes() <= KEPT_BYTES / 4 {
        if let Ok(mut kept) = KEPT.lock() {
            kept.bytes += entries.bytes();
            if let Some(old) = kept.lru.insert(key, entries.clone()) {
                kept.bytes -= old.bytes();
            }
            while kept.bytes > KEPT_BYTES {
                match kept.lru.remove_lru() {
                    Some((_, old)) => kept.bytes -= old.bytes(),
                    None => break,
                }
            }
        }
    }
    Ok(Some(entries))
}

/// Last changes kept (each a few hundred bytes: a commit whose summary is longer is not).
const KEPT_CHANGES: usize = 4096;
const KEPT_CHANGE_BYTES: usize = 2048;

static LAST_CHANGES: LazyLock<Mutex<LruCache<Key, Commit>>> =
    LazyLock::new(|| Mutex::new(LruCache::new(KEPT_CHANGES)));

/// The last commit up to `commit` that changed the directory `path` (not "": the root's is
/// `commit`). Kept: git finds it by comparing the directory's trees commit after commit,
/// which for a directory of 100,000 files costs more than reading its listing.
pub async fn last_change(dir: &Path, commit: &str, path: &str) -> ServerResult<Option<Commit>> {
    let key: Key = (dir.to_path_buf(), commit.to_string(), path.to_string());
    if let Some(kept) = LAST_CHANGES
        .lock()
        .ok()
        .and_then(|mut k| k.get(&key).cloned())
    {
        return Ok(Some(kept));
    }
    let last = super::gitview::log(dir, commit, Some(path), 0, 1)
        .await?
        .pop();
    if let Some(c) = &last {
        let bytes = c.sha.len() + c.author.len() + c.subject.len() + c.parents.len() * 64;
        if bytes <= KEPT_CHANGE_BYTES {
            if let Ok(mut kept) = LAST_CHANGES.lock() {
                kept.insert(key, c.clone());
            }
        }
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(mode: &str, name: &[u8], oid: u8) -> Vec<u8> {
        let mut out = format!("{mode} ").into_bytes();
        out.extend_from_slice(name);
        out.push(0);
        out.extend_from_slice(&[oid; 20]);
        out
    }

    #[test]
    fn directories_first_then_names_and_junk_is_left_out() {
        let mut raw = Vec::new();
        for (mode, name, oid) in [
            ("100644", &b"README.md"[..], 1),
            ("40000", b"a-b", 2),
            ("40000", b"a", 3),
            ("100755", b"run.sh", 4),
            ("120000", b"link", 5),
            ("160000", b"sub", 6),
            ("100644", b"\xff\xfe", 7),
            ("777", b"odd", 8),
            ("100644", b"readme.txt", 9),
        ] {
            raw.extend(record(mode, name, oid));
        }
        // A truncated record at the end.
        raw.extend_from_slice(b"100644 cut\0\x01\x02");
        let entries = parse(raw, 20);
        let names: Vec<(Kind, String)> = entries
            .slice(0..100)
            .into_iter()
            .map(|e| (e.kind, e.name.to_string()))
            .collect();
        assert_eq!(
            names,
            [
                (Kind::Dir, "a".to_string()),
                (Kind::Dir, "a-b".into()),
                (Kind::File, "README.md".into()),
                (Kind::Symlink, "link".into()),
                (Kind::File, "readme.txt".into()),
                (Kind::File, "run.sh".into()),
                (Kind::Submodule, "sub".into()),
            ]
        );
        assert_eq!(entries.slice(1..2)[0].oid, "02".repeat(20));
        assert_eq!(entries.slice(5..99).len(), 2);
        assert!(entries.slice(50..60).is_empty());
        let readmes: Vec<&str> = entries.readmes().iter().map(|e| e.name).collect();
        assert_eq!(readmes, ["README.md", "readme.txt"]);
        // Garbage of every length never panics.
        for len in 0..40 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 % 256) as u8).collect();
            let _ = parse(junk, 32).len();
        }
    }
}
