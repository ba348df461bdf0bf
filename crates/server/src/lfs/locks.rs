//! The git-lfs file locking API (git-lfs's docs/api/locking.md): create, list, verify and
//! unlock, at `<repo>/info/lfs/locks`. A lock's owner is the user name its creator's token
//! carries; only that user, or any user forcing with an admin-scope token, removes it. The
//! pre-receive hook reads the same locks to refuse pushes that change other users' files.

use axum::body::Body;
use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;

use crate::body::read_limited;
use crate::error::ServerError;
use crate::lfs::{lfs_json, LfsResult};
use crate::state::{blocking, SharedState};
use git_xet_core::api::locks::{
    CreateLockRequest, ListLocksQuery, Lock as LockJson, LockList, LockOwner, LockResponse,
    UnlockRequest, VerifyLocksRequest, VerifyLocksResponse,
};
use git_xet_identity::auth::{Access, Scope};
use git_xet_index::RepoName;
use git_xet_index::{Lock, LockOutcome, LockPage, LockQuery};
use git_xet_io::time::rfc3339;

/// Locks per page when the client names no limit, and the most it may ask for.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;
/// Longest locked path accepted (git's own limit on most systems is PATH_MAX).
const MAX_PATH: usize = 4096;
const MAX_BODY: usize = 64 * 1024;

/// A lock as git-lfs reads it.
fn lock_json(lock: &Lock) -> LockJson {
    LockJson {
        id: lock.id.clone(),
        locked_at: rfc3339(lock.locked_at),
        owner: Some(LockOwner {
            name: lock.owner.clone(),
        }),
        path: lock.path.clone(),
    }
}

fn valid_path(path: &str) -> Result<(), ServerError> {
    if path.is_empty() || path.len() > MAX_PATH || path.chars().any(char::is_control) {
        return Err(ServerError::bad_request(format!(
            "invalid lock path {:?}: expected a path relative to the repository root, at most {MAX_PATH} bytes, without control characters",
            path.chars().take(80).collect::<String>()
        )));
    }
    Ok(())
}

/// Lock ids (and cursors, which are lock ids) are short ASCII words.
fn valid_id(what: &str, id: &str) -> Result<(), ServerError> {
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(ServerError::bad_request(format!(
            "invalid {what} {:?}",
            id.chars().take(80).collect::<String>()
        )));
    }
    Ok(())
}

fn page_limit(limit: Option<usize>) -> usize {
    match limit {
        None | Some(0) => DEFAULT_LIMIT,
        Some(n) => n.min(MAX_LIMIT),
    }
}

fn parse_body<T: serde::de::DeserializeOwned + Default>(
    bytes: &[u8],
    what: &str,
) -> Result<T, ServerError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ServerError::bad_request(format!("malformed {what}: {e}")))
}

/// The user a lock request acts for.
fn user_of(access: &Access) -> Result<String, ServerError> {
    access.user().map(str::to_string).ok_or_else(|| {
        ServerError::Forbidden("locks need an access token that names its user".into())
    })
}

/// The start of every lock change (create, verify, unlock): a write token that names its
/// user, then the request body (at most `MAX_BODY` bytes).
async fn change_request(
    state: &SharedState,
    repo: &RepoName,
    headers: &HeaderMap,
    body: Body,
    what: &str,
) -> LfsResult<(Access, String, bytes::Bytes)> {
    let access = state.authorize_repo(headers, repo, Scope::Write)?;
    let user = user_of(&access)?;
    let bytes = read_limited(body, headers, MAX_BODY, what).await?;
    Ok((access, user, bytes))
}

/// `POST locks`: 201 with the new lock, or 409 with the lock already held on the path.
pub async fn create(
    state: &SharedState,
    repo: &RepoName,
    headers: &HeaderMap,
    body: Body,
) -> LfsResult<Response> {
    let (_, owner, bytes) = change_request(state, repo, headers, body, "lock request").await?;
    let request: CreateLockRequest = serde_json::from_slice(&bytes)
        .map_err(|e| ServerError::bad_request(format!("malformed lock request: {e}")))?;
    valid_path(&request.path)?;
    let index = state.index.clone();
    let owned = repo.clone();
    // Bounded (`--max-locks-per-repo`): what a writer makes everyone who lists locks walk.
    let max = state.config.max_locks_per_repo;
    let outcome = blocking(move || {
        // Checked before the insert, not with it: concurrent requests may pass it together,
        // a few locks over is harmless; what matters is that the count stays bounded.
        if index.count_locks(&owned)? >= max {
            return Err(ServerError::InsufficientStorage(format!(
                "repository {owned} holds {max} locks, the most this server keeps per repository; unlock files no longer being edited (git lfs unlock)"
            )));
        }
        let id = format!("{:016x}", rand::random::<u64>());
        let now = git_xet_io::time::now_secs();
        Ok(index.create_lock(&owned, &request.path, &owner, &id, now)?)
    })
    .await?;
    Ok(match outcome {
        LockOutcome::Created(lock) => {
            tracing::info!(repo = %repo, path = %lock.path, owner = %lock.owner, "locked");
            let answer = LockResponse {
                lock: lock_json(&lock),
                message: None,
            };
            with_status(StatusCode::CREATED, lfs_json(&answer))
        }
        LockOutcome::Exists(lock) => {
            let answer = LockResponse {
                lock: lock_json(&lock),
                message: Some(format!("{} is already locked by {}", lock.path, lock.owner)),
            };
            with_status(StatusCode::CONFLICT, lfs_json(&answer))
        }
    })
}

fn with_status(status: StatusCode, mut response: Response) -> Response {
    *response.status_mut() = status;
    response
}

async fn page(state: &SharedState, repo: &RepoName, query: LockQuery) -> LfsResult<LockPage> {
    let index = state.index.clone();
    let owned = repo.clone();
    Ok(blocking(move || Ok(index.locks(&owned, &query)?)).await?)
}

/// `GET locks?path=&id=&cursor=&limit=&refspec=`.
pub async fn list(
    state: &SharedState,
    repo: &RepoName,
    headers: &HeaderMap,
    uri: &Uri,
) -> LfsResult<Response> {
    state.authorize_repo(headers, repo, Scope::Read)?;
    let Query(params) = Query::<ListLocksQuery>::try_from_uri(uri)
        .map_err(|e| ServerError::bad_request(format!("malformed lock query: {e}")))?;
    if let Some(path) = &params.path {
        valid_path(path)?;
    }
    for (what, id) in [("lock id", &params.id), ("cursor", &params.cursor)] {
        if let Some(id) = id {
            valid_id(what, id)?;
        }
    }
    let limit = match params.limit.as_deref() {
        None | Some("") => None,
        Some(text) => Some(text.parse::<usize>().map_err(|_| {
            ServerError::bad_request(format!(
                "invalid limit {:?}",
                text.chars().take(20).collect::<String>()
            ))
        })?),
    };
    let query = LockQuery {
        path: params.path,
        id: params.id,
        cursor: params.cursor,
        limit: page_limit(limit),
    };
    let page = page(state, repo, query).await?;
    Ok(lfs_json(&LockList {
        locks: page.locks.iter().map(lock_json).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// `POST locks/verify`: the locks that matter to a push, split into the caller's and others'.
pub async fn verify(
    state: &SharedState,
    repo: &RepoName,
    headers: &HeaderMap,
    body: Body,
) -> LfsResult<Response> {
    let (_, user, bytes) =
        change_request(state, repo, headers, body, "lock verify request").await?;
    let request: VerifyLocksRequest = parse_body(&bytes, "lock verify request")?;
    if let Some(cursor) = &request.cursor {
        if !cursor.is_empty() {
            valid_id("cursor", cursor)?;
        }
    }
    let query = LockQuery {
        cursor: request.cursor.filter(|c| !c.is_empty()),
        limit: page_limit(
            request
                .limit
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        ),
        ..LockQuery::default()
    };
    let page = page(state, repo, query).await?;
    let (ours, theirs): (Vec<&Lock>, Vec<&Lock>) = page.locks.iter().partition(|l| l.owner == user);
    Ok(lfs_json(&VerifyLocksResponse {
        next_cursor: page.next_cursor,
        ours: ours.into_iter().map(lock_json).collect(),
        theirs: theirs.into_iter().map(lock_json).collect(),
    }))
}

/// `POST locks/<id>/unlock`: the owner removes a lock; others only with `force` and an
/// admin-scope token.
pub async fn unlock(
    state: &SharedState,
    repo: &RepoName,
    id: &str,
    headers: &HeaderMap,
    body: Body,
) -> LfsResult<Response> {
    let (access, user, bytes) =
        change_request(state, repo, headers, body, "unlock request").await?;
    valid_id("lock id", id)?;
    let request: UnlockRequest = parse_body(&bytes, "unlock request")?;
    let query = LockQuery {
        id: Some(id.to_string()),
        limit: 1,
        ..LockQuery::default()
    };
    let not_found = || ServerError::not_found(format!("there is no lock {id} in {repo}"));
    let lock = page(state, repo, query)
        .await?
        .locks
        .pop()
        .ok_or_else(not_found)?;
    if lock.owner != user {
        if !request.force {
            return Err(ServerError::Forbidden(format!(
                "{} is locked by {}, not by you ({user}); an admin can remove it with `git lfs unlock --force`",
                lock.path, lock.owner
            ))
            .into());
        }
        if access.scope < Scope::Admin {
            return Err(ServerError::Forbidden(format!(
                "{} is locked by {}: only a token with the admin scope may force-unlock another user's lock",
                lock.path, lock.owner
            ))
            .into());
        }
    }
    let index = state.index.clone();
    let (owned, lock_id) = (repo.clone(), id.to_string());
    let removed = blocking(move || Ok(index.delete_lock(&owned, &lock_id)?))
        .await?
        .ok_or_else(not_found)?;
    tracing::info!(repo = %repo, path = %removed.path, owner = %removed.owner, by = %user, forced = request.force, "unlocked");
    Ok(lfs_json(&LockResponse {
        lock: lock_json(&removed),
        message: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_ids_and_limits_are_checked() {
        assert!(valid_path("art/a b.psd").is_ok());
        assert!(valid_path("").is_err());
        assert!(valid_path("a\nb").is_err());
        assert!(valid_path(&"a".repeat(MAX_PATH + 1)).is_err());
        assert!(valid_id("cursor", "00ab").is_ok());
        assert!(valid_id("cursor", "' OR 1=1").is_err());
        assert!(valid_id("cursor", "").is_err());
        assert_eq!(page_limit(None), DEFAULT_LIMIT);
        assert_eq!(page_limit(Some(0)), DEFAULT_LIMIT);
        assert_eq!(page_limit(Some(5)), 5);
        assert_eq!(page_limit(Some(1 << 40)), MAX_LIMIT);
    }
}
