//! The server layer's one error type. Each variant is an HTTP status; the message is the
//! reason a client sees in the JSON body (`{"error": ..., "message": ..., "request_id": ...}`;
//! `message`, the field git-lfs prints, ends with the request id).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use git_xet_core::CoreError;

use git_xet_identity::AuthError;
use git_xet_index::IndexError;

/// `WWW-Authenticate` / `LFS-Authenticate` challenge sent with every 401, so that git and
/// git-lfs ask their credential helpers and retry with HTTP Basic.
pub const AUTH_CHALLENGE: &str = "Basic realm=\"git-xet\"";

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{message}")]
    RangeNotSatisfiable { message: String, size: u64 },
    #[error("{0}")]
    NotImplemented(String),
    #[error("{0}")]
    Unavailable(String),
    /// The server's disk (or quota) is full: 507, which clients do not retry.
    #[error("{0}")]
    InsufficientStorage(String),
    #[error("internal error: {0}")]
    Internal(String),
}

pub type ServerResult<T> = Result<T, ServerError>;

impl ServerError {
    pub fn bad_request(msg: impl Into<String>) -> Self {
        ServerError::BadRequest(msg.into())
    }

    pub fn not_found(msg: impl Into<String>) -> Self {
        ServerError::NotFound(msg.into())
    }

    pub fn internal(msg: impl std::fmt::Display) -> Self {
        ServerError::Internal(msg.to_string())
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ServerError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ServerError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ServerError::Forbidden(_) => StatusCode::FORBIDDEN,
            ServerError::NotFound(_) => StatusCode::NOT_FOUND,
            ServerError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ServerError::Conflict(_) => StatusCode::CONFLICT,
            ServerError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ServerError::RangeNotSatisfiable { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
            ServerError::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            ServerError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ServerError::InsufficientStorage(_) => StatusCode::INSUFFICIENT_STORAGE,
            ServerError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The response with a chosen JSON content type (git-lfs wants its own media type).
    pub fn into_response_as(self, content_type: &'static str) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(%status, "{self}");
        }
        let error = self.to_string();
        // `message` is what git-lfs prints: it carries the request id for the user to report.
        let body = match crate::request_id::current() {
            Some(id) => serde_json::json!({
                "error": error,
                "message": format!("{error} (request id {id})"),
                "request_id": id,
            }),
            None => serde_json::json!({ "error": error, "message": error }),
        }
        .to_string();
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        match &self {
            ServerError::Unauthorized(_) => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(AUTH_CHALLENGE),
                );
                headers.insert("lfs-authenticate", HeaderValue::from_static(AUTH_CHALLENGE));
            }
            ServerError::RangeNotSatisfiable { size, .. } => {
                if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                    headers.insert(header::CONTENT_RANGE, v);
                }
            }
            _ => {}
        }
        response
    }
}

impl From<git_xet_index::InvalidRepoName> for ServerError {
    fn from(e: git_xet_index::InvalidRepoName) -> Self {
        ServerError::BadRequest(e.to_string())
    }
}

impl IntoResponse for ServerError {
    fn into_response(self) -> Response {
        self.into_response_as("application/json")
    }
}

impl From<CoreError> for ServerError {
    fn from(e: CoreError) -> Self {
        ServerError::BadRequest(e.to_string())
    }
}

impl ServerError {
    /// 507 for a full disk or quota.
    pub fn disk_full(detail: impl std::fmt::Display) -> Self {
        ServerError::InsufficientStorage(format!(
            "the server is out of disk space ({detail}); nothing was stored: the server's \
             administrator must free space, then retry"
        ))
    }
}

impl From<std::io::Error> for ServerError {
    fn from(e: std::io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => ServerError::disk_full(e),
            _ => ServerError::Internal(format!("i/o: {e}")),
        }
    }
}

/// The index's failures by what failed: unreachable or busy is 503 (a later try may work),
/// a full disk 507 (it will not), a collected xorb 409 (upload it again).
impl From<IndexError> for ServerError {
    fn from(e: IndexError) -> Self {
        let text = e.with_causes();
        match e {
            IndexError::DiskFull { .. } => ServerError::disk_full(text),
            IndexError::Unavailable { .. } | IndexError::Busy { .. } => {
                ServerError::Unavailable(format!("{text}; retry shortly"))
            }
            IndexError::XorbCollected(_) => ServerError::Conflict(text),
            IndexError::Damaged { .. }
            | IndexError::Corrupt(_)
            | IndexError::SchemaTooNew { .. }
            | IndexError::Internal { .. } => ServerError::Internal(text),
        }
    }
}

/// A refused credential by what was refused: unauthenticated 401, too little 403, and a
/// repository the credential does not reach 404, as a missing one.
impl From<AuthError> for ServerError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Unauthenticated(why) => ServerError::Unauthorized(why),
            AuthError::Forbidden(why) => ServerError::Forbidden(why),
            AuthError::NotReached(why) => ServerError::NotFound(why),
        }
    }
}

/// A hosted repository's failure: a full disk is 507 as for any write, the rest internal.
impl From<git_xet_deployment::repos::RepoError> for ServerError {
    fn from(e: git_xet_deployment::repos::RepoError) -> Self {
        use git_xet_deployment::repos::RepoError;
        match e {
            RepoError::Git(why) => ServerError::Internal(why),
            RepoError::Io(e) => ServerError::from(e),
            RepoError::Task(e) => ServerError::from(e),
        }
    }
}

impl From<tokio::task::JoinError> for ServerError {
    fn from(e: tokio::task::JoinError) -> Self {
        ServerError::Internal(format!("background task failed: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_507_with_its_cause() {
        for errno in [libc::ENOSPC, libc::EDQUOT] {
            let e = ServerError::from(std::io::Error::from_raw_os_error(errno));
            assert_eq!(e.status(), StatusCode::INSUFFICIENT_STORAGE);
            assert!(e.to_string().contains("out of disk space"), "{e}");
        }
        let other = ServerError::from(std::io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(other.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn auth_errors_answer_by_variant() {
        let cases = [
            (
                AuthError::Unauthenticated("no".into()),
                StatusCode::UNAUTHORIZED,
            ),
            (AuthError::Forbidden("no".into()), StatusCode::FORBIDDEN),
            (AuthError::NotReached("no".into()), StatusCode::NOT_FOUND),
        ];
        for (error, status) in cases {
            assert_eq!(ServerError::from(error).status(), status);
        }
    }

    #[test]
    fn index_errors_answer_by_variant() {
        let backend = || -> git_xet_index::BackendError { "engine says no".into() };
        let cases = [
            (
                IndexError::DiskFull { source: backend() },
                StatusCode::INSUFFICIENT_STORAGE,
            ),
            (
                IndexError::Unavailable {
                    reason: "down".into(),
                    source: Some(backend()),
                },
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (
                IndexError::Busy { source: backend() },
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (
                IndexError::XorbCollected(git_xet_core::MerkleHash::from_bytes([7; 32])),
                StatusCode::CONFLICT,
            ),
            (
                IndexError::Damaged { source: backend() },
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
            (
                IndexError::SchemaTooNew { found: 9, known: 2 },
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
            (
                IndexError::Internal {
                    detail: "query".into(),
                    source: Some(backend()),
                },
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
        ];
        for (error, status) in cases {
            let has_source = std::error::Error::source(&error).is_some();
            let answer = ServerError::from(error);
            assert_eq!(answer.status(), status, "{answer}");
            if status == StatusCode::INSUFFICIENT_STORAGE {
                assert!(answer.to_string().contains("full"), "{answer}");
            }
            // The backend's words reach the message through the chain.
            if has_source {
                assert!(answer.to_string().contains("engine says no"), "{answer}");
            }
        }
    }
}
