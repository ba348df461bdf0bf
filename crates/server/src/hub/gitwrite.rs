//! Writing commits into a hosted bare repository from the Hub API: every object goes into
//! the write's quarantine (quarantine.rs), trees are built in a temporary index, and the
//! branch moves only from the commit it was built on (`git update-ref NEW OLD`, after the
//! objects moved in: ref_update.rs), so a push or another commit in between makes it fail
//! rather than be overwritten. Every git here runs with the server's fsync settings.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use tokio::process::Command;

use crate::error::{ServerError, ServerResult};
use crate::git::ls_tree;
use crate::hub::gitread;
use crate::hub::quarantine::Quarantine;
use git_xet_deployment::repos::FSYNC_CONFIG;

/// The entries of the tree being built, by path as git stores it (any bytes but NUL: a name
/// that is not UTF-8 is kept as it is, never rewritten): mode (`100644`, `100755`, `120000`
/// for a symlink, `160000` for a submodule's commit) and object id.
pub type Files = BTreeMap<Vec<u8>, (String, String)>;

fn git(dir: &Path) -> Command {
    let mut cmd = gitread::git(dir);
    cmd.args(FSYNC_CONFIG);
    cmd
}

/// git in the repository, writing into `quarantine` and reading it, when there is one.
fn git_at(dir: &Path, quarantine: Option<&Quarantine>) -> Command {
    let mut cmd = git(dir);
    if let Some(q) = quarantine {
        cmd.envs(q.env());
    }
    cmd
}

/// Runs `cmd` with `args` and `input` on stdin; stdout trimmed, or an internal error with
/// git's message.
async fn run(cmd: Command, args: &[&str], input: &[u8]) -> ServerResult<String> {
    let out = output(cmd, args, input).await?;
    Ok(String::from_utf8_lossy(&out).trim().to_string())
}

/// [`run`]'s stdout as git wrote it.
async fn output(mut cmd: Command, args: &[&str], input: &[u8]) -> ServerResult<Vec<u8>> {
    cmd.args(args);
    let out = gitread::run_with_input(cmd, input.to_vec()).await?;
    gitread::succeeded(args, out)
}

/// Stores `bytes` as a blob in `quarantine`; returns its id.
pub async fn write_blob(quarantine: &Quarantine, bytes: &[u8]) -> ServerResult<String> {
    let cmd = git_at(quarantine.repo_dir(), Some(quarantine));
    run(cmd, &["hash-object", "-w", "--stdin"], bytes).await
}

/// A blob's bytes, from the repository or `quarantine`.
pub async fn read_blob(quarantine: &Quarantine, oid: &str) -> ServerResult<Vec<u8>> {
    let cmd = git_at(quarantine.repo_dir(), Some(quarantine));
    output(cmd, &["cat-file", "blob", oid], b"").await
}

/// Every entry of `commit`'s tree but its directories: files, symlinks and submodules,
/// with their modes; empty for `None`.
pub async fn files_of(dir: &Path, commit: Option<&str>) -> ServerResult<Files> {
    let Some(commit) = commit else {
        return Ok(Files::new());
    };
    let out = output(git(dir), &["ls-tree", "-r", "-z", commit], b"").await?;
    let files = ls_tree::records(&out)
        .filter(|r| r.kind != "tree")
        .map(|r| (r.path.to_vec(), (r.mode.to_string(), r.oid.to_string())))
        .collect();
    Ok(files)
}

/// Writes the tree of `files` into `quarantine` (through a temporary index under `tmp`);
/// returns its id.
pub async fn write_tree(
    quarantine: &Quarantine,
    tmp: &Path,
    files: &Files,
) -> ServerResult<String> {
    tokio::fs::create_dir_all(tmp).await?;
    let index = tmp.join(format!("hub-index-{:016x}", rand::random::<u64>()));
    let mut info = Vec::new();
    for (path, (mode, oid)) in files {
        info.extend_from_slice(format!("{mode} {oid}\t").as_bytes());
        info.extend_from_slice(path);
        info.push(0);
    }
    let with_index = || {
        let mut cmd = git_at(quarantine.repo_dir(), Some(quarantine));
        cmd.env("GIT_INDEX_FILE", &index);
        cmd
    };
    let result = async {
        run(with_index(), &["update-index", "-z", "--index-info"], &info).await?;
        run(with_index(), &["write-tree"], b"").await
    }
    .await;
    let _ = tokio::fs::remove_file(&index).await;
    result
}

/// The paths among `paths` whose `filter` attribute is `lfs` in `tree`'s .gitattributes
/// (`tree` in the repository or in `quarantine`).
pub async fn lfs_filtered(
    dir: &Path,
    quarantine: Option<&Quarantine>,
    tree: &str,
    paths: &[&str],
) -> ServerResult<Vec<String>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let source = format!("--source={tree}");
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p.as_bytes());
        input.push(0);
    }
    let args = ["check-attr", &source, "-z", "--stdin", "filter"];
    let out = run(git_at(dir, quarantine), &args, &input).await?;
    // `path\0filter\0value\0` per path.
    let fields: Vec<&str> = out.split('\0').collect();
    Ok(fields
        .chunks(3)
        .filter(|c| c.len() == 3 && c[2] == "lfs")
        .map(|c| c[0].to_string())
        .collect())
}

/// Who a commit is by.
pub struct Author<'a> {
    pub name: &'a str,
    pub email: &'a str,
}

/// Creates the commit of `tree` on `parent` (none: a root commit) in `quarantine`; returns
/// its id.
pub async fn commit_tree(
    quarantine: &Quarantine,
    tree: &str,
    parent: Option<&str>,
    message: &str,
    author: &Author<'_>,
) -> ServerResult<String> {
    let mut args = vec!["commit-tree", tree];
    if let Some(p) = parent {
        args.extend(["-p", p]);
    }
    let mut cmd = git_at(quarantine.repo_dir(), Some(quarantine));
    cmd.envs([
        ("GIT_AUTHOR_NAME", author.name),
        ("GIT_AUTHOR_EMAIL", author.email),
        ("GIT_COMMITTER_NAME", author.name),
        ("GIT_COMMITTER_EMAIL", author.email),
    ]);
    run(cmd, &args, message.as_bytes()).await
}

/// Moves the ref `full` to `new` (`None`: deletes it) if it still points at `old` (`None`:
/// if it does not exist). `false` when it moved meanwhile.
pub async fn update_ref(
    dir: &Path,
    full: &str,
    new: Option<&str>,
    old: Option<&str>,
    reason: &str,
) -> ServerResult<bool> {
    let zero = "0".repeat(40);
    let old = old.unwrap_or(&zero);
    let mut cmd = git(dir);
    cmd.args(["update-ref", "-m", reason]);
    match new {
        Some(new) => cmd.args([full, new, old]),
        None => cmd.args(["-d", full, old]),
    };
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| ServerError::internal(format!("running git: {e}")))?;
    Ok(out.status.success())
}

/// Writes an annotated tag object for `commit` into `quarantine`; returns its id.
pub async fn write_tag(
    quarantine: &Quarantine,
    name: &str,
    commit: &str,
    message: &str,
    author: &Author<'_>,
) -> ServerResult<String> {
    let now = git_xet_io::time::now_secs();
    let text = format!(
        "object {commit}\ntype commit\ntag {name}\ntagger {} <{}> {now} +0000\n\n{}\n",
        author.name,
        author.email,
        message.trim_end()
    );
    let cmd = git_at(quarantine.repo_dir(), Some(quarantine));
    run(cmd, &["mktag"], text.as_bytes()).await
}

/// Whether git takes `full` as a ref name (`git check-ref-format`).
pub async fn valid_ref_name(dir: &Path, full: &str) -> ServerResult<bool> {
    let out = git(dir)
        .args(["check-ref-format", full])
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| ServerError::internal(format!("running git: {e}")))?;
    Ok(out.status.success())
}
