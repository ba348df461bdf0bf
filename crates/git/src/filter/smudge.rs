//! The smudge side (checkout, clone, pull): pointer in, file content out.
//!
//! Follows `git lfs smudge`: content that is not a pointer passes through unchanged; with
//! `GIT_LFS_SKIP_SMUDGE` the pointer itself is checked out; an object in the local store is
//! streamed from there; a missing one is fetched through XET into the store first, so git
//! only ever receives verified bytes. What git-xet does not handle itself (pointer
//! extensions, `lfs.fetchinclude`/`lfs.fetchexclude`, servers without `xet`) goes to
//! `git lfs smudge`, which does.

use std::io::{BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::filter::pktline::PktReader;
use crate::GitError;
use git_xet_lfs::pointer::{Pointer, MAX_POINTER_SIZE};
use git_xet_lfs::store::{LfsStore, TempGuard};

/// Where the content git receives comes from.
pub enum Smudged {
    /// Small content kept in memory (a passed-through pointer or short non-pointer blob).
    Bytes(Vec<u8>),
    /// A file: an object in the store, or a spooled non-pointer blob (removed after).
    File { path: PathBuf, temp: bool },
    /// `git lfs smudge` produces it from this pointer text.
    GitLfs(Vec<u8>),
    /// Not yet: fetched with the others when git asks which delayed files are ready.
    Delayed,
    /// Missing: fetched now and streamed to git as it arrives.
    Fetch { text: Vec<u8>, pointer: Pointer },
}

/// The blob git sent: a pointer, or content to hand back unchanged.
pub enum Input {
    Pointer { text: Vec<u8>, pointer: Pointer },
    Other(Smudged),
}

/// Reads the blob git sends for a smudge. The outer error is fatal, the inner one fails only
/// this file.
pub fn read_input<R: Read>(
    input: &mut PktReader<R>,
    store: &LfsStore,
) -> Result<Result<Input, GitError>, GitError> {
    let mut head = Vec::with_capacity(MAX_POINTER_SIZE + 1);
    // Only a blob larger than any pointer needs to be spooled to disk.
    let mut spool: Option<BufWriter<std::fs::File>> = None;
    let mut guard = TempGuard(None);
    let read = input.read_content(|data| {
        if spool.is_none() && head.len() + data.len() <= MAX_POINTER_SIZE {
            head.extend_from_slice(data);
            return Ok(());
        }
        if spool.is_none() {
            let (file, path) = store.temp_file("smudge")?;
            guard.0 = Some(path);
            let mut w = BufWriter::with_capacity(1 << 20, file);
            w.write_all(&head)
                .map_err(|e| GitError::io("spooling a non-pointer blob", e))?;
            spool = Some(w);
        }
        spool
            .as_mut()
            .expect("spool exists")
            .write_all(data)
            .map_err(|e| GitError::io("spooling a non-pointer blob", e))
    })?;
    if let Err(e) = read {
        return Ok(Err(e));
    }
    if let Some(w) = spool {
        if let Err(e) = w.into_inner() {
            return Ok(Err(GitError::io(
                "spooling a non-pointer blob",
                e.into_error(),
            )));
        }
        let path = guard.0.take().expect("spool has a path");
        return Ok(Ok(Input::Other(Smudged::File { path, temp: true })));
    }
    Ok(Ok(match Pointer::parse(&head) {
        Ok(pointer) => Input::Pointer {
            text: head,
            pointer,
        },
        Err(_) => Input::Other(Smudged::Bytes(head)),
    }))
}

/// Runs `git lfs smudge -- PATH` on a pointer and copies what it writes into `out`. The
/// outer error is fatal (writing to git failed), the inner one fails only this file.
pub fn via_git_lfs(
    pointer_text: &[u8],
    pathname: &str,
    out: &mut dyn FnMut(&[u8]) -> Result<(), GitError>,
) -> Result<Result<(), GitError>, GitError> {
    let mut child = match Command::new("git")
        .args(["lfs", "smudge", "--", pathname])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            return Ok(Err(GitError::Spawn {
                program: "git lfs smudge".into(),
                source: e,
            }))
        }
    };
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let text = pointer_text.to_vec();
    // The pointer is tiny, but write it from a thread anyway so a child that writes before
    // reading can never deadlock us.
    let feeder = std::thread::spawn(move || stdin.write_all(&text));
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut buf = vec![0u8; 1 << 20];
    let mut fatal = None;
    loop {
        match stdout.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if let Err(e) = out(&buf[..n]) {
                    fatal = Some(e);
                    let _ = child.kill();
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(Err(GitError::io("reading from `git lfs smudge`", e)));
            }
        }
    }
    let _ = feeder.join();
    let status = child
        .wait()
        .map_err(|e| GitError::io("waiting for `git lfs smudge`", e))?;
    if let Some(e) = fatal {
        return Err(e);
    }
    if !status.success() {
        return Ok(Err(GitError::Command {
            command: format!("git lfs smudge -- {pathname}"),
            stderr: format!("exited with {status} (its messages are above)"),
        }));
    }
    Ok(Ok(()))
}
