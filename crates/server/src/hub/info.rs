//! Repository info (`sha`, `siblings`), tree listings (paged: tree_page.rs), `paths-info`
//! and refs.

use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::error::ServerError;
use crate::hub::access::{open, Repo};
use crate::hub::gitread::{self, Entry};
use crate::hub::tree_page::{self, Cursor};
use crate::hub::{HubError, HubResult};
use crate::state::{blocking, SharedState};
use git_xet_identity::auth::Scope;

/// The commit `rev` names in `repo`, or `RevisionNotFound`.
pub async fn commit_of(repo: &Repo, rev: &str) -> HubResult<String> {
    gitread::resolve(&repo.dir, rev)
        .await?
        .ok_or_else(|| HubError::RevisionNotFound(rev.to_string()))
}

/// The XET file hashes of the LFS files among `entries` that `repo` holds (by the pointer's
/// sha256, the repository's own claim), in the same order.
pub async fn xet_hashes(
    state: &SharedState,
    repo: &Repo,
    entries: &[Entry],
) -> HubResult<Vec<Option<String>>> {
    let oids: Vec<Option<[u8; 32]>> = entries
        .iter()
        .map(|e| e.pointer.as_ref().map(|p| p.oid.0))
        .collect();
    let (index, name) = (state.index.clone(), repo.name.clone());
    Ok(blocking(move || {
        oids.into_iter()
            .map(|oid| match oid {
                Some(oid) => Ok(index
                    .repo_file_by_sha256(&name, &oid)?
                    .map(|f| f.file_hash.to_hex())),
                None => Ok(None),
            })
            .collect()
    })
    .await?)
}

/// The most files whose sizes and pointers (`blobs`) the repository information describes
/// for a caller without a credential: each small file costs a blob read.
const MAX_ANONYMOUS_DESCRIBED_FILES: usize = 10_000;

/// `GET /api/models/{repo}[/revision/{rev}]`: the files' names only, or with `blobs`
/// (`files_metadata=True`) their sizes, blob ids and LFS pointers too, as the Hub answers.
/// The names come from one `ls-tree` that reads no blob; `blobs` reads the small blobs
/// not read before (gitread.rs, pointers.rs).
pub async fn repo_info(
    state: &SharedState,
    headers: &HeaderMap,
    (ns, name): (&str, &str),
    rev: Option<&str>,
    blobs: bool,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Read).await?;
    git_xet_io::time::test_delay().await;
    let sha = match rev {
        Some(rev) => Some(commit_of(&repo, rev).await?),
        None => gitread::head(&repo.dir).await?,
    };
    let (siblings, modified) = match &sha {
        Some(sha) => {
            if blobs && repo.access.anonymous {
                // One `ls-tree` that reads no blob says whether the blob reads fit.
                let files = gitread::file_names(&repo.dir, sha).await?.len();
                if files > MAX_ANONYMOUS_DESCRIBED_FILES {
                    return Err(ServerError::bad_request(format!(
                        "the repository holds {files} files: without a token, its information \
                         describes at most {MAX_ANONYMOUS_DESCRIBED_FILES} (files_metadata); \
                         list them page by page (list_repo_tree) or send a token"
                    ))
                    .into());
                }
            }
            let siblings: Vec<Value> = match blobs {
                true => gitread::list(&repo.dir, sha, "", true)
                    .await?
                    .iter()
                    .filter(|e| !e.is_dir)
                    .map(sibling)
                    .collect(),
                false => gitread::file_names(&repo.dir, sha)
                    .await?
                    .into_iter()
                    .map(|path| json!({ "rfilename": path }))
                    .collect(),
            };
            let time = gitread::commit_time(&repo.dir, sha).await?;
            (siblings, Some(git_xet_io::time::rfc3339(time)))
        }
        None => (Vec::new(), None),
    };
    // What an anonymous caller would get: a token needed (see `AppState::anonymous_read`).
    let (index, name) = (state.index.clone(), repo.name.clone());
    let private =
        !state.config.anonymous_read || blocking(move || Ok(index.repo_private(&name)?)).await?;
    let id = crate::hub::hub_id(&repo.name);
    let mut info = json!({
        "_id": id,
        "id": id,
        "author": id.split('/').next(),
        "sha": sha,
        "lastModified": modified,
        "private": private,
        "gated": false,
        "disabled": false,
        "downloads": 0,
        "likes": 0,
        "tags": [],
        "siblings": siblings,
    });
    if !repo.name.is_dataset() {
        info["modelId"] = json!(id);
    }
    Ok(Json(info).into_response())
}

fn sibling(e: &Entry) -> Value {
    let mut v = json!({ "rfilename": e.path, "size": e.file_size(), "blobId": e.oid });
    if let Some(p) = &e.pointer {
        v["lfs"] = json!({ "sha256": p.oid.to_hex(), "size": p.size, "pointerSize": e.size });
    }
    v
}

/// `entries` as the Hub lists them (the tree listing and `paths-info`), with the XET hash of
/// each LFS file `repo` holds.
async fn listing(state: &SharedState, repo: &Repo, entries: &[Entry]) -> HubResult<Json<Value>> {
    let hashes = xet_hashes(state, repo, entries).await?;
    let listed: Vec<Value> = entries
        .iter()
        .zip(hashes)
        .map(|(e, x)| tree_entry(e, x))
        .collect();
    Ok(Json(Value::Array(listed)))
}

/// A tree listing's entry as the Hub writes it (`oid`, not `sha256`, under `lfs` here).
fn tree_entry(e: &Entry, xet_hash: Option<String>) -> Value {
    if e.is_dir {
        return json!({ "type": "directory", "path": e.path, "oid": e.oid, "size": 0 });
    }
    let mut v = json!({ "type": "file", "path": e.path, "oid": e.oid, "size": e.file_size() });
    if let Some(p) = &e.pointer {
        v["lfs"] = json!({ "oid": p.oid.to_hex(), "size": p.size, "pointerSize": e.size });
    }
    if let Some(x) = xet_hash {
        v["xetHash"] = json!(x);
    }
    v
}

pub struct TreeQuery {
    pub rev: String,
    /// A directory in the repository, "" for the root.
    pub path: String,
    pub recursive: bool,
    /// Where the page starts (the `cursor` of a previous page's `Link`).
    pub cursor: Option<String>,
}

/// `GET /api/models/{repo}/tree/{rev}[/{path}]?recursive=&cursor=`: one page of the listing
/// (tree_page.rs), with a `Link` to the next when there is one.
pub async fn tree(
    state: &SharedState,
    headers: &HeaderMap,
    ns: &str,
    name: &str,
    query: TreeQuery,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Read).await?;
    let after = query.cursor.as_deref().map(Cursor::decode).transpose()?;
    let sha = commit_of(&repo, &query.rev).await?;
    let missing = || HubError::EntryNotFound {
        message: format!("{} does not exist at {}", query.path, query.rev),
        commit: Some(sha.clone()),
    };
    if !query.path.is_empty() {
        if !crate::hub::valid_repo_path(&query.path) {
            return Err(missing());
        }
        match gitread::entry(&repo.dir, &sha, &query.path).await? {
            Some(e) if e.is_dir => {}
            _ => return Err(missing()),
        }
    }
    let page = tree_page::page(
        &repo.dir,
        &sha,
        &query.path,
        query.recursive,
        after.as_ref(),
    )
    .await?;
    let mut response = listing(state, &repo, &page.entries).await?.into_response();
    if let Some(next) = page.next {
        let base = state.base_url(headers);
        let link = next_link(&base, &repo, &sha, &query, &next)?;
        response.headers_mut().insert(header::LINK, link);
    }
    Ok(response)
}

/// The `Link` header to the page after `cursor`: the same listing of the commit `sha`.
fn next_link(
    base: &str,
    repo: &Repo,
    sha: &str,
    query: &TreeQuery,
    cursor: &Cursor,
) -> HubResult<HeaderValue> {
    let api = crate::hub::api_url(base, &repo.name);
    let unusable = || ServerError::internal(format!("cannot make a next-page URL of {api}"));
    let mut url = reqwest::Url::parse(&api).map_err(|_| unusable())?;
    {
        let mut path = url.path_segments_mut().map_err(|_| unusable())?;
        path.push("tree").push(sha);
        if !query.path.is_empty() {
            path.push(&query.path);
        }
    }
    url.query_pairs_mut()
        .append_pair("recursive", if query.recursive { "true" } else { "false" })
        .append_pair("cursor", &cursor.encode());
    HeaderValue::from_str(&format!("<{url}>; rel=\"next\"")).map_err(|_| unusable().into())
}

/// Paths one `paths-info` request may ask about (the client sends batches of 500), and its
/// body's bytes; fewer for a caller without a credential (and the 64 KiB of
/// `body::ANONYMOUS_BODY_MAX`).
const MAX_PATHS: usize = 1000;
const MAX_BODY: usize = 1024 * 1024;
const MAX_ANONYMOUS_PATHS: usize = 200;

/// `POST /api/{type}s/{repo}/paths-info/{rev}` (form: `paths=a&paths=b&expand=`): the tree
/// entry of each path that exists, as the tree listing writes it; missing paths are left
/// out. `get_paths_info`, and `create_commit` for `CommitOperationCopy`. Answered from two
/// git processes whatever the number of paths (`gitread::lookup_paths`).
pub async fn paths_info(
    state: &SharedState,
    headers: &HeaderMap,
    ns: &str,
    name: &str,
    rev: &str,
    body: axum::body::Body,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Read).await?;
    let (max_paths, max_body) = match repo.access.anonymous {
        true => (MAX_ANONYMOUS_PATHS, crate::body::ANONYMOUS_BODY_MAX),
        false => (MAX_PATHS, MAX_BODY),
    };
    let bytes = crate::body::read_limited(body, headers, max_body, "paths-info request").await?;
    git_xet_io::time::test_delay().await;
    let sha = commit_of(&repo, rev).await?;
    let mut paths = Vec::new();
    for pair in bytes.split(|&b| b == b'&') {
        let pair = String::from_utf8_lossy(pair).replace('+', " ");
        if let Some(value) = pair.strip_prefix("paths=") {
            paths.push(crate::hub::decode(value)?.trim_end_matches('/').to_string());
        }
        if paths.len() > max_paths {
            return Err(ServerError::bad_request(format!(
                "at most {max_paths} paths per paths-info request{}",
                match repo.access.anonymous {
                    true => " without a token",
                    false => "",
                }
            ))
            .into());
        }
    }
    paths.retain(|p| crate::hub::valid_repo_path(p));
    let entries = gitread::lookup_paths(&repo.dir, &sha, &paths).await?;
    Ok(listing(state, &repo, &entries).await?.into_response())
}

/// `GET /api/models/{repo}/refs`: branches and tags; no conversions or pull requests.
pub async fn refs(
    state: &SharedState,
    headers: &HeaderMap,
    ns: &str,
    name: &str,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Read).await?;
    let (branches, tags) = gitread::refs(&repo.dir).await?;
    let items = |refs: Vec<gitread::Ref>| -> Vec<Value> {
        refs.into_iter()
            .map(|r| json!({ "name": r.name, "ref": r.full, "targetCommit": r.commit }))
            .collect()
    };
    Ok(Json(json!({
        "branches": items(branches),
        "tags": items(tags),
        "converts": [],
        "pullRequests": [],
    }))
    .into_response())
}
