//! HTTP with authentication and retries: every CAS request goes through [`Http::request`].
//!
//! The bearer token is attached only to URLs on the CAS server's own origin, never to
//! `fetch_info` URLs on other hosts (pre-signed storage or CDN URLs carry their own
//! authorization, and a token must not leak to them).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{RequestBuilder, Response, StatusCode};

use crate::error::{ClientError, Result};
use crate::retry::{is_retryable_status, retry_after, RetryPolicy, Verdict};
use crate::token::{Token, TokenSource};
use crate::transport::{HttpFactory, TransportError};

/// How one attempt ended, as far as retrying is concerned.
#[derive(Debug)]
pub enum AttemptError {
    /// Transient: try again (after the server's hint, if it gave one).
    Retry {
        reason: String,
        hint: Option<Duration>,
    },
    /// Permanent.
    Fatal(ClientError),
}

impl AttemptError {
    pub fn retry(reason: impl Into<String>) -> Self {
        AttemptError::Retry {
            reason: reason.into(),
            hint: None,
        }
    }
}

impl From<ClientError> for AttemptError {
    fn from(e: ClientError) -> Self {
        AttemptError::Fatal(e)
    }
}

/// Describes a transport error without the URL's query (which may hold a signature).
pub fn describe_transport_error(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_body() || e.is_decode() {
        "connection failed while transferring data"
    } else {
        "request failed"
    };
    match git_xet_io::error_chain::innermost(e) {
        Some(detail) if !detail.is_empty() => format!("{kind}: {detail}"),
        _ => kind.to_string(),
    }
}

/// The HTTP client shared by all requests of a [`crate::CasClient`].
#[derive(Debug, Clone)]
pub struct Http {
    client: reqwest::Client,
    factory: HttpFactory,
    tokens: Arc<TokenSource>,
    policy: RetryPolicy,
    /// `scheme://host:port` of the CAS server: the only origin that gets the token.
    origin: String,
}

/// Origin (`scheme://host[:port]`) of a URL, lowercase.
pub fn origin_of(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => u.origin().ascii_serialization().to_ascii_lowercase(),
        Err(_) => String::new(),
    }
}

impl Http {
    pub fn new(
        cas_url: &str,
        tokens: Arc<TokenSource>,
        policy: RetryPolicy,
        factory: &HttpFactory,
    ) -> Result<Self> {
        let client = factory.client_for(cas_url)?;
        let origin = origin_of(cas_url);
        if origin.is_empty() || origin == "null" {
            return Err(ClientError::InvalidArgument(format!(
                "invalid CAS URL `{cas_url}`"
            )));
        }
        Ok(Http {
            client,
            factory: factory.clone(),
            tokens,
            policy,
            origin,
        })
    }

    pub fn policy(&self) -> RetryPolicy {
        self.policy
    }

    pub fn tokens(&self) -> &Arc<TokenSource> {
        &self.tokens
    }

    /// Sends the request `build` makes, retrying transient failures, and hands a successful
    /// response to `consume`, whose own transient failures (e.g. the connection dropping
    /// mid-body) are retried too. `what` names the operation in errors and logs.
    pub async fn request<T, B, C, Fut>(
        &self,
        what: &str,
        url: &str,
        build: B,
        consume: C,
    ) -> Result<T>
    where
        B: Fn(&reqwest::Client) -> Result<RequestBuilder>,
        C: Fn(Response) -> Fut,
        Fut: Future<Output = std::result::Result<T, AttemptError>>,
    {
        let authenticate = origin_of(url) == self.origin;
        let started = Instant::now();
        let mut attempts = 0u32;
        let mut refreshed_after_401 = false;
        loop {
            attempts += 1;
            let token = if authenticate {
                self.tokens.get().await?
            } else {
                None
            };
            let request = self.factory.with_extra_headers(build(&self.client)?, url);
            let outcome = self.attempt(what, url, request, token.as_ref()).await;
            let outcome = match outcome {
                Ok(response) => consume(response).await,
                Err(e) => Err(e),
            };
            let (reason, hint) = match outcome {
                Ok(value) => return Ok(value),
                Err(AttemptError::Fatal(ClientError::Http { status: 401, .. }))
                    if authenticate && !refreshed_after_401 && self.tokens.can_refresh() =>
                {
                    refreshed_after_401 = true;
                    attempts -= 1; // a refresh is not a failure
                    tracing::info!("{what}: token refused (401), refreshing it");
                    self.tokens.refused(token.as_ref()).await?;
                    continue;
                }
                Err(AttemptError::Fatal(e)) => return Err(e),
                Err(AttemptError::Retry { reason, hint }) => (reason, hint),
            };
            match self.policy.verdict(attempts, started.elapsed(), hint) {
                Verdict::RetryAfter(delay) => {
                    tracing::warn!(
                        "{what}: {reason}; retrying in {:.1}s (attempt {attempts})",
                        delay.as_secs_f64()
                    );
                    tokio::time::sleep(delay).await;
                }
                Verdict::GiveUp => {
                    return Err(ClientError::RetriesExhausted {
                        what: what.to_string(),
                        attempts,
                        elapsed_secs: started.elapsed().as_secs_f64(),
                        last: reason,
                    })
                }
            }
        }
    }

    async fn attempt(
        &self,
        what: &str,
        url: &str,
        request: RequestBuilder,
        token: Option<&Token>,
    ) -> std::result::Result<Response, AttemptError> {
        let request = match token {
            Some(t) => request.bearer_auth(&t.secret),
            None => request,
        };
        let response = request.send().await.map_err(|e| {
            if e.is_builder() {
                return AttemptError::Fatal(ClientError::InvalidArgument(format!("{what}: {e}")));
            }
            match self.factory.classify(url, &e) {
                // Retrying does not change a certificate or a setting.
                e @ (TransportError::Tls { .. } | TransportError::Settings { .. }) => {
                    AttemptError::Fatal(e.into())
                }
                _ => AttemptError::retry(describe_transport_error(&e)),
            }
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let hint = retry_after(response.headers());
        let id = request_id(response.headers());
        let reason = error_reason(response).await;
        if is_retryable_status(status.as_u16()) {
            let reason = if reason.is_empty() {
                status.to_string()
            } else {
                format!("{status}: {reason}")
            };
            let reason = with_request_id(reason, id.as_deref());
            return Err(AttemptError::Retry { reason, hint });
        }
        let reason = match (status, reason.is_empty()) {
            (StatusCode::UNAUTHORIZED, true) => "the token was refused".to_string(),
            (StatusCode::FORBIDDEN, true) => "the token does not allow this".to_string(),
            (_, true) => status.canonical_reason().unwrap_or("").to_string(),
            (_, false) => reason,
        };
        Err(AttemptError::Fatal(ClientError::Http {
            what: what.to_string(),
            status: status.as_u16(),
            reason: with_request_id(reason, id.as_deref()),
        }))
    }
}

/// The id the server gave the request (`X-Request-Id`), when it is a short plain token: a
/// user's report quoting it finds the request in the server's log.
pub fn request_id(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let id = headers.get("x-request-id")?.to_str().ok()?;
    let sane = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    sane.then(|| id.to_string())
}

/// `reason` ending with `(request id ID)`, unless the server's own message already says it.
pub fn with_request_id(reason: String, id: Option<&str>) -> String {
    match id {
        Some(id) if !reason.contains(id) => format!("{reason} (request id {id})"),
        _ => reason,
    }
}

/// The server's explanation from an error body: `{"error": "..."}`, `{"message": ...}` or
/// plain text, shortened.
async fn error_reason(response: Response) -> String {
    const MAX: usize = 500;
    let body = match response.bytes().await {
        Ok(b) => b,
        Err(_) => return String::new(),
    };
    let text = String::from_utf8_lossy(&body[..body.len().min(4096)])
        .trim()
        .to_string();
    let text = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(map)) => ["error", "message", "detail"]
            .iter()
            .find_map(|k| map.get(*k).and_then(|v| v.as_str()).map(str::to_string))
            .unwrap_or(text),
        _ => text,
    };
    let mut text: String = text.chars().filter(|c| !c.is_control()).collect();
    if text.len() > MAX {
        let cut = (0..=MAX)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        assert_eq!(
            origin_of("http://127.0.0.1:8080/v1/x"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(origin_of("HTTPS://Example.com/a?b"), "https://example.com");
        assert_ne!(
            origin_of("http://127.0.0.1:8080/"),
            origin_of("http://127.0.0.1:8081/")
        );
        assert_eq!(origin_of("not a url"), "");
    }

    #[test]
    fn request_ids_are_appended_once_and_only_when_sane() {
        let mut headers = reqwest::header::HeaderMap::new();
        assert_eq!(request_id(&headers), None);
        headers.insert("x-request-id", "ab12-cd".parse().unwrap());
        let id = request_id(&headers);
        assert_eq!(id.as_deref(), Some("ab12-cd"));
        assert_eq!(
            with_request_id("denied".into(), id.as_deref()),
            "denied (request id ab12-cd)"
        );
        let said = "denied (request id ab12-cd)".to_string();
        assert_eq!(with_request_id(said.clone(), id.as_deref()), said);
        headers.insert("x-request-id", "a b".parse().unwrap());
        assert_eq!(request_id(&headers), None);
    }
}
