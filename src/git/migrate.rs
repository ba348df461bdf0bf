//! `git xet migrate`: move an LFS repository's objects to the remote's XET server.

use crate::git::GitError;

pub fn run(_remote: Option<&str>) -> Result<(), GitError> {
    Err(GitError::Failed(
        "`git xet migrate` is not wired yet".into(),
    ))
}
