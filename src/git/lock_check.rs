//! The lock half of the pre-receive check: a push may not change (modify, delete or rename)
//! a file that another user holds a git-lfs lock on. git-lfs checks this on the client
//! (`lfs.locksverify`), but a client can skip that; the server's hook cannot be skipped.
//!
//! What a push changes: for an updated ref, the difference between its old and new commit;
//! for a new ref, the files touched by the commits no existing ref reaches. The server is
//! asked which of those paths are locked (`info/xet/locked-paths`, in batches), with the
//! pusher's identity: the work follows the push, not the number of locks a writer may have
//! taken. A server without that route gets its whole lock listing walked, as before.

use std::collections::BTreeSet;

use crate::git::command::Git;
use crate::git::hook_server::HookServer;
use crate::git::pre_receive::HookSettings;
use crate::git::GitError;

/// Locks per request (the server's largest page).
const PAGE: usize = 1000;
/// Pages read at most (a million locks); a server whose cursor never ends is an error.
const MAX_PAGES: usize = 1000;

/// A pushed change to a file another user has locked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedChange {
    pub path: String,
    pub owner: String,
}

/// One `<old> <new> <ref>` line of a pre-receive hook's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    pub old: String,
    pub new: String,
    pub name: String,
}

fn is_zero(id: &str) -> bool {
    id.bytes().all(|b| b == b'0')
}

fn is_object_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_hexdigit())
}

impl RefUpdate {
    /// Parses a hook input line; `None` for anything else.
    pub fn parse(line: &str) -> Option<RefUpdate> {
        let mut fields = line.split_whitespace();
        let (old, new, name) = (fields.next()?, fields.next()?, fields.next()?);
        (is_object_id(old) && is_object_id(new)).then(|| RefUpdate {
            old: old.to_string(),
            new: new.to_string(),
            name: name.to_string(),
        })
    }
}

/// The paths the updates change (see the module comment). Deleting a ref changes no file.
pub fn changed_paths(git: &Git, updates: &[RefUpdate]) -> Result<BTreeSet<String>, GitError> {
    let mut paths = BTreeSet::new();
    for u in updates {
        if is_zero(&u.new) {
            continue;
        }
        let out = if is_zero(&u.old) {
            git.run_bytes(
                [
                    "log",
                    "--format=",
                    "--name-only",
                    "-z",
                    "--no-renames",
                    &u.new,
                    "--not",
                    "--all",
                ],
                None,
            )?
        } else {
            git.run_bytes(
                ["diff", "--name-only", "-z", "--no-renames", &u.old, &u.new],
                None,
            )?
        };
        for path in out.split(|&b| b == 0).filter(|p| !p.is_empty()) {
            // A lock names a UTF-8 path; a path that is not UTF-8 cannot be locked.
            if let Ok(p) = std::str::from_utf8(path) {
                paths.insert(p.trim_start_matches('\n').to_string());
            }
        }
    }
    Ok(paths)
}

#[derive(serde::Deserialize)]
struct LockList {
    locks: Vec<LockEntry>,
    #[serde(default)]
    next_cursor: Option<String>,
}

#[derive(serde::Deserialize)]
struct LockEntry {
    path: String,
    #[serde(default)]
    owner: Option<OwnerEntry>,
}

#[derive(serde::Deserialize)]
struct OwnerEntry {
    name: String,
}

/// The changed paths that another user (anyone but `settings.user`) has locked.
pub fn locked_changes(
    settings: &HookSettings,
    changed: &BTreeSet<String>,
) -> Result<Vec<LockedChange>, GitError> {
    if changed.is_empty() {
        return Ok(Vec::new());
    }
    let server = HookServer::new(settings)?;
    let mut found = Vec::new();
    let paths: Vec<&String> = changed.iter().collect();
    for batch in paths.chunks(BATCH) {
        match ask_about(&server, batch) {
            Ok(locks) => found.extend(locks),
            Err(GitError::HookServerRefused { status: 404, .. }) => {
                return walk_locks(&server, settings, changed)
            }
            Err(e) => return Err(e),
        }
    }
    found.retain(|l| {
        changed.contains(&l.path) && settings.user.as_deref() != Some(l.owner.as_str())
    });
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

/// Paths per `locked-paths` request (the server takes up to 4096).
const BATCH: usize = 1000;

#[derive(serde::Deserialize)]
struct LockedPaths {
    locks: Vec<LockedPath>,
}

#[derive(serde::Deserialize)]
struct LockedPath {
    path: String,
    owner: String,
}

/// The locks on `paths`, whoever holds them.
fn ask_about(server: &HookServer, paths: &[&String]) -> Result<Vec<LockedChange>, GitError> {
    const WHAT: &str = "asking which changed paths are locked";
    let mut body = Vec::new();
    for p in paths {
        body.extend_from_slice(p.as_bytes());
        body.push(0);
    }
    let answer = server.call(
        reqwest::Method::POST,
        &server.url("xet/locked-paths"),
        std::time::Duration::from_secs(120),
        WHAT,
        |request| request.body(body),
    )?;
    let list: LockedPaths = serde_json::from_slice(&answer)
        .map_err(|e| server.bad_answer(WHAT, format!("a malformed answer: {e}")))?;
    Ok(list
        .locks
        .into_iter()
        .map(|l| LockedChange {
            path: l.path,
            owner: l.owner,
        })
        .collect())
}

/// [`locked_changes`] from the whole lock listing, page by page (servers without
/// `locked-paths`).
fn walk_locks(
    server: &HookServer,
    settings: &HookSettings,
    changed: &BTreeSet<String>,
) -> Result<Vec<LockedChange>, GitError> {
    const WHAT: &str = "reading the locks";
    let base = server.url("lfs/locks");
    let mut found = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut url = format!("{base}?limit={PAGE}");
        if let Some(c) = &cursor {
            // Cursors are lock ids: ASCII letters and digits, nothing to escape.
            if !c.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(server.bad_answer(WHAT, format!("a malformed lock cursor {c:?}")));
            }
            url.push_str(&format!("&cursor={c}"));
        }
        let body = server.call(
            reqwest::Method::GET,
            &url,
            std::time::Duration::from_secs(120),
            WHAT,
            |request| request.header("Accept", "application/vnd.git-lfs+json"),
        )?;
        let page: LockList = serde_json::from_slice(&body)
            .map_err(|e| server.bad_answer(WHAT, format!("a malformed lock listing: {e}")))?;
        for lock in page.locks {
            let owner = lock.owner.map(|o| o.name).unwrap_or_default();
            if changed.contains(&lock.path) && settings.user.as_deref() != Some(owner.as_str()) {
                found.push(LockedChange {
                    path: lock.path,
                    owner,
                });
            }
        }
        match page.next_cursor.filter(|c| !c.is_empty()) {
            Some(next) if Some(&next) != cursor.as_ref() => cursor = Some(next),
            Some(_) => {
                return Err(server.bad_answer(WHAT, "a lock listing that repeats its cursor".into()))
            }
            None => {
                found.sort_by(|a, b| a.path.cmp(&b.path));
                return Ok(found);
            }
        }
    }
    Err(server.bad_answer(WHAT, format!("more than {} locks", PAGE * MAX_PAGES)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_lines_parse_into_updates() {
        let (a, z) = ("a".repeat(40), "0".repeat(40));
        let u = RefUpdate::parse(&format!("{z} {a} refs/heads/new")).unwrap();
        assert_eq!(
            (u.old.as_str(), u.name.as_str()),
            (z.as_str(), "refs/heads/new")
        );
        assert!(is_zero(&u.old) && !is_zero(&u.new));
        assert_eq!(RefUpdate::parse("not a line"), None);
        assert_eq!(RefUpdate::parse(&format!("{a} {a}")), None, "no ref");
        assert_eq!(RefUpdate::parse(&format!("{a} xyz refs/heads/x")), None);
    }
}
