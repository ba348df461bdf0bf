//! A client of the git-lfs Batch API (docs/api/batch.md in git-lfs), for the commands that
//! talk to an LFS server themselves (`migrate`, `status`) rather than through git-lfs.

use std::collections::BTreeMap;
use std::sync::Arc;

use reqwest::Method;

use crate::pointer::Oid;
use crate::protocol::{Action, Operation};
use crate::LfsError;
use git_xet_client::retry::{is_retryable_status, retry_after, Verdict};
use git_xet_client::transport::{shown_url, Authenticator, HttpFactory};
use git_xet_client::RetryPolicy;
use git_xet_core::api::routes;
use git_xet_core::constants::{XET_DOWNLOAD_TRANSFER, XET_TRANSFER};
pub use git_xet_core::lfs::batch::ObjectError;
use git_xet_core::lfs::batch::{self as wire, BatchRequest, ObjectSpec, HASH_ALGO_SHA256};
use git_xet_core::lfs::pointer::PointerError;

const MEDIA_TYPE: &str = "application/vnd.git-lfs+json";
/// Objects per batch request (git-lfs's own default batch size).
pub const BATCH_SIZE: usize = 100;

/// An LFS endpoint (`.../info/lfs`) and the headers its requests carry (from
/// `git-lfs-authenticate` for ssh remotes). Credentials go through the client's
/// [`Authenticator`], not in `header`.
#[derive(Clone, Default)]
pub struct Endpoint {
    pub url: String,
    /// Header values are credentials: never logged (this type has no `Debug`).
    pub header: BTreeMap<String, String>,
}

impl Endpoint {
    pub fn new(url: &str) -> Endpoint {
        Endpoint {
            url: url.trim_end_matches('/').to_string(),
            header: BTreeMap::new(),
        }
    }

    /// Takes the `Authorization` header out of `header` (it goes to an [`Authenticator`]).
    pub fn take_authorization(&mut self) -> Option<String> {
        let key = self
            .header
            .keys()
            .find(|k| k.eq_ignore_ascii_case("authorization"))?
            .clone();
        self.header.remove(&key)
    }
}

/// An LFS server endpoint (`.../info/lfs`) and how to authenticate to it.
#[derive(Clone)]
pub struct BatchClient {
    endpoint: String,
    /// Headers every Batch API request carries (from `git-lfs-authenticate`); the
    /// `Authorization` comes from `auth`.
    header: BTreeMap<String, String>,
    auth: Arc<Authenticator>,
    http: HttpFactory,
    /// When a request that got no answer or a transient status is tried again.
    retry: RetryPolicy,
}

/// `transfers`, plus [`XET_DOWNLOAD_TRANSFER`] for a download offering `xet`: our `xet`
/// downloads, and servers name `xet` for downloads only to clients that say so.
fn with_download_marker(operation: Operation, transfers: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = transfers.iter().map(|t| t.to_string()).collect();
    if operation == Operation::Download
        && transfers.contains(&XET_TRANSFER)
        && !transfers.contains(&XET_DOWNLOAD_TRANSFER)
    {
        out.push(XET_DOWNLOAD_TRANSFER.to_string());
    }
    out
}

/// The server's answer for one object, its oid parsed and its actions sorted out.
#[derive(Debug, Clone)]
pub struct BatchObject {
    pub oid: Oid,
    pub size: u64,
    /// The transfer action (`upload` or `download`); `None` on upload means the server
    /// already has the object.
    pub action: Option<Action>,
    /// A `verify` action to call after an upload.
    pub verify: Option<Action>,
    pub error: Option<ObjectError>,
}

/// The answer to one batch request, as the client uses it.
#[derive(Debug, Clone)]
pub struct BatchResponse {
    /// The transfer the server chose (`basic` when it said nothing).
    pub transfer: String,
    pub objects: Vec<BatchObject>,
}

impl BatchClient {
    /// A client of `endpoint` (its requests carry `endpoint.header`), whose HTTP clients
    /// come from `http`, authenticated by `auth`.
    pub fn new(
        endpoint: Endpoint,
        http: &HttpFactory,
        auth: Arc<Authenticator>,
    ) -> Result<BatchClient, LfsError> {
        // Unusable settings (a missing CA file...) show here, before any request; the
        // client made is the one the requests use.
        let http = http.clone();
        http.client_for(&endpoint.url)?;
        Ok(BatchClient {
            endpoint: without_userinfo(endpoint.url.trim_end_matches('/')),
            header: endpoint.header,
            auth,
            http,
            retry: RetryPolicy::quick(),
        })
    }

    /// The client with `retry` as its retry policy (`RetryPolicy::quick` otherwise).
    pub fn with_retry(mut self, retry: RetryPolicy) -> BatchClient {
        self.retry = retry;
        self
    }

    pub fn authenticator(&self) -> &Arc<Authenticator> {
        &self.auth
    }

    /// The factory of the client's HTTP clients (git's settings).
    pub fn http(&self) -> &HttpFactory {
        &self.http
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// One batch request for `objects`, offering `transfers`.
    pub async fn batch(
        &self,
        operation: Operation,
        transfers: &[&str],
        objects: &[(Oid, u64)],
    ) -> Result<BatchResponse, LfsError> {
        let url = format!("{}/{}", self.endpoint, routes::LFS_BATCH);
        let mut specs = Vec::with_capacity(objects.len());
        for (oid, size) in objects {
            // git-lfs reads sizes as int64: a pointer with a larger one is not valid to it.
            let size = i64::try_from(*size).map_err(|_| PointerError {
                reason: format!("object {oid} has size {size}, larger than git-lfs allows"),
            })?;
            specs.push(ObjectSpec {
                oid: oid.to_hex(),
                size,
            });
        }
        let body = BatchRequest {
            operation,
            transfers: with_download_marker(operation, transfers),
            objects: specs,
            refspec: None,
            hash_algo: Some(HASH_ALGO_SHA256.into()),
        };
        let body = serde_json::to_vec(&body).expect("batch request serializes");
        let started = std::time::Instant::now();
        let mut attempts = 0;
        let (status, text) = loop {
            attempts += 1;
            let outcome = self.send_batch(&url, &body).await;
            // No answer (not a TLS or settings problem: those stay) or a transient status.
            let hint = match &outcome {
                Err(LfsError::Http(e)) if e.is_transient() => None,
                Ok((status, _, hint)) if is_retryable_status(*status) => *hint,
                _ => break outcome.map(|(status, text, _)| (status, text))?,
            };
            match self.retry.verdict(attempts, started.elapsed(), hint) {
                Verdict::RetryAfter(delay) => {
                    tracing::debug!(
                        "LFS batch request to {} failed; retrying in {:.1}s",
                        shown_url(&url),
                        delay.as_secs_f64()
                    );
                    tokio::time::sleep(delay).await;
                }
                Verdict::GiveUp => break outcome.map(|(status, text, _)| (status, text))?,
            }
        };
        if !(200..300).contains(&status) {
            return Err(LfsError::status(
                "LFS batch request",
                shown_url(&url),
                status,
                server_message(&text),
            ));
        }
        let bad_answer = |detail: String| LfsError::BadAnswer {
            url: shown_url(&url),
            detail,
        };
        let parsed: wire::BatchResponse =
            serde_json::from_str(&text).map_err(|e| bad_answer(e.to_string()))?;
        let mut out = Vec::with_capacity(parsed.objects.len());
        for o in parsed.objects {
            let oid = o
                .oid
                .parse::<Oid>()
                .map_err(|e| bad_answer(e.to_string()))?;
            let size = u64::try_from(o.size)
                .map_err(|_| bad_answer(format!("object {oid} has size {}", o.size)))?;
            let mut actions = o.actions;
            let take = |actions: &mut BTreeMap<String, wire::Action>, name: &str| {
                actions.remove(name).map(|a| Action {
                    href: a.href,
                    header: a.header,
                })
            };
            out.push(BatchObject {
                oid,
                size,
                action: take(&mut actions, operation.as_str()),
                verify: take(&mut actions, "verify"),
                error: o.error,
            });
        }
        Ok(BatchResponse {
            transfer: parsed.transfer.unwrap_or_else(|| "basic".into()),
            objects: out,
        })
    }

    /// One Batch API request: the answer's status, body and `Retry-After` delay.
    async fn send_batch(
        &self,
        url: &str,
        body: &[u8],
    ) -> Result<(u16, String, Option<std::time::Duration>), LfsError> {
        let response = self
            .auth
            .send(&self.http, url, || {
                let mut request = self
                    .http
                    .request(Method::POST, url)?
                    .header("Accept", MEDIA_TYPE)
                    .header("Content-Type", MEDIA_TYPE)
                    .body(body.to_vec());
                for (k, v) in &self.header {
                    request = request.header(k, v);
                }
                Ok(request)
            })
            .await?;
        let status = response.status().as_u16();
        let hint = retry_after(response.headers());
        let text = response
            .text()
            .await
            .map_err(|e| LfsError::from(self.http.classify(url, &e)))?;
        Ok((status, text, hint))
    }

    /// Calls a `verify` action after an upload, as git-lfs does.
    pub async fn verify(&self, action: &Action, oid: &Oid, size: u64) -> Result<(), LfsError> {
        let body = serde_json::json!({"oid": oid.to_hex(), "size": size}).to_string();
        let build = || {
            let mut request = self
                .http
                .request(Method::POST, &action.href)?
                .header("Accept", MEDIA_TYPE)
                .header("Content-Type", MEDIA_TYPE)
                .body(body.clone());
            for (k, v) in &self.header {
                request = request.header(k, v);
            }
            for (k, v) in &action.header {
                request = request.header(k, v);
            }
            Ok(request)
        };
        let has_auth = action
            .header
            .keys()
            .any(|k| k.eq_ignore_ascii_case("authorization"));
        let response = if has_auth {
            build()?
                .send()
                .await
                .map_err(|e| self.http.classify(&action.href, &e))?
        } else {
            self.auth.send(&self.http, &action.href, build).await?
        };
        if !response.status().is_success() {
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            return Err(LfsError::status(
                "verify",
                shown_url(&action.href),
                status,
                server_message(&text),
            ));
        }
        Ok(())
    }
}

/// `url` without `user:password@`: the authenticator sends credentials (written in the
/// URL or not) as one `Authorization` header, and a second one from the URL would make
/// proxies refuse the request.
fn without_userinfo(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string().trim_end_matches('/').to_string()
        }
        _ => url.to_string(),
    }
}

/// The `message` of an LFS error body, else the start of the body.
fn server_message(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| text.chars().take(200).collect())
}
