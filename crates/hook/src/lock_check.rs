//! The lock half of the pre-receive check: a push may not change (modify, delete or rename)
//! a file that another user holds a git-lfs lock on. git-lfs checks this on the client
//! (`lfs.locksverify`), but a client can skip that; the server's hook cannot be skipped.
//!
//! What a push changes: every file that any commit it adds (one no existing ref reaches,
//! on any ref, branch or tag) changes against any of its parents, merges included, a
//! rename or deletion naming both paths; and for an updated ref, the difference between its
//! old and new commit. The server is asked which of those paths are locked
//! (`info/xet/locked-paths`, in batches), with the pusher's identity: the work follows the
//! push, not the number of locks a writer may have taken. A server without that route gets
//! its whole lock listing walked, as before.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use git_xet_core::api::locks::{LockList, LockedPaths};
use git_xet_core::api::routes;

use super::git::Git;
use super::server_call::HookServer;
use super::HookError;
use super::HookSettings;

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

/// A git object id: SHA-1 or SHA-256, in hex.
pub(super) fn is_object_id(id: &str) -> bool {
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
///
/// Three git processes whatever the push: `cat-file` peels the pushed ids to commits (tags
/// point at them; a tag of a tree or blob adds no commit), `rev-list` lists the commits
/// no existing ref reaches, and one `diff-tree` compares each of them with each of its
/// parents (`-m`: merges too, whose changes `git log` does not show), a root commit with
/// the empty tree, and each updated ref's new commit with its old one.
pub fn changed_paths(git: &Git, updates: &[RefUpdate]) -> Result<BTreeSet<String>, HookError> {
    let pushed: Vec<&RefUpdate> = updates.iter().filter(|u| !is_zero(&u.new)).collect();
    if pushed.is_empty() {
        return Ok(BTreeSet::new());
    }
    let mut names = String::new();
    for u in &pushed {
        names.push_str(&format!("{}^{{commit}}\n", u.new));
        if !is_zero(&u.old) {
            names.push_str(&format!("{}^{{commit}}\n", u.old));
        }
    }
    let peeled = git.run_bytes(
        ["cat-file", "--batch-check=%(objectname)"],
        Some(names.as_bytes()),
    )?;
    // One answer line per name: the commit, or `<name> missing` for what is no commit.
    let mut answers = peeled.split(|&b| b == b'\n').map(|line| {
        std::str::from_utf8(line)
            .ok()
            .filter(|id| is_object_id(id))
            .map(str::to_string)
    });
    let mut tips = String::new();
    let mut pairs = String::new();
    for u in &pushed {
        let new = answers.next().flatten();
        let old = if is_zero(&u.old) {
            None
        } else {
            answers.next().flatten()
        };
        if let Some(new) = &new {
            tips.push_str(new);
            tips.push('\n');
        }
        if let (Some(new), Some(old)) = (new, old) {
            // `<commit> <parent>`: diff-tree compares the two as commit and parent.
            pairs.push_str(&format!("{new} {old}\n"));
        }
    }
    let mut commits = if tips.is_empty() {
        Vec::new()
    } else {
        // `--stdin` first: the tips are read before `--not` applies to `--all`.
        git.run_bytes(
            ["rev-list", "--stdin", "--not", "--all"],
            Some(tips.as_bytes()),
        )?
    };
    commits.extend_from_slice(pairs.as_bytes());
    if commits.is_empty() {
        return Ok(BTreeSet::new());
    }
    let mut diff = git.spawn(
        [
            "diff-tree",
            "--stdin",
            "-m",
            "-r",
            "--root",
            "--name-only",
            "--no-renames",
            "--no-commit-id",
            "-z",
        ],
        Stdio::piped(),
    )?;
    let mut stdin = diff.stdin.take().expect("piped stdin");
    // Fed from another thread: diff-tree answers while it reads.
    let feeder = std::thread::spawn(move || stdin.write_all(&commits));
    let mut out = BufReader::new(diff.stdout.take().expect("piped stdout"));
    let mut paths = BTreeSet::new();
    let mut path = Vec::new();
    loop {
        path.clear();
        let n = out
            .read_until(0, &mut path)
            .map_err(|e| HookError::io("reading git diff-tree", e))?;
        if n == 0 {
            break;
        }
        if path.last() == Some(&0) {
            path.pop();
        }
        // A lock names a UTF-8 path; a path that is not UTF-8 cannot be locked.
        if let Ok(p) = std::str::from_utf8(&path) {
            if !p.is_empty() && !paths.contains(p) {
                paths.insert(p.to_string());
            }
        }
    }
    let fed = feeder.join().map_err(|_| {
        HookError::io(
            "writing to git diff-tree",
            std::io::Error::other("the writing thread panicked"),
        )
    })?;
    let status = diff
        .wait()
        .map_err(|e| HookError::io("waiting for git diff-tree", e))?;
    if !status.success() {
        return Err(HookError::StepFailed {
            step: "listing the files the pushed commits change",
            status,
        });
    }
    fed.map_err(|e| HookError::io("writing to git diff-tree", e))?;
    Ok(paths)
}

/// The changed paths that another user (anyone but `settings.user`) has locked.
pub fn locked_changes(
    settings: &HookSettings,
    changed: &BTreeSet<String>,
) -> Result<Vec<LockedChange>, HookError> {
    if changed.is_empty() {
        return Ok(Vec::new());
    }
    let server = HookServer::new(settings)?;
    let mut found = Vec::new();
    let paths: Vec<&String> = changed.iter().collect();
    for batch in paths.chunks(BATCH) {
        match ask_about(&server, batch) {
            Ok(locks) => found.extend(locks),
            Err(HookError::ServerRefused { status: 404, .. }) => {
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

/// The locks on `paths`, whoever holds them.
fn ask_about(server: &HookServer, paths: &[&String]) -> Result<Vec<LockedChange>, HookError> {
    const WHAT: &str = "asking which changed paths are locked";
    let mut body = Vec::new();
    for p in paths {
        body.extend_from_slice(p.as_bytes());
        body.push(0);
    }
    let answer = server.call(
        reqwest::Method::POST,
        &server.url(routes::HOOK_LOCKED_PATHS),
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
) -> Result<Vec<LockedChange>, HookError> {
    const WHAT: &str = "reading the locks";
    let base = server.url(&format!("{}/{}", routes::LFS_ENDPOINT, routes::LFS_LOCKS));
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
            let owner = lock.owner_name().to_string();
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

    /// A repository whose only ref is `main`; `commit` returns the new commit's id.
    struct Repo {
        git: Git,
        _dir: tempfile::TempDir,
    }

    impl Repo {
        fn new() -> Repo {
            let dir = tempfile::tempdir().unwrap();
            let git = Git::in_dir(dir.path());
            git.run(["init", "-q", "-b", "main"]).unwrap();
            git.run(["config", "user.name", "t"]).unwrap();
            git.run(["config", "user.email", "t@t"]).unwrap();
            Repo { git, _dir: dir }
        }

        fn write(&self, path: &str, text: &str) {
            let dir = self.git.dir().unwrap();
            std::fs::write(dir.join(path), text).unwrap();
            self.git.run(["add", path]).unwrap();
        }

        fn commit(&self, message: &str) -> String {
            self.git.run(["commit", "-q", "-m", message]).unwrap();
            self.git.run(["rev-parse", "HEAD"]).unwrap()
        }

        fn changed(&self, old: &str, new: &str) -> Vec<String> {
            let update = RefUpdate {
                old: old.into(),
                new: new.into(),
                name: "refs/heads/pushed".into(),
            };
            changed_paths(&self.git, &[update])
                .unwrap()
                .into_iter()
                .collect()
        }
    }

    /// The changes a merge makes itself (an "evil" merge) count, on a new ref and on an
    /// old one, through a tag too; `git log --name-only` showed none of them.
    #[test]
    fn every_added_commit_counts_against_each_parent_merges_too() {
        let repo = Repo::new();
        let z = "0".repeat(40);
        repo.write("locked.psd", "v1");
        repo.write("other.txt", "v1");
        let base = repo.commit("base");
        let git = &repo.git;
        git.run(["checkout", "-q", "-b", "side"]).unwrap();
        repo.write("side.txt", "s");
        repo.commit("side");
        git.run(["checkout", "-q", "main"]).unwrap();
        repo.write("main.txt", "m");
        repo.commit("main");
        git.run(["merge", "-q", "--no-commit", "side"]).unwrap();
        repo.write("locked.psd", "v2");
        let merge = repo.commit("merge");
        // Only `main` at `base` exists: the three commits are what a push would add.
        git.run(["update-ref", "refs/heads/main", &base]).unwrap();
        git.run(["reset", "-q", "--hard"]).unwrap();
        git.run(["branch", "-q", "-D", "side"]).unwrap();
        let all = ["locked.psd", "main.txt", "side.txt"];
        assert_eq!(repo.changed(&z, &merge), all, "a new branch");
        assert_eq!(repo.changed(&base, &merge), all, "an updated branch");
        git.run(["tag", "-a", "-m", "t", "t", &merge]).unwrap();
        let tag = git.run(["rev-parse", "t"]).unwrap();
        git.run(["tag", "-d", "t"]).unwrap();
        assert_eq!(repo.changed(&z, &tag), all, "an annotated tag");
        // Commits that exist already are not added again; deleting a ref changes nothing.
        git.run(["update-ref", "refs/heads/main", &merge]).unwrap();
        assert!(repo.changed(&z, &merge).is_empty());
        assert!(repo.changed(&merge, &z).is_empty());
    }

    /// A root commit against the empty tree, a rename as both its paths, a tag of a tree
    /// as no change.
    #[test]
    fn roots_renames_and_tags_of_trees() {
        let repo = Repo::new();
        let z = "0".repeat(40);
        repo.write("a.psd", "a");
        let root = repo.commit("root");
        let git = &repo.git;
        git.run(["update-ref", "-d", "refs/heads/main"]).unwrap();
        assert_eq!(repo.changed(&z, &root), ["a.psd"]);
        git.run(["update-ref", "refs/heads/main", &root]).unwrap();
        git.run(["mv", "a.psd", "b.psd"]).unwrap();
        let renamed = repo.commit("rename");
        git.run(["update-ref", "refs/heads/main", &root]).unwrap();
        assert_eq!(repo.changed(&z, &renamed), ["a.psd", "b.psd"]);
        let tree = git.run(["rev-parse", "HEAD^{tree}"]).unwrap();
        git.run(["tag", "-a", "-m", "t", "tt", &tree]).unwrap();
        let tag = git.run(["rev-parse", "tt"]).unwrap();
        assert!(repo.changed(&z, &tag).is_empty());
    }
}
