//! What remains after a migration, and `--update-lfsconfig`.
//!
//! git-lfs takes `lfs.url` from git config, else from the checked-out `.lfsconfig`, for
//! every remote. A committed `.lfsconfig` naming the old server keeps clones of the new one
//! talking to the old server, so migrate says so and, asked to, commits the change: `lfs.url`
//! set to the new endpoint, or removed when the remote's URL derives it. History is not
//! rewritten: old commits keep their `.lfsconfig` (see docs/migrate.md for reading them).

use crate::credentials::strip_userinfo;
use crate::repo::{lfs_endpoint_from_remote_url, Repo};
use crate::GitError;

/// What `.lfsconfig` should become for clients of the new server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LfsconfigChange {
    /// `.lfsconfig` does not name another server: nothing to do.
    None,
    /// Set `lfs.url` to this endpoint (credentials never written).
    Set { old: String, new: String },
    /// Remove `lfs.url`: the remote's URL derives the endpoint.
    Unset { old: String },
}

/// The change `.lfsconfig` needs so that clients of `remote` use `destination`.
pub fn needed_change(
    repo: &Repo,
    remote: &str,
    destination: &str,
) -> Result<LfsconfigChange, GitError> {
    let Some(old) = repo.lfsconfig_get("lfs.url")? else {
        return Ok(LfsconfigChange::None);
    };
    let old = old.trim_end_matches('/').to_string();
    let new = strip_userinfo(destination);
    if strip_userinfo(&old) == new {
        return Ok(LfsconfigChange::None);
    }
    let derived = repo
        .remote_url(remote)
        .ok()
        .map(|url| strip_userinfo(&lfs_endpoint_from_remote_url(&url)));
    Ok(if derived.as_deref() == Some(new.as_str()) {
        LfsconfigChange::Unset { old }
    } else {
        LfsconfigChange::Set { old, new }
    })
}

/// Commits the change on the current branch (only `.lfsconfig`, whatever else is staged);
/// returns the new commit's id.
pub fn commit_change(repo: &Repo, change: &LfsconfigChange) -> Result<Option<String>, GitError> {
    let Some(path) = repo.lfsconfig_path() else {
        return Ok(None);
    };
    let file = path.to_string_lossy().into_owned();
    let git = repo.git();
    let message = match change {
        LfsconfigChange::None => return Ok(None),
        LfsconfigChange::Set { new, .. } => {
            git.run(["config", "--file", &file, "lfs.url", new])?;
            format!("lfs: LFS objects now live at {new} (git xet migrate)")
        }
        LfsconfigChange::Unset { .. } => {
            git.run(["config", "--file", &file, "--unset", "lfs.url"])?;
            // `--unset` leaves an empty `[lfs]` section behind.
            let _ = git.try_run(["config", "--file", &file, "--remove-section", "lfs"]);
            "lfs: LFS objects now live at the remote's own endpoint (git xet migrate)".to_string()
        }
    };
    let empty = git
        .run(["config", "--file", &file, "--list"])?
        .trim()
        .is_empty();
    if empty {
        std::fs::remove_file(&path).map_err(|e| GitError::io("removing .lfsconfig", e))?;
    }
    git.run(["commit", "-q", "-m", &message, "--", ".lfsconfig"])?;
    Ok(Some(git.run(["rev-parse", "--short", "HEAD"])?))
}

/// The steps left to the user, printed after a successful run.
pub fn next_steps(
    repo: &Repo,
    remote: &str,
    destination: &str,
    change: &LfsconfigChange,
    committed: Option<&str>,
) -> Vec<String> {
    let mut steps = vec![format!(
        "push the refs: git push {remote} --all && git push {remote} --tags"
    )];
    let new = strip_userinfo(destination);
    match (change, committed) {
        (LfsconfigChange::None, _) => {}
        (_, Some(commit)) => steps.push(format!(
            "commit {commit} changes .lfsconfig for clients of {remote}; it goes with the push \
             (older commits keep the old lfs.url: to check them out, clients run \
             `git config lfs.url {new}` once)"
        )),
        (LfsconfigChange::Set { old, new }, None) => steps.push(format!(
            ".lfsconfig names the old server ({old}): clients of {remote} would keep using it; \
             run `git xet migrate {remote} --update-lfsconfig` (or `git config -f .lfsconfig \
             lfs.url {new}` and commit it)"
        )),
        (LfsconfigChange::Unset { old }, None) => steps.push(format!(
            ".lfsconfig names the old server ({old}): clients of {remote} would keep using it; \
             run `git xet migrate {remote} --update-lfsconfig` (or `git config -f .lfsconfig \
             --unset lfs.url` and commit it)"
        )),
    }
    if let Ok(Some(local)) = repo.config().get(None, "lfs.url") {
        if strip_userinfo(&local) != new {
            steps.push(format!(
                "lfs.url in your git config ({}) sends git-lfs to the old server for every \
                 remote: `git config --unset lfs.url` (or set it to {new}) once you work with \
                 {remote}",
                strip_userinfo(&local)
            ));
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Git;

    fn repo_with(lfsconfig: Option<&str>, remote: &str) -> (tempfile::TempDir, Repo) {
        let dir = tempfile::tempdir().unwrap();
        let git = Git::in_dir(dir.path());
        git.run(["init", "-q"]).unwrap();
        git.run(["remote", "add", "xet", remote]).unwrap();
        if let Some(url) = lfsconfig {
            git.run(["config", "-f", ".lfsconfig", "lfs.url", url])
                .unwrap();
        }
        let repo = Repo::discover(dir.path()).unwrap();
        (dir, repo)
    }

    #[test]
    fn lfsconfig_is_pointed_at_the_destination_or_left_to_the_remote_url() {
        let old = "https://lfs.example.com/team/r.git/info/lfs";
        let remote = "http://x:tok@xet.example.com/org/r.git";
        let derived = "http://x:tok@xet.example.com/org/r.git/info/lfs";
        let other = "http://x:tok@cas.example.com/org/r.git/info/lfs";

        let (_d, repo) = repo_with(Some(old), remote);
        assert_eq!(
            needed_change(&repo, "xet", derived).unwrap(),
            LfsconfigChange::Unset { old: old.into() }
        );
        // Another endpoint is written without its credentials.
        assert_eq!(
            needed_change(&repo, "xet", other).unwrap(),
            LfsconfigChange::Set {
                old: old.into(),
                new: "http://cas.example.com/org/r.git/info/lfs".into()
            }
        );
        // Already the destination, or no .lfsconfig: nothing to do.
        let (_d, repo) = repo_with(Some("http://xet.example.com/org/r.git/info/lfs/"), remote);
        assert_eq!(
            needed_change(&repo, "xet", derived).unwrap(),
            LfsconfigChange::None
        );
        let (_d, repo) = repo_with(None, remote);
        assert_eq!(
            needed_change(&repo, "xet", derived).unwrap(),
            LfsconfigChange::None
        );
    }
}
