//! Storage use per repository and overall, for the status page: logical bytes (the sizes
//! of the files registered) against stored bytes (the xorbs holding their chunks, each
//! counted once), whose quotient is the dedup ratio.

use crate::repo_name::RepoName;
use crate::IndexResult;

/// Registered files and the xorbs that hold them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub files: u64,
    pub logical_bytes: u64,
    pub xorbs: u64,
    pub stored_bytes: u64,
}

impl Usage {
    /// Logical bytes per stored byte (`None` when nothing is stored).
    pub fn dedup_ratio(&self) -> Option<f64> {
        (self.stored_bytes > 0).then(|| self.logical_bytes as f64 / self.stored_bytes as f64)
    }
}

pub trait StatsIndex {
    /// The files visible in `repo` and the distinct xorbs their terms reference (a xorb
    /// shared with other repositories counts in each).
    fn repo_usage(&self, repo: &RepoName) -> IndexResult<Usage>;

    /// Every registered file and every stored xorb.
    fn total_usage(&self) -> IndexResult<Usage>;
}
