//! The blobs of a Hub commit written as its lines are read: one `git fast-import` per commit,
//! fed each file's bytes as they are decoded, into the commit's quarantine (quarantine.rs).
//! One git process whatever the number of files (a `git hash-object` per file made a commit
//! of 10,000 files take over a minute), and no file is held after it is handed on.
//! Blocking: it runs on the thread that reads the request body.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};

use crate::error::{ServerError, ServerResult};
use crate::hub::quarantine::Quarantine;
use git_xet_deployment::repos::{git_command, FSYNC_CONFIG};

/// From this size, git fast-import streams a blob and tries no delta for it.
const BIG_FILE: usize = 1 << 20;

/// A blob handed to the writer: its number (from 0, in the order written), whose id
/// [`BlobWriter::finish`] tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(pub usize);

pub struct BlobWriter {
    child: Child,
    stdin: Option<BufWriter<ChildStdin>>,
    marks: PathBuf,
    written: usize,
}

impl BlobWriter {
    /// Starts `git fast-import` writing into `quarantine`; its marks file goes under `tmp`.
    pub fn start(quarantine: &Quarantine, tmp: &Path) -> ServerResult<BlobWriter> {
        std::fs::create_dir_all(tmp)?;
        let marks = tmp.join(format!("hub-marks-{:016x}", rand::random::<u64>()));
        let mut child = git_command(quarantine.repo_dir())
            .args(FSYNC_CONFIG)
            .args(["fast-import", "--quiet"])
            // A blob from 1 MiB is streamed into the pack, not held, and not compared with
            // the blob before it for a delta (an unrelated file, as a rule): for 8 commits
            // of 9 MiB files at once, that halved fast-import's time and took its memory
            // from 50 to 14 MB each. Smaller ones still get deltas; a repack redoes them.
            .arg(format!("--big-file-threshold={BIG_FILE}"))
            .arg(format!("--export-marks={}", marks.display()))
            .envs(quarantine.objects_env())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| ServerError::internal(format!("running git fast-import: {e}")))?;
        let stdin = child
            .stdin
            .take()
            .map(|s| BufWriter::with_capacity(1 << 16, s));
        Ok(BlobWriter {
            child,
            stdin,
            marks,
            written: 0,
        })
    }

    /// Hands `bytes` to git as the next blob.
    pub fn write(&mut self, bytes: &[u8]) -> ServerResult<Mark> {
        let mark = Mark(self.written);
        let stdin = self.stdin.as_mut().expect("open until finish");
        let sent = write!(stdin, "blob\nmark :{}\ndata {}\n", mark.0 + 1, bytes.len())
            .and_then(|()| stdin.write_all(bytes))
            .and_then(|()| stdin.write_all(b"\n"));
        if let Err(e) = sent {
            return Err(self.failed(&format!("writing to it: {e}")));
        }
        self.written += 1;
        Ok(mark)
    }

    /// Ends the stream (git writes its pack) and returns the blob ids, by mark.
    pub fn finish(mut self) -> ServerResult<Vec<String>> {
        let flushed = self.stdin.take().expect("open until finish").into_inner();
        // Dropping the pipe is the end of the stream.
        match flushed {
            Ok(stdin) => drop(stdin),
            Err(e) => return Err(self.failed(&format!("writing to it: {}", e.error()))),
        }
        let status = self
            .child
            .wait()
            .map_err(|e| ServerError::internal(format!("waiting for git fast-import: {e}")))?;
        if !status.success() {
            return Err(self.failed(&format!("it exited with {status}")));
        }
        let text = std::fs::read_to_string(&self.marks).unwrap_or_default();
        let mut ids = vec![String::new(); self.written];
        // `:<mark> <id>` lines.
        for line in text.lines() {
            let parsed = line
                .strip_prefix(':')
                .and_then(|l| l.split_once(' '))
                .and_then(|(m, id)| Some((m.parse::<usize>().ok()?, id)));
            if let Some((m, id)) = parsed {
                if let Some(slot) = m.checked_sub(1).and_then(|i| ids.get_mut(i)) {
                    *slot = id.to_string();
                }
            }
        }
        if ids.iter().any(String::is_empty) {
            return Err(ServerError::internal(
                "git fast-import did not name every blob it was given",
            ));
        }
        Ok(ids)
    }

    /// The error of a fast-import that stopped, with what it said; the process is ended.
    fn failed(&mut self, what: &str) -> ServerError {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut said = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            let _ = stderr.read_to_string(&mut said);
        }
        ServerError::internal(format!(
            "git fast-import failed, {what}: {}",
            said.trim().chars().take(2000).collect::<String>()
        ))
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        // Not finished (the request failed or went away): nothing it wrote is kept anyway,
        // the quarantine goes; killed rather than ended, so it writes no pack.
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.marks);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn blobs_are_written_into_the_quarantine_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("r.git");
        let ok = Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(&repo)
            .status()
            .unwrap();
        assert!(ok.success());
        let q = Quarantine::create(&repo).unwrap();
        let mut w = BlobWriter::start(&q, &dir.path().join("tmp")).unwrap();
        assert_eq!(w.write(b"hello\n").unwrap(), Mark(0));
        assert_eq!(w.write(b"").unwrap(), Mark(1));
        assert_eq!(w.write(b"hello\n").unwrap(), Mark(2));
        let ids = w.finish().unwrap();
        // `git hash-object` of the same bytes.
        let hello = "ce013625030ba8dba906f756967f9e9ca394464a";
        let empty = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";
        assert_eq!(ids, [hello, empty, hello]);
        let has = |env: bool| {
            let mut cmd = Command::new("git");
            cmd.arg("--git-dir").arg(&repo);
            cmd.args(["cat-file", "-e", hello]);
            if env {
                cmd.envs(q.env());
            }
            cmd.status().unwrap().success()
        };
        assert!(has(true), "in the quarantine");
        assert!(!has(false), "not in the repository before it moves in");
        q.migrate().unwrap();
        assert!(has(false));
    }
}
