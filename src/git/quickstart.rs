//! `git xet quickstart`: the whole workflow against a temporary local server.

use std::path::PathBuf;

use crate::git::GitError;

pub struct Options {
    pub size_mib: u64,
    pub dir: Option<PathBuf>,
    pub program: String,
}

pub fn run(_opts: &Options) -> Result<(), GitError> {
    Err(GitError::Failed(
        "`git xet quickstart` is not wired yet".into(),
    ))
}
