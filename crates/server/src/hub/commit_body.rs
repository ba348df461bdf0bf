//! A Hub commit request read as it arrives, on a blocking thread (body.rs): its lines parsed
//! one at a time (ndjson.rs), each file's bytes decoded and handed to git as its line is read
//! (blobs.rs, into the commit's quarantine), never kept. What is kept per operation is its
//! path, within [`MAX_OPERATIONS`] and [`MAX_PATH_BYTES`], so the memory of a request is one
//! line and the list of its paths, whatever its size. LFS files are looked up in the index in
//! batches once the body is in, and their pointers written by the same git.

use std::io::BufReader;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use git_xet_core::lfs::pointer::{Oid, Pointer};

use crate::body::BodyReader;
use crate::error::ServerError;
use crate::hub::blobs::{BlobWriter, Mark};
use crate::hub::ndjson::{Header, Line, Lines};
use crate::hub::quarantine::Quarantine;
use crate::hub::{valid_repo_path, HubError, HubResult};
use git_xet_index::Index;
use git_xet_index::RepoName;

/// Operations in one commit (huggingface_hub's `upload_folder` makes one commit of a
/// folder; `upload_large_folder` splits larger ones).
pub const MAX_OPERATIONS: usize = 100_000;
/// The bytes of all the paths one commit names (what is held while the body is read).
pub const MAX_PATH_BYTES: usize = 32 * 1024 * 1024;
/// LFS objects looked up in one index query.
const LOOKUPS_PER_QUERY: usize = 1000;

/// One operation of the commit, in the request's order.
#[derive(Debug, PartialEq, Eq)]
pub enum Op {
    /// A file (or an LFS file's pointer) written at `path`, as the blob `oid`.
    Write {
        path: String,
        oid: String,
        lfs: bool,
    },
    DeleteFile(String),
    DeleteFolder(String),
}

/// What the commit request said, its blobs in the quarantine.
pub struct Received {
    pub header: Header,
    pub ops: Vec<Op>,
    pub quarantine: Quarantine,
}

/// What reading needs besides the body.
pub struct Context {
    pub index: Arc<dyn Index>,
    pub repo: RepoName,
    /// The branch and its head, which `parentCommit` must name.
    pub branch: String,
    pub head: String,
    pub tmp: std::path::PathBuf,
}

fn bad(msg: impl Into<String>) -> HubError {
    ServerError::bad_request(msg).into()
}

/// An operation before the blobs are named.
enum Pending {
    Write(String, Mark),
    Lfs(String, [u8; 32], Option<u64>),
    DeleteFile(String),
    DeleteFolder(String),
}

/// Reads the whole request (see the module comment). Errors leave nothing behind: the
/// quarantine goes with them.
pub fn read(
    body: &mut BodyReader,
    quarantine: Quarantine,
    context: &Context,
) -> HubResult<Received> {
    let mut lines = Lines::new(BufReader::with_capacity(1 << 16, body));
    let header = match lines.next_line()? {
        Some(Line::Header(h)) => h,
        _ => return Err(bad("the commit request must start with a `header` line")),
    };
    check_header(&header, context)?;
    let mut blobs = BlobWriter::start(&quarantine, &context.tmp)?;
    let mut pending = Vec::new();
    let mut path_bytes = 0usize;
    let mut content = Vec::new();
    while let Some(line) = lines.next_line()? {
        let path = match &line {
            Line::Header(_) => return Err(bad("a second `header` line")),
            Line::File(op) => &op.path,
            Line::LfsFile(op) => &op.path,
            Line::DeletedFile(op) | Line::DeletedFolder(op) => &op.path,
        };
        path_bytes += path.len();
        if pending.len() >= MAX_OPERATIONS || path_bytes > MAX_PATH_BYTES {
            return Err(ServerError::PayloadTooLarge(format!(
                "a commit holds at most {MAX_OPERATIONS} operations naming at most \
                 {} MiB of paths: split it into several commits (upload_large_folder does)",
                MAX_PATH_BYTES >> 20
            ))
            .into());
        }
        pending.push(match line {
            Line::Header(_) => unreachable!("refused above"),
            Line::File(op) => {
                if op.encoding.as_deref().is_some_and(|e| e != "base64") {
                    return Err(bad("file contents must be base64"));
                }
                let path = checked_path(&op.path)?;
                content.clear();
                STANDARD
                    .decode_vec(op.content.as_bytes(), &mut content)
                    .map_err(|_| bad(format!("the content of {path} is not base64")))?;
                Pending::Write(path, blobs.write(&content)?)
            }
            Line::LfsFile(op) => {
                let path = checked_path(&op.path)?;
                let sha256 = crate::lfs::parse_oid(&op.oid)?;
                Pending::Lfs(path, sha256, op.size)
            }
            Line::DeletedFile(op) => Pending::DeleteFile(op.path.into_owned()),
            Line::DeletedFolder(op) => Pending::DeleteFolder(op.path.into_owned()),
        });
    }
    // The largest line's buffer goes before the lookups.
    drop(lines);
    drop(content);
    let pointers = held_pointers(context, &pending)?;
    let mut pointer_marks = Vec::with_capacity(pointers.len());
    for pointer in &pointers {
        pointer_marks.push(blobs.write(pointer.to_text().as_bytes())?);
    }
    let ids = blobs.finish()?;
    let mut pointer_marks = pointer_marks.into_iter();
    let ops = pending
        .into_iter()
        .map(|p| match p {
            Pending::Write(path, mark) => Op::Write {
                path,
                oid: ids[mark.0].clone(),
                lfs: false,
            },
            Pending::Lfs(path, ..) => {
                let mark = pointer_marks.next().expect("one pointer per LFS file");
                Op::Write {
                    path,
                    oid: ids[mark.0].clone(),
                    lfs: true,
                }
            }
            Pending::DeleteFile(path) => Op::DeleteFile(path),
            Pending::DeleteFolder(path) => Op::DeleteFolder(path),
        })
        .collect();
    Ok(Received {
        header,
        ops,
        quarantine,
    })
}

fn check_header(header: &Header, context: &Context) -> HubResult<()> {
    if header.summary.trim().is_empty() {
        return Err(bad("the commit message (summary) is empty"));
    }
    if let Some(parent) = &header.parent_commit {
        let valid =
            (5..=40).contains(&parent.len()) && parent.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid || !context.head.starts_with(&parent.to_ascii_lowercase()) {
            return Err(ServerError::Conflict(format!(
                "parent commit {parent} is not the head of {} ({}): the branch moved; \
                 fetch it and commit again",
                context.branch, context.head
            ))
            .into());
        }
    }
    Ok(())
}

fn checked_path(path: &str) -> HubResult<String> {
    if valid_repo_path(path) {
        Ok(path.to_string())
    } else {
        Err(bad(format!(
            "invalid path in repository {:?}: no empty, `.`, `..` or `.git` segment",
            path.chars().take(200).collect::<String>()
        )))
    }
}

/// The pointer of each `lfsFile` operation, in order, if the repository holds every object
/// (with the size the line gives, if it gives one): 400 naming the first it lacks.
fn held_pointers(context: &Context, pending: &[Pending]) -> HubResult<Vec<Pointer>> {
    let wanted: Vec<(&str, [u8; 32], Option<u64>)> = pending
        .iter()
        .filter_map(|p| match p {
            Pending::Lfs(path, sha256, size) => Some((path.as_str(), *sha256, *size)),
            _ => None,
        })
        .collect();
    let mut pointers = Vec::with_capacity(wanted.len());
    for part in wanted.chunks(LOOKUPS_PER_QUERY) {
        let sha256s: Vec<[u8; 32]> = part.iter().map(|w| w.1).collect();
        let stored = context
            .index
            .repo_files_by_sha256(&context.repo, &sha256s)?;
        for ((path, sha256, size), file) in part.iter().zip(stored) {
            let oid = Oid(*sha256);
            let Some(file) = file else {
                return Err(bad(format!(
                    "LFS object {oid} of {path} was not uploaded to {}: upload it (hf_xet or \
                     LFS) first",
                    context.repo
                )));
            };
            if size.is_some_and(|s| s != file.size) {
                return Err(bad(format!(
                    "LFS object {oid} is stored with {} bytes, not {}",
                    file.size,
                    size.unwrap_or(0)
                )));
            }
            pointers.push(Pointer::new(oid, file.size));
        }
    }
    Ok(pointers)
}
