//! The running server's git-lfs API over HTTP on loopback: `git-lfs-transfer` moves objects
//! through the Batch API and basic transfers, as any git-lfs client would, so the shell
//! never opens the store or the index and the server's checks apply unchanged.

use git_xet_core::api::routes;
use std::io::Read;

use crate::command::LfsOperation;
use crate::ShellError;
pub use git_xet_core::lfs::batch::{Action, ObjectResponse};
use git_xet_core::lfs::batch::{
    BatchRequest, BatchResponse, ObjectSpec, Operation, Ref, HASH_ALGO_SHA256,
};
use git_xet_identity::auth::{self, Scope};
use git_xet_identity::keys::Keys;
use git_xet_index::RepoName;

const LFS_JSON: &str = "application/vnd.git-lfs+json";
/// Lifetime of the token the shell mints for each Batch request it makes.
const TOKEN_TTL: u64 = 5 * 60;
/// Largest error body read from the server.
const MAX_ERROR_BODY: u64 = 64 * 1024;

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
    /// The ssh user the tokens are minted for (locks and revocation know it by this).
    holder: auth::Holder,
}

impl Upstream {
    /// The server at `base` (its loopback URL), for `repo` with `scope`.
    pub fn new(
        base: &str,
        repo: RepoName,
        keys: Keys,
        scope: Scope,
        holder: auth::Holder,
    ) -> Result<Upstream, ShellError> {
        let client = git_xet_io::http::blocking_builder()
            // Loopback to its own server: never through a proxy from the environment.
            .no_proxy()
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
            holder,
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
    ) -> Result<Vec<ObjectResponse>, ShellError> {
        let mut specs = Vec::with_capacity(objects.len());
        for (oid, size) in objects {
            // git-lfs sizes are int64: the server would refuse the request (400) as well.
            let size = i64::try_from(*size).map_err(|_| ShellError::Upstream {
                status: 400,
                message: format!("object {oid} has size {size}, larger than git-lfs allows"),
            })?;
            specs.push(ObjectSpec {
                oid: oid.clone(),
                size,
            });
        }
        let body = BatchRequest {
            operation: match operation {
                LfsOperation::Upload => Operation::Upload,
                LfsOperation::Download => Operation::Download,
            },
            transfers: vec!["basic".into()],
            objects: specs,
            refspec: refname.map(|name| Ref { name: name.into() }),
            hash_algo: Some(HASH_ALGO_SHA256.into()),
        };
        let (token, _) =
            auth::issue_for(&self.keys, &self.repo, self.scope, TOKEN_TTL, &self.holder);
        let url = format!(
            "{}/{}.git{}/{}",
            self.base,
            self.repo,
            routes::LFS_ENDPOINT,
            routes::LFS_BATCH
        );
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
        let answer: BatchResponse = response.json().map_err(|e| ShellError::Upstream {
            status: 502,
            message: format!("the server's batch answer is not valid: {e}"),
        })?;
        Ok(answer.objects)
    }

    /// A request to the repository's LFS API at `info/lfs/<rest>` with a JSON `body`, under a
    /// token minted for this session's user; the response as it came, whatever its status.
    pub(super) fn lfs_call(
        &self,
        method: reqwest::Method,
        rest: &str,
        query: &[(&str, &str)],
        body: Option<&serde_json::Value>,
    ) -> Result<reqwest::blocking::Response, ShellError> {
        let (token, _) =
            auth::issue_for(&self.keys, &self.repo, self.scope, TOKEN_TTL, &self.holder);
        let url = format!(
            "{}/{}.git{}/{rest}",
            self.base,
            self.repo,
            routes::LFS_ENDPOINT
        );
        let mut request = self
            .client
            .request(method, url)
            .query(query)
            .header("Accept", LFS_JSON)
            .bearer_auth(token);
        if let Some(body) = body {
            request = request
                .header("Content-Type", LFS_JSON)
                .body(serde_json::to_vec(body).expect("JSON value serializes"));
        }
        request.send().map_err(|e| self.unreachable(e))
    }

    /// The user this session acts for.
    pub fn user(&self) -> &str {
        &self.holder.user
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
pub(super) fn checked(
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
