//! The hosted git repositories as `index rebuild` reads them: their names, the visibility
//! each records in its own config, and the LFS objects its history points to.

use std::path::{Path, PathBuf};

use crate::git::repos::PRIVATE_CONFIG;
use crate::hook::git::Git;
use crate::hook::{all_referenced, Referenced};
use crate::repo_name::RepoName;

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

/// One hosted repository.
#[derive(Debug, Clone)]
pub struct HostedRepo {
    pub name: RepoName,
    pub dir: PathBuf,
}

/// The hosted repositories under `root` (`name.git`, `org/name.git`,
/// `datasets/org/name.git`), by name. Directories that are not repository names (`.new-*`
/// being created) are passed over.
pub fn hosted_repos(root: &Path) -> std::io::Result<Vec<HostedRepo>> {
    let mut found = Vec::new();
    let mut dirs = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let file_name = entry.file_name();
            let name = file_name.to_string_lossy();
            if name.starts_with('.') || !entry.file_type()?.is_dir() {
                continue;
            }
            if name.ends_with(".git") {
                let relative = entry.path();
                let relative = relative.strip_prefix(root).unwrap_or(&relative);
                if let Ok(repo) = RepoName::parse(&relative.to_string_lossy()) {
                    if repo.bare_dir(root) == entry.path() {
                        found.push(HostedRepo {
                            name: repo,
                            dir: entry.path(),
                        });
                    }
                }
            } else if depth < 2 {
                dirs.push((entry.path(), depth + 1));
            }
        }
    }
    found.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    Ok(found)
}

/// What the repository's config records (`git config xet.private`).
pub fn visibility(dir: &Path) -> std::io::Result<Visibility> {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(dir)
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
pub fn pointers(dir: &Path) -> Result<Vec<Referenced>, crate::hook::HookError> {
    all_referenced(&Git::in_dir(dir))
}
