//! Branches and tags through the API: `create_branch`, `delete_branch`, `create_tag`,
//! `delete_tag`. A created ref passes the checks a `git push` of it would (push_check.rs):
//! from a commit no ref reaches (a deleted branch's, say), it brings that commit's changes,
//! and a change to a file another user has locked is refused. Each ref moves under the
//! repository's writer lock, only from the state it was read in (`git update-ref NEW OLD`),
//! as a commit's branch does (ref_update.rs); an annotated tag's object is written into a
//! quarantine that the repository takes in only then.

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::body::read_limited;
use crate::error::ServerError;
use crate::hub::access::{open, Repo};
use crate::hub::commit::who;
use crate::hub::gitwrite::{self, Author};
use crate::hub::info::commit_of;
use crate::hub::push_check::{refuse_as_a_push, Update};
use crate::hub::quarantine::Quarantine;
use crate::hub::ref_update::ref_locked;
use crate::hub::{gitread, HubError, HubResult};
use crate::state::SharedState;
use git_xet_identity::auth::Scope;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct BranchRequest {
    #[serde(default)]
    starting_point: Option<String>,
}

#[derive(Deserialize)]
struct TagRequest {
    tag: String,
    #[serde(default)]
    message: Option<String>,
}

/// A branch or tag name the API may create: one git takes (`check-ref-format`), not a
/// full ref or a commit id (which the Hub's revisions would read differently).
async fn checked_name(repo: &Repo, kind: &str, name: &str) -> HubResult<String> {
    let full = format!("refs/{kind}/{name}");
    let commit_like = name.len() == 40 && name.bytes().all(|b| b.is_ascii_hexdigit());
    if !gitread::plausible_rev(name)
        || name.starts_with("refs/")
        || commit_like
        || !gitwrite::valid_ref_name(&repo.dir, &full).await?
    {
        return Err(ServerError::bad_request(format!(
            "invalid {} name {:?}",
            if kind == "heads" { "branch" } else { "tag" },
            name.chars().take(100).collect::<String>()
        ))
        .into());
    }
    Ok(full)
}

fn conflict(what: &str) -> HubError {
    ServerError::Conflict(format!("{what} already exists")).into()
}

fn created() -> Response {
    (StatusCode::OK, axum::Json(serde_json::json!({}))).into_response()
}

/// `POST /api/{type}s/{repo}/branch/{branch}` (`{"startingPoint": rev}`, default the
/// default branch's head): 409 when it exists.
pub async fn create_branch(
    state: &SharedState,
    headers: &HeaderMap,
    (ns, name): (&str, &str),
    branch: &str,
    body: Body,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Write).await?;
    let bytes = read_limited(body, headers, 64 * 1024, "branch request").await?;
    let request: BranchRequest = if bytes.iter().all(u8::is_ascii_whitespace) {
        BranchRequest::default()
    } else {
        serde_json::from_slice(&bytes)
            .map_err(|e| ServerError::bad_request(format!("malformed branch request: {e}")))?
    };
    let full = checked_name(&repo, "heads", branch).await?;
    let start = match &request.starting_point {
        Some(rev) => commit_of(&repo, rev).await?,
        None => gitread::head(&repo.dir)
            .await?
            .ok_or_else(|| HubError::RevisionNotFound("HEAD".into()))?,
    };
    let update = Update {
        full: &full,
        old: None,
        new: &start,
    };
    refuse_as_a_push(state, &repo, None, update).await?;
    if !ref_locked(&repo, None, &full, Some(&start), None, "hub create_branch").await? {
        return Err(conflict(&format!("branch {branch}")));
    }
    tracing::info!(repo = %repo.name, %branch, commit = %start, "hub branch created");
    Ok(created())
}

/// `DELETE /api/{type}s/{repo}/branch/{branch}`: not the default branch.
pub async fn delete_branch(
    state: &SharedState,
    headers: &HeaderMap,
    (ns, name): (&str, &str),
    branch: &str,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Write).await?;
    let full = format!("refs/heads/{branch}");
    let old = gitread::resolve(&repo.dir, &full)
        .await?
        .ok_or_else(|| HubError::RevisionNotFound(branch.to_string()))?;
    if default_branch(&repo).await?.as_deref() == Some(full.as_str()) {
        return Err(ServerError::Forbidden(format!(
            "{branch} is the default branch: it cannot be deleted"
        ))
        .into());
    }
    if !ref_locked(&repo, None, &full, None, Some(&old), "hub delete_branch").await? {
        return Err(ServerError::Conflict(format!("{branch} moved meanwhile: try again")).into());
    }
    tracing::info!(repo = %repo.name, %branch, "hub branch deleted");
    Ok(created())
}

/// The ref HEAD names (`refs/heads/main`).
async fn default_branch(repo: &Repo) -> HubResult<Option<String>> {
    let out = gitread::run(&repo.dir, &["symbolic-ref", "--quiet", "HEAD"]).await?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok((out.status.success() && !name.is_empty()).then_some(name))
}

/// `POST /api/{type}s/{repo}/tag/{rev}` (`{"tag", "message"?}`): an annotated tag when a
/// message is given, else a lightweight one; 409 when it exists.
pub async fn create_tag(
    state: &SharedState,
    headers: &HeaderMap,
    (ns, name): (&str, &str),
    rev: &str,
    body: Body,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Write).await?;
    let bytes = read_limited(body, headers, 64 * 1024, "tag request").await?;
    let request: TagRequest = serde_json::from_slice(&bytes)
        .map_err(|e| ServerError::bad_request(format!("malformed tag request: {e}")))?;
    let full = checked_name(&repo, "tags", &request.tag).await?;
    let commit = commit_of(&repo, rev).await?;
    // An annotated tag is an object of its own: written into a quarantine.
    let (target, quarantine) = match request.message.as_deref().map(str::trim) {
        Some(message) if !message.is_empty() => {
            let (user, email) = who(&repo);
            let author = Author {
                name: &user,
                email: &email,
            };
            let quarantine = Quarantine::open(&repo.dir).await?;
            let tag =
                gitwrite::write_tag(&quarantine, &request.tag, &commit, message, &author).await?;
            (tag, Some(quarantine))
        }
        _ => (commit.clone(), None),
    };
    let update = Update {
        full: &full,
        old: None,
        new: &target,
    };
    refuse_as_a_push(state, &repo, quarantine.as_ref(), update).await?;
    let tagged = ref_locked(
        &repo,
        quarantine,
        &full,
        Some(&target),
        None,
        "hub create_tag",
    );
    if !tagged.await? {
        return Err(conflict(&format!("tag {}", request.tag)));
    }
    tracing::info!(repo = %repo.name, tag = %request.tag, %commit, "hub tag created");
    Ok(created())
}

/// `DELETE /api/{type}s/{repo}/tag/{tag}`.
pub async fn delete_tag(
    state: &SharedState,
    headers: &HeaderMap,
    (ns, name): (&str, &str),
    tag: &str,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Write).await?;
    if !gitread::plausible_rev(tag) {
        return Err(HubError::RevisionNotFound(tag.to_string()));
    }
    let full = format!("refs/tags/{tag}");
    let out = gitread::run(&repo.dir, &["rev-parse", "--verify", "--quiet", &full]).await?;
    let old = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || old.is_empty() {
        return Err(HubError::RevisionNotFound(tag.to_string()));
    }
    if !ref_locked(&repo, None, &full, None, Some(&old), "hub delete_tag").await? {
        return Err(ServerError::Conflict(format!("tag {tag} moved meanwhile: try again")).into());
    }
    tracing::info!(repo = %repo.name, %tag, "hub tag deleted");
    Ok(created())
}
