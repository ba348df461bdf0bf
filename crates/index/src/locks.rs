//! File locks (the git-lfs locking API): at most one per path and repository, owned by a
//! token's user name. Locks are repository-wide: git-lfs's API document asks servers to use
//! a request's `ref` for authorization only.

use crate::repo_name::RepoName;
use crate::IndexResult;

/// A held lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    pub id: String,
    pub path: String,
    pub owner: String,
    /// Seconds since the Unix epoch.
    pub locked_at: u64,
}

/// What a lock request found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockOutcome {
    Created(Lock),
    /// The path was already locked (by anyone): that lock.
    Exists(Lock),
}

/// Which locks to list: those matching every given filter, ordered by id, starting at
/// `cursor` (an id), at most `limit`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockQuery {
    pub path: Option<String>,
    pub id: Option<String>,
    pub cursor: Option<String>,
    pub limit: usize,
}

/// One page of locks, and the cursor of the next when there are more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockPage {
    pub locks: Vec<Lock>,
    pub next_cursor: Option<String>,
}

pub trait LockIndex {
    /// Locks `path` for `owner` under a new id, unless it is locked already.
    fn create_lock(
        &self,
        repo: &RepoName,
        path: &str,
        owner: &str,
        id: &str,
        now: u64,
    ) -> IndexResult<LockOutcome>;

    fn locks(&self, repo: &RepoName, query: &LockQuery) -> IndexResult<LockPage>;

    /// How many locks `repo` holds.
    fn count_locks(&self, repo: &RepoName) -> IndexResult<u64>;

    /// Removes the lock with this id; returns it, or `None` when there is none.
    fn delete_lock(&self, repo: &RepoName, id: &str) -> IndexResult<Option<Lock>>;
}
