//! CAS tokens of the `xet` transfer: the newest one the LFS server handed out, and a fresh
//! one fetched from the action's refresh URL (`href`) with the LFS credentials when the
//! client's has expired.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::action::{RefreshedToken, XetAction};
use crate::LfsError;
use git_xet_client::transport::{Authenticator, HttpFactory};
use git_xet_client::{ClientError, Token};

/// The newest token the LFS server handed out, for the client's refresh callback.
pub(crate) struct Tokens {
    refresh_url: String,
    action_authorization: Option<String>,
    auth: Arc<Authenticator>,
    http: HttpFactory,
    /// A token from a later action that the client has not used yet.
    pending: Mutex<Option<Token>>,
    last_seen: Mutex<String>,
}

impl Tokens {
    pub(crate) fn new(first: &XetAction, auth: Arc<Authenticator>, http: HttpFactory) -> Tokens {
        Tokens {
            refresh_url: first.refresh_url.clone(),
            action_authorization: first.authorization.clone(),
            auth,
            http,
            pending: Mutex::new(None),
            last_seen: Mutex::new(first.access_token.clone()),
        }
    }

    /// Keeps the token of a later action for the next refresh.
    pub(crate) fn offer(&self, action: &XetAction) {
        let mut last = self.last_seen.lock().unwrap_or_else(|p| p.into_inner());
        if *last != action.access_token {
            *last = action.access_token.clone();
            *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(
                Token::with_unix_expiry(action.access_token.clone(), action.token_expiration),
            );
        }
    }

    pub(crate) async fn refresh(self: Arc<Self>) -> Result<Token, ClientError> {
        let fresh = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(token) = fresh.filter(|t| !expires_within(t, 60)) {
            return Ok(token);
        }
        if self.refresh_url.is_empty() {
            return Err(ClientError::Auth(
                "the CAS token expired and the LFS server gave no refresh URL (retry the command)"
                    .into(),
            ));
        }
        let auth = match &self.action_authorization {
            Some(a) => Arc::new(Authenticator::with_header(a.clone())),
            None => self.auth.clone(),
        };
        let t: RefreshedToken = refresh_token(&self.http, &self.refresh_url, &auth)
            .await
            .map_err(|e| match e {
                LfsError::Http(t) => ClientError::Transport(*t),
                other => ClientError::Refresh(Box::new(other)),
            })?;
        Ok(Token::with_unix_expiry(t.access_token, t.exp))
    }
}

fn expires_within(token: &Token, secs: u64) -> bool {
    token
        .expires_at
        .is_some_and(|exp| exp <= SystemTime::now() + std::time::Duration::from_secs(secs))
}

/// Fetches a fresh CAS token from the action's `href` with the LFS credentials.
pub async fn refresh_token(
    http: &HttpFactory,
    url: &str,
    auth: &Authenticator,
) -> Result<RefreshedToken, LfsError> {
    let response = auth
        .send(http, url, || {
            Ok(http
                .request(reqwest::Method::GET, url)?
                .header("Accept", "application/json"))
        })
        .await?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(LfsError::status(
            "token refresh",
            git_xet_client::transport::shown_url(url),
            status.as_u16(),
            body.chars().take(200).collect(),
        ));
    }
    response
        .json::<RefreshedToken>()
        .await
        .map_err(|e| LfsError::BadAnswer {
            url: git_xet_client::transport::shown_url(url),
            detail: format!("token refresh: {e}"),
        })
}
