//! The history pages of a repository: a revision's commits, one commit's changes, and a
//! file's versions with what each LFS version cost (chunks.rs compares each with the older
//! versions on its page and up to [`COST_LOOKBACK`] more).

use axum::response::Response;

use git_xet_web::model::{
    Change, ChangeKind, CommitPage, CommitsPage, FileVersion, HistoryPage, Paging, Tab,
    VersionState, Viewer,
};
use git_xet_web::{pages, CHANGES_LISTED, COMMITS_PER_PAGE, COST_LOOKBACK, VERSIONS_PER_PAGE};

use super::access::Readable;
use super::repo_pages::{chrome, commit_of};
use super::{chunks, commit_summary, gitview, html_ok};
use crate::error::{ServerError, ServerResult};
use crate::hub::valid_repo_path;
use crate::state::SharedState;
use git_xet_core::lfs::pointer::{Pointer, MAX_POINTER_SIZE};

/// `/{repo}/commits/{rev}`.
pub async fn commits(
    viewer: &Viewer,
    repo: &Readable,
    rev: &str,
    page: usize,
) -> ServerResult<Response> {
    let commit = commit_of(repo, rev).await?;
    let skip = page.saturating_mul(COMMITS_PER_PAGE);
    let mut list = gitview::log(&repo.dir, &commit, None, skip, COMMITS_PER_PAGE + 1).await?;
    let more = list.len() > COMMITS_PER_PAGE;
    list.truncate(COMMITS_PER_PAGE);
    let model = CommitsPage {
        chrome: chrome(repo, rev, Tab::Commits).await?,
        commits: list.into_iter().map(commit_summary).collect(),
        paging: Paging {
            page,
            per_page: COMMITS_PER_PAGE,
            more,
            total: None,
        },
    };
    Ok(html_ok(pages::history::commits(&model, viewer)))
}

/// `/{repo}/commit/{sha}`: the commit and the files it changed (against its first parent).
pub async fn commit(viewer: &Viewer, repo: &Readable, sha: &str) -> ServerResult<Response> {
    let sha = commit_of(repo, sha).await?;
    let (summary, body) = gitview::commit(&repo.dir, &sha).await?;
    let parent = summary.parents.first().cloned();
    let (raw, total) = gitview::changes(&repo.dir, &sha, parent.as_deref(), CHANGES_LISTED).await?;
    // Sizes of every blob before and after, and the LFS pointers among the small ones.
    let oids: Vec<String> = raw
        .iter()
        .flat_map(|c| [c.old.clone(), c.new.clone()])
        .flatten()
        .collect();
    let found = gitview::blobs(&repo.dir, &oids).await?;
    let small: Vec<String> = found
        .iter()
        .flatten()
        .filter(|(_, size)| *size <= MAX_POINTER_SIZE as u64)
        .map(|(oid, _)| oid.clone())
        .collect();
    let pointers = gitview::pointers(&repo.dir, &small).await?;
    let lookup = |oid: &Option<String>| -> (Option<u64>, bool) {
        let Some(oid) = oid else { return (None, false) };
        let size = found
            .iter()
            .flatten()
            .find(|(o, _)| o == oid)
            .map(|(_, s)| *s);
        match small
            .iter()
            .position(|o| o == oid)
            .and_then(|i| pointers[i].as_ref())
        {
            Some(p) => (Some(p.size), true),
            None => (size, false),
        }
    };
    let changes = raw
        .iter()
        .map(|c| {
            let (old_size, old_lfs) = lookup(&c.old);
            let (new_size, new_lfs) = lookup(&c.new);
            Change {
                kind: match c.status {
                    'A' => ChangeKind::Added,
                    'D' => ChangeKind::Deleted,
                    'T' => ChangeKind::TypeChanged,
                    _ => ChangeKind::Modified,
                },
                path: c.path.clone(),
                old_size,
                new_size,
                lfs: old_lfs || new_lfs,
            }
        })
        .collect();
    let model = CommitPage {
        chrome: chrome(repo, &sha, Tab::Commits).await?,
        commit: commit_summary(summary),
        body,
        changes,
        total_changes: total,
    };
    Ok(html_ok(pages::history::commit(&model, viewer)))
}

/// `/{repo}/commits/{rev}/{path}`: the commits that changed `path`, each with the version
/// it left, and for LFS versions their new and shared bytes.
pub async fn file_history(
    state: &SharedState,
    viewer: &Viewer,
    repo: &Readable,
    rev: &str,
    path: &str,
    page: usize,
) -> ServerResult<Response> {
    if !valid_repo_path(path) {
        return Err(ServerError::not_found(format!("no such path: {path:?}")));
    }
    let commit = commit_of(repo, rev).await?;
    let skip = page.saturating_mul(VERSIONS_PER_PAGE);
    let window = VERSIONS_PER_PAGE + COST_LOOKBACK;
    let commits = gitview::log(&repo.dir, &commit, Some(path), skip, window).await?;
    let names: Vec<String> = commits
        .iter()
        .map(|c| format!("{}:{path}", c.sha))
        .collect();
    let found = gitview::blobs(&repo.dir, &names).await?;
    let small: Vec<String> = found
        .iter()
        .flatten()
        .filter(|(_, size)| *size <= MAX_POINTER_SIZE as u64)
        .map(|(oid, _)| oid.clone())
        .collect();
    let read = gitview::pointers(&repo.dir, &small).await?;
    let pointer_of = |oid: &str| -> Option<Pointer> {
        small
            .iter()
            .position(|o| o == oid)
            .and_then(|i| read[i].clone())
    };
    let states: Vec<(Option<u64>, Option<Pointer>)> = found
        .iter()
        .map(|f| match f {
            Some((oid, size)) => (Some(*size), pointer_of(oid)),
            None => (None, None),
        })
        .collect();
    // Costs, oldest first over the whole window.
    let sha256s: Vec<[u8; 32]> = states
        .iter()
        .filter_map(|(_, p)| p.as_ref().map(|p| p.oid.0))
        .collect();
    let records = chunks::records(state, &repo.name, sha256s).await?;
    let mut oldest_first: Vec<_> = records.into_iter().rev().collect();
    let costs = chunks::version_costs(state, std::mem::take(&mut oldest_first)).await?;
    let mut costs = costs.into_iter().rev();
    let more = commits.len() > VERSIONS_PER_PAGE;
    let versions = commits
        .into_iter()
        .zip(states)
        .map(|(c, (size, pointer))| FileVersion {
            commit: commit_summary(c),
            state: match (size, pointer) {
                (None, _) => VersionState::Deleted,
                (_, Some(p)) => VersionState::Lfs {
                    size: p.size,
                    sha256: p.oid.to_hex(),
                    cost: costs.next().flatten(),
                },
                (Some(size), None) => VersionState::Plain { size },
            },
        })
        .take(VERSIONS_PER_PAGE)
        .collect();
    let model = HistoryPage {
        chrome: chrome(repo, rev, Tab::Commits).await?,
        path: path.to_string(),
        versions,
        paging: Paging {
            page,
            per_page: VERSIONS_PER_PAGE,
            more,
            total: None,
        },
        lookback: COST_LOOKBACK,
    };
    Ok(html_ok(pages::history::file_history(&model, viewer)))
}
