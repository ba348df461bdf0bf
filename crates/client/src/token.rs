//! Access tokens: the current one, when it expires, and how to get a new one.
//!
//! A token is refreshed through the caller's callback when it has less than
//! [`REFRESH_MARGIN`] left, and once more when the server answers 401. Concurrent requests
//! share one refresh. Tokens are never logged: [`Token`]'s `Debug` hides the secret.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{Mutex, RwLock};

use crate::error::{ClientError, Result};

/// Refresh this long before a token expires.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(30);

/// A bearer token and its expiry (None: does not expire or unknown).
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub secret: String,
    pub expires_at: Option<SystemTime>,
}

impl Token {
    pub fn new(secret: impl Into<String>, expires_at: Option<SystemTime>) -> Self {
        Token {
            secret: secret.into(),
            expires_at,
        }
    }

    /// A token whose expiry is given in unix seconds (as in `X-Xet-Token-Expiration`).
    pub fn with_unix_expiry(secret: impl Into<String>, exp: u64) -> Self {
        Token::new(secret, Some(UNIX_EPOCH + Duration::from_secs(exp)))
    }

    fn needs_refresh(&self, now: SystemTime) -> bool {
        self.expires_at
            .is_some_and(|exp| exp <= now + REFRESH_MARGIN)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("secret", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The future a refresh callback returns.
pub type RefreshFuture = Pin<Box<dyn Future<Output = Result<Token>> + Send>>;
/// Produces a fresh token (e.g. from the git-lfs token-refresh URL).
pub type RefreshFn = Arc<dyn Fn() -> RefreshFuture + Send + Sync>;

/// Where requests get their token from.
pub struct TokenSource {
    current: RwLock<Option<Token>>,
    refresh: Option<RefreshFn>,
    /// Serialises refreshes so that many requests waiting on an expired token cause one.
    refreshing: Mutex<()>,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSource")
            .field("refreshable", &self.refresh.is_some())
            .finish()
    }
}

impl TokenSource {
    /// No authentication (anonymous read servers).
    pub fn anonymous() -> Self {
        TokenSource {
            current: RwLock::new(None),
            refresh: None,
            refreshing: Mutex::new(()),
        }
    }

    /// A fixed token, never refreshed.
    pub fn fixed(token: Token) -> Self {
        TokenSource {
            current: RwLock::new(Some(token)),
            refresh: None,
            refreshing: Mutex::new(()),
        }
    }

    /// An initial token (optional: the callback is then asked first) and a refresh callback.
    pub fn refreshable(initial: Option<Token>, refresh: RefreshFn) -> Self {
        TokenSource {
            current: RwLock::new(initial),
            refresh: Some(refresh),
            refreshing: Mutex::new(()),
        }
    }

    pub fn can_refresh(&self) -> bool {
        self.refresh.is_some()
    }

    /// The token to send now, refreshing first when it is about to expire.
    pub async fn get(&self) -> Result<Option<Token>> {
        let now = SystemTime::now();
        let current = self.current.read().await.clone();
        match current {
            Some(t) if !t.needs_refresh(now) => Ok(Some(t)),
            None if self.refresh.is_none() => Ok(None),
            Some(t) if self.refresh.is_none() => Ok(Some(t)), // expired; the server decides
            stale => self.refresh_if_unchanged(stale.as_ref()).await.map(Some),
        }
    }

    /// Called after a 401 with the token that was refused: refreshes unless another request
    /// already did. Fails when there is no way to refresh.
    pub async fn refused(&self, refused: Option<&Token>) -> Result<Token> {
        if self.refresh.is_none() {
            return Err(ClientError::Auth(
                "the server refused the token (401) and no refresh is configured; get a new token"
                    .into(),
            ));
        }
        self.refresh_if_unchanged(refused).await
    }

    async fn refresh_if_unchanged(&self, seen: Option<&Token>) -> Result<Token> {
        let _guard = self.refreshing.lock().await;
        // Someone else may have refreshed while we waited for the lock.
        if let Some(current) = self.current.read().await.clone() {
            if Some(&current) != seen && !current.needs_refresh(SystemTime::now()) {
                return Ok(current);
            }
        }
        let refresh = self.refresh.as_ref().expect("checked by callers");
        tracing::debug!("refreshing the access token");
        let fresh = refresh().await.map_err(|e| match e {
            ClientError::Auth(_) | ClientError::Refresh(_) => e,
            other => ClientError::Refresh(Box::new(other)),
        })?;
        *self.current.write().await = Some(fresh.clone());
        Ok(fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn counting_refresh(counter: Arc<AtomicU32>) -> RefreshFn {
        Arc::new(move || {
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move {
                Ok(Token::new(
                    format!("fresh-{n}"),
                    Some(SystemTime::now() + Duration::from_secs(3600)),
                ))
            })
        })
    }

    #[tokio::test]
    async fn valid_token_is_used_as_is() {
        let counter = Arc::new(AtomicU32::new(0));
        let t = Token::new("a", Some(SystemTime::now() + Duration::from_secs(600)));
        let source = TokenSource::refreshable(Some(t.clone()), counting_refresh(counter.clone()));
        assert_eq!(source.get().await.unwrap(), Some(t));
        assert_eq!(counter.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn token_near_expiry_is_refreshed_once_for_concurrent_callers() {
        let counter = Arc::new(AtomicU32::new(0));
        let t = Token::new("old", Some(SystemTime::now() + Duration::from_secs(10)));
        let source = Arc::new(TokenSource::refreshable(
            Some(t),
            counting_refresh(counter.clone()),
        ));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let s = source.clone();
                tokio::spawn(async move { s.get().await.unwrap().unwrap().secret })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap(), "fresh-1");
        }
        assert_eq!(counter.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn refused_token_is_refreshed_but_not_twice() {
        let counter = Arc::new(AtomicU32::new(0));
        let t = Token::new("old", None);
        let source = TokenSource::refreshable(Some(t.clone()), counting_refresh(counter.clone()));
        let fresh = source.refused(Some(&t)).await.unwrap();
        assert_eq!(fresh.secret, "fresh-1");
        // A second request that was refused with the old token gets the new one.
        assert_eq!(source.refused(Some(&t)).await.unwrap().secret, "fresh-1");
        assert_eq!(counter.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn refused_without_refresh_is_an_auth_error() {
        let source = TokenSource::fixed(Token::new("t", None));
        let err = source.refused(None).await.unwrap_err();
        assert!(matches!(err, ClientError::Auth(_)), "{err}");
    }

    #[test]
    fn debug_hides_the_secret() {
        let t = Token::new("super-secret", None);
        assert!(!format!("{t:?}").contains("super-secret"));
    }
}
