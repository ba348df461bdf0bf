//! A directory's entries for the listing pages, from its raw tree object (`git cat-file
//! tree`: no formatting in git, and about half of `ls-tree`'s bytes), parsed here and
//! ordered directories first, then by name. Large directories are kept (a commit and a path
//! name one tree forever, so a kept listing never goes stale): paging through a directory
//! of 100,000 files reads its tree once, and memory stays under [`KEPT_BYTES`]. The last
//! commit that changed a directory is kept the same way; it is looked up in the background,
//! beside the listing, so that a large directory's page need not wait for it.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use hashlink::LruCache;
use tokio::sync::watch;
use tokio::time::Instant;

use super::gitview::{Commit, Kind};
use crate::error::{ServerError, ServerResult};
use crate::hub::gitread::run;

/// Directories with fewer entries are read again each time (cheap, and not worth a place),
/// and their pages wait for their last change.
pub const KEEP_FROM: usize = 2_000;
/// The most bytes kept listings take, all repositories together.
const KEPT_BYTES: usize = 64 << 20;

/// A directory's entries, in page order: its directories, then the rest, each by name.
pub struct Entries {
    raw: Vec<u8>,
    /// Bytes of an object id in `raw` (20 for SHA-1, 32 for SHA-256).
    hash_len: usize,
    dirs: Vec<Record>,
    rest: Vec<Record>,
    /// Files whose names start with `readme` (any case): index in page order.
    readmes: Vec<usize>,
}

/// An entry: its name at `name..name + len` in the raw tree, its object id right after the
/// name's NUL.
#[derive(Clone, Copy)]
struct Record {
    name: usize,
    len: u32,
    kind: Kind,
}

/// One entry as a page uses it.
pub struct Entry<'a> {
    pub kind: Kind,
    pub name: &'a str,
    pub oid: String,
}

impl Entries {
    pub fn len(&self) -> usize {
        self.dirs.len() + self.rest.len()
    }

    /// Entries `range` (clamped to the directory).
    pub fn slice(&self, range: Range<usize>) -> Vec<Entry<'_>> {
        let end = range.end.min(self.len());
        let start = range.start.min(end);
        (start..end).map(|i| self.entry(self.record(i))).collect()
    }

    /// The files whose names start with `readme`, any case.
    pub fn readmes(&self) -> Vec<Entry<'_>> {
        self.readmes
            .iter()
            .map(|&i| self.entry(self.record(i)))
            .collect()
    }

    fn record(&self, i: usize) -> &Record {
        match i.checked_sub(self.dirs.len()) {
            None => &self.dirs[i],
            Some(i) => &self.rest[i],
        }
    }

    fn name(&self, r: &Record) -> &[u8] {
        &self.raw[r.name..r.name + r.len as usize]
    }

    fn entry(&self, r: &Record) -> Entry<'_> {
        let oid = r.name + r.len as usize + 1;
        Entry {
            kind: r.kind,
            // Checked to be UTF-8 when parsed.
            name: std::str::from_utf8(self.name(r)).unwrap_or_default(),
            oid: hex(&self.raw[oid..oid + self.hash_len]),
        }
    }

    fn bytes(&self) -> usize {
        self.raw.len() + (self.dirs.capacity() + self.rest.capacity()) * size_of::<Record>()
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// Parses a raw tree object whose object ids are `hash_len` bytes (20 for SHA-1, 32 for
/// SHA-256). Entries whose name is not UTF-8 are left out (the Hub and these pages name
/// files by strings), and so are unknown modes; a truncated record ends the listing.
///
/// One pass over the bytes, no allocation per entry: git keeps a tree sorted by name (a
/// directory's name compared with a `/` after it), so the entries that are not directories
/// come already in page order (checked as they come, sorted only if a tree was not); the
/// directories, usually few, are sorted.
pub fn parse(raw: Vec<u8>, hash_len: usize) -> Entries {
    let (mut dirs, mut rest) = (Vec::new(), Vec::new());
    let mut in_order = true;
    let mut previous: Option<Range<usize>> = None;
    let mut at = 0;
    while at < raw.len() {
        // A mode is at most 6 octal digits.
        let Some(space) = raw[at..raw.len().min(at + 7)]
            .iter()
            .position(|&b| b == b' ')
        else {
            break;
        };
        let mode = &raw[at..at + space];
        let name = at + space + 1;
        let (mut end, mut high) = (name, 0u8);
        while end < raw.len() && raw[end] != 0 {
            high |= raw[end];
            end += 1;
        }
        if end + 1 + hash_len > raw.len() {
            break;
        }
        at = end + 1 + hash_len;
        let kind = match mode {
            b"40000" => Kind::Dir,
            b"160000" => Kind::Submodule,
            b"120000" => Kind::Symlink,
            b"100644" | b"100755" | b"100664" => Kind::File,
            _ => continue,
        };
        let Ok(len) = u32::try_from(end - name) else {
            continue;
        };
        // ASCII names (most) need no further check.
        if high >= 0x80 && std::str::from_utf8(&raw[name..end]).is_err() {
            continue;
        }
        let record = Record { name, len, kind };
        if kind == Kind::Dir {
            dirs.push(record);
            continue;
        }
        if let Some(p) = previous.as_ref().filter(|_| in_order) {
            in_order = raw[p.clone()] <= raw[name..end];
        }
        previous = Some(name..end);
        rest.push(record);
    }
    let by_name = |a: &Record, b: &Record| {
        raw[a.name..a.name + a.len as usize].cmp(&raw[b.name..b.name + b.len as usize])
    };
    dirs.sort_by(by_name);
    if !in_order {
        rest.sort_by(by_name);
    }
    let readmes = rest
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.kind == Kind::File
                && raw[r.name..r.name + r.len as usize]
                    .get(..6)
                    .is_some_and(|p| p.eq_ignore_ascii_case(b"readme"))
        })
        .map(|(i, _)| dirs.len() + i)
        .collect();
    Entries {
        raw,
        hash_len,
        dirs,
        rest,
        readmes,
    }
}

/// (repository, commit, path): one tree forever.
pub type Key = (PathBuf, String, String);

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
/// Last-change lookups running in the background at most, all repositories together (each
/// one `git log`). Past them a page looks up its directory's last change itself, as if
/// there were no background.
const BACKGROUND_LOOKUPS: usize = 4;

static LAST_CHANGES: LazyLock<Mutex<LruCache<Key, Commit>>> =
    LazyLock::new(|| Mutex::new(LruCache::new(KEPT_CHANGES)));

/// A lookup's answer once it has one (an error as its message).
type Found = Option<Result<Option<Commit>, String>>;

/// The lookups running in the background, so that pages asking for the same directory
/// share one.
static LOOKING_UP: LazyLock<Mutex<HashMap<Key, watch::Receiver<Found>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The last commit that changed a directory: known, being looked up in the background, or
/// to be looked up by whoever waits for it.
pub enum LastChange {
    Known(Option<Commit>),
    Running(watch::Receiver<Found>),
    Inline(Key),
}

/// Starts finding the last commit up to `commit` that changed the directory `path` (not
/// "": the root's is `commit`). Kept: git finds it by comparing the directory's trees
/// commit after commit, which for a directory of 100,000 files costs more than reading its
/// listing; so it runs beside the listing, in the background (at most
/// [`BACKGROUND_LOOKUPS`] at once), and a page that stops waiting for it leaves it to finish
/// and be kept for the next one.
pub fn last_change(dir: &Path, commit: &str, path: &str) -> LastChange {
    let key: Key = (dir.to_path_buf(), commit.to_string(), path.to_string());
    if let Some(kept) = LAST_CHANGES
        .lock()
        .ok()
        .and_then(|mut k| k.get(&key).cloned())
    {
        return LastChange::Known(Some(kept));
    }
    let Ok(mut running) = LOOKING_UP.lock() else {
        return LastChange::Inline(key);
    };
    if let Some(found) = running.get(&key) {
        return LastChange::Running(found.clone());
    }
    if running.len() >= BACKGROUND_LOOKUPS {
        return LastChange::Inline(key);
    }
    let (answer, found) = watch::channel(None);
    running.insert(key.clone(), found.clone());
    drop(running);
    let (dir, commit, path) = key.clone();
    tokio::spawn(async move {
        // However this task ends, its lookup no longer runs.
        let running = Running(key);
        let result = match super::gitview::object_type(&dir, &commit, &path).await {
            // Started before the page knew the path is a directory: no walk for another.
            Ok(Some(kind)) if kind == "tree" => look_up(&running.0).await,
            Ok(_) => Ok(None),
            Err(e) => Err(e),
        };
        let result = result.map_err(|e| e.to_string());
        // Kept first, then no longer running: a page asking meanwhile finds one or the other.
        drop(running);
        let _ = answer.send(Some(result));
    });
    LastChange::Running(found)
}

/// A background lookup, removed from [`LOOKING_UP`] when dropped.
struct Running(Key);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(mut running) = LOOKING_UP.lock() {
            running.remove(&self.0);
        }
    }
}

impl LastChange {
    /// The last change, or `None` when `deadline` (if any) comes first: the lookup then goes
    /// on without this page.
    pub async fn wait(self, deadline: Option<Instant>) -> ServerResult<Option<Option<Commit>>> {
        let mut found = match self {
            LastChange::Known(last) => return Ok(Some(last)),
            LastChange::Inline(key) => return look_up(&key).await.map(Some),
            LastChange::Running(found) => found,
        };
        let answer = async { found.wait_for(Option::is_some).await.map(|f| f.clone()) };
        let answer = match deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, answer).await {
                Ok(answer) => answer,
                Err(_) => return Ok(None),
            },
            None => answer.await,
        };
        match answer {
            Ok(Some(Ok(last))) => Ok(Some(last)),
            Ok(Some(Err(e))) => Err(ServerError::internal(e)),
            // The task ended without an answer: the server is stopping.
            Ok(None) | Err(_) => Err(ServerError::internal("a last-change lookup stopped")),
        }
    }
}

/// Asks git for the last change of `path` up to `commit`, and keeps it.
async fn look_up(key: &Key) -> ServerResult<Option<Commit>> {
    pause().await;
    let (dir, commit, path) = key;
    let last = super::gitview::log(dir, commit, Some(path), 0, 1)
        .await?
        .pop();
    if let Some(c) = &last {
        let bytes = c.sha.len() + c.author.len() + c.subject.len() + c.parents.len() * 64;
        if bytes <= KEPT_CHANGE_BYTES {
            if let Ok(mut kept) = LAST_CHANGES.lock() {
                kept.insert(key.clone(), c.clone());
            }
        }
    }
    Ok(last)
}

/// Test hook (with the `test-hooks` feature): with `GIT_XET_WEB_TEST_PAUSE` naming a
/// directory, a last-change lookup creates `last-change.reached` there and waits (up to two
/// minutes) for `last-change.go` before it asks git, so that a test sees a page that does
/// not wait for it.
#[cfg(feature = "test-hooks")]
async fn pause() {
    if let Some(dir) = std::env::var_os("GIT_XET_WEB_TEST_PAUSE") {
        git_xet_io::test_pause::reached(Path::new(&dir), "last-change", "web pause").await;
    }
}

/// Without the `test-hooks` feature a lookup never pauses.
#[cfg(not(feature = "test-hooks"))]
async fn pause() {}

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
        // Every entry's own object id.
        let oids: Vec<String> = entries.slice(0..7).into_iter().map(|e| e.oid).collect();
        let want: Vec<String> = [3, 2, 1, 5, 9, 4, 6]
            .iter()
            .map(|&b: &u8| format!("{b:02x}").repeat(20))
            .collect();
        assert_eq!(oids, want);
        // Garbage of every length never panics.
        for len in 0..40 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 % 256) as u8).collect();
            let _ = parse(junk, 32).len();
        }
    }

    /// A tree as git writes it: by name, a directory's name compared with a `/` after it
    /// (so `a-b/` before `a/`), here with SHA-256 ids and names beyond ASCII.
    #[test]
    fn a_tree_in_git_order_lists_directories_first_then_by_name() {
        let record = |mode: &str, name: &str, oid: u8| {
            let mut out = format!("{mode} {name}\0").into_bytes();
            out.extend_from_slice(&[oid; 32]);
            out
        };
        let git_order = [
            ("100644", "Z.txt", 1),
            ("40000", "a-b", 2),
            ("100644", "a.txt", 3),
            ("40000", "a", 4),
            ("100644", "readme", 5),
            ("100644", "\u{e9}t\u{e9}.txt", 6),
            ("100644", "\u{1f600}", 7),
        ];
        let raw: Vec<u8> = git_order
            .iter()
            .flat_map(|&(mode, name, oid)| record(mode, name, oid))
            .collect();
        let entries = parse(raw, 32);
        let listed: Vec<(Kind, String, String)> = entries
            .slice(0..10)
            .into_iter()
            .map(|e| (e.kind, e.name.to_string(), e.oid))
            .collect();
        let want: Vec<(Kind, String, String)> = [
            (Kind::Dir, "a", 4),
            (Kind::Dir, "a-b", 2),
            (Kind::File, "Z.txt", 1),
            (Kind::File, "a.txt", 3),
            (Kind::File, "readme", 5),
            (Kind::File, "\u{e9}t\u{e9}.txt", 6),
            (Kind::File, "\u{1f600}", 7),
        ]
        .into_iter()
        .map(|(k, n, o)| (k, n.to_string(), format!("{o:02x}").repeat(32)))
        .collect();
        assert_eq!(listed, want);
        assert_eq!(entries.len(), 7);
        assert_eq!(entries.slice(3..5)[1].name, "readme");
        let readmes: Vec<&str> = entries.readmes().iter().map(|e| e.name).collect();
        assert_eq!(readmes, ["readme"]);
    }

    #[tokio::test]
    async fn a_page_stops_waiting_for_a_lookup_at_its_deadline() {
        let (answer, found) = watch::channel(None);
        let soon = Instant::now() + std::time::Duration::from_millis(20);
        let pending = LastChange::Running(found.clone()).wait(Some(soon)).await;
        assert!(matches!(pending, Ok(None)));
        let commit = Commit {
            sha: "c".repeat(40),
            parents: Vec::new(),
            author: "Ann".into(),
            time: 1,
            subject: "s".into(),
        };
        answer.send(Some(Ok(Some(commit)))).unwrap();
        let soon = Instant::now() + std::time::Duration::from_millis(20);
        let known = LastChange::Running(found.clone()).wait(Some(soon)).await;
        assert_eq!(known.unwrap().unwrap().unwrap().sha, "c".repeat(40));
        let (answer, found) = watch::channel(None);
        drop(answer);
        assert!(LastChange::Running(found).wait(None).await.is_err());
    }
}
