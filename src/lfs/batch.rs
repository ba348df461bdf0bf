//! A client of the git-lfs Batch API (docs/api/batch.md in git-lfs), for the commands that
//! talk to an LFS server themselves (`migrate`, `status`) rather than through git-lfs.

use std::collections::BTreeMap;

use crate::xet::constants::{XET_DOWNLOAD_TRANSFER, XET_TRANSFER};
use serde::{Deserialize, Serialize};

use crate::lfs::pointer::Oid;
use crate::lfs::protocol::{Action, Operation};
use crate::lfs::{BatchFailure, LfsError};

const MEDIA_TYPE: &str = "application/vnd.git-lfs+json";
/// Objects per batch request (git-lfs's own default batch size).
pub const BATCH_SIZE: usize = 100;

/// Attempts of a Batch API request that got no answer or a 5xx, and the pause after each.
const BATCH_RETRY_PAUSES_MS: [u64; 2] = [200, 800];

/// An LFS endpoint (`.../info/lfs`) and the headers its requests carry: from
/// `git-lfs-authenticate` for ssh remotes, from git's credentials for http ones.
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

    /// Adds `Authorization: value` unless a header already authorizes.
    pub fn with_authorization(mut self, value: Option<String>) -> Endpoint {
        let has = self
            .header
            .keys()
            .any(|k| k.eq_ignore_ascii_case("authorization"));
        if let (false, Some(v)) = (has, value) {
            self.header.insert("Authorization".into(), v);
        }
        self
    }
}

/// An LFS server endpoint (`.../info/lfs`) and how to authenticate to it.
#[derive(Clone)]
pub struct BatchClient {
    endpoint: String,
    header: BTreeMap<String, String>,
    http: reqwest::Client,
}

/// `transfers`, plus [`XET_DOWNLOAD_TRANSFER`] for a download offering `xet`: our `xet`
/// downloads, and servers name `xet` for downloads only to clients that say so.
fn with_download_marker<'a>(operation: Operation, transfers: &[&'a str]) -> Vec<&'a str> {
    let mut out = transfers.to_vec();
    if operation == Operation::Download
        && out.contains(&XET_TRANSFER)
        && !out.contains(&XET_DOWNLOAD_TRANSFER)
    {
        out.push(XET_DOWNLOAD_TRANSFER);
    }
    out
}

#[derive(Serialize)]
struct RequestBody<'a> {
    operation: &'a str,
    transfers: Vec<&'a str>,
    objects: Vec<ObjectSpec>,
    hash_algo: &'a str,
}

#[derive(Serialize)]
struct ObjectSpec {
    oid: String,
    size: u64,
}

#[derive(Deserialize)]
struct ResponseBody {
    #[serde(default)]
    transfer: Option<String>,
    #[serde(default)]
    objects: Vec<ResponseObject>,
}

#[derive(Deserialize)]
struct ResponseObject {
    oid: String,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    actions: Option<BTreeMap<String, RawAction>>,
    #[serde(default)]
    error: Option<ObjectError>,
}

#[derive(Deserialize)]
struct RawAction {
    #[serde(default)]
    href: String,
    #[serde(default)]
    header: BTreeMap<String, String>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct ObjectError {
    #[serde(default)]
    pub code: u32,
    #[serde(default)]
    pub message: String,
}

/// The server's answer for one object.
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

/// The answer to one batch request.
#[derive(Debug, Clone)]
pub struct BatchResponse {
    /// The transfer the server chose (`basic` when it said nothing).
    pub transfer: String,
    pub objects: Vec<BatchObject>,
}

impl BatchClient {
    pub fn new(endpoint: &str, authorization: Option<String>) -> Result<BatchClient, LfsError> {
        BatchClient::for_endpoint(Endpoint::new(endpoint).with_authorization(authorization))
    }

    /// A client whose requests carry `endpoint.header`.
    pub fn for_endpoint(endpoint: Endpoint) -> Result<BatchClient, LfsError> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("git-xet/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LfsError::Transfer(format!("cannot create an HTTP client: {e}")))?;
        Ok(BatchClient {
            endpoint: endpoint.url.trim_end_matches('/').to_string(),
            header: endpoint.header,
            http,
        })
    }

    fn authorization(&self) -> Option<&String> {
        self.header
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| v)
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
        let url = format!("{}/objects/batch", self.endpoint);
        let body = RequestBody {
            operation: operation.as_str(),
            transfers: with_download_marker(operation, transfers),
            objects: objects
                .iter()
                .map(|(oid, size)| ObjectSpec {
                    oid: oid.to_hex(),
                    size: *size,
                })
                .collect(),
            hash_algo: "sha256",
        };
        let body = serde_json::to_vec(&body).expect("batch request serializes");
        let failed = |failure| LfsError::Batch {
            url: url.clone(),
            failure,
        };
        let mut attempt = 0;
        let text = loop {
            let mut request = self
                .http
                .post(&url)
                .header("Accept", MEDIA_TYPE)
                .header("Content-Type", MEDIA_TYPE)
                .body(body.clone());
            for (k, v) in &self.header {
                request = request.header(k, v);
            }
            let outcome = match request.send().await {
                Err(e) => Err(BatchFailure::Unreachable(error_chain(&e))),
                Ok(response) => {
                    let status = response.status();
                    match response.text().await {
                        Err(e) => Err(BatchFailure::Unreachable(error_chain(&e))),
                        Ok(text) if status.is_success() => Ok(text),
                        Ok(text) => Err(BatchFailure::Status {
                            status: status.as_u16(),
                            message: server_message(&text),
                        }),
                    }
                }
            };
            let retry = match &outcome {
                Err(BatchFailure::Unreachable(_)) => true,
                Err(BatchFailure::Status { status, .. }) => *status >= 500,
                _ => false,
            };
            match outcome {
                Ok(text) => break text,
                Err(e) if !retry || attempt >= BATCH_RETRY_PAUSES_MS.len() => {
                    return Err(failed(e))
                }
                Err(e) => {
                    tracing::debug!("LFS batch request to {url} failed ({e}); retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(
                        BATCH_RETRY_PAUSES_MS[attempt],
                    ))
                    .await;
                    attempt += 1;
                }
            }
        };
        let parsed: ResponseBody = serde_json::from_str(&text)
            .map_err(|e| failed(BatchFailure::BadAnswer(e.to_string())))?;
        let mut out = Vec::with_capacity(parsed.objects.len());
        for o in parsed.objects {
            let oid = o
                .oid
                .parse::<Oid>()
                .map_err(|e| failed(BatchFailure::BadAnswer(e.to_string())))?;
            let mut actions = o.actions.unwrap_or_default();
            let take = |actions: &mut BTreeMap<String, RawAction>, name: &str| {
                actions.remove(name).map(|a| Action {
                    href: a.href,
                    header: a.header,
                })
            };
            out.push(BatchObject {
                oid,
                size: o.size,
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

    /// Calls a `verify` action after an upload, as git-lfs does.
    pub async fn verify(&self, action: &Action, oid: &Oid, size: u64) -> Result<(), LfsError> {
        let mut request = self
            .http
            .post(&action.href)
            .header("Accept", MEDIA_TYPE)
            .header("Content-Type", MEDIA_TYPE)
            .body(serde_json::json!({"oid": oid.to_hex(), "size": size}).to_string());
        let mut has_auth = false;
        for (k, v) in &action.header {
            has_auth |= k.eq_ignore_ascii_case("authorization");
            request = request.header(k, v);
        }
        if let (false, Some(auth)) = (has_auth, self.authorization()) {
            request = request.header("Authorization", auth);
        }
        let response = request
            .send()
            .await
            .map_err(|e| LfsError::Transfer(format!("verify of {oid} failed: {e}")))?;
        if !response.status().is_success() {
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            return Err(LfsError::Transfer(format!(
                "the LFS server did not verify {oid}: HTTP {status}: {}",
                server_message(&text)
            )));
        }
        Ok(())
    }
}

/// An error and its causes on one line (reqwest's own message hides the cause, e.g. TLS).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
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
