//! Authenticating HTTP requests as git-lfs does: credentials written in the remote URL,
//! else a credential store (git's credential helpers, through the git layer) asked with
//! `fill` when the server wants credentials (`lfs.<url>.access = basic`: before the first
//! request; unset: after a 401), `approve`d once a request they authorized succeeded and
//! `reject`ed when the server refuses them.

use std::fmt;
use std::sync::{Arc, Mutex};

use base64::Engine;
use reqwest::{RequestBuilder, Response, StatusCode};

use super::error::{shown_url, TransportError};
use super::factory::HttpFactory;

/// A user name and password, with what the store said about them (given back to it on
/// approve and reject).
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub username: String,
    pub password: String,
    /// The store's own answer (`key=value` pairs), if it came from one.
    pub attributes: Vec<(String, String)>,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Credential {{ username: {:?}, password: <redacted> }}",
            self.username
        )
    }
}

impl Credential {
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Credential {
        Credential {
            username: username.into(),
            password: password.into(),
            attributes: Vec::new(),
        }
    }

    /// The value of an HTTP `Authorization` header.
    pub fn basic_auth(&self) -> String {
        let raw = format!("{}:{}", self.username, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }
}

/// Where credentials come from and go back to (git's `git credential`, in the git layer).
/// Calls may block (a helper, a prompt).
pub trait CredentialStore: Send + Sync {
    fn fill(&self, url: &str) -> Result<Credential, TransportError>;
    fn approve(&self, url: &str, credential: &Credential);
    fn reject(&self, url: &str, credential: &Credential);
}

/// `lfs.<url>.access`, as git-lfs reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Access {
    /// Not set: a first request without credentials, then credentials after a 401.
    #[default]
    Unset,
    /// `none`: never ask for credentials.
    None,
    /// `basic` (or the old `private`): credentials from the first request.
    Basic,
    /// `negotiate`: Kerberos/SPNEGO, which git-xet does not do.
    Negotiate,
}

impl Access {
    pub fn parse(value: &str) -> Access {
        match value.trim().to_ascii_lowercase().as_str() {
            "basic" | "private" => Access::Basic,
            "none" => Access::None,
            "negotiate" => Access::Negotiate,
            _ => Access::Unset,
        }
    }
}

/// Where an `Authorization` header given from elsewhere comes from when it is needed (an
/// ssh `git-lfs-authenticate` answer, asked again once it expires). May block.
pub type HeaderSource = Arc<dyn Fn() -> Result<String, TransportError> + Send + Sync>;

/// How requests to one server are authenticated; shared by the requests of a command so
/// that credentials are asked for once.
pub struct Authenticator {
    access: Access,
    /// An `Authorization` header given from elsewhere (an ssh `git-lfs-authenticate`
    /// answer, an action's header): sent as is, never replaced.
    header: Option<String>,
    /// The same, asked for at each request (never git's credentials).
    header_source: Option<HeaderSource>,
    /// user:password written in the remote URL.
    from_url: Option<Credential>,
    store: Option<Arc<dyn CredentialStore>>,
    /// What the store gave, and whether it was approved yet.
    filled: Mutex<Option<(Credential, bool)>>,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("access", &self.access)
            .field("header", &self.header.as_ref().map(|_| "<redacted>"))
            .field("header_source", &self.header_source.is_some())
            .field("from_url", &self.from_url)
            .field("store", &self.store.is_some())
            .finish()
    }
}

impl Authenticator {
    /// Credentials from `from_url` if given, else from `store` as `access` says.
    pub fn new(
        access: Access,
        from_url: Option<Credential>,
        store: Option<Arc<dyn CredentialStore>>,
    ) -> Authenticator {
        Authenticator {
            access,
            header: None,
            header_source: None,
            from_url,
            store,
            filled: Mutex::new(None),
        }
    }

    /// Sends `header` as the `Authorization` of every request.
    pub fn with_header(header: impl Into<String>) -> Authenticator {
        Authenticator {
            header: Some(header.into()),
            ..Authenticator::anonymous()
        }
    }

    /// Sends what `source` gives as the `Authorization` of every request, asking it when
    /// a request is made (not before: a command that sends nothing never asks).
    pub fn with_header_source(source: HeaderSource) -> Authenticator {
        Authenticator {
            header_source: Some(source),
            ..Authenticator::anonymous()
        }
    }

    /// The `Authorization` given from elsewhere (an ssh answer), if this authenticator
    /// sends one; asking its source may block.
    pub fn given_authorization(&self) -> Option<Result<String, TransportError>> {
        match (&self.header, &self.header_source) {
            (Some(h), _) => Some(Ok(h.clone())),
            (None, Some(source)) => Some(source()),
            (None, None) => None,
        }
    }

    /// No credentials at all.
    pub fn anonymous() -> Authenticator {
        Authenticator::new(Access::None, None, None)
    }

    fn filled(&self) -> Option<Credential> {
        let f = self.filled.lock().unwrap_or_else(|p| p.into_inner());
        f.as_ref().map(|(c, _)| c.clone())
    }

    async fn fill(&self, url: &str) -> Result<Credential, TransportError> {
        let Some(store) = self.store.clone() else {
            return Err(TransportError::NoCredentials {
                url: shown_url(url),
                reason: "no credential store".into(),
            });
        };
        let owned = url.to_string();
        let credential = tokio::task::spawn_blocking(move || store.fill(&owned))
            .await
            .map_err(|e| TransportError::NoCredentials {
                url: shown_url(url),
                reason: format!("the credential helper did not finish: {e}"),
            })??;
        *self.filled.lock().unwrap_or_else(|p| p.into_inner()) = Some((credential.clone(), false));
        Ok(credential)
    }

    fn settle(&self, url: &str, credential: &Credential, accepted: bool) {
        let Some(store) = &self.store else { return };
        let mut filled = self.filled.lock().unwrap_or_else(|p| p.into_inner());
        match filled.as_mut() {
            Some((c, approved)) if c == credential => {
                if accepted && !*approved {
                    *approved = true;
                    store.approve(url, credential);
                } else if !accepted {
                    store.reject(url, credential);
                    *filled = None;
                }
            }
            _ => {}
        }
    }

    /// Sends the request `build` makes for `url` (built again for a retry with credentials)
    /// with the authorization that applies, and returns any answer but a 401 it could not
    /// get past. The caller reads the status of what it gets.
    pub async fn send<B>(
        &self,
        http: &HttpFactory,
        url: &str,
        build: B,
    ) -> Result<Response, TransportError>
    where
        B: Fn() -> Result<RequestBuilder, TransportError>,
    {
        if let Some(header) = &self.header {
            let response = self.attempt(http, url, &build, Some(header)).await?;
            return refused(url, response);
        }
        if let Some(source) = self.header_source.clone() {
            let header = tokio::task::spawn_blocking(move || source())
                .await
                .map_err(|e| TransportError::NoCredentials {
                    url: shown_url(url),
                    reason: format!("asking for the authorization did not finish: {e}"),
                })??;
            let response = self.attempt(http, url, &build, Some(&header)).await?;
            return refused(url, response);
        }
        if let Some(c) = &self.from_url {
            let response = self
                .attempt(http, url, &build, Some(&c.basic_auth()))
                .await?;
            return refused(url, response);
        }
        if self.access == Access::Negotiate {
            return Err(TransportError::UnsupportedAuth {
                url: shown_url(url),
                scheme: "negotiate".into(),
            });
        }
        let mut credential = self.filled();
        if credential.is_none() && self.access == Access::Basic {
            credential = Some(self.fill(url).await?);
        }
        loop {
            let header = credential.as_ref().map(Credential::basic_auth);
            let response = self.attempt(http, url, &build, header.as_deref()).await?;
            if response.status() != StatusCode::UNAUTHORIZED {
                if let (Some(c), true) = (&credential, response.status().is_success()) {
                    self.settle(url, c, true);
                }
                return Ok(response);
            }
            match credential {
                Some(c) => {
                    tracing::debug!("{}: credentials refused (401)", shown_url(url));
                    self.settle(url, &c, false);
                    return refused(url, response);
                }
                None if self.access == Access::None || self.store.is_none() => {
                    return refused(url, response)
                }
                None => {
                    tracing::debug!(
                        "{}: 401 without credentials, asking for them",
                        shown_url(url)
                    );
                    credential = Some(self.fill(url).await?);
                }
            }
        }
    }

    async fn attempt<B>(
        &self,
        http: &HttpFactory,
        url: &str,
        build: &B,
        authorization: Option<&str>,
    ) -> Result<Response, TransportError>
    where
        B: Fn() -> Result<RequestBuilder, TransportError>,
    {
        let mut request = build()?;
        if let Some(a) = authorization {
            request = request.header(reqwest::header::AUTHORIZATION, a);
        }
        request.send().await.map_err(|e| http.classify(url, &e))
    }
}

/// A 401 as an error; any other answer as it is.
fn refused(url: &str, response: Response) -> Result<Response, TransportError> {
    if response.status() == StatusCode::UNAUTHORIZED {
        return Err(TransportError::AuthRefused {
            url: shown_url(url),
            status: 401,
        });
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_values() {
        assert_eq!(Access::parse("basic"), Access::Basic);
        assert_eq!(Access::parse("Private"), Access::Basic);
        assert_eq!(Access::parse("none"), Access::None);
        assert_eq!(Access::parse("negotiate"), Access::Negotiate);
        assert_eq!(Access::parse(""), Access::Unset);
    }

    #[test]
    fn basic_auth_header_hides_the_password_in_debug() {
        let c = Credential::new("x", "tok");
        assert_eq!(c.basic_auth(), "Basic eDp0b2s=");
        assert!(!format!("{c:?}").contains("tok"));
    }
}
