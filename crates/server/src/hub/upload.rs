//! The steps of an upload before its commit: `create_repo`, `preupload` (which files go
//! through LFS/XET) and the xet write token.

use std::collections::HashSet;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::Deserialize;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use crate::body::read_limited;
use crate::error::ServerError;
use crate::hub::access::{authorize, open, Repo};
use crate::hub::blob_lookup::blobs_at;
use crate::hub::gitwrite::{self, Author, Files};
use crate::hub::push_check::{refuse_as_a_push, Update};
use crate::hub::quarantine::Quarantine;
use crate::hub::ref_update::branch_locked;
use crate::hub::{gitread, HubError, HubResult};
use crate::state::{blocking, SharedState};
use git_xet_identity::auth::Scope;
use git_xet_index::RepoName;

/// Files from this size go through LFS/XET whatever their content (the Hub's threshold).
const LFS_FROM: u64 = 10 * 1024 * 1024;

/// The `.gitattributes` of a new repository: the usual weights and data formats via LFS.
const GITATTRIBUTES: &str = "\
*.7z *.arrow *.bin *.bz2 *.ckpt *.ftz *.gguf *.gz *.h5 *.joblib *.lfs.* *.mlmodel *.model \
*.msgpack *.npy *.npz *.onnx *.ot *.parquet *.pb *.pickle *.pkl *.pt *.pth *.rar \
*.safetensors *.tar *.tflite *.tgz *.wasm *.xz *.zip *.zst *tfevents*";

fn initial_gitattributes() -> String {
    GITATTRIBUTES
        .split_whitespace()
        .map(|p| format!("{p} filter=lfs diff=lfs merge=lfs -text\n"))
        .collect()
}

#[derive(Deserialize)]
struct CreateRequest {
    name: String,
    #[serde(default)]
    organization: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    /// `private` or `public` (huggingface_hub 2.x).
    #[serde(default)]
    visibility: Option<String>,
    /// What older clients send instead of `visibility`.
    #[serde(default)]
    private: Option<bool>,
}

/// `POST /api/repos/create`: a new hosted repository with an initial commit on `main`
/// (`.gitattributes`), as the Hub creates them. A private one is recorded in the index: it
/// needs a token even on a server with `--anonymous-read` (without it, every repository
/// does).
pub async fn create_repo(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    create(&state, &headers, body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn create(state: &SharedState, headers: &HeaderMap, body: Body) -> HubResult<Response> {
    let bytes = read_limited(body, headers, 64 * 1024, "create request").await?;
    let request: CreateRequest = serde_json::from_slice(&bytes)
        .map_err(|e| ServerError::bad_request(format!("malformed create request: {e}")))?;
    let Some(org) = request.organization else {
        return Err(ServerError::bad_request(
            "name the repository with its namespace: create_repo(\"org/name\")",
        )
        .into());
    };
    let repo = requested_repo(request.kind.as_deref(), &org, &request.name)?;
    let private = visibility(request.visibility.as_deref(), request.private)?.unwrap_or(false);
    let access = authorize(state, headers, &repo, Scope::Write)?;
    let url = format!("{}/{repo}", state.base_url(headers));
    let root = state.config.repos_dir();
    let dir = repo.bare_dir(&root);
    // An existing repository without any ref (a refused first push or `create_repo` left
    // it) gets its first commit now, as a new one would.
    if dir.join("HEAD").is_file() && has_refs(&dir).await? {
        let kind = if repo.is_dataset() {
            "dataset"
        } else {
            "model"
        };
        let body = serde_json::json!({
            "error": format!("You already created this {kind} repo"),
            "url": url,
        });
        return Ok((axum::http::StatusCode::CONFLICT, axum::Json(body)).into_response());
    }
    // Recorded before the repository exists, so that it is never readable unrecorded.
    let (index, name) = (state.index.clone(), repo.clone());
    blocking(move || Ok(index.set_repo_private(&name, private)?)).await?;
    let hook = git_xet_deployment::repos::hook_script(state.config.hook_program.as_deref());
    git_xet_deployment::repos::ensure_repo(&root, &repo, &hook, private).await?;
    // A git push may have created it first (as not private): the index says private now.
    git_xet_deployment::repos::record_private(&dir, private).await?;
    let repo = Repo {
        name: repo,
        dir,
        access,
    };
    let quarantine = Quarantine::open(&repo.dir).await?;
    let blob = gitwrite::write_blob(&quarantine, initial_gitattributes().as_bytes()).await?;
    let mut files = Files::new();
    files.insert(b".gitattributes".to_vec(), ("100644".into(), blob));
    let tree = gitwrite::write_tree(&quarantine, &state.config.tmp_dir(), &files).await?;
    let user = repo.access.user().unwrap_or("git-xet").to_string();
    let author = Author {
        name: &user,
        email: "hub@git-xet",
    };
    let commit =
        gitwrite::commit_tree(&quarantine, &tree, None, "initial commit\n", &author).await?;
    let update = Update {
        full: "refs/heads/main",
        old: None,
        new: &commit,
    };
    refuse_as_a_push(state, &repo, Some(&quarantine), update).await?;
    // A push that created the branch first wins (its `main` stays; the initial commit's
    // objects go with the quarantine); the repository is there either way.
    branch_locked(&repo, quarantine, "main", &commit, None).await?;
    Ok(
        axum::Json(serde_json::json!({ "url": url, "name": repo.name.to_string() }))
            .into_response(),
    )
}

/// The hosted repository a create or delete request names: `type` absent or `model`, or
/// `dataset` (`datasets/org/name`); spaces are not served.
pub fn requested_repo(kind: Option<&str>, org: &str, name: &str) -> Result<RepoName, ServerError> {
    let prefix = match kind {
        None | Some("model") => "",
        Some("dataset") => crate::hub::DATASET_PREFIX,
        Some(other) => {
            return Err(ServerError::bad_request(format!(
                "{other} repositories are not served by git-xet's Hub API: only models and datasets"
            )))
        }
    };
    if prefix.is_empty() && org == git_xet_index::repo_name::DATASETS {
        return Err(ServerError::bad_request(
            "a model may not be in the namespace `datasets` (its URLs would be a dataset's)",
        ));
    }
    Ok(RepoName::parse(&format!("{prefix}{org}/{name}"))?)
}

#[derive(Deserialize)]
struct PreuploadRequest {
    files: Vec<PreuploadFile>,
}

#[derive(Deserialize)]
struct PreuploadFile {
    path: String,
    #[serde(default)]
    sample: String,
    #[serde(default)]
    size: u64,
}

/// Whether the repository at `dir` has a branch or tag.
async fn has_refs(dir: &std::path::Path) -> HubResult<bool> {
    let args = ["for-each-ref", "--count=1", "--format=%(refname)"];
    let out = gitread::run(dir, &args).await?;
    if !out.status.success() {
        return Err(ServerError::internal("git for-each-ref failed").into());
    }
    Ok(!out.stdout.iter().all(u8::is_ascii_whitespace))
}

/// `POST /api/models/{repo}/preupload/{rev}`: `lfs` for files an LFS rule of the
/// revision's `.gitattributes` covers, binary samples and files from 10 MiB; `regular`
/// otherwise. `oid` is the file's current id (sha256 or blob id) so unchanged files are
/// skipped by the client. Only the paths asked about are looked up (blob_lookup.rs).
pub async fn preupload(
    state: &SharedState,
    headers: &HeaderMap,
    ns: &str,
    name: &str,
    rev: &str,
    body: Body,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Write).await?;
    let bytes = read_limited(body, headers, 4 * 1024 * 1024, "preupload request").await?;
    let request: PreuploadRequest = serde_json::from_slice(&bytes)
        .map_err(|e| ServerError::bad_request(format!("malformed preupload request: {e}")))?;
    let commit = gitread::resolve(&repo.dir, rev)
        .await?
        .ok_or_else(|| HubError::RevisionNotFound(rev.to_string()))?;
    let paths: Vec<&str> = request.files.iter().map(|f| f.path.as_str()).collect();
    let filtered = gitwrite::lfs_filtered(&repo.dir, None, &commit, &paths).await?;
    let filtered: HashSet<&str> = filtered.iter().map(String::as_str).collect();
    let existing = blobs_at(&repo.dir, &commit, &paths).await?;
    let answers: Vec<serde_json::Value> = request
        .files
        .iter()
        .zip(existing)
        .map(|(f, blob)| {
            let sample = STANDARD.decode(f.sample.as_bytes()).unwrap_or_default();
            let lfs =
                f.size >= LFS_FROM || sample.contains(&0) || filtered.contains(f.path.as_str());
            let oid = blob.and_then(|b| match (b.pointer, lfs) {
                (Some(p), true) => Some(p.oid.to_hex()),
                (None, false) => Some(b.oid),
                _ => None,
            });
            serde_json::json!({
                "path": f.path,
                "uploadMode": if lfs { "lfs" } else { "regular" },
                "shouldIgnore": false,
                "oid": oid,
            })
        })
        .collect();
    Ok(axum::Json(serde_json::json!({ "files": answers })).into_response())
}

/// `GET /api/models/{repo}/xet-write-token/{rev}`: a CAS write token (the revision is not
/// checked: the commit names the branch).
pub async fn xet_write_token(
    state: &SharedState,
    headers: &HeaderMap,
    ns: &str,
    name: &str,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Write).await?;
    Ok(crate::hub::resolve::xet_token(
        state,
        headers,
        &repo,
        Scope::Write,
    ))
}

/// Whether a request makes the repository private: `visibility` (public or private) or the
/// older `private` flag; `None` when it says neither.
pub fn visibility(visibility: Option<&str>, private: Option<bool>) -> HubResult<Option<bool>> {
    match visibility {
        None => Ok(private),
        Some("private") => Ok(Some(true)),
        Some("public") => Ok(Some(false)),
        Some(other) => Err(ServerError::bad_request(format!(
            "visibility {other:?} is not served: private or public"
        ))
        .into()),
    }
}
