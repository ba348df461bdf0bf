//! The server's page (`/`) and an organization's (`/{org}`): the repositories the viewer
//! may read with their usage and last push, and the bytes the most recent pushes brought
//! (from the reflogs receive-pack keeps, and the index's chunks), plus the storage tab of
//! one repository (what the status page gathers).

use axum::http::HeaderMap;
use axum::response::Response;

use git_xet_web::model::{
    HeadLfsFile, ListingPage, Lock, Push, PushBytes, RepoInfo, RepoRow, StatusPage, Tab, Usage,
    Viewer,
};
use git_xet_web::pages;

use super::access::{self, Credential, Readable};
use super::repo_pages::chrome;
use super::{chunks, gitview, html_ok};
use crate::error::{ServerError, ServerResult};
use crate::state::{blocking, SharedState};
use crate::status::scan;
use git_xet_core::lfs::pointer::MAX_POINTER_SIZE;
use git_xet_index::RepoName;

/// Pushes the storage chart covers (the most recent, over every listed repository).
const GROWTH_PUSHES: usize = 30;
/// Blobs of one push looked at for LFS pointers.
const BLOBS_PER_PUSH: usize = 2000;

fn usage(u: git_xet_index::stats::Usage) -> Usage {
    Usage {
        files: u.files,
        logical_bytes: u.logical_bytes,
        xorbs: u.xorbs,
        stored_bytes: u.stored_bytes,
    }
}

/// `/` (`org` `None`) or `/{org}`; an organization with no repository the viewer may read
/// is answered as missing.
pub async fn render(
    state: &SharedState,
    headers: &HeaderMap,
    viewer: &Viewer,
    org: Option<&str>,
) -> ServerResult<Response> {
    let credential = access::credential(state, headers)?;
    if matches!(credential, Credential::Anonymous) && !state.config.anonymous_read {
        return Err(git_xet_identity::auth::required().into());
    }
    let (st, prefix) = (state.clone(), org.map(|o| format!("{o}/")));
    // Only a reader without a token on an open server sees what every reader sees; a
    // token's page is of what it may read, even when nothing on disk was left out.
    let whole_server = org.is_none() && matches!(credential, Credential::Anonymous);
    let listed = blocking(move || {
        let root = st.config.repos_dir();
        let all = scan::repositories(&root).map_err(|e| ServerError::internal(e.to_string()))?;
        let (mut rows, mut pushes, mut hidden) = (Vec::new(), Vec::new(), false);
        for name in all {
            let in_org = prefix.as_ref().is_none_or(|p| {
                name.as_str()
                    .strip_prefix(p.as_str())
                    .is_some_and(|rest| !rest.contains('/'))
            });
            if !in_org {
                continue;
            }
            if !access::may_read(&st, &credential, &name)? {
                hidden = true;
                continue;
            }
            let recent = scan::recent_pushes(&name.bare_dir(&root));
            rows.push(RepoRow {
                repo: RepoInfo {
                    name: name.to_string(),
                    is_dataset: name.is_dataset(),
                    private: st.index.repo_private(&name)?,
                },
                usage: usage(st.index.repo_usage(&name)?),
                last_push: recent.first().map(|p| p.time),
            });
            pushes.extend(recent.into_iter().map(|p| (name.clone(), p)));
        }
        let server_wide = whole_server && !hidden;
        // The shown repositories' sum, never the index's server total: that also counts
        // repositories with no git repository here (CAS uploads alone), which the viewer may
        // not read. Repositories sharing xorbs are counted once each: an upper bound.
        let total = rows.iter().fold(Usage::default(), |t, r| Usage {
            files: t.files + r.usage.files,
            logical_bytes: t.logical_bytes + r.usage.logical_bytes,
            xorbs: t.xorbs + r.usage.xorbs,
            stored_bytes: t.stored_bytes + r.usage.stored_bytes,
        });
        Ok((rows, pushes, total, server_wide))
    });
    let org = org.map(str::to_string);
    let (repos, pushes, total, server_wide) = listed.await?;
    if org.is_some() && repos.is_empty() {
        return Err(ServerError::not_found(format!(
            "there is no organization {} here, or you may not see its repositories",
            org.as_deref().unwrap_or_default()
        )));
    }
    let model = ListingPage {
        org,
        total,
        server_wide,
        repos,
        growth: growth(state, pushes).await?,
    };
    Ok(html_ok(pages::listing::render(&model, viewer)))
}

/// The LFS bytes of the [`GROWTH_PUSHES`] most recent pushes, oldest first, and how many
/// of them were new: each push's new objects compared with every object before it here.
async fn growth(
    state: &SharedState,
    mut pushes: Vec<(RepoName, scan::Push)>,
) -> ServerResult<Vec<PushBytes>> {
    pushes.sort_by_key(|p| std::cmp::Reverse(p.1.time));
    pushes.truncate(GROWTH_PUSHES);
    pushes.reverse();
    let root = state.config.repos_dir();
    let mut seen = std::collections::HashSet::new();
    let (mut per_push, mut times) = (Vec::new(), Vec::new());
    for (repo, push) in &pushes {
        let dir = repo.bare_dir(&root);
        let oids = gitview::pushed_blobs(&dir, &push.old, &push.new, BLOBS_PER_PUSH).await?;
        let small: Vec<String> = gitview::blobs(&dir, &oids)
            .await?
            .into_iter()
            .flatten()
            .filter(|(_, size)| *size <= MAX_POINTER_SIZE as u64)
            .map(|(oid, _)| oid)
            .collect();
        let fresh: Vec<_> = gitview::pointers(&dir, &small)
            .await?
            .into_iter()
            .flatten()
            .filter(|p| seen.insert((repo.clone(), p.oid.0)))
            .collect();
        let records = chunks::records(state, repo, fresh.iter().map(|p| p.oid.0).collect()).await?;
        let logical: u64 = fresh.iter().map(|p| p.size).sum();
        per_push.push(records.into_iter().flatten().collect::<Vec<_>>());
        times.push((push.time, logical));
    }
    let costs = chunks::push_costs(state, per_push).await?;
    Ok(times
        .into_iter()
        .zip(costs)
        .map(|((time, logical), cost)| PushBytes {
            time,
            logical,
            new: cost.new,
        })
        .collect())
}

/// `/{repo}/status`: what the status page showed for the repository.
pub async fn status(
    state: &SharedState,
    viewer: &Viewer,
    repo: &Readable,
) -> ServerResult<Response> {
    let status = crate::status::build(state.clone(), repo.name.clone())
        .await?
        .ok_or_else(|| ServerError::not_found(format!("{} does not exist", repo.name)))?;
    let head = gitview::default_branch(&repo.dir)
        .await?
        .unwrap_or_else(|| "main".into());
    let model = StatusPage {
        chrome: chrome(repo, &head, Tab::Status).await?,
        usage: usage(status.usage),
        lfs_files: status
            .head
            .files
            .iter()
            .zip(&status.stored)
            .map(|(f, stored)| HeadLfsFile {
                path: f.path.clone(),
                size: f.size,
                sha256: f.oid.to_hex(),
                stored: *stored,
            })
            .collect(),
        lfs_total: status.head.total,
        lfs_total_bytes: status.head.total_bytes,
        pushes: status
            .pushes
            .into_iter()
            .map(|p| Push {
                refname: p.refname,
                old: p.old,
                new: p.new,
                who: p.who,
                time: p.time,
            })
            .collect(),
        locks: status
            .locks
            .into_iter()
            .map(|l| Lock {
                id: l.id,
                path: l.path,
                owner: l.owner,
                locked_at: l.locked_at,
            })
            .collect(),
        more_locks: status.more_locks,
    };
    Ok(html_ok(pages::status::render(&model, viewer)))
}
