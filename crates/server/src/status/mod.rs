//! What a repository's storage tab shows (web/ renders it): the LFS files at HEAD with
//! their sizes and whether this server holds them, bytes stored against logical bytes (the
//! dedup ratio), recent pushes and the file locks held. The data comes from git (scan.rs)
//! and the index (index/stats.rs); access is the caller's (web/access.rs).

pub mod scan;

use axum::http::{header, HeaderMap, Method};

use crate::error::{ServerError, ServerResult};
use crate::state::{blocking, SharedState};
use git_xet_index::stats::Usage;
use git_xet_index::RepoName;
use git_xet_index::{Lock, LockQuery};

/// One repository as the page shows it.
#[derive(Debug, Clone)]
pub struct RepoStatus {
    pub usage: Usage,
    pub head: scan::HeadFiles,
    /// Per file of `head.files`: whether the index has it for this repository.
    pub stored: Vec<bool>,
    pub pushes: Vec<scan::Push>,
    /// The first [`MAX_LOCKS`] locks, by path; `more_locks` when there are others.
    pub locks: Vec<Lock>,
    pub more_locks: bool,
}

/// Most locks listed per repository (`git lfs locks` lists them all).
pub const MAX_LOCKS: usize = 200;

/// Whether a request on a repository path is a browser asking for the page rather than
/// git or git-lfs (which never ask for HTML).
pub fn wants_page(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::GET
        && headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/html"))
}

/// Gathers the storage tab of `repo`; `None` when it is not hosted here.
pub(crate) async fn build(state: SharedState, repo: RepoName) -> ServerResult<Option<RepoStatus>> {
    blocking(move || {
        let dir = repo.bare_dir(&state.config.repos_dir());
        if !dir.is_dir() {
            return Ok(None);
        }
        let head = scan::head_files(&dir).map_err(|e| ServerError::internal(e.to_string()))?;
        let mut stored = Vec::with_capacity(head.files.len());
        for file in &head.files {
            let known = state.index.repo_file_by_sha256(&repo, &file.oid.0)?;
            stored.push(known.is_some());
        }
        let query = LockQuery {
            limit: MAX_LOCKS,
            ..LockQuery::default()
        };
        let page = state.index.locks(&repo, &query)?;
        let mut locks = page.locks;
        locks.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Some(RepoStatus {
            usage: state.index.repo_usage(&repo)?,
            head,
            stored,
            pushes: scan::recent_pushes(&dir),
            locks,
            more_locks: page.next_cursor.is_some(),
        }))
    })
    .await
}
