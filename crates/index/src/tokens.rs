//! Token records: what `token create` made (never the token text itself), so that tokens can
//! be listed and revoked one by one without rotating the signing secret.

use crate::IndexResult;

/// One created token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    pub id: String,
    pub user: String,
    pub repo: String,
    /// `read`, `write` or `admin`.
    pub scope: String,
    /// Seconds since the Unix epoch.
    pub created: u64,
    pub expires: u64,
    pub revoked: bool,
}

pub trait TokenIndex {
    /// Records a new token. A second record with the same id is an error.
    fn record_token(&self, record: &TokenRecord) -> IndexResult<()>;

    /// Every recorded token, oldest first.
    fn tokens(&self) -> IndexResult<Vec<TokenRecord>>;

    /// Marks the token revoked. Returns `false` when no token has that id.
    fn revoke_token(&self, id: &str) -> IndexResult<bool>;

    /// Whether the token with this id was revoked (`false` for ids never recorded).
    fn token_revoked(&self, id: &str) -> IndexResult<bool>;
}
