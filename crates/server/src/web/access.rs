//! Who may see which repository's pages, by the rules every route applies: a repository is
//! readable with a credential whose rules cover it, or without one where the server allows
//! anonymous reads and the repository is not private. Anything else answers exactly as a
//! missing repository does to the same viewer, so pages never tell a private repository's
//! existence: 404 (with a sign-in link), or, on a server without anonymous reads, 401 to
//! anyone without a credential, whatever the name.

use std::path::PathBuf;

use axum::http::HeaderMap;

use crate::error::{ServerError, ServerResult};
use crate::state::SharedState;
use git_xet_identity::auth::{self, Scope};
use git_xet_index::RepoName;

/// A repository the viewer may read.
pub struct Readable {
    pub name: RepoName,
    pub dir: PathBuf,
    pub private: bool,
}

fn missing(raw: &str) -> ServerError {
    ServerError::not_found(format!(
        "there is no repository {} here, or you may not see it",
        raw.chars().take(200).collect::<String>()
    ))
}

/// What a viewer's credential grants, checked once per request.
pub enum Credential {
    Anonymous,
    Rules(git_xet_identity::rules::RuleSet),
}

/// The request's credential: none, or one that verifies and is not revoked (401/403
/// otherwise).
pub fn credential(state: &SharedState, headers: &HeaderMap) -> ServerResult<Credential> {
    match auth::credential(headers) {
        None => Ok(Credential::Anonymous),
        Some(_) => Ok(Credential::Rules(state.authorize_user(headers)?.rules)),
    }
}

/// Whether `credential` may read `repo` (one index read for the private flag when
/// anonymous reads are on).
pub fn may_read(
    state: &SharedState,
    credential: &Credential,
    repo: &RepoName,
) -> ServerResult<bool> {
    if let Credential::Rules(rules) = credential {
        if rules.scope(repo).is_some() {
            return Ok(true);
        }
    }
    Ok(state.config.anonymous_read && !state.index.repo_private(repo)?)
}

/// Opens `raw` for reading, or the answer a missing repository gets.
pub fn open(state: &SharedState, headers: &HeaderMap, raw: &str) -> ServerResult<Readable> {
    let credential = credential(state, headers)?;
    let no_access = || match (&credential, state.config.anonymous_read) {
        (Credential::Anonymous, false) => auth::required().into(),
        _ => missing(raw),
    };
    let Ok(name) = RepoName::parse(raw) else {
        return Err(no_access());
    };
    if !may_read(state, &credential, &name)? {
        return Err(no_access());
    }
    // A credential that grants the repository goes through the routes' own check too.
    if let Credential::Rules(rules) = &credential {
        if rules.scope(&name).is_some() {
            state.authorize_repo(headers, &name, Scope::Read)?;
        }
    }
    let dir = name.bare_dir(&state.config.repos_dir());
    if state.config.no_git || !dir.join("HEAD").is_file() {
        return Err(no_access());
    }
    let private = state.index.repo_private(&name)?;
    Ok(Readable { name, dir, private })
}
