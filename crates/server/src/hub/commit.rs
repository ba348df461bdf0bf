//! `POST /api/models/{repo}/commit/{branch}`: the client's NDJSON commit (`header`, `file`,
//! `lfsFile`, `deletedFile`, `deletedFolder`) becomes a git commit on the branch. The body is
//! read as it arrives (commit_body.rs), its objects written into a quarantine that becomes
//! part of the repository only when the commit is accepted (quarantine.rs). LFS files are
//! committed as the pointers git-lfs writes, and only for objects this repository holds
//! (uploaded through XET with its write token, or LFS basic); their paths get an LFS rule in
//! `.gitattributes` when none covers them, so `git clone` checks them out. The commit changes
//! exactly the paths it names: the rest of the tree (submodules, symlinks, modes included)
//! stays as it was. It passes the checks of a push (push_check.rs): a change to a file
//! another user has locked is refused.

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use crate::body::{read_blocking, read_blocking_slot_when_flowing};
use crate::error::ServerError;
use crate::hub::access::{open, Repo};
use crate::hub::commit_body::{self, Context, Op, Received};
use crate::hub::gitwrite::{self, Author, Files};
use crate::hub::push_check::{refuse_as_a_push, Update};
use crate::hub::quarantine::Quarantine;
use crate::hub::ref_update::branch_locked;
use crate::hub::{gitread, HubError, HubResult};
use crate::state::SharedState;
use git_xet_identity::auth::Scope;

const REGULAR: &str = "100644";
const EXECUTABLE: &str = "100755";
/// What a commit request may hold in all (file contents travel base64 inside it). It is
/// read as it arrives, never held: this bounds the disk its objects take, not memory.
pub const MAX_COMMIT_BODY: u64 = 1 << 30;
/// A request larger than this takes one of the server's upload slots (state.rs) once this
/// much of it has arrived, so that big commits queue, as xorb uploads do, instead of adding
/// up; smaller ones are read at once.
pub const SLOT_FROM: u64 = 1 << 20;

fn bad(msg: impl Into<String>) -> HubError {
    ServerError::bad_request(msg).into()
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
    let old = gitread::resolve(&repo.dir, &format!("refs/heads/{branch}"))
        .await?
        .ok_or_else(|| HubError::RevisionNotFound(branch.to_string()))?;
    let quarantine = Quarantine::open(&repo.dir).await?;
    let context = Context {
        index: state.index.clone(),
        repo: repo.name.clone(),
        branch: branch.to_string(),
        head: old.clone(),
        tmp: state.config.tmp_dir(),
    };
    let received = receive(state, headers, body, quarantine, context).await?;
    let Received {
        header,
        ops,
        quarantine,
    } = received;
    let mut files = gitwrite::files_of(&repo.dir, Some(&old)).await?;
    let lfs_paths = apply(&mut files, ops)?;
    let tmp = state.config.tmp_dir();
    let mut tree = gitwrite::write_tree(&quarantine, &tmp, &files).await?;
    if cover_lfs_paths(&repo, &quarantine, &mut files, &tree, &lfs_paths).await? {
        tree = gitwrite::write_tree(&quarantine, &tmp, &files).await?;
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
    let new = gitwrite::commit_tree(&quarantine, &tree, Some(&old), &message, &author).await?;
    let full = format!("refs/heads/{branch}");
    let update = Update {
        full: &full,
        old: Some(&old),
        new: &new,
    };
    refuse_as_a_push(state, &repo, Some(&quarantine), update).await?;
    if !branch_locked(&repo, quarantine, branch, &new, Some(&old)).await? {
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

/// Reads the body into `quarantine` (commit_body.rs): a large one once it holds an upload
/// slot.
async fn receive(
    state: &SharedState,
    headers: &HeaderMap,
    body: Body,
    quarantine: Quarantine,
    context: Context,
) -> HubResult<Received> {
    const WHAT: &str = "commit request";
    let work = move |reader: &mut crate::body::BodyReader| {
        Ok(commit_body::read(reader, quarantine, &context))
    };
    let small = crate::body::content_length(headers).is_some_and(|n| n <= SLOT_FROM);
    let read = if small {
        read_blocking(body, headers, MAX_COMMIT_BODY, WHAT, work).await
    } else {
        let slots = &state.upload_slots;
        read_blocking_slot_when_flowing(
            body,
            headers,
            MAX_COMMIT_BODY,
            WHAT,
            slots,
            SLOT_FROM,
            work,
        )
        .await
    };
    read?
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

/// Applies the operations to the tree's entries, in order; returns the LFS files' paths.
fn apply(files: &mut Files, ops: Vec<Op>) -> HubResult<Vec<String>> {
    let mut lfs_paths = Vec::new();
    for op in ops {
        match op {
            Op::Write { path, oid, lfs } => {
                add(files, &path, oid);
                if lfs {
                    lfs_paths.push(path);
                }
            }
            Op::DeleteFile(path) => {
                if files.remove(path.as_bytes()).is_none() {
                    return Err(HubError::EntryNotFound {
                        message: format!("A file with this name doesn't exist: {path}"),
                        commit: None,
                    });
                }
            }
            Op::DeleteFolder(path) => {
                let dir = path.trim_end_matches('/').as_bytes();
                if remove_under(files, dir) == 0 {
                    return Err(HubError::EntryNotFound {
                        message: format!("A folder with this name doesn't exist: {path}"),
                        commit: None,
                    });
                }
            }
        }
    }
    Ok(lfs_paths)
}

/// Writes a file's blob at `path`. An executable file stays executable; a symlink or a
/// submodule there becomes a regular file.
fn add(files: &mut Files, path: &str, oid: String) {
    // A file replacing a directory, or the other way round, drops what was in the way.
    let path = path.as_bytes();
    remove_under(files, path);
    for (i, _) in path.iter().enumerate().filter(|(_, &b)| b == b'/') {
        files.remove(&path[..i]);
    }
    let mode = match files.get(path) {
        Some((m, _)) if m == EXECUTABLE => EXECUTABLE,
        _ => REGULAR,
    };
    files.insert(path.to_vec(), (mode.to_string(), oid));
}

/// Removes the entries under the directory `dir` (`dir/...`); how many there were.
fn remove_under(files: &mut Files, dir: &[u8]) -> usize {
    let mut from = dir.to_vec();
    from.push(b'/');
    let mut to = dir.to_vec();
    to.push(b'/' + 1);
    let under: Vec<Vec<u8>> = files.range(from..to).map(|(p, _)| p.clone()).collect();
    for p in &under {
        files.remove(p);
    }
    under.len()
}

/// Adds a `.gitattributes` rule for each LFS path no rule covers. Returns whether it did.
async fn cover_lfs_paths(
    repo: &Repo,
    quarantine: &Quarantine,
    files: &mut Files,
    tree: &str,
    lfs_paths: &[String],
) -> HubResult<bool> {
    let paths: Vec<&str> = lfs_paths.iter().map(String::as_str).collect();
    let covered = gitwrite::lfs_filtered(&repo.dir, Some(quarantine), tree, &paths).await?;
    let missing: Vec<&str> = paths
        .into_iter()
        .filter(|p| !covered.iter().any(|c| c == p))
        .collect();
    if missing.is_empty() {
        return Ok(false);
    }
    let mut text = match files.get(&b".gitattributes"[..]) {
        Some((_, oid)) => gitwrite::read_blob(quarantine, oid).await?,
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
    let oid = gitwrite::write_blob(quarantine, &text).await?;
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
