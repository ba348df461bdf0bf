//! The pointers git's index holds, read through one `git cat-file --batch-command` kept for
//! the filter process's life: a re-clean after a checkout (git refreshing its index) asks for
//! every file it re-cleans, and two git commands per file made a pull of many small files
//! several times slower than git-lfs. cat-file reads the index once: a filter process lives
//! for one git command, whose own index update is written only when it ends. Whether a
//! re-clean's content is the index's is asked of git's index file first (recheck.rs,
//! `crate::git_index`): cat-file answers what that reader cannot and the large files' probe.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use crate::repo::Repo;
use git_xet_lfs::pointer::{Pointer, MAX_POINTER_SIZE};

/// The running `cat-file`, started at the first question; `Broken` after any failure (the
/// caller then asks git the slow way).
#[derive(Default)]
pub enum IndexReader {
    #[default]
    NotStarted,
    Running {
        child: Child,
        stdin: ChildStdin,
        stdout: BufReader<ChildStdout>,
    },
    Broken,
}

/// What the index holds for a path.
pub enum Indexed {
    Pointer(Pointer),
    /// Not a pointer, or no such entry.
    Other,
    /// This reader cannot answer (cat-file failed, or a name it cannot carry).
    Unknown,
}

impl IndexReader {
    /// The LFS pointer git's index holds for `pathname` (stage 0).
    pub fn pointer(&mut self, repo: &Repo, pathname: &str, how: Ask) -> Indexed {
        if pathname.contains('\n') {
            return Indexed::Unknown; // one command per line: such a name cannot be asked
        }
        if matches!(self, IndexReader::NotStarted) {
            *self = match repo
                .git()
                .spawn(["cat-file", "--batch-command"], Stdio::piped())
            {
                Ok(mut child) => match (child.stdin.take(), child.stdout.take()) {
                    (Some(stdin), Some(stdout)) => IndexReader::Running {
                        child,
                        stdin,
                        stdout: BufReader::new(stdout),
                    },
                    _ => IndexReader::Broken,
                },
                Err(_) => IndexReader::Broken,
            };
        }
        let IndexReader::Running { stdin, stdout, .. } = self else {
            return Indexed::Unknown;
        };
        match ask(stdin, stdout, pathname, how) {
            Ok(answer) => answer,
            Err(e) => {
                tracing::debug!("git cat-file --batch-command: {e}");
                *self = IndexReader::Broken;
                Indexed::Unknown
            }
        }
    }
}

/// How many questions a pointer costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// `info` first, `contents` only for an entry small enough to be a pointer: for a
    /// large file, whose entry may be the whole content (a file newly put in LFS).
    SizeFirst,
    /// `contents` at once, one round trip, discarding an entry too large to be a pointer:
    /// when the content is known to be an LFS object already (a re-clean), whose entry is
    /// all but always its pointer.
    Contents,
}

fn ask(
    stdin: &mut ChildStdin,
    stdout: &mut BufReader<ChildStdout>,
    pathname: &str,
    how: Ask,
) -> std::io::Result<Indexed> {
    if how == Ask::SizeFirst {
        command(stdin, "info", pathname)?;
        match header(stdout)? {
            Header::Blob(size) if size <= MAX_POINTER_SIZE as u64 => {}
            // Not a pointer (the file is not in LFS in the index), or no such entry.
            Header::Blob(_) | Header::Other(_) | Header::Missing => return Ok(Indexed::Other),
        }
    }
    command(stdin, "contents", pathname)?;
    let size = match header(stdout)? {
        Header::Missing => return Ok(Indexed::Other),
        Header::Blob(size) if size <= MAX_POINTER_SIZE as u64 => size,
        Header::Blob(size) | Header::Other(size) if how == Ask::Contents => {
            // Read past it (and git's newline) in pieces, never allocated whole.
            let all = size.saturating_add(1);
            let skipped = std::io::copy(&mut stdout.by_ref().take(all), &mut std::io::sink())?;
            if skipped != all {
                return Err(std::io::Error::other("cat-file ended inside an answer"));
            }
            return Ok(Indexed::Other);
        }
        Header::Blob(_) | Header::Other(_) => {
            return Err(std::io::Error::other(
                "the index changed between two questions",
            ))
        }
    };
    // `size` is at most MAX_POINTER_SIZE (checked above), plus git's newline after it.
    let mut body = vec![0; size as usize + 1];
    stdout.read_exact(&mut body)?;
    body.pop();
    Ok(match Pointer::parse(&body) {
        Ok(pointer) => Indexed::Pointer(pointer),
        Err(_) => Indexed::Other,
    })
}

/// Sends one command in one write: the pipe is not buffered, and every write wakes cat-file
/// (a re-clean of many small files waits for each answer).
fn command(stdin: &mut ChildStdin, verb: &str, pathname: &str) -> std::io::Result<()> {
    stdin.write_all(format!("{verb} :0:{pathname}\n").as_bytes())
}

/// One answer's header.
enum Header {
    /// `<name> missing` (or ambiguous): nothing follows.
    Missing,
    /// `<oid> blob <size>`.
    Blob(u64),
    /// Another type (a submodule's commit), with its size.
    Other(u64),
}

fn header(stdout: &mut BufReader<ChildStdout>) -> std::io::Result<Header> {
    let mut line = String::new();
    if stdout.by_ref().take(4096).read_line(&mut line)? == 0 {
        return Err(std::io::Error::other("cat-file ended"));
    }
    let line = line.trim_end_matches('\n');
    if line.ends_with(" missing") || line.ends_with(" ambiguous") {
        return Ok(Header::Missing);
    }
    let mut fields = line.split(' ');
    let bad = || std::io::Error::other(format!("cat-file said {line:?}"));
    match (fields.next(), fields.next(), fields.next(), fields.next()) {
        (Some(_oid), Some(kind), Some(size), None) => {
            let size = size.parse().map_err(|_| bad())?;
            Ok(match kind {
                "blob" => Header::Blob(size),
                _ => Header::Other(size),
            })
        }
        _ => Err(bad()),
    }
}

impl Drop for IndexReader {
    fn drop(&mut self) {
        if let IndexReader::Running { child, .. } = self {
            // Its stdin closes with this value, and cat-file ends at end of input.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Git;

    /// One cat-file answers for pointers, other files, absent paths and awkward names.
    #[test]
    fn the_index_s_pointers_through_one_cat_file() {
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap().join("work");
        Git::new()
            .run(["init", "-q", top.to_str().unwrap()])
            .unwrap();
        let oid = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";
        let pointer =
            format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize 12345\n");
        std::fs::write(top.join("a pointer.bin"), &pointer).unwrap();
        std::fs::write(top.join("plain.txt"), "not a pointer\n").unwrap();
        std::fs::write(top.join("big.txt"), vec![b'x'; 5000]).unwrap();
        let repo = Repo::discover(&top).unwrap();
        repo.git().run(["add", "."]).unwrap();

        let mut reader = IndexReader::default();
        // Both ways, interleaved on one cat-file: an answer left unread would shift the rest.
        for how in [Ask::SizeFirst, Ask::Contents, Ask::SizeFirst] {
            let Indexed::Pointer(p) = reader.pointer(&repo, "a pointer.bin", how) else {
                panic!("the pointer is read ({how:?})");
            };
            assert_eq!((p.oid.to_string(), p.size), (oid.to_string(), 12345));
            for other in ["plain.txt", "big.txt", "absent", "a pointer.bin missing"] {
                assert!(
                    matches!(reader.pointer(&repo, other, how), Indexed::Other),
                    "{other} ({how:?})"
                );
            }
            assert!(matches!(
                reader.pointer(&repo, "new\nline", how),
                Indexed::Unknown
            ));
        }
        assert!(matches!(reader, IndexReader::Running { .. }));
    }
}
