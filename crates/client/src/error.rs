//! The client layer's one error type. Every variant says what was being done and why it
//! failed, in words a user can act on; tokens never appear in messages.

use std::path::PathBuf;

use git_xet_core::CoreError;

/// Everything the client can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with a status that retrying will not fix (4xx other than 401/429,
    /// or 401 after a token refresh). `reason` is the server's own explanation.
    #[error("{what}: server answered {status}{}", reason_suffix(.reason))]
    Http {
        what: String,
        status: u16,
        reason: String,
    },

    /// The server kept failing (5xx, 429, connection errors, timeouts) until the retry budget
    /// ran out.
    #[error("{what}: gave up after {attempts} attempts over {elapsed_secs:.1}s: {last}")]
    RetriesExhausted {
        what: String,
        attempts: u32,
        elapsed_secs: f64,
        last: String,
    },

    /// The token was refused and no refresh was possible.
    #[error("authentication failed: {0}")]
    Auth(String),

    /// Refreshing the token failed; the source (the refresh callback's error) says why.
    #[error("authentication failed: refreshing the access token failed: {0}")]
    Refresh(Box<dyn std::error::Error + Send + Sync>),

    /// The server said something that does not follow the protocol.
    #[error("{what}: invalid response from the server: {reason}")]
    Protocol { what: String, reason: String },

    /// The server answered a request with a body that is not the API's answer (a proxy's
    /// error page, a server of another kind, a truncated body): nothing is assumed from it.
    #[error(
        "{what}: the server answered {status} with something that is not the CAS API's answer \
         ({reason}); it began {excerpt:?}. Check that the CAS URL points at a XET server and \
         not at a proxy or web page"
    )]
    MalformedAnswer {
        what: String,
        status: u16,
        reason: String,
        excerpt: String,
    },

    /// Downloaded data is not what it claims to be (bad chunk header, wrong length, wrong
    /// hash). Nothing was written to the destination.
    #[error("{what}: data failed verification: {reason}")]
    Corrupt { what: String, reason: String },

    /// A local file or cache could not be read or written.
    // The cause is part of the message (and deliberately not `source()`, so that error
    // chains do not print it twice).
    #[error("{context} ({}): {cause}", .path.display())]
    Io {
        context: String,
        path: PathBuf,
        cause: std::io::Error,
    },

    /// A protocol-core structure was rejected.
    #[error("{context}: {cause}")]
    Core { context: String, cause: CoreError },

    /// The caller asked for something impossible (bad range, bad configuration).
    #[error("{0}")]
    InvalidArgument(String),

    /// A request could not be made at all: TLS, a proxy, or an unusable HTTP setting.
    #[error(transparent)]
    Transport(#[from] crate::transport::TransportError),

    /// The operation was abandoned (a worker stopped, the session was dropped).
    #[error("{0}")]
    Aborted(String),

    /// The server refused the shard of an upload that reused xorbs the local shard cache
    /// (or an earlier global dedup answer) said it holds: it no longer does (restored from
    /// a backup, reset, or its xorbs collected). This server's cache was cleared, so the
    /// same upload again sends those chunks.
    #[error(
        "{refusal}; the upload reused xorbs this server no longer holds, so its local shard \
         cache was cleared: retrying uploads them again"
    )]
    StaleDedup { refusal: Box<ClientError> },
}

/// Why a local cache file (a chunk list, a reconstruction record) was rejected. Such files
/// are only caches: the caller drops them and goes on without.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheDamage {
    /// The file does not start as one of its kind (`kind` names it).
    #[error("not a {0}")]
    NotOne(&'static str),
    /// Its checksum (or, in an old format, the file hash its chunks give) does not match.
    #[error("its checksum does not match")]
    Checksum,
    #[error("it is truncated")]
    Truncated,
    /// A count that the bytes after it contradict.
    #[error("{count} entries announced, {bytes} bytes of entries")]
    Count { count: usize, bytes: usize },
    #[error("trailing bytes after the content")]
    Trailing,
}

fn reason_suffix(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}

impl ClientError {
    pub fn io(
        context: impl Into<String>,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        ClientError::Io {
            context: context.into(),
            path: path.into(),
            cause: source,
        }
    }

    pub fn core(context: impl Into<String>, source: CoreError) -> Self {
        ClientError::Core {
            context: context.into(),
            cause: source,
        }
    }

    pub fn protocol(what: impl Into<String>, reason: impl Into<String>) -> Self {
        ClientError::Protocol {
            what: what.into(),
            reason: reason.into(),
        }
    }

    /// An answer (`body`, with `status`) that does not parse as the API's JSON.
    pub fn malformed(
        what: impl Into<String>,
        status: u16,
        body: &[u8],
        cause: &serde_json::Error,
    ) -> Self {
        const EXCERPT: usize = 120;
        let text = String::from_utf8_lossy(&body[..body.len().min(EXCERPT)]);
        let mut excerpt: String = text.chars().filter(|c| !c.is_control()).collect();
        if body.len() > EXCERPT {
            excerpt.push('…');
        }
        ClientError::MalformedAnswer {
            what: what.into(),
            status,
            reason: cause.to_string(),
            excerpt,
        }
    }

    pub fn corrupt(what: impl Into<String>, reason: impl Into<String>) -> Self {
        ClientError::Corrupt {
            what: what.into(),
            reason: reason.into(),
        }
    }

    /// The HTTP status when the server refused the request.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether this is a "not found" answer from the server.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }
}

pub type Result<T, E = ClientError> = std::result::Result<T, E>;
