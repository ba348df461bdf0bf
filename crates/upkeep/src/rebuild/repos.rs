//! The hosted git repositories as `index rebuild` reads them (listed by
//! [`git_xet_deployment::repos::hosted`]): the visibility each records in its own config, and the LFS
//! objects its history points to.

use std::path::Path;

use git_xet_deployment::repos::PRIVATE_CONFIG;
use git_xet_hook::git::Git;
use git_xet_hook::{all_referenced, Referenced};

/// Whether a repository is private, as its bare repository records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    Private,
    Public,
    /// Nothing recorded (created before the record existed, or edited by hand): treated as
    /// private, so that a rebuild never opens a repository to anonymous readers.
    Unknown,
}

impl Visibility {
    pub fn private(self) -> bool {
        self != Visibility::Public
    }
}

/// What the repository's config records (`git config xet.private`).
pub fn visibility(dir: &Path) -> std::io::Result<Visibility> {
    let out = git_xet_deployment::repos::git_command(dir)
        .args(["config", "--get", "--type=bool", PRIVATE_CONFIG])
        .output()?;
    // Exit 1: the key is not set.
    Ok(match String::from_utf8_lossy(&out.stdout).trim() {
        "true" if out.status.success() => Visibility::Private,
        "false" if out.status.success() => Visibility::Public,
        _ => Visibility::Unknown,
    })
}

/// Every LFS object the history of any ref points to.
pub fn pointers(dir: &Path) -> Result<Vec<Referenced>, git_xet_hook::HookError> {
    all_referenced(&Git::in_dir(dir))
}
