//! `POST /api/models/{repo}/commit/{branch}`: the client's NDJSON commit (`header`, `file`,
//! `lfsFile`, `deletedFile`, `deletedFolder`) becomes a git commit on the branch. LFS files
//! are committed as the pointers git-lfs writes, and only for objects this repository holds
//! (uploaded through XET with its write token, or LFS basic); their paths get an LFS rule in
//! `.gitattributes` when none covers them, so `git clone` checks them out. A change to a file
//! another user has locked is refused, as in a push (locks.rs).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::Deserialize;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use git_xet_core::lfs::pointer::{Oid, Pointer};

use crate::auth::Scope;
use crate::body::read_limited;
use crate::error::ServerError;
use crate::hub::access::{open, Repo};
use crate::hub::gitwrite::{self, Author, Files};
use crate::hub::{gitread, valid_repo_path, HubError, HubResult};
use crate::state::{blocking, SharedState};

const REGULAR: &str = "100644";
/// What a commit request may hold (file contents travel base64 inside it).
const MAX_COMMIT_BODY: usize = 256 * 1024 * 1024;

#[derive(Deserialize)]
struct Line {
    key: String,
    value: serde_json::Value,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Header {
    summary: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parent_commit: Option<String>,
}

#[derive(Deserialize)]
struct FileOp {
    path: String,
    content: String,
    #[serde(default)]
    encoding: Option<String>,
}

#[derive(Deserialize)]
struct LfsOp {
    path: String,
    oid: String,
    #[serde(default)]
    size: Option<u64>,
}

#[derive(Deserialize)]
struct PathOp {
    path: String,
}

fn bad(msg: impl Into<String>) -> HubError {
    ServerError::bad_request(msg).into()
}

fn parse<T: serde::de::DeserializeOwned>(v: serde_json::Value, what: &str) -> HubResult<T> {
    serde_json::from_value(v).map_err(|e| bad(format!("malformed {what} line: {e}")))
}

fn checked_path(path: &str) -> HubResult<&str> {
    if valid_repo_path(path) {
        Ok(path)
    } else {
        Err(bad(format!(
            "invalid path in repository {:?}: no empty, `.`, `..` or `.git` segment",
            path.chars().take(200).collect::<String>()
        )))
    }
}

pub async fn commit(
    state: &SharedState,
    headers: &HeaderMap,
    ns: &str,
    name: &str,
    branch: &str,
    query: &str,
    body: Body,
) -> HubResult<Response> {
    let repo = open(state, headers, ns, name, Scope::Write).await?;
    if super::query_flag(query, "create_pr") {
        return Err(bad(
            "pull requests (create_pr) are not served by git-xet: commit to a branch",
        ));
    }
    let bytes = read_limited(body, headers, MAX_COMMIT_BODY, "commit request").await?;
    let old = gitread::resolve(&repo.dir, &format!("refs/heads/{branch}"))
        .await?
        .ok_or_else(|| HubError::RevisionNotFound(branch.to_string()))?;
    let mut lines = bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace));
    let header: Header = match lines.next().map(serde_json::from_slice::<Line>) {
        Some(Ok(line)) if line.key == "header" => parse(line.value, "header")?,
        _ => return Err(bad("the commit request must start with a `header` line")),
    };
    if header.summary.trim().is_empty() {
        return Err(bad("the commit message (summary) is empty"));
    }
    if let Some(parent) = &header.parent_commit {
        let valid =
            (5..=40).contains(&parent.len()) && parent.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid || !old.starts_with(&parent.to_ascii_lowercase()) {
            return Err(ServerError::Conflict(format!(
                "parent commit {parent} is not the head of {branch} ({old}): the branch moved; \
                 fetch it and commit again"
            ))
            .into());
        }
    }
    let mut files = gitwrite::files_of(&repo.dir, Some(&old)).await?;
    let mut lfs_paths = Vec::new();
    for line in lines {
        let line: Line =
            serde_json::from_slice(line).map_err(|e| bad(format!("malformed line: {e}")))?;
        match line.key.as_str() {
            "file" => {
                let op: FileOp = parse(line.value, "file")?;
                if op.encoding.as_deref().is_some_and(|e| e != "base64") {
                    return Err(bad("file contents must be base64"));
                }
                let content = STANDARD
                    .decode(op.content.as_bytes())
                    .map_err(|_| bad(format!("the content of {} is not base64", op.path)))?;
                let path = checked_path(&op.path)?;
                let oid = gitwrite::write_blob(&repo.dir, &content).await?;
                add(&mut files, path, oid);
            }
            "lfsFile" => {
                let op: LfsOp = parse(line.value, "lfsFile")?;
                let path = checked_path(&op.path)?.to_string();
                let pointer = held_pointer(state, &repo, &op).await?;
                let oid = gitwrite::write_blob(&repo.dir, pointer.to_text().as_bytes()).await?;
                add(&mut files, &path, oid);
                lfs_paths.push(path);
            }
            "deletedFile" => {
                let op: PathOp = parse(line.value, "deletedFile")?;
                if files.remove(op.path.as_bytes()).is_none() {
                    return Err(HubError::EntryNotFound {
                        message: format!("A file with this name doesn't exist: {}", op.path),
                        commit: None,
                    });
                }
            }
            "deletedFolder" => {
                let op: PathOp = parse(line.value, "deletedFolder")?;
                let prefix = format!("{}/", op.path.trim_end_matches('/'));
                let before = files.len();
                files.retain(|p, _| !p.starts_with(prefix.as_bytes()));
                if files.len() == before {
                    return Err(HubError::EntryNotFound {
                        message: format!("A folder with this name doesn't exist: {}", op.path),
                        commit: None,
                    });
                }
            }
            other => return Err(bad(format!("unsupported commit operation {other:?}"))),
        }
    }
    let tmp = state.config.tmp_dir();
    let mut tree = gitwrite::write_tree(&repo.dir, &tmp, &files).await?;
    if cover_lfs_paths(&repo, &mut files, &tree, &lfs_paths).await? {
        tree = gitwrite::write_tree(&repo.dir, &tmp, &files).await?;
    }
    let message = match header.description.trim() {
        "" => format!("{}\n", header.summary.trim()),
        d => format!("{}\n\n{d}\n", header.summary.trim()),
    };
    let (user, email) = who(&repo);
    let author = Author {
        name: &user,
        email: &email,
    };
    let new = gitwrite::commit_tree(&repo.dir, &tree, Some(&old), &message, &author).await?;
    crate::hub::locks::refuse_locked(state, &repo, branch, &old, &new).await?;
    let moved = write_locked(&repo, branch, &new, Some(&old)).await?;
    if !moved {
        return Err(ServerError::Conflict(format!(
            "{branch} moved while the commit was made (a push or another commit): commit again"
        ))
        .into());
    }
    tracing::info!(repo = %repo.name, %branch, commit = %new, "hub commit");
    let url = format!("{}/{}/commit/{new}", state.base_url(headers), repo.name);
    Ok(axum::Json(serde_json::json!({
        "success": true,
        "commitOid": new,
        "commitUrl": url,
        "pullRequestUrl": null,
    }))
    .into_response())
}

/// The name and e-mail address commits and tags made with the caller's token are by.
pub fn who(repo: &Repo) -> (String, String) {
    let user = repo.access.user().unwrap_or("anonymous").to_string();
    let email = format!(
        "{}@git-xet",
        user.replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '.' && c != '-' && c != '_',
            "-"
        )
    );
    (user, email)
}

/// Moves the branch under the repository's writer lock, then makes the change durable.
pub async fn write_locked(
    repo: &Repo,
    branch: &str,
    new: &str,
    old: Option<&str>,
) -> HubResult<bool> {
    let full = format!("refs/heads/{branch}");
    ref_locked(repo, &full, Some(new), old, "hub commit").await
}

/// Updates (or with `new` `None` deletes) the ref `full` if it is still at `old`, under the
/// repository's writer lock, then makes the change durable. Whether it did.
pub async fn ref_locked(
    repo: &Repo,
    full: &str,
    new: Option<&str>,
    old: Option<&str>,
    reason: &str,
) -> HubResult<bool> {
    let dir = repo.dir.clone();
    let started = std::time::SystemTime::now();
    let lock = tokio::task::spawn_blocking(move || crate::git::writers::WriterLock::acquire(&dir))
        .await
        .map_err(ServerError::from)?
        .map_err(ServerError::from)?;
    let moved = gitwrite::update_ref(&repo.dir, full, new, old, reason).await?;
    let dir = repo.dir.clone();
    tokio::task::spawn_blocking(move || crate::git::repos::sync_names(&dir, started))
        .await
        .map_err(ServerError::from)?
        .map_err(ServerError::from)?;
    drop(lock);
    Ok(moved)
}

fn add(files: &mut Files, path: &str, oid: String) {
    // A file replacing a directory, or the other way round, drops what was in the way.
    let path = path.as_bytes();
    let under = |p: &[u8], dir: &[u8]| p.strip_prefix(dir).is_some_and(|r| r.starts_with(b"/"));
    files.retain(|p, _| !under(p, path) && !under(path, p));
    let mode = files
        .get(path)
        .map(|(m, _)| m.clone())
        .filter(|m| m == "100755")
        .unwrap_or_else(|| REGULAR.to_string());
    files.insert(path.to_vec(), (mode, oid));
}

/// The pointer of an `lfsFile` line, if this repository holds that object (with that size).
async fn held_pointer(state: &SharedState, repo: &Repo, op: &LfsOp) -> HubResult<Pointer> {
    let sha256 = crate::lfs::parse_oid(&op.oid)?;
    let (index, name) = (state.index.clone(), repo.name.clone());
    let found = blocking(move || Ok(index.repo_file_by_sha256(&name, &sha256)?)).await?;
    let Some(file) = found else {
        return Err(bad(format!(
            "LFS object {} of {} was not uploaded to {}: upload it (hf_xet or LFS) first",
            op.oid, op.path, repo.name
        )));
    };
    if op.size.is_some_and(|s| s != file.size) {
        return Err(bad(format!(
            "LFS object {} is stored with {} bytes, not {}",
            op.oid,
            file.size,
            op.size.unwrap_or(0)
        )));
    }
    Ok(Pointer::new(Oid(sha256), file.size))
}

/// Adds a `.gitattributes` rule for each LFS path no rule covers. Returns whether it did.
async fn cover_lfs_paths(
    repo: &Repo,
    files: &mut Files,
    tree: &str,
    lfs_paths: &[String],
) -> HubResult<bool> {
    let paths: Vec<&str> = lfs_paths.iter().map(String::as_str).collect();
    let covered = gitwrite::lfs_filtered(&repo.dir, tree, &paths).await?;
    let missing: Vec<&str> = paths
        .into_iter()
        .filter(|p| !covered.iter().any(|c| c == p))
        .collect();
    if missing.is_empty() {
        return Ok(false);
    }
    let mut text = match files.get(&b".gitattributes"[..]) {
        Some((_, oid)) => gitread::blob(&repo.dir, oid).await?,
        None => Vec::new(),
    };
    if !text.is_empty() && !text.ends_with(b"\n") {
        text.push(b'\n');
    }
    for p in missing {
        text.extend_from_slice(
            format!("{} filter=lfs diff=lfs merge=lfs -text\n", attr_pattern(p)).as_bytes(),
        );
    }
    let oid = gitwrite::write_blob(&repo.dir, &text).await?;
    add(files, ".gitattributes", oid);
    Ok(true)
}

/// `path` as a .gitattributes pattern matching exactly it (anchored; glob characters and
/// white space escaped).
fn attr_pattern(path: &str) -> String {
    let mut out = String::from("/");
    for c in path.chars() {
        match c {
            '*' | '?' | '[' | '\\' | '!' | '#' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_whitespace() => out.push_str("[[:space:]]"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_patterns_match_only_their_path() {
        assert_eq!(attr_pattern("a/b.bin"), "/a/b.bin");
        assert_eq!(attr_pattern("dir x/*.bin"), "/dir[[:space:]]x/\\*.bin");
    }

    #[test]
    fn a_file_replaces_a_directory_in_its_way() {
        let mut files = Files::new();
        files.insert(b"a/b".to_vec(), ("100644".into(), "1".into()));
        files.insert(b"run.sh".to_vec(), ("100755".into(), "2".into()));
        files.insert(b"ab".to_vec(), ("100644".into(), "5".into()));
        add(&mut files, "a", "3".into());
        add(&mut files, "run.sh", "4".into());
        assert_eq!(files.len(), 3, "{files:?}");
        assert_eq!(
            files[&b"run.sh"[..]],
            ("100755".to_string(), "4".to_string())
        );
        // A directory in the way of a file goes, whatever bytes its files are named by.
        files.insert(b"d/caf\xe9".to_vec(), ("100644".into(), "6".into()));
        add(&mut files, "d", "7".into());
        assert!(files.keys().all(|p| !p.starts_with(b"d/")), "{files:?}");
    }
}
