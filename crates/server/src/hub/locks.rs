//! The lock half of push_check.rs: a Hub write may not change (modify, delete, rename away)
//! a file another user holds a git-lfs lock on. The changed paths are the hook's own
//! (`changed_paths` on the write as a ref update); the locks are read from the index
//! directly, as the hook's `locked-paths` route does.

use crate::error::ServerError;
use crate::hub::access::Repo;
use crate::hub::HubResult;
use crate::state::{blocking, SharedState};
use git_xet_hook::git::Git;
use git_xet_hook::lock_check::{changed_paths, RefUpdate};
use git_xet_index::LockQuery;

/// Refuses (403) `update` when it changes a file another user has locked; `git` runs in
/// the repository (with the write's quarantine, if any).
pub async fn refuse_locked(
    state: &SharedState,
    repo: &Repo,
    git: &Git,
    update: &RefUpdate,
) -> HubResult<()> {
    let (index, name) = (state.index.clone(), repo.name.clone());
    let (git, update) = (git.clone(), update.clone());
    let user = repo.access.user().map(str::to_string);
    let locked = blocking(move || {
        let any = LockQuery {
            limit: 1,
            ..LockQuery::default()
        };
        // No lock in the repository (the usual case): nothing to diff.
        if index.locks(&name, &any)?.locks.is_empty() {
            return Ok(Vec::new());
        }
        let changed = changed_paths(&git, &[update])
            .map_err(|e| ServerError::internal(format!("listing what the commit changes: {e}")))?;
        let mut locked = Vec::new();
        for path in changed {
            let query = LockQuery {
                path: Some(path),
                limit: 1,
                ..LockQuery::default()
            };
            for lock in index.locks(&name, &query)?.locks {
                if user.as_deref() != Some(lock.owner.as_str()) {
                    locked.push(format!("{} (locked by {})", lock.path, lock.owner));
                }
            }
        }
        Ok(locked)
    })
    .await?;
    if locked.is_empty() {
        return Ok(());
    }
    Err(ServerError::Forbidden(format!(
        "the change touches files another user has locked: {}; ask them to unlock (git lfs unlock), or an admin to force it",
        locked.join(", ")
    ))
    .into())
}
