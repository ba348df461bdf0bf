//! Errors of the Hub routes, answered as the Hub does: `X-Error-Code` names what is missing
//! (`huggingface_hub` maps it to its typed errors; on a plain-http endpoint it has no other
//! way to tell a missing repository from any 404), `X-Error-Message` and a JSON `error`
//! carry the text.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::error::ServerError;

/// What `huggingface_hub` sends back for a credential it could not use.
pub const INVALID_CREDENTIALS: &str = "Invalid credentials in Authorization header";

#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// No such repository, or one the caller may not read (never told apart).
    #[error("Repository not found: {0}")]
    RepoNotFound(String),
    /// No credential, where one is needed to see the repository: 401, still RepoNotFound.
    #[error(
        "Repository not found: {0}; send a token from `git xet server token create` as HF_TOKEN"
    )]
    NoCredential(String),
    #[error("Invalid rev id: {0}")]
    RevisionNotFound(String),
    /// A path missing at a commit (`commit` goes to `X-Repo-Commit`).
    #[error("{message}")]
    EntryNotFound {
        message: String,
        commit: Option<String>,
    },
    /// A credential that does not verify (bad signature, expired).
    #[error("{0}")]
    InvalidCredentials(String),
    #[error(transparent)]
    Server(#[from] ServerError),
}

pub type HubResult<T> = Result<T, HubError>;

impl From<git_xet_deployment::repos::RepoError> for HubError {
    fn from(e: git_xet_deployment::repos::RepoError) -> Self {
        HubError::Server(e.into())
    }
}

impl From<git_xet_index::IndexError> for HubError {
    fn from(e: git_xet_index::IndexError) -> Self {
        HubError::Server(e.into())
    }
}

impl IntoResponse for HubError {
    fn into_response(self) -> Response {
        let (status, code, commit) = match &self {
            HubError::RepoNotFound(_) => (StatusCode::NOT_FOUND, Some("RepoNotFound"), None),
            HubError::NoCredential(_) => (StatusCode::UNAUTHORIZED, Some("RepoNotFound"), None),
            HubError::RevisionNotFound(_) => {
                (StatusCode::NOT_FOUND, Some("RevisionNotFound"), None)
            }
            HubError::EntryNotFound { commit, .. } => {
                (StatusCode::NOT_FOUND, Some("EntryNotFound"), commit.clone())
            }
            HubError::InvalidCredentials(_) => (StatusCode::UNAUTHORIZED, None, None),
            HubError::Server(e) => (e.status(), None, None),
        };
        if status.is_server_error() {
            tracing::error!(%status, "{self}");
        }
        let message = self.to_string();
        // The client shows X-Error-Message first; for a bad credential it must be this text
        // (it then does not read the 401 as a missing repository).
        let header_message = match &self {
            HubError::InvalidCredentials(_) => INVALID_CREDENTIALS.to_string(),
            _ => message.clone(),
        };
        let body = serde_json::json!({ "error": message }).to_string();
        let mut response = (status, body).into_response();
        let h = response.headers_mut();
        h.insert(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(code) = code {
            h.insert("x-error-code", HeaderValue::from_static(code));
        }
        if let Ok(v) = HeaderValue::from_str(&ascii(&header_message)) {
            h.insert("x-error-message", v);
        }
        if let Some(v) = commit.and_then(|c| HeaderValue::from_str(&c).ok()) {
            h.insert("x-repo-commit", v);
        }
        response
    }
}

/// A header-safe rendering of a message (paths may hold any character).
fn ascii(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(500)
        .collect()
}
