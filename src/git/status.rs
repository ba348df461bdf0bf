//! `git xet status`: what git-xet does for this repository.

use crate::git::GitError;

pub fn run(_remote: Option<&str>, _offline: bool) -> Result<(), GitError> {
    Err(GitError::Failed("`git xet status` is not wired yet".into()))
}
