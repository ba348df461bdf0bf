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
    pub name: String,
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

#[derive(Debug, Clone)]
pub struct StatusPage {
    /// The repository of a one-repository page.
    pub only: Option<String>,
    pub generated: i64,
    /// The shown repositories' usage together: server-wide only when every repository is
    /// shown (`--anonymous-read`); a token sees the totals of what it may read, not the
    /// server's (which would tell it how much other tenants store).
    pub total: Usage,
    pub server_wide: bool,
    pub repos: Vec<RepoStatus>,
}

/// Whether a request on a repository path is a browser asking for the page rather than
/// git or git-lfs (which never ask for HTML).
pub fn wants_page(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::GET
        && headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/html"))
}

/// Gathers the page for `repos` (every hosted repository when `None`).
pub(crate) async fn build(
    state: SharedState,
    repos: Option<Vec<RepoName>>,
    only: Option<String>,
) -> ServerResult<StatusPage> {
    blocking(move || {
        let root = state.config.repos_dir();
        let mut hidden = false;
        let names: Vec<RepoName> = match &repos {
            Some(names) => names
                .iter()
                .filter(|r| r.bare_dir(&root).is_dir())
                .cloned()
                .collect(),
            // Every repository a reader without a token may see: private ones are left
            // out, and then the totals are those of the shown ones, not the server's.
            None => {
                let mut shown = Vec::new();
                let all =
                    scan::repositories(&root).map_err(|e| ServerError::internal(e.to_string()))?;
                for repo in all {
                    match state.index.repo_private(&repo)? {
                        true => hidden = true,
                        false => shown.push(repo),
                    }
                }
                shown
            }
        };
        let server_wide = repos.is_none() && !hidden;
        let mut repos = Vec::with_capacity(names.len());
        for repo in names {
            let dir = repo.bare_dir(&root);
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
            repos.push(RepoStatus {
                name: repo.to_string(),
                usage: state.index.repo_usage(&repo)?,
                head,
                stored,
                pushes: scan::recent_pushes(&dir),
                locks,
                more_locks: page.next_cursor.is_some(),
            });
        }
        let total = match server_wide {
            true => state.index.total_usage()?,
            // Distinct repositories share no xorb in this sum's eyes: an upper bound of what
            // they store, exact for one repository (a token's).
            false => repos.iter().fold(Usage::default(), |t, r| Usage {
                files: t.files + r.usage.files,
                logical_bytes: t.logical_bytes + r.usage.logical_bytes,
                xorbs: t.xorbs + r.usage.xorbs,
                stored_bytes: t.stored_bytes + r.usage.stored_bytes,
            }),
        };
        Ok(StatusPage {
            only,
            generated: git_xet_io::time::now_secs() as i64,
            total,
            server_wide,
            repos,
        })
    })
    .await
}
