//! What the status page reads from the hosted repositories with git: the repositories
//! themselves, the LFS pointers in HEAD's tree, and recent pushes from the refs' reflogs
//! (receive-pack keeps them: see git/service.rs). Blocking: run on a blocking thread.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

// The pointer format's one parser is the protocol core's, shared with the client side.
use git_xet_core::lfs::pointer::{Oid, Pointer, MAX_POINTER_SIZE};
use git_xet_index::RepoName;

/// Most LFS files listed per repository; the rest are counted.
pub const MAX_FILES: usize = 2000;
/// Most pushes listed per repository.
pub const MAX_PUSHES: usize = 20;
/// Bytes read from the end of one reflog.
const REFLOG_TAIL: u64 = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("running git in {dir}: {source}")]
    Spawn {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("git {what} in {dir} failed: {stderr}")]
    Git {
        what: &'static str,
        dir: PathBuf,
        stderr: String,
    },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// An LFS file in HEAD's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LfsFile {
    /// The path as git stores it (bytes; shown lossily).
    pub path: String,
    pub size: u64,
    pub oid: Oid,
}

/// The LFS files at HEAD (at most [`MAX_FILES`]) and how many there are in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeadFiles {
    pub files: Vec<LfsFile>,
    pub total: usize,
    pub total_bytes: u64,
}

/// One ref update from a reflog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Push {
    pub refname: String,
    pub old: String,
    pub new: String,
    pub who: String,
    pub time: i64,
}

/// The hosted repositories under `root`, by name (see [`git_xet_deployment::repos::hosted`]).
pub fn repositories(root: &Path) -> Result<Vec<RepoName>, ScanError> {
    let repos = git_xet_deployment::repos::hosted(root).map_err(|source| ScanError::Read {
        path: root.to_path_buf(),
        source,
    })?;
    Ok(repos.into_iter().map(|repo| repo.name).collect())
}

fn git(dir: &Path) -> Command {
    let mut cmd = git_xet_deployment::repos::git_command(dir);
    cmd.stderr(Stdio::piped());
    cmd
}

/// The LFS pointers in HEAD's tree (none when HEAD has no commit yet).
pub fn head_files(dir: &Path) -> Result<HeadFiles, ScanError> {
    let spawn = |source| ScanError::Spawn {
        dir: dir.to_path_buf(),
        source,
    };
    let has_head = git(dir)
        .args(["rev-parse", "--verify", "--quiet", "HEAD^{tree}"])
        .stdout(Stdio::null())
        .status()
        .map_err(spawn)?
        .success();
    if !has_head {
        return Ok(HeadFiles::default());
    }
    let out = git(dir)
        .args(["ls-tree", "-r", "-l", "-z", "--full-tree", "HEAD"])
        .output()
        .map_err(spawn)?;
    if !out.status.success() {
        return Err(ScanError::Git {
            what: "ls-tree",
            dir: dir.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    // Blobs small enough to be a pointer, paths shown lossily.
    let candidates: Vec<(String, String)> = crate::git::ls_tree::records(&out.stdout)
        .filter(|r| r.kind == "blob" && r.size.is_some_and(|s| s <= MAX_POINTER_SIZE as u64))
        .map(|r| {
            (
                r.oid.to_string(),
                String::from_utf8_lossy(r.path).into_owned(),
            )
        })
        .collect();
    let mut result = HeadFiles::default();
    if candidates.is_empty() {
        return Ok(result);
    }
    let mut child = git(dir)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(spawn)?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let oids: Vec<String> = candidates.iter().map(|(oid, _)| oid.clone()).collect();
    // Written from a thread so that a full stdout pipe cannot stall both sides.
    let writer = std::thread::spawn(move || {
        for oid in oids {
            if writeln!(stdin, "{oid}").is_err() {
                break;
            }
        }
    });
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let read_err = |source| ScanError::Read {
        path: dir.to_path_buf(),
        source,
    };
    for (_, path) in &candidates {
        let mut header = String::new();
        stdout.read_line(&mut header).map_err(read_err)?;
        // `<oid> blob <size>`, or `<oid> missing`.
        let size = header
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|&s| s <= MAX_POINTER_SIZE);
        let Some(size) = size else { continue };
        let mut body = vec![0u8; size + 1]; // the content and its newline
        stdout.read_exact(&mut body).map_err(read_err)?;
        if let Ok(pointer) = Pointer::parse(&body[..size]) {
            result.total += 1;
            result.total_bytes += pointer.size;
            if result.files.len() < MAX_FILES {
                result.files.push(LfsFile {
                    path: path.clone(),
                    size: pointer.size,
                    oid: pointer.oid,
                });
            }
        }
    }
    let _ = writer.join();
    let _ = child.wait();
    Ok(result)
}

/// The most recent ref updates of the repository, newest first.
pub fn recent_pushes(dir: &Path) -> Vec<Push> {
    let mut pushes = Vec::new();
    let logs = dir.join("logs");
    let mut stack = vec![logs.join("refs")];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
                continue;
            }
            let Ok(rel) = path.strip_prefix(&logs) else {
                continue;
            };
            let refname = rel.to_string_lossy().into_owned();
            pushes.extend(
                tail(&path)
                    .lines()
                    .filter_map(|line| parse_reflog_line(&refname, line)),
            );
        }
    }
    pushes.sort_by(|a, b| b.time.cmp(&a.time).then(a.refname.cmp(&b.refname)));
    pushes.truncate(MAX_PUSHES);
    pushes
}

/// The last [`REFLOG_TAIL`] bytes of a file, from its first whole line.
fn tail(path: &Path) -> String {
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(REFLOG_TAIL);
    if std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut bytes = Vec::new();
    let _ = file.take(REFLOG_TAIL).read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    match (start > 0, text.find('\n')) {
        (true, Some(i)) => text[i + 1..].to_string(),
        _ => text,
    }
}

/// `<old> <new> <name> <<email>> <seconds> <tz>\t<message>`.
fn parse_reflog_line(refname: &str, line: &str) -> Option<Push> {
    let head = line.split('\t').next()?;
    let (old, rest) = head.split_once(' ')?;
    let (new, ident) = rest.split_once(' ')?;
    let ident = ident.trim_end();
    let (ident, _tz) = ident.rsplit_once(' ')?;
    let (who, time) = ident.rsplit_once(' ')?;
    let who = who.split(" <").next().unwrap_or(who).to_string();
    let hex = |s: &str| s.len() >= 40 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(old) || !hex(new) {
        return None;
    }
    Some(Push {
        refname: refname.to_string(),
        old: old.to_string(),
        new: new.to_string(),
        who,
        time: time.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflog_lines_parse_and_junk_is_skipped() {
        let z = "0".repeat(40);
        let a = "a".repeat(40);
        let line = format!("{z} {a} git-xet <git-xet@http.127.0.0.1> 1700000000 +0000\tpush");
        assert_eq!(
            parse_reflog_line("refs/heads/main", &line),
            Some(Push {
                refname: "refs/heads/main".into(),
                old: z.clone(),
                new: a.clone(),
                who: "git-xet".into(),
                time: 1_700_000_000,
            })
        );
        for junk in [
            "",
            "x",
            "zz yy a <b> 1 +0000",
            &format!("{z} {a} a <b> soon +0000"),
        ] {
            assert_eq!(parse_reflog_line("r", junk), None, "{junk:?}");
        }
    }
}
