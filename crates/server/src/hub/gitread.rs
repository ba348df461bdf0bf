//! What the Hub routes read from a hosted bare repository, by running git's plumbing
//! (revisions, trees, blobs, refs). Revisions and paths come from URLs: they reach git only
//! as arguments after a check, never as options, and paths as literal pathspecs.

use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use git_xet_core::lfs::pointer::{Pointer, MAX_POINTER_SIZE};

use crate::error::{ServerError, ServerResult};
use crate::git::ls_tree;
use crate::hub::pointers;

/// One entry of a tree listing.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: String,
    /// Blob or tree id (40 hex).
    pub oid: String,
    pub is_dir: bool,
    /// Blob size in git (the pointer's size for LFS files); 0 for trees.
    pub size: u64,
    /// The LFS pointer the blob holds, if it is one.
    pub pointer: Option<Pointer>,
}

impl Entry {
    /// The file's real size: the pointed-to object's for LFS files.
    pub fn file_size(&self) -> u64 {
        self.pointer.as_ref().map_or(self.size, |p| p.size)
    }
}

/// git in the bare repository `dir` as the Hub runs it: never prompting, paths literal,
/// killed when the request goes away (gitwrite.rs adds the fsync settings).
pub(crate) fn git(dir: &Path) -> Command {
    let mut cmd = Command::from(git_xet_deployment::repos::git_command(dir));
    cmd.kill_on_drop(true);
    cmd
}

/// Runs git (see [`git`]); its output whatever its exit status.
pub(crate) async fn run(dir: &Path, args: &[&str]) -> ServerResult<std::process::Output> {
    git(dir)
        .args(args)
        .output()
        .await
        .map_err(|e| ServerError::internal(format!("running git: {e}")))
}

async fn run_ok(dir: &Path, args: &[&str]) -> ServerResult<Vec<u8>> {
    succeeded(args, run(dir, args).await?)
}

/// Runs `cmd` (from [`git`]) with `input` on its stdin, written from a task so that a full
/// stdout pipe cannot stall both sides; its output whatever its exit status.
pub(crate) async fn run_with_input(
    mut cmd: Command,
    input: Vec<u8>,
) -> ServerResult<std::process::Output> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ServerError::internal(format!("running git: {e}")))?;
    let mut stdin = child.stdin.take().expect("piped");
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(&input).await;
    });
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| ServerError::internal(format!("git: {e}")))?;
    let _ = writer.await;
    Ok(out)
}

/// The stdout of git run with `args`, or an internal error with git's message.
pub(crate) fn succeeded(args: &[&str], out: std::process::Output) -> ServerResult<Vec<u8>> {
    if !out.status.success() {
        return Err(ServerError::internal(format!(
            "git {} failed: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out.stdout)
}

/// Whether `rev` may be handed to git: a ref name or a commit id, nothing git would read as
/// an option or a revision expression.
pub fn plausible_rev(rev: &str) -> bool {
    !rev.is_empty()
        && rev.len() <= 255
        && !rev.starts_with(['-', '/'])
        && !rev.ends_with(['/', '.'])
        && !rev.contains("..")
        && !rev.contains("//")
        && !rev.contains("@{")
        && rev
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'))
}

fn is_commit_id(rev: &str) -> bool {
    rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The commit a revision names, as the Hub reads one: a branch, a tag, a full ref
/// (`refs/...`) or a full commit id. `None` when there is no such commit.
pub async fn resolve(dir: &Path, rev: &str) -> ServerResult<Option<String>> {
    if !plausible_rev(rev) {
        return Ok(None);
    }
    let candidates: Vec<String> = if is_commit_id(rev) {
        vec![rev.to_ascii_lowercase()]
    } else if rev.starts_with("refs/") {
        vec![rev.to_string()]
    } else {
        vec![format!("refs/heads/{rev}"), format!("refs/tags/{rev}")]
    };
    for candidate in candidates {
        let spec = format!("{candidate}^{{commit}}");
        let out = run(dir, &["rev-parse", "--verify", "--quiet", &spec]).await?;
        if out.status.success() {
            let sha = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if is_commit_id(&sha) {
                return Ok(Some(sha));
            }
        }
    }
    Ok(None)
}

/// The commit HEAD (the default branch) points at; `None` in an empty repository.
pub async fn head(dir: &Path) -> ServerResult<Option<String>> {
    let out = run(dir, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]).await?;
    let sha = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok((out.status.success() && is_commit_id(&sha)).then_some(sha))
}

/// The committer time of `commit` (seconds since the epoch).
pub async fn commit_time(dir: &Path, commit: &str) -> ServerResult<u64> {
    let out = run_ok(dir, &["show", "-s", "--format=%ct", commit, "--"]).await?;
    Ok(String::from_utf8_lossy(&out).trim().parse().unwrap_or(0))
}

/// The entries of `commit`'s tree: under `prefix` (a directory, "" for the root), all of them
/// (`recursive`, directories included) or its direct children. LFS pointers are read.
pub async fn list(
    dir: &Path,
    commit: &str,
    prefix: &str,
    recursive: bool,
) -> ServerResult<Vec<Entry>> {
    let treeish = if prefix.is_empty() {
        format!("{commit}^{{tree}}")
    } else {
        format!("{commit}:{prefix}")
    };
    let mut args = vec!["ls-tree", "-l", "-z"];
    if recursive {
        args.extend(["-r", "-t"]);
    }
    args.push(&treeish);
    let out = run_ok(dir, &args).await?;
    let mut entries = parse_ls_tree(&out);
    if !prefix.is_empty() {
        for e in &mut entries {
            e.path = format!("{prefix}/{}", e.path);
        }
    }
    read_pointers(dir, &mut entries).await?;
    Ok(entries)
}

/// The entry at `path` in `commit`, if any (its pointer read).
pub async fn entry(dir: &Path, commit: &str, path: &str) -> ServerResult<Option<Entry>> {
    let out = run_ok(
        dir,
        &["ls-tree", "-l", "-z", "--full-tree", commit, "--", path],
    )
    .await?;
    let mut entries: Vec<Entry> = parse_ls_tree(&out)
        .into_iter()
        .filter(|e| e.path == path)
        .collect();
    read_pointers(dir, &mut entries).await?;
    Ok(entries.pop())
}

/// The paths of the files (blobs) of `commit`'s whole tree, as `list` names them but
/// without their sizes or pointers: one `ls-tree` that reads no blob.
pub async fn file_names(dir: &Path, commit: &str) -> ServerResult<Vec<String>> {
    let treeish = format!("{commit}^{{tree}}");
    let out = run_ok(dir, &["ls-tree", "-r", "-z", &treeish]).await?;
    Ok(ls_tree::records(&out)
        .filter(|record| record.kind == "blob")
        .filter_map(|record| Some(std::str::from_utf8(record.path).ok()?.to_string()))
        .collect())
}

/// The entries at `paths` in `commit` (their pointers read), in that order; paths that name
/// nothing (or a submodule) are left out. Two git processes whatever the number of paths:
/// one `cat-file --batch-check` for all of them, one `cat-file --batch` for the small blobs.
/// The paths must pass `valid_repo_path` (no newline, no `.` or `..` segment).
pub async fn lookup_paths(dir: &Path, commit: &str, paths: &[String]) -> ServerResult<Vec<Entry>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let mut input = String::new();
    for path in paths {
        input.push_str(commit);
        input.push(':');
        input.push_str(path);
        input.push('\n');
    }
    let args = [
        "cat-file",
        "--batch-check=%(objectname) %(objecttype) %(objectsize)",
    ];
    let mut cmd = git(dir);
    cmd.args(args);
    let out = succeeded(&args, run_with_input(cmd, input.into_bytes()).await?)?;
    let mut entries = Vec::new();
    // One line per path, in order: `<oid> <type> <size>`, or `<name> missing`.
    for (path, line) in paths.iter().zip(out.split(|&b| b == b'\n')) {
        let line = String::from_utf8_lossy(line);
        let mut fields = line.split(' ');
        let (Some(oid), Some(kind), Some(size), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let is_dir = match kind {
            "tree" => true,
            "blob" => false,
            _ => continue,
        };
        let (Some(size), true) = (size.parse::<u64>().ok(), is_object_id(oid)) else {
            continue;
        };
        entries.push(Entry {
            path: path.clone(),
            oid: oid.to_string(),
            is_dir,
            size: if is_dir { 0 } else { size },
            pointer: None,
        });
    }
    read_pointers(dir, &mut entries).await?;
    Ok(entries)
}

/// Sets the sizes of the blobs among `entries` (listed without them) with one
/// `cat-file --batch-check`.
pub(super) async fn size_blobs(dir: &Path, entries: &mut [Entry]) -> ServerResult<()> {
    let blobs: Vec<usize> = (0..entries.len()).filter(|&i| !entries[i].is_dir).collect();
    if blobs.is_empty() {
        return Ok(());
    }
    let mut input = String::with_capacity(blobs.len() * 41);
    for &i in &blobs {
        input.push_str(&entries[i].oid);
        input.push('\n');
    }
    let args = ["cat-file", "--batch-check=%(objectname) %(objectsize)"];
    let mut cmd = git(dir);
    cmd.args(args);
    let out = succeeded(&args, run_with_input(cmd, input.into_bytes()).await?)?;
    // One line per blob, in order: `<oid> <size>` (or `<oid> missing`, left at 0).
    for (&i, line) in blobs.iter().zip(out.split(|&b| b == b'\n')) {
        let line = String::from_utf8_lossy(line);
        if let Some((oid, size)) = line.split_once(' ') {
            if oid == entries[i].oid {
                entries[i].size = size.parse().unwrap_or(0);
            }
        }
    }
    Ok(())
}

/// A full object id (SHA-1 or SHA-256) as git prints it.
fn is_object_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The entries of `git ls-tree -l -z` output. Submodules, paths that are not UTF-8 (the Hub
/// names files by strings) and anything unparsable are left out.
fn parse_ls_tree(out: &[u8]) -> Vec<Entry> {
    ls_tree::records(out)
        .filter_map(|record| entry_of(&record, record.size))
        .collect()
}

/// The entry of one `ls-tree` record, sized `size` (a blob without one is left out).
/// Submodules and paths that are not UTF-8 (the Hub names files by strings) are left out.
pub(super) fn entry_of(record: &ls_tree::Record<'_>, size: Option<u64>) -> Option<Entry> {
    let is_dir = match record.kind {
        "tree" => true,
        "blob" => false,
        _ => return None,
    };
    Some(Entry {
        path: std::str::from_utf8(record.path).ok()?.to_string(),
        oid: record.oid.to_string(),
        is_dir,
        size: if is_dir { 0 } else { size? },
        pointer: None,
    })
}

/// Reads the blobs small enough to be LFS pointers and keeps those that are: the ones not
/// read before (pointers.rs) in one `git cat-file --batch`, its output read as it comes.
pub(super) async fn read_pointers(dir: &Path, entries: &mut [Entry]) -> ServerResult<()> {
    let mut unknown: Vec<usize> = Vec::new();
    for (i, e) in entries.iter_mut().enumerate() {
        if e.is_dir || e.size as usize > MAX_POINTER_SIZE {
            continue;
        }
        match pointers::lookup(dir, &e.oid) {
            Some(known) => e.pointer = known,
            None => unknown.push(i),
        }
    }
    if unknown.is_empty() {
        return Ok(());
    }
    let mut input = String::with_capacity(unknown.len() * 41);
    for &i in &unknown {
        input.push_str(&entries[i].oid);
        input.push('\n');
    }
    let mut child = git(dir)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| ServerError::internal(format!("running git: {e}")))?;
    let mut stdin = child.stdin.take().expect("piped");
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(input.as_bytes()).await;
    });
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut read = Vec::with_capacity(unknown.len());
    let (mut header, mut content) = (Vec::new(), Vec::new());
    // `<oid> blob <size>\n<content>\n` per object, in the order asked.
    for &i in &unknown {
        header.clear();
        if out.read_until(b'\n', &mut header).await? == 0 {
            break;
        }
        let size = std::str::from_utf8(&header)
            .ok()
            .and_then(|h| h.trim_end().split(' ').nth(2))
            .and_then(|s| s.parse::<usize>().ok());
        let Some(size) = size else {
            continue; // `<oid> missing`
        };
        if size > MAX_POINTER_SIZE {
            break; // not the small blob listed: nothing more is trusted
        }
        content.resize(size + 1, 0);
        out.read_exact(&mut content).await?;
        let pointer = Pointer::detect(&content[..size]);
        read.push((entries[i].oid.clone(), pointer.clone()));
        entries[i].pointer = pointer;
    }
    // Closing its output ends git if it had more to say.
    drop(out);
    let _ = writer.await;
    let _ = child.wait().await;
    pointers::remember(dir, read);
    Ok(())
}

/// A blob's bytes.
pub async fn blob(dir: &Path, oid: &str) -> ServerResult<Vec<u8>> {
    run_ok(dir, &["cat-file", "blob", oid]).await
}

/// A branch or tag: its name, full ref and the commit it points at.
#[derive(Debug, Clone)]
pub struct Ref {
    pub name: String,
    pub full: String,
    pub commit: String,
}

/// Branches and tags (annotated tags peeled to their commits).
pub async fn refs(dir: &Path) -> ServerResult<(Vec<Ref>, Vec<Ref>)> {
    let out = run_ok(
        dir,
        &[
            "for-each-ref",
            "--format=%(refname) %(objectname) %(*objectname)",
            "refs/heads",
            "refs/tags",
        ],
    )
    .await?;
    let (mut branches, mut tags) = (Vec::new(), Vec::new());
    for line in String::from_utf8_lossy(&out).lines() {
        let mut f = line.split(' ');
        let (Some(full), Some(oid)) = (f.next(), f.next()) else {
            continue;
        };
        let peeled = f.next().filter(|p| !p.is_empty()).unwrap_or(oid);
        let item = |name: &str| Ref {
            name: name.to_string(),
            full: full.to_string(),
            commit: peeled.to_string(),
        };
        if let Some(name) = full.strip_prefix("refs/heads/") {
            branches.push(item(name));
        } else if let Some(name) = full.strip_prefix("refs/tags/") {
            tags.push(item(name));
        }
    }
    Ok((branches, tags))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_that_git_could_misread_are_refused() {
        for ok in ["main", "feat/x", "v1.0", "refs/pr/1", &"a".repeat(40)] {
            assert!(plausible_rev(ok), "{ok}");
        }
        for bad in [
            "", "-x", "--all", "a..b", "main@{1}", "a b", "HEAD~1", "x:y", "/a", "a/",
        ] {
            assert!(!plausible_rev(bad), "{bad:?}");
        }
    }

    #[test]
    fn ls_tree_records_are_parsed_and_junk_skipped() {
        let out = b"100644 blob 0123456789012345678901234567890123456789     12\ta b.txt\0\
040000 tree 1111111111111111111111111111111111111111       -\tdir\0\
160000 commit 2222222222222222222222222222222222222222       -\tsub\0garbage\0\
100644 blob 3333333333333333333333333333333333333333      5\tnot-\xffutf8\0";
        let entries = parse_ls_tree(out);
        assert_eq!(entries.len(), 2);
        assert_eq!((entries[0].path.as_str(), entries[0].size), ("a b.txt", 12));
        assert!(entries[1].is_dir && entries[1].path == "dir");
    }
}
