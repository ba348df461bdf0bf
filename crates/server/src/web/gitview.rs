//! What the web pages read from a hosted bare repository with git's plumbing: a directory
//! listed a page at a time (names from its tree object, tree_listing.rs; sizes and LFS
//! pointers only for the page's entries, so a 100,000-file directory costs one tree read), commits, a commit's
//! changes, a file's versions, and the first bytes of a blob. Revisions reach git only
//! after `gitread::resolve` (a commit id), paths as literal pathspecs or `commit:path`.

use std::path::Path;
use std::process::Stdio;

use tokio::io::AsyncReadExt;

use git_xet_core::lfs::pointer::{Pointer, MAX_POINTER_SIZE};

use super::tree_listing;
use crate::error::{ServerError, ServerResult};
use crate::git::cat_file;
use crate::hub::gitread::{git, run, run_with_input, succeeded};

/// An entry of a directory listing with what the page shows of it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: String,
    pub oid: String,
    pub kind: Kind,
    /// Blob size in git (the pointer's own size for LFS files).
    pub size: Option<u64>,
    pub pointer: Option<Pointer>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    Submodule,
}

/// One page of a directory, directories first then by name, and the directory's length.
pub struct DirPage {
    pub entries: Vec<Listed>,
    pub total: usize,
    /// The files whose names start with `readme` (any case), and their blob ids.
    pub names: Vec<(String, String)>,
    /// Whether the directory is large (its listing is kept).
    pub large: bool,
}

/// What a `commit:path` names.
pub async fn object_type(dir: &Path, commit: &str, path: &str) -> ServerResult<Option<String>> {
    let spec = format!("{commit}:{path}");
    let out = run(dir, &["cat-file", "-t", &spec]).await?;
    let kind = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(out.status.success().then_some(kind))
}

/// Page `page` of the directory `prefix` ("" the root) of `commit`, or `None` when that is
/// not a directory.
pub async fn list_page(
    dir: &Path,
    commit: &str,
    prefix: &str,
    page: usize,
    per_page: usize,
) -> ServerResult<Option<DirPage>> {
    let Some(all) = tree_listing::entries(dir, commit, prefix).await? else {
        return Ok(None);
    };
    let start = page.saturating_mul(per_page);
    let mut entries: Vec<Listed> = all
        .slice(start..start.saturating_add(per_page))
        .into_iter()
        .map(|e| Listed {
            name: e.name.to_string(),
            oid: e.oid,
            kind: e.kind,
            size: None,
            pointer: None,
        })
        .collect();
    let names = all
        .readmes()
        .into_iter()
        .map(|e| (e.name.to_string(), e.oid))
        .collect();
    let blobs: Vec<usize> = (0..entries.len())
        .filter(|&i| matches!(entries[i].kind, Kind::File | Kind::Symlink))
        .collect();
    let oids: Vec<String> = blobs.iter().map(|&i| entries[i].oid.clone()).collect();
    let found = self::blobs(dir, &oids).await?;
    for (&i, blob) in blobs.iter().zip(found) {
        entries[i].size = blob.map(|(_, size)| size);
    }
    let small: Vec<usize> = blobs
        .into_iter()
        .filter(|&i| entries[i].kind == Kind::File)
        .filter(|&i| {
            entries[i]
                .size
                .is_some_and(|s| s <= MAX_POINTER_SIZE as u64)
        })
        .collect();
    let oids: Vec<String> = small.iter().map(|&i| entries[i].oid.clone()).collect();
    for (&i, pointer) in small.iter().zip(pointers(dir, &oids).await?) {
        entries[i].pointer = pointer;
    }
    Ok(Some(DirPage {
        entries,
        total: all.len(),
        names,
        large: all.len() >= tree_listing::KEEP_FROM,
    }))
}

/// The blob ids and sizes of objects named by id or `commit:path` (one `cat-file
/// --batch-check`); `None` for a missing one or one that is not a blob.
pub async fn blobs(dir: &Path, names: &[String]) -> ServerResult<Vec<Option<(String, u64)>>> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let mut cmd = git(dir);
    cmd.args([
        "cat-file",
        "--batch-check=%(objectname) %(objecttype) %(objectsize)",
    ]);
    let input = names.iter().map(|n| format!("{n}\n")).collect::<String>();
    let out = run_with_input(cmd, input.into_bytes()).await?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    Ok(names
        .iter()
        .map(|_| {
            let mut f = lines.next()?.split(' ');
            let (oid, kind, size) = (f.next()?, f.next()?, f.next()?);
            (kind == "blob").then(|| Some((oid.to_string(), size.parse().ok()?)))?
        })
        .collect())
}

/// The LFS pointers among small blobs (one `cat-file --batch`), in order.
pub async fn pointers(dir: &Path, oids: &[String]) -> ServerResult<Vec<Option<Pointer>>> {
    let mut found = vec![None; oids.len()];
    if oids.is_empty() {
        return Ok(found);
    }
    let mut cmd = git(dir);
    cmd.args(["cat-file", "--batch"]);
    let input = oids.iter().map(|o| format!("{o}\n")).collect::<String>();
    let out = run_with_input(cmd, input.into_bytes()).await?;
    for (slot, body) in found.iter_mut().zip(cat_file::objects(&out.stdout)) {
        if let Some(body) = body.filter(|b| b.len() <= MAX_POINTER_SIZE) {
            *slot = Pointer::detect(body);
        }
    }
    Ok(found)
}

/// The first `max` bytes of a blob, without reading the rest (git is stopped).
pub async fn blob_prefix(dir: &Path, oid: &str, max: u64) -> ServerResult<Vec<u8>> {
    let mut child = git(dir)
        .args(["cat-file", "blob", oid])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| ServerError::internal(format!("running git: {e}")))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut bytes = Vec::new();
    stdout
        .take(max)
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| ServerError::internal(format!("reading blob {oid}: {e}")))?;
    let _ = child.start_kill();
    let _ = child.wait().await;
    Ok(bytes)
}

/// A commit as lists show it, and its whole message.
#[derive(Debug, Clone)]
pub struct Commit {
    pub sha: String,
    pub parents: Vec<String>,
    pub author: String,
    pub time: i64,
    pub subject: String,
}

const LOG_FORMAT: &str = "--format=tformat:%H%x00%P%x00%an%x00%at%x00%s";

fn parse_log(out: &[u8]) -> Vec<Commit> {
    String::from_utf8_lossy(out)
        .split('\n')
        .filter_map(|line| {
            let f: Vec<&str> = line.split('\0').collect();
            let [sha, parents, author, time, subject] = f.as_slice() else {
                return None;
            };
            Some(Commit {
                sha: sha.to_string(),
                parents: parents.split_whitespace().map(str::to_string).collect(),
                author: author.to_string(),
                time: time.parse().unwrap_or(0),
                subject: subject.to_string(),
            })
        })
        .collect()
}

/// Commits reachable from `commit` (touching `path` when given), `count` after skipping
/// `skip`, newest first.
pub async fn log(
    dir: &Path,
    commit: &str,
    path: Option<&str>,
    skip: usize,
    count: usize,
) -> ServerResult<Vec<Commit>> {
    let skip = format!("--skip={skip}");
    let count = format!("--max-count={count}");
    let mut args = vec!["log", LOG_FORMAT, &skip, &count, commit, "--"];
    args.extend(path);
    Ok(parse_log(&succeeded(&args, run(dir, &args).await?)?))
}

/// One commit and the body of its message (after the subject).
pub async fn commit(dir: &Path, sha: &str) -> ServerResult<(Commit, String)> {
    let args = ["log", "-1", LOG_FORMAT, sha, "--"];
    let summary = parse_log(&succeeded(&args, run(dir, &args).await?)?)
        .pop()
        .ok_or_else(|| ServerError::not_found(format!("no commit {sha}")))?;
    let args = ["log", "-1", "--format=%b", sha, "--"];
    let body = String::from_utf8_lossy(&succeeded(&args, run(dir, &args).await?)?).into_owned();
    Ok((summary, body))
}

/// A path a commit changed: status letter, path, and the blob ids before and after.
#[derive(Debug, Clone)]
pub struct RawChange {
    pub status: char,
    pub path: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

/// What `sha` changed against its first parent (every path, for a root commit): the first
/// `limit` changes and how many there are.
pub async fn changes(
    dir: &Path,
    sha: &str,
    parent: Option<&str>,
    limit: usize,
) -> ServerResult<(Vec<RawChange>, usize)> {
    let mut args = vec!["diff-tree", "-r", "-z", "--raw", "--no-commit-id"];
    match parent {
        Some(p) => args.extend([p, sha]),
        None => args.extend(["--root", sha]),
    }
    let out = succeeded(&args, run(dir, &args).await?)?;
    Ok(parse_raw(&out, limit))
}

/// `:<mode> <mode> <oid> <oid> <status>\0<path>\0` records (no renames: `-M` is not asked).
fn parse_raw(out: &[u8], limit: usize) -> (Vec<RawChange>, usize) {
    let mut fields = out.split(|&b| b == 0);
    let (mut listed, mut total) = (Vec::new(), 0);
    while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
        let meta = String::from_utf8_lossy(meta);
        let f: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        let [_, _, old, new, status] = f.as_slice() else {
            continue;
        };
        let Ok(path) = std::str::from_utf8(path) else {
            continue;
        };
        total += 1;
        if listed.len() < limit {
            let blob = |oid: &str| (!oid.bytes().all(|b| b == b'0')).then(|| oid.to_string());
            listed.push(RawChange {
                status: status.chars().next().unwrap_or('M'),
                path: path.to_string(),
                old: blob(old),
                new: blob(new),
            });
        }
    }
    (listed, total)
}

/// The blob ids a push brought: paths added or modified between `old` and `new` (from
/// the empty tree when the ref is new), at most `limit`.
pub async fn pushed_blobs(
    dir: &Path,
    old: &str,
    new: &str,
    limit: usize,
) -> ServerResult<Vec<String>> {
    const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
    let old = match old.bytes().all(|b| b == b'0') {
        true => EMPTY_TREE,
        false => old,
    };
    let args = ["diff-tree", "-r", "-z", "--raw", old, new];
    let out = run(dir, &args).await?;
    if !out.status.success() {
        // A ref whose old commit was since collected: nothing known of that push.
        return Ok(Vec::new());
    }
    let (changes, _) = parse_raw(&out.stdout, limit);
    Ok(changes.into_iter().filter_map(|c| c.new).collect())
}

/// The symbolic name of HEAD (the default branch), if it names a branch.
pub async fn default_branch(dir: &Path) -> ServerResult<Option<String>> {
    let out = run(dir, &["symbolic-ref", "-q", "--short", "HEAD"]).await?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok((out.status.success() && !name.is_empty()).then_some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_and_raw_diff_records_parse() {
        let log = b"aaaa\0bbbb cccc\0Ann\x00123\0two parents\nroot\0\0Bob\0x\0<s>\njunk\n";
        let commits = parse_log(log);
        assert_eq!(commits.len(), 2);
        assert_eq!(commits[0].parents, ["bbbb", "cccc"]);
        assert!(commits[1].parents.is_empty() && commits[1].time == 0);
        let z = "0".repeat(40);
        let a = "a".repeat(40);
        let raw = format!(
            ":000000 100644 {z} {a} A\0new file\0:100644 000000 {a} {z} D\0gone\0:bad\0x\0"
        );
        let (changes, total) = parse_raw(raw.as_bytes(), 1);
        assert_eq!(total, 2);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].status, 'A');
        assert_eq!(
            (changes[0].old.as_deref(), changes[0].new.as_deref()),
            (None, Some(a.as_str()))
        );
    }
}
