//! The blobs at some paths of a commit, for `preupload`: looked up by path (`git cat-file
//! --batch-check` on `<commit>:<path>`), then the small ones read to tell LFS pointers.
//! Two git processes per call whatever the tree, and work in proportion to the paths asked
//! about: huggingface_hub asks 256 paths at a time, and listing the whole tree each time
//! made an upload of many files quadratic.

use std::path::Path;

use git_xet_core::lfs::pointer::{Pointer, MAX_POINTER_SIZE};

use crate::error::ServerResult;
use crate::git::cat_file;
use crate::hub::{gitread, valid_repo_path};

/// The blob at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobAt {
    pub oid: String,
    /// The LFS pointer the blob holds, if it is one.
    pub pointer: Option<Pointer>,
}

/// The blob at each of `paths` in `commit` (a commit id), in order; `None` where there is
/// none (no such path, a directory, a submodule, a path git could not be asked about).
pub async fn blobs_at(
    dir: &Path,
    commit: &str,
    paths: &[&str],
) -> ServerResult<Vec<Option<BlobAt>>> {
    let asked: Vec<usize> = (0..paths.len())
        .filter(|&i| valid_repo_path(paths[i]))
        .collect();
    let mut found = vec![None; paths.len()];
    if asked.is_empty() {
        return Ok(found);
    }
    let mut input = Vec::new();
    for &i in &asked {
        input.extend_from_slice(format!("{commit}:{}\n", paths[i]).as_bytes());
    }
    let mut cmd = gitread::git(dir);
    let args = [
        "cat-file",
        "--batch-check=%(objectname) %(objecttype) %(objectsize)",
    ];
    cmd.args(args);
    let out = gitread::succeeded(&args, gitread::run_with_input(cmd, input).await?)?;
    // One line per name: `<oid> <type> <size>`, or `<name> missing` (or `ambiguous`).
    let mut small = Vec::new();
    for (&i, line) in asked.iter().zip(out.split(|&b| b == b'\n')) {
        let line = String::from_utf8_lossy(line);
        let fields: Vec<&str> = line.split(' ').collect();
        if let [oid, "blob", size] = fields[..] {
            let Ok(size) = size.parse::<usize>() else {
                continue;
            };
            found[i] = Some(BlobAt {
                oid: oid.to_string(),
                pointer: None,
            });
            if size <= MAX_POINTER_SIZE {
                small.push(i);
            }
        }
    }
    read_pointers(dir, &mut found, &small).await?;
    Ok(found)
}

/// Reads the blobs of `found` at `small` (one `git cat-file --batch`) and keeps the
/// pointers among them.
async fn read_pointers(
    dir: &Path,
    found: &mut [Option<BlobAt>],
    small: &[usize],
) -> ServerResult<()> {
    if small.is_empty() {
        return Ok(());
    }
    let mut input = String::new();
    for &i in small {
        if let Some(blob) = &found[i] {
            input.push_str(&blob.oid);
            input.push('\n');
        }
    }
    let mut cmd = gitread::git(dir);
    let args = ["cat-file", "--batch"];
    cmd.args(args);
    let out = gitread::succeeded(
        &args,
        gitread::run_with_input(cmd, input.into_bytes()).await?,
    )?;
    for (&i, content) in small.iter().zip(cat_file::objects(&out)) {
        if let (Some(blob), Some(content)) = (&mut found[i], content) {
            blob.pointer = Pointer::detect(content);
        }
    }
    Ok(())
}
