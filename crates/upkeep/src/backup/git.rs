//! The hosted git repositories in a backup: one `git bundle` per repository (git reads the
//! refs once, then packs what they reach: a consistent copy while pushes run), and HEAD's
//! branch beside it in the manifest.

use std::path::{Path, PathBuf};

use super::BackupError;
use git_xet_deployment::repos::{hosted, run_git};
use git_xet_index::RepoName;

async fn git(dir: &Path, args: &[&str]) -> Result<String, BackupError> {
    run_git(dir, args, |why| {
        BackupError::Git(format!("in {}: {why}", dir.display()))
    })
    .await
}

/// Every hosted repository under `root` that holds a `HEAD` (one git can bundle), by name.
pub fn list_repos(root: &Path) -> std::io::Result<Vec<(RepoName, PathBuf)>> {
    Ok(hosted(root)?
        .into_iter()
        .filter(|repo| repo.dir.join("HEAD").exists())
        .map(|repo| (repo.name, repo.dir))
        .collect())
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
    git_xet_deployment::repos::ensure_repo(root, name, hook, true)
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
    git_xet_deployment::repos::record_private(&name.bare_dir(root), private)
        .await
        .map_err(|e| BackupError::Git(format!("recording the visibility of {name}: {e}")))
}
