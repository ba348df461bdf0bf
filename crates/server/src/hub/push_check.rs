//! A ref the Hub API creates or moves passes the checks a `git push` of the same ref update
//! passes in the pre-receive hook (hook/mod.rs), with the hook's own code for what the update
//! brings: the commits no ref reaches yet (the write's own, in its quarantine, or ones already
//! stored that no ref names, such as a deleted branch's) may not change a file another user
//! has locked (locks.rs), and the LFS pointers they hold must name objects the repository
//! stores. The index is read directly, as the hook's routes do.

use crate::error::ServerError;
use crate::hub::access::Repo;
use crate::hub::quarantine::Quarantine;
use crate::hub::HubResult;
use crate::state::{blocking, SharedState};
use git_xet_hook::git::Git;
use git_xet_hook::lock_check::RefUpdate;
use git_xet_hook::newly_referenced;

/// Objects looked up in one index query.
const LOOKUPS_PER_QUERY: usize = 1000;
/// Missing objects named in the refusal; the rest are counted.
const NAMED_AT_MOST: usize = 20;

/// The ref `full` moving from `old` (`None`: created) to `new`.
pub struct Update<'a> {
    pub full: &'a str,
    pub old: Option<&'a str>,
    pub new: &'a str,
}

/// Refuses the update as the pre-receive hook would refuse its push: 403 when it changes a
/// file another user has locked, 400 when it brings LFS pointers to objects the repository
/// does not hold. `quarantine` holds the write's new objects, if it made any.
pub async fn refuse_as_a_push(
    state: &SharedState,
    repo: &Repo,
    quarantine: Option<&Quarantine>,
    update: Update<'_>,
) -> HubResult<()> {
    let mut git = Git::in_dir(repo.dir.clone());
    if let Some(q) = quarantine {
        git = git.with_env(q.env());
    }
    let update = RefUpdate {
        old: update.old.map_or_else(|| "0".repeat(40), str::to_string),
        new: update.new.to_string(),
        name: update.full.to_string(),
    };
    crate::hub::locks::refuse_locked(state, repo, &git, &update).await?;
    refuse_missing_objects(state, repo, git, update.new).await
}

/// 400 when the objects `tip` brings hold LFS pointers to objects the repository lacks.
async fn refuse_missing_objects(
    state: &SharedState,
    repo: &Repo,
    git: Git,
    tip: String,
) -> HubResult<()> {
    let (index, name) = (state.index.clone(), repo.name.clone());
    let missing = blocking(move || {
        let referenced = newly_referenced(&git, &[tip])
            .map_err(|e| ServerError::internal(format!("listing the LFS pointers: {e}")))?;
        let mut missing = Vec::new();
        for part in referenced.chunks(LOOKUPS_PER_QUERY) {
            let sha256s: Vec<[u8; 32]> = part.iter().map(|r| r.oid.0).collect();
            let stored = index.repo_files_by_sha256(&name, &sha256s)?;
            for (wanted, stored) in part.iter().zip(stored) {
                if stored.is_none_or(|f| f.size != wanted.size) {
                    missing.push(format!("{} ({} bytes)", wanted.oid, wanted.size));
                }
            }
        }
        Ok(missing)
    })
    .await?;
    if missing.is_empty() {
        return Ok(());
    }
    let mut named = missing[..missing.len().min(NAMED_AT_MOST)].join(", ");
    if missing.len() > NAMED_AT_MOST {
        named.push_str(&format!(" and {} more", missing.len() - NAMED_AT_MOST));
    }
    Err(ServerError::bad_request(format!(
        "the change holds LFS pointers to {} object(s) not stored for {}: {named}; upload \
         them first (hf_xet, or git lfs push), then try again",
        missing.len(),
        repo.name
    ))
    .into())
}
