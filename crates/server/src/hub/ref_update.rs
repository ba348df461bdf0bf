//! The last step of every Hub write: under the repository's writer lock (git/writers.rs),
//! the write's quarantined objects move into the repository and then its ref moves, only
//! from the state it was read in (`git update-ref NEW OLD`); then the change is made durable.
//! A ref that moved meanwhile leaves the objects out: the quarantine is deleted.

use crate::error::ServerError;
use crate::hub::access::Repo;
use crate::hub::quarantine::Quarantine;
use crate::hub::{gitread, gitwrite, HubResult};

/// Moves the branch `branch` from `old` to `new` (see [`ref_locked`]).
pub async fn branch_locked(
    repo: &Repo,
    quarantine: Quarantine,
    branch: &str,
    new: &str,
    old: Option<&str>,
) -> HubResult<bool> {
    let full = format!("refs/heads/{branch}");
    ref_locked(repo, Some(quarantine), &full, Some(new), old, "hub commit").await
}

/// Updates (or with `new` `None` deletes) the ref `full` if it is still at `old` (`None`: if
/// it does not exist), under the repository's writer lock, the objects of `quarantine`
/// moved in first, then makes the change durable. Whether it did.
pub async fn ref_locked(
    repo: &Repo,
    quarantine: Option<Quarantine>,
    full: &str,
    new: Option<&str>,
    old: Option<&str>,
    reason: &str,
) -> HubResult<bool> {
    let dir = repo.dir.clone();
    let started = std::time::SystemTime::now();
    let lock =
        tokio::task::spawn_blocking(move || git_xet_deployment::writers::WriterLock::acquire(&dir))
            .await
            .map_err(ServerError::from)?
            .map_err(ServerError::from)?;
    // Checked before the objects move in, so that a write that lost the race leaves none
    // (update-ref below still decides, against a push arriving in between).
    if current(repo, full).await?.as_deref() != old {
        return Ok(false);
    }
    if let Some(quarantine) = quarantine {
        tokio::task::spawn_blocking(move || quarantine.migrate())
            .await
            .map_err(ServerError::from)?
            .map_err(ServerError::from)?;
    }
    let moved = gitwrite::update_ref(&repo.dir, full, new, old, reason).await?;
    let dir = repo.dir.clone();
    tokio::task::spawn_blocking(move || git_xet_deployment::repos::sync_names(&dir, started))
        .await
        .map_err(ServerError::from)?
        .map_err(ServerError::from)?;
    drop(lock);
    Ok(moved)
}

/// The object the ref `full` points at; `None` when there is no such ref.
async fn current(repo: &Repo, full: &str) -> HubResult<Option<String>> {
    let out = gitread::run(&repo.dir, &["rev-parse", "--verify", "--quiet", full]).await?;
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok((out.status.success() && !id.is_empty()).then_some(id))
}
