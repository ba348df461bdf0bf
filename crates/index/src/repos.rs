//! What the index keeps about a hosted repository itself: its visibility, as `create_repo`
//! (the Hub API) set it. A repository without a record (pushed with git) is not private.

use crate::repo_name::RepoName;
use crate::IndexResult;

pub trait RepoIndex {
    /// Records whether `repo` is private (replacing an earlier record).
    fn set_repo_private(&self, repo: &RepoName, private: bool) -> IndexResult<()>;

    /// Whether `repo` was recorded private (`false` without a record).
    fn repo_private(&self, repo: &RepoName) -> IndexResult<bool>;

    /// Drops `repo`'s record (it was deleted; a new one of that name starts afresh).
    fn forget_repo(&self, repo: &RepoName) -> IndexResult<()>;
}
