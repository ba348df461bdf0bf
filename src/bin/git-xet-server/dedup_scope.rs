//! `--dedup-scope` as the command line spells it; the index's `DedupScope` knows no clap.

use git_xet_index::DedupScope;

/// How far deduplication reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DedupScopeArg {
    /// Every repository dedups against every other (one team).
    Server,
    /// Repositories dedup within their org, the first component of their name (the first
    /// two of a dataset's, `datasets/ORG`).
    Org,
    /// Each repository dedups only against itself.
    Repo,
}

impl From<DedupScopeArg> for DedupScope {
    fn from(arg: DedupScopeArg) -> DedupScope {
        match arg {
            DedupScopeArg::Server => DedupScope::Server,
            DedupScopeArg::Org => DedupScope::Org,
            DedupScopeArg::Repo => DedupScope::Repo,
        }
    }
}
