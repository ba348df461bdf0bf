//! The pages of one repository: its front page and directories, a file, and the storage
//! tab. Each reads git (gitview.rs) and the index (chunks.rs), fills a page model of the
//! git-xet-web crate and renders it; history.rs has the commit pages.

use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::Response;
use tokio::time::Instant;

use git_xet_web::model::{
    BlobBody, BlobPage, CloneInfo, EntryKind, LastCommit, LfsFile, Paging, Readme, ReadmeBody,
    RepoChrome, RepoInfo, Tab, TreeEntry, TreePage, Viewer,
};
use git_xet_web::{markdown, pages, safetensors, urls, ENTRIES_PER_PAGE, MAX_LINES, MAX_TEXT};

use super::access::Readable;
use super::gitview::{self, Kind};
use super::{chunks, commit_summary, html_ok, redirect, tree_listing};
use crate::error::{ServerError, ServerResult};
use crate::hub::{gitread, valid_repo_path};
use crate::state::SharedState;

/// Most branches and tags listed in the revision picker.
const MAX_REFS: usize = 100;
/// How long a large directory's page waits for the directory's last change, from when it
/// began looking: past that (a first view; git compares the directory's large trees commit
/// after commit) the page answers without it, the lookup goes on, and later views name it.
const LAST_CHANGE_WAIT: Duration = Duration::from_millis(50);

pub fn repo_info(repo: &Readable) -> RepoInfo {
    RepoInfo {
        name: repo.name.to_string(),
        is_dataset: repo.name.is_dataset(),
        private: repo.private,
    }
}

/// The chrome of a page at `rev` (branches, tags, the default branch).
pub async fn chrome(repo: &Readable, rev: &str, tab: Tab) -> ServerResult<RepoChrome> {
    let (branches, tags) = gitread::refs(&repo.dir).await?;
    let names = |refs: Vec<gitread::Ref>| refs.into_iter().take(MAX_REFS).map(|r| r.name).collect();
    Ok(RepoChrome {
        repo: repo_info(repo),
        rev: rev.to_string(),
        default_branch: gitview::default_branch(&repo.dir).await?,
        branches: names(branches),
        tags: names(tags),
        tab,
    })
}

/// The commit `rev` names, or a 404 saying so.
pub async fn commit_of(repo: &Readable, rev: &str) -> ServerResult<String> {
    gitread::resolve(&repo.dir, rev)
        .await?
        .ok_or_else(|| no_revision(repo, rev))
}

fn no_revision(repo: &Readable, rev: &str) -> ServerError {
    ServerError::not_found(format!("{} has no revision {rev:?}", repo.name))
}

fn check_path(path: &str) -> ServerResult<()> {
    match path.is_empty() || valid_repo_path(path) {
        true => Ok(()),
        false => Err(ServerError::not_found(format!("no such path: {path:?}"))),
    }
}

/// The front page (`rev` `None`: the default branch) or a directory at `rev`.
pub async fn tree(
    state: &SharedState,
    headers: &HeaderMap,
    viewer: &Viewer,
    repo: &Readable,
    rev: Option<&str>,
    dir: &str,
    page: usize,
) -> ServerResult<Response> {
    check_path(dir)?;
    let default = gitview::default_branch(&repo.dir).await?;
    let rev = match rev {
        Some(rev) => rev.to_string(),
        None => default.clone().unwrap_or_else(|| "main".into()),
    };
    let commit = match gitread::resolve(&repo.dir, &rev).await? {
        Some(c) => Some(c),
        // An empty repository's front page still says how to push to it.
        None if dir.is_empty() && gitread::head(&repo.dir).await?.is_none() => None,
        None => return Err(no_revision(repo, &rev)),
    };
    let clone = dir.is_empty().then(|| CloneInfo {
        base_url: state.base_url(headers),
        ssh_host: ssh_host(&state.base_url(headers)),
    });
    let Some(commit) = commit else {
        let model = TreePage {
            chrome: chrome(repo, &rev, Tab::Files).await?,
            commit: None,
            dir: String::new(),
            entries: Vec::new(),
            paging: Paging {
                page: 0,
                per_page: ENTRIES_PER_PAGE,
                more: false,
                total: Some(0),
            },
            readme: None,
            clone,
        };
        return Ok(html_ok(pages::repo::render(&model, viewer)));
    };
    // A directory's last change is looked up beside the listing (the root's is the commit).
    let started = Instant::now();
    let last_change = match dir {
        "" => None,
        dir => Some(tree_listing::last_change(&repo.dir, &commit, dir)),
    };
    let (chrome, listing) = tokio::try_join!(
        chrome(repo, &rev, Tab::Files),
        gitview::list_page(&repo.dir, &commit, dir, page, ENTRIES_PER_PAGE)
    )?;
    let Some(listing) = listing else {
        // Not a directory: a file's page, or nothing.
        return match gitview::object_type(&repo.dir, &commit, dir)
            .await?
            .as_deref()
        {
            Some("blob") => Ok(redirect(&urls::blob(repo.name.as_str(), &rev, dir))),
            _ => Err(ServerError::not_found(format!(
                "{dir:?} does not exist at {rev}"
            ))),
        };
    };
    let sha256s: Vec<[u8; 32]> = listing
        .entries
        .iter()
        .filter_map(|e| e.pointer.as_ref().map(|p| p.oid.0))
        .collect();
    let mut held = chunks::records(state, &repo.name, sha256s)
        .await?
        .into_iter();
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    let entries = listing
        .entries
        .iter()
        .map(|e| TreeEntry {
            name: e.name.clone(),
            path: format!("{prefix}{}", e.name),
            kind: match (e.kind, &e.pointer) {
                (Kind::Dir, _) => EntryKind::Dir,
                (Kind::Submodule, _) => EntryKind::Submodule,
                (Kind::Symlink, _) => EntryKind::Symlink,
                (Kind::File, Some(p)) => EntryKind::Lfs {
                    size: p.size,
                    xet: held.next().flatten().is_some(),
                },
                (Kind::File, None) => EntryKind::File {
                    size: e.size.unwrap_or(0),
                },
            },
        })
        .collect();
    let readme = match page {
        0 => readme(repo, &rev, dir, &listing.names).await?,
        _ => None,
    };
    let last = match last_change {
        None => Some(gitview::log(&repo.dir, &commit, None, 0, 1).await?.pop()),
        // A large directory's page waits a while, a small one's (cheap to find) until found.
        Some(last) => {
            let deadline = listing.large.then_some(started + LAST_CHANGE_WAIT);
            last.wait(deadline).await?
        }
    };
    let model = TreePage {
        chrome,
        commit: Some(match last {
            Some(Some(c)) => LastCommit::Known(commit_summary(c)),
            // A commit that changed no path of the directory: none to name.
            Some(None) => LastCommit::Unknown,
            None => LastCommit::Pending,
        }),
        dir: dir.to_string(),
        entries,
        paging: Paging {
            page,
            per_page: ENTRIES_PER_PAGE,
            more: (page + 1) * ENTRIES_PER_PAGE < listing.total,
            total: Some(listing.total),
        },
        readme,
        clone,
    };
    Ok(html_ok(pages::repo::render(&model, viewer)))
}

/// The host name of the base URL, for the ssh clone command.
fn ssh_host(base: &str) -> String {
    let rest = base.split_once("://").map_or(base, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host.to_string(),
        _ => authority.to_string(),
    }
}

/// The directory's README, rendered when small enough and in git (not LFS).
async fn readme(
    repo: &Readable,
    rev: &str,
    dir: &str,
    names: &[(String, String)],
) -> ServerResult<Option<Readme>> {
    let rank = |name: &str| match name.to_ascii_lowercase().as_str() {
        "readme.md" => Some(0),
        "readme.markdown" => Some(1),
        "readme" | "readme.txt" => Some(2),
        _ => None,
    };
    let Some((name, oid)) = names
        .iter()
        .filter_map(|(n, o)| rank(n).map(|r| (r, n, o)))
        .min()
        .map(|(_, n, o)| (n, o))
    else {
        return Ok(None);
    };
    let path = if dir.is_empty() {
        name.clone()
    } else {
        format!("{dir}/{name}")
    };
    let size = gitview::blobs(&repo.dir, std::slice::from_ref(oid))
        .await?
        .pop()
        .flatten()
        .map_or(0, |(_, size)| size);
    let body = if size as usize > markdown::MAX_README {
        ReadmeBody::Linked
    } else {
        let bytes = gitview::blob_prefix(&repo.dir, oid, markdown::MAX_README as u64).await?;
        match git_xet_core::lfs::pointer::Pointer::detect(&bytes) {
            Some(_) => ReadmeBody::Linked,
            None => {
                let base = markdown::LinkBase {
                    repo: repo.name.to_string(),
                    rev: rev.to_string(),
                    dir: dir.to_string(),
                };
                ReadmeBody::Html(markdown::render(&String::from_utf8_lossy(&bytes), &base))
            }
        }
    };
    Ok(Some(Readme { path, body }))
}

/// A file at `rev`.
pub async fn blob(
    state: &SharedState,
    viewer: &Viewer,
    repo: &Readable,
    rev: &str,
    path: &str,
) -> ServerResult<Response> {
    check_path(path)?;
    let commit = commit_of(repo, rev).await?;
    let missing = || ServerError::not_found(format!("{path:?} does not exist at {rev}"));
    let entry = gitread::entry(&repo.dir, &commit, path)
        .await?
        .ok_or_else(missing)?;
    if entry.is_dir {
        return Ok(redirect(&urls::tree(repo.name.as_str(), rev, path)));
    }
    let is_safetensors = path.to_ascii_lowercase().ends_with(".safetensors");
    let (body, tensors) = match &entry.pointer {
        Some(pointer) => {
            let record = chunks::records(state, &repo.name, vec![pointer.oid.0])
                .await?
                .pop()
                .flatten();
            let tensors = match (is_safetensors, &record) {
                (false, _) => None,
                (true, None) => Some(Err("this server does not hold the object".to_string())),
                (true, Some(file)) => Some(lfs_header(state, file).await?),
            };
            let lfs = LfsFile {
                size: pointer.size,
                sha256: pointer.oid.to_hex(),
                xet_hash: record.map(|r| r.file_hash.to_hex()),
            };
            (BlobBody::Lfs(lfs), tensors)
        }
        None => {
            let tensors = match is_safetensors {
                true => {
                    let max = 8 + safetensors::MAX_HEADER;
                    let bytes = gitview::blob_prefix(&repo.dir, &entry.oid, max).await?;
                    Some(safetensors::parse(&bytes).map_err(|e| e.to_string()))
                }
                false => None,
            };
            (plain_body(repo, &entry.oid, entry.size).await?, tensors)
        }
    };
    let model = BlobPage {
        chrome: chrome(repo, rev, Tab::Files).await?,
        path: path.to_string(),
        body,
        safetensors: tensors,
    };
    Ok(html_ok(pages::file::render(&model, viewer)))
}

/// A git blob as text (UTF-8 without NUL, not over [`MAX_TEXT`]) or as binary.
async fn plain_body(repo: &Readable, oid: &str, size: u64) -> ServerResult<BlobBody> {
    let binary = || BlobBody::Binary {
        size,
        oid: oid.to_string(),
    };
    if size > MAX_TEXT {
        return Ok(binary());
    }
    let bytes = gitview::blob_prefix(&repo.dir, oid, MAX_TEXT).await?;
    let Ok(text) = String::from_utf8(bytes) else {
        return Ok(binary());
    };
    if text.contains('\0') {
        return Ok(binary());
    }
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let truncated = lines.len() > MAX_LINES;
    lines.truncate(MAX_LINES);
    Ok(BlobBody::Text {
        size,
        lines,
        truncated,
    })
}

/// A safetensors header of an LFS file: its first 8 bytes, then the header they declare.
async fn lfs_header(
    state: &SharedState,
    file: &git_xet_index::FileRecord,
) -> ServerResult<Result<safetensors::Header, String>> {
    let prefix = chunks::file_bytes(state, file, 0..8).await?;
    let len = match safetensors::header_len(&prefix) {
        Ok(len) => len,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let json = chunks::file_bytes(state, file, 8..8 + len).await?;
    if (json.len() as u64) < len {
        return Ok(Err(safetensors::SafetensorsError::Truncated.to_string()));
    }
    Ok(safetensors::parse_header(&json).map_err(|e| e.to_string()))
}
