//! Hosted bare repositories under `DATA/repos/<org>/<name>.git`: created on first push,
//! with the pre-receive hook installed, and HEAD pointed at a branch that exists.

use std::path::Path;

use tokio::process::Command;

use crate::server::error::{ServerError, ServerResult};
use crate::server::repo_name::RepoName;

/// The hook of this project for any git server: runs `git-xet pre-receive` from PATH.
pub const PRE_RECEIVE_HOOK: &str = include_str!("../../../hooks/pre-receive");

/// The pre-receive hook of hosted repositories. With `program` (the git-xet binary serving
/// them), a two-line script running that binary's built-in check, so that the hook runs
/// the server's own version. Without, hooks/pre-receive (the git-xet on PATH).
pub fn hook_script(program: Option<&Path>) -> String {
    match program.and_then(Path::to_str) {
        Some(exe) => format!(
            "#!/bin/sh\n\
             # Installed by `git xet server`: refuses pushes that reference LFS objects the\n\
             # XET server does not hold (the check of git-xet's hooks/pre-receive, built in).\n\
             exec {} pre-receive\n",
            shell_quote(exe)
        ),
        None => PRE_RECEIVE_HOOK.to_string(),
    }
}

/// `s` as one word for sh.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

async fn git(dir: &Path, args: &[&str]) -> ServerResult<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .await
        .map_err(|e| ServerError::internal(format!("running git: {e}")))?;
    if !out.status.success() {
        return Err(ServerError::internal(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Creates the bare repository if it does not exist. Built under a temporary name and
/// renamed into place, so concurrent first pushes and crashes never leave half a repo.
pub async fn ensure_repo(root: &Path, repo: &RepoName, hook: &str) -> ServerResult<()> {
    let dir = repo.bare_dir(root);
    if dir.exists() {
        return Ok(());
    }
    let parent = dir.parent().expect("repository has a parent directory");
    tokio::fs::create_dir_all(parent).await?;
    let tmp = parent.join(format!(".new-{:016x}", rand::random::<u64>()));
    let result = async {
        let tmp_str = tmp.to_string_lossy().to_string();
        git(
            parent,
            &[
                "init",
                "--bare",
                "--quiet",
                "--initial-branch=main",
                &tmp_str,
            ],
        )
        .await?;
        git(&tmp, &["config", "http.receivepack", "true"]).await?;
        git(&tmp, &["config", "uploadpack.allowFilter", "true"]).await?;
        install_hook(&tmp, hook).await?;
        match tokio::fs::rename(&tmp, &dir).await {
            Ok(()) => Ok(()),
            Err(_) if dir.exists() => Ok(()), // someone else created it first
            Err(e) => Err(ServerError::from(e)),
        }
    }
    .await;
    if tmp.exists() {
        let _ = tokio::fs::remove_dir_all(&tmp).await;
    }
    if result.is_ok() {
        tracing::info!(%repo, "created repository");
    }
    result
}

/// An empty bare repository under `tmp` (made once), whose receive-pack advertisement stands
/// in for a repository that does not exist yet: push discovery creates nothing, the push
/// itself does.
pub async fn empty_repo(tmp: &Path) -> ServerResult<std::path::PathBuf> {
    let dir = tmp.join("empty.git");
    if dir.join("HEAD").exists() {
        return Ok(dir);
    }
    tokio::fs::create_dir_all(tmp).await?;
    let new = tmp.join(format!(".empty-{:016x}", rand::random::<u64>()));
    let result = async {
        git(tmp, &["init", "--bare", "--quiet", &new.to_string_lossy()]).await?;
        match tokio::fs::rename(&new, &dir).await {
            Ok(()) => Ok(()),
            Err(_) if dir.join("HEAD").exists() => Ok(()), // made by a concurrent request
            Err(e) => Err(ServerError::from(e)),
        }
    }
    .await;
    if new.exists() {
        let _ = tokio::fs::remove_dir_all(&new).await;
    }
    result.map(|()| dir)
}

/// Writes the pre-receive hook (see [`hook_script`]) unless it is already current.
pub async fn install_hook(repo_dir: &Path, hook: &str) -> ServerResult<()> {
    use std::os::unix::fs::PermissionsExt;
    let path = repo_dir.join("hooks").join("pre-receive");
    if tokio::fs::read_to_string(&path)
        .await
        .is_ok_and(|s| s == hook)
    {
        return Ok(());
    }
    tokio::fs::create_dir_all(path.parent().expect("hooks dir")).await?;
    let tmp = path.with_extension("tmp");
    tokio::fs::write(&tmp, hook).await?;
    tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).await?;
    tokio::fs::rename(&tmp, &path).await?;
    Ok(())
}

/// Points HEAD at an existing branch when it names one that does not exist (a first push
/// of `master` into a repository created with `main`), so clones check something out.
pub async fn fix_head(repo_dir: &Path) {
    if head_branch_exists(repo_dir).await {
        return; // the usual case, seen without starting git twice after every push
    }
    let result = async {
        let head = git(repo_dir, &["symbolic-ref", "HEAD"]).await?;
        let branches = git(
            repo_dir,
            &["for-each-ref", "--format=%(refname)", "refs/heads/"],
        )
        .await?;
        let branches: Vec<&str> = branches.lines().collect();
        if branches.is_empty() || branches.contains(&head.as_str()) {
            return Ok(());
        }
        let pick = ["refs/heads/main", "refs/heads/master"]
            .into_iter()
            .find(|b| branches.contains(b))
            .unwrap_or(branches[0]);
        git(repo_dir, &["symbolic-ref", "HEAD", pick])
            .await
            .map(|_| ())
    }
    .await;
    if let Err(e) = result {
        tracing::warn!("updating HEAD of {}: {e}", repo_dir.display());
    }
}

/// Whether HEAD names a branch that exists, as far as the files of git's default ref
/// storage show it (a loose ref or a `packed-refs` line). `false` means "not sure": the
/// caller asks git.
async fn head_branch_exists(repo_dir: &Path) -> bool {
    let Ok(head) = tokio::fs::read_to_string(repo_dir.join("HEAD")).await else {
        return false;
    };
    let Some(branch) = head
        .strip_prefix("ref: ")
        .map(str::trim_end)
        .filter(|r| r.starts_with("refs/heads/") && !r.contains(".."))
    else {
        return false;
    };
    if tokio::fs::metadata(repo_dir.join(branch))
        .await
        .is_ok_and(|m| m.is_file())
    {
        return true;
    }
    tokio::fs::read_to_string(repo_dir.join("packed-refs"))
        .await
        .is_ok_and(|packed| {
            packed
                .lines()
                .any(|line| line.split_once(' ').is_some_and(|(_, name)| name == branch))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hosted hook runs the program it names with `pre-receive`, wherever it lives.
    #[test]
    fn the_hosted_hook_runs_its_program_even_from_an_awkward_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("it's a $HOME `dir`");
        std::fs::create_dir_all(&home).unwrap();
        let program = home.join("git-xet");
        std::fs::write(&program, "#!/bin/sh\necho \"ran with $*\"\n").unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let hook = dir.path().join("pre-receive");
        std::fs::write(&hook, hook_script(Some(&program))).unwrap();
        let out = std::process::Command::new("sh")
            .arg(&hook)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "ran with pre-receive\n"
        );
        assert_eq!(hook_script(None), PRE_RECEIVE_HOOK);
    }
}
