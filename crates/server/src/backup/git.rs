//! The hosted git repositories in a backup: one `git bundle` per repository (git reads the
//! refs once, then packs what they reach: a consistent copy while pushes run), and HEAD's
//! branch beside it in the manifest.

use std::path::{Path, PathBuf};

use tokio::process::Command;

use super::BackupError;
use crate::git::repos::FSYNC_CONFIG;
use crate::repo_name::RepoName;

async fn git(dir: &Path, args: &[&str]) -> Result<String, BackupError> {
    let out = Command::new("git")
        .args(FSYNC_CONFIG)
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .await
        .map_err(|e| BackupError::Git(format!("running git: {e}")))?;
    if !out.status.success() {
        return Err(BackupError::Git(format!(
            "git {} in {} failed: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Every hosted repository under `root` (`<name>.git` directories holding a `HEAD`;
/// half-made `.new-*` ones are skipped), by name.
pub fn list_repos(root: &Path) -> std::io::Result<Vec<(RepoName, PathBuf)>> {
    let mut out = Vec::new();
    walk(root, root, 0, &mut out)?;
    out.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    Ok(out)
}

fn walk(
    root: &Path,
    dir: &Path,
    depth: usize,
    out: &mut Vec<(RepoName, PathBuf)>,
) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if !entry.file_type()?.is_dir() || file_name.starts_with('.') {
            continue;
        }
        if file_name.ends_with(".git") && path.join("HEAD").exists() {
            let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy();
            if let Ok(name) = RepoName::parse(rel.trim_end_matches(".git")) {
                out.push((name, path));
            }
        } else if depth < 3 {
            walk(root, &path, depth + 1, out)?;
        }
    }
    Ok(())
}

/// HEAD's target, and a bundle of every ref written to `bundle` (`false`: no refs, no bundle).
pub async fn bundle(repo_dir: &Path, bundle: &Path) -> Result<(Option<String>, bool), BackupError> {
    let head = git(repo_dir, &["symbolic-ref", "-q", "HEAD"]).await.ok();
    let refs = git(
        repo_dir,
        &["for-each-ref", "--count=1", "--format=%(refname)"],
    )
    .await?;
    if refs.is_empty() {
        return Ok((head, false));
    }
    let target = bundle.to_string_lossy().to_string();
    git(repo_dir, &["bundle", "create", "--quiet", &target, "--all"]).await?;
    Ok((head, true))
}

/// Creates the repository (with the server's hook) and fetches every ref of `bundle`. It is
/// recorded private until the restored index says otherwise ([`record_visibility`]), so a
/// restore cut short never leaves a repository open that was not.
pub async fn unbundle(
    root: &Path,
    name: &RepoName,
    bundle: Option<&Path>,
    head: Option<&str>,
    hook: &str,
) -> Result<(), BackupError> {
    crate::git::repos::ensure_repo(root, name, hook, true)
        .await
        .map_err(|e| BackupError::Git(format!("creating repository {name}: {e}")))?;
    let dir = name.bare_dir(root);
    if let Some(bundle) = bundle {
        let source = bundle.to_string_lossy().to_string();
        git(&dir, &["fetch", "--quiet", &source, "refs/*:refs/*"]).await?;
    }
    if let Some(head) = head {
        git(&dir, &["symbolic-ref", "HEAD", head]).await?;
    }
    Ok(())
}

/// Writes the repository's visibility, as the restored index holds it, into its git config
/// (where `index rebuild` reads it back).
pub async fn record_visibility(
    root: &Path,
    name: &RepoName,
    private: bool,
) -> Result<(), BackupError> {
    crate::git::repos::record_private(&name.bare_dir(root), private)
        .await
        .map_err(|e| BackupError::Git(format!("recording the visibility of {name}: {e}")))
}
