//! Repository names: `name` or `org/name`, checked strictly because they become paths on disk;
//! and `datasets/org/name`, a Hugging Face dataset (the Hub's own URL shape, so a dataset and a
//! model of the same name are two repositories, and the dataset clones from
//! `/datasets/org/name.git`).

use std::fmt;
use std::path::{Path, PathBuf};

const MAX_SEGMENTS: usize = 2;
/// The first segment of a dataset's name, before its own `org/name`.
pub const DATASETS: &str = "datasets";
const MAX_SEGMENT_LEN: usize = 100;

/// Why a string is not a repository name (the server answers it as a bad request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid repository name {name:?}: {why} (expected `name` or `org/name` made of letters, \
     digits, `.`, `_` and `-`)"
)]
pub struct InvalidRepoName {
    /// The rejected name, cut to 120 characters.
    name: String,
    why: &'static str,
}

/// A validated repository name without the `.git` suffix, e.g. `org/model`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoName(String);

impl RepoName {
    /// Accepts one or two `/`-separated segments of `[A-Za-z0-9._-]`, each starting with a
    /// letter or digit (so no `..`, no hidden directories, nothing that looks like an option),
    /// at most 100 characters; or `datasets/org/name`. A trailing `.git` is removed.
    pub fn parse(raw: &str) -> Result<RepoName, InvalidRepoName> {
        let invalid = |why: &'static str| InvalidRepoName {
            name: truncate(raw),
            why,
        };
        let name = raw.strip_suffix(".git").unwrap_or(raw);
        if name.is_empty() {
            return Err(invalid("empty"));
        }
        let segments: Vec<&str> = match name
            .strip_prefix(DATASETS)
            .and_then(|r| r.strip_prefix('/'))
        {
            Some(rest) if rest.contains('/') => rest.split('/').collect(),
            _ => name.split('/').collect(),
        };
        if segments.len() > MAX_SEGMENTS {
            return Err(invalid("too many path segments"));
        }
        for segment in &segments {
            if segment.is_empty() {
                return Err(invalid("empty path segment"));
            }
            if segment.len() > MAX_SEGMENT_LEN {
                return Err(invalid("path segment too long"));
            }
            if !segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
            {
                return Err(invalid("unsupported character"));
            }
            if !segment.as_bytes()[0].is_ascii_alphanumeric() {
                return Err(invalid("a segment must start with a letter or digit"));
            }
            if segment.ends_with(".git") || segment.ends_with(".lock") {
                return Err(invalid("a segment may not end with .git or .lock"));
            }
        }
        Ok(RepoName(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is a dataset (`datasets/org/name`).
    pub fn is_dataset(&self) -> bool {
        self.dataset_id().is_some()
    }

    /// A dataset's `org/name` (its name without `datasets/`).
    pub fn dataset_id(&self) -> Option<&str> {
        let rest = self.0.strip_prefix(DATASETS)?.strip_prefix('/')?;
        rest.contains('/').then_some(rest)
    }

    /// The bare repository's directory under `root`: `root/org/name.git`.
    pub fn bare_dir(&self, root: &Path) -> PathBuf {
        root.join(format!("{}.git", self.0))
    }
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_names() {
        for ok in ["model", "org/model", "org/model.git", "a-b_c.d/e1", "9/x"] {
            assert!(RepoName::parse(ok).is_ok(), "{ok}");
            assert!(!RepoName::parse(ok).unwrap().is_dataset(), "{ok}");
        }
        // A dataset; `datasets` alone or as a two-segment org is an ordinary name.
        let d = RepoName::parse("datasets/org/d.git").unwrap();
        assert_eq!(d.as_str(), "datasets/org/d");
        assert!(d.is_dataset());
        assert!(!RepoName::parse("datasets/x").unwrap().is_dataset());
        assert_eq!(
            RepoName::parse("org/model.git").unwrap().as_str(),
            "org/model"
        );
    }

    #[test]
    fn rejects_traversal_and_oddities() {
        for bad in [
            "",
            ".git",
            "..",
            "../x",
            "org/..",
            "org/../x",
            "a/b/c",
            "datasets/a/b/c",
            "datasets/a/../b",
            "datasets//b",
            "dataset/a/b",
            "datasets/.x/b",
            "/abs",
            "a//b",
            ".hidden",
            "org/.x",
            "-rf",
            "a b",
            "a%2e",
            "a\\b",
            "x.git.git",
            "name.lock",
            "a\0b",
        ] {
            assert!(RepoName::parse(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(RepoName::parse(&"a".repeat(101)).is_err());
    }
}
