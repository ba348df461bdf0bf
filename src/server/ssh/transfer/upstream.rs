//! The running server's git-lfs API over HTTP on loopback: `git-lfs-transfer` moves objects
//! through the Batch API and basic transfers, as any git-lfs client would, so the shell
//! never opens the store or the index and the server's checks apply unchanged.

use std::collections::HashMap;
use std::io::Read;
use std::time::Duration;

use crate::server::auth::{self, Scope};
use crate::server::keys::Keys;
use crate::server::repo_name::RepoName;
use crate::server::ssh::command::LfsOperation;
use crate::server::ssh::ShellError;

const LFS_JSON: &str = "application/vnd.git-lfs+json";
/// Lifetime of the token the shell mints for each Batch request it makes.
const TOKEN_TTL: u64 = 5 * 60;
/// Largest error body read from the server.
const MAX_ERROR_BODY: u64 = 64 * 1024;

#[derive(serde::Serialize)]
struct BatchRequest<'a> {
    operation: &'a str,
    transfers: [&'a str; 1],
    objects: Vec<ObjectSpec<'a>>,
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    refspec: Option<RefName<'a>>,
    hash_algo: &'a str,
}

#[derive(serde::Serialize)]
struct ObjectSpec<'a> {
    oid: &'a str,
    size: u64,
}

#[derive(serde::Serialize)]
struct RefName<'a> {
    name: &'a str,
}

#[derive(serde::Deserialize)]
struct BatchAnswer {
    #[serde(default)]
    objects: Vec<ObjectAnswer>,
}

/// One object of a Batch answer.
#[derive(Debug, serde::Deserialize)]
pub struct ObjectAnswer {
    pub oid: String,
    #[serde(default)]
    pub actions: HashMap<String, Action>,
    #[serde(default)]
    pub error: Option<ObjectError>,
}

#[derive(Debug, serde::Deserialize)]
pub struct Action {
    pub href: String,
    #[serde(default)]
    pub header: HashMap<String, String>,
}

#[derive(Debug, serde::Deserialize)]
pub struct ObjectError {
    pub code: u16,
    pub message: String,
}

#[derive(serde::Deserialize)]
struct ErrorBody {
    message: String,
}

pub struct Upstream {
    client: reqwest::blocking::Client,
    base: String,
    repo: RepoName,
    keys: Keys,
    scope: Scope,
}

impl Upstream {
    /// The server at `base` (its loopback URL), for `repo` with `scope`.
    pub fn new(
        base: &str,
        repo: RepoName,
        keys: Keys,
        scope: Scope,
    ) -> Result<Upstream, ShellError> {
        let client = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // Objects are large and their transfers long; the server has its own timeouts.
            .timeout(None)
            .build()
            .map_err(|e| ShellError::NoServer(format!("building the HTTP client: {e}")))?;
        Ok(Upstream {
            client,
            base: base.to_string(),
            repo,
            keys,
            scope,
        })
    }

    fn unreachable(&self, e: reqwest::Error) -> ShellError {
        ShellError::NoServer(format!(
            "cannot reach the git xet server at {}: {e}",
            self.base
        ))
    }

    /// A Batch request for `objects` (oid, size).
    pub fn batch(
        &self,
        operation: LfsOperation,
        objects: &[(String, u64)],
        refname: Option<&str>,
    ) -> Result<Vec<ObjectAnswer>, ShellError> {
        let body = BatchRequest {
            operation: operation.as_str(),
            transfers: ["basic"],
            objects: objects
                .iter()
                .map(|(oid, size)| ObjectSpec { oid, size: *size })
                .collect(),
            refspec: refname.map(|name| RefName { name }),
            hash_algo: "sha256",
        };
        let (token, _) = auth::issue(&self.keys, &self.repo, self.scope, TOKEN_TTL);
        let url = format!("{}/{}.git/info/lfs/objects/batch", self.base, self.repo);
        let response = self
            .client
            .post(url)
            .header("Accept", LFS_JSON)
            .header("Content-Type", LFS_JSON)
            .bearer_auth(token)
            .body(serde_json::to_vec(&body).expect("batch request serializes"))
            .send()
            .map_err(|e| self.unreachable(e))?;
        let response = checked(response)?;
        let answer: BatchAnswer = response.json().map_err(|e| ShellError::Upstream {
            status: 502,
            message: format!("the server's batch answer is not valid: {e}"),
        })?;
        Ok(answer.objects)
    }

    /// Starts a download; the response is the object's bytes.
    pub fn download(&self, action: &Action) -> Result<reqwest::blocking::Response, ShellError> {
        let mut request = self.client.get(&action.href);
        for (k, v) in &action.header {
            request = request.header(k, v);
        }
        let response = request.send().map_err(|e| self.unreachable(e))?;
        checked(response)
    }

    /// Uploads `size` bytes from `body`.
    pub fn upload(
        &self,
        action: &Action,
        body: impl Read + Send + 'static,
        size: u64,
    ) -> Result<(), ShellError> {
        let mut request = self
            .client
            .put(&action.href)
            .header("Content-Type", "application/octet-stream");
        for (k, v) in &action.header {
            request = request.header(k, v);
        }
        let body = reqwest::blocking::Body::sized(body, size);
        let response = request
            .body(body)
            .send()
            .map_err(|e| ShellError::Upstream {
                status: 502,
                message: format!("uploading to the server: {e}"),
            })?;
        checked(response).map(|_| ())
    }
}

/// The response if it is a success, else the server's status and message.
fn checked(
    response: reqwest::blocking::Response,
) -> Result<reqwest::blocking::Response, ShellError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let mut text = String::new();
    let _ = response.take(MAX_ERROR_BODY).read_to_string(&mut text);
    let message = serde_json::from_str::<ErrorBody>(&text)
        .map(|b| b.message)
        .unwrap_or_else(|_| status.canonical_reason().unwrap_or("error").to_string());
    Err(ShellError::Upstream {
        status: status.as_u16(),
        message,
    })
}
