//! `git xet pre-receive`: the pre-receive check, the one implementation of it. It refuses
//! a push whose new commits hold LFS pointers to objects the XET server does not store for
//! the repository, and names them; with `GIT_XET_CHECK_LOCKS` (set by `git xet server`) also
//! a push changing a file another user has locked (hook/lock_check.rs).
//!
//! `git xet server` installs a two-line hook running it in the repositories it hosts; other
//! git servers run it through `hooks/pre-receive` (`exec git-xet pre-receive`). A push
//! waits for its hook, and this check starts three git processes (the curl-based shell
//! script it replaced started nine).

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};

mod error;
pub mod git;
pub mod lock_check;
mod server_call;

pub use error::HookError;

use git::Git;
use git_xet_core::lfs::Oid;
use lock_check::{LockedChange, RefUpdate};
use server_call::HookServer;

/// Blobs outside these sizes cannot be pointers (git-lfs reads at most 1024 bytes).
const POINTER_SIZES: std::ops::RangeInclusive<u64> = 100..=1024;
/// Pointers per request to the server (it takes up to 16 MiB per request).
const DEFAULT_BATCH_LINES: usize = 100_000;
/// Missing objects named in the rejection; the rest are counted.
const NAMED_AT_MOST: usize = 50;

/// Where to ask, from the environment `git xet server` sets or the repository's git config.
#[derive(Clone)]
pub struct HookSettings {
    pub server_url: String,
    pub repo: String,
    pub token: Option<String>,
    pub batch_lines: usize,
    /// Refuse changes to files other users have locked.
    pub check_locks: bool,
    /// The pusher's user name (the owner of their locks).
    pub user: Option<String>,
}

impl std::fmt::Debug for HookSettings {
    // The token stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookSettings")
            .field("server_url", &self.server_url)
            .field("repo", &self.repo)
            .field("batch_lines", &self.batch_lines)
            .field("check_locks", &self.check_locks)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl HookSettings {
    /// `GIT_XET_SERVER_URL`, `GIT_XET_REPO`, `GIT_XET_TOKEN`, `GIT_XET_CHECK_LOCKS`,
    /// `GIT_XET_USER`, each falling back to `xet.serverUrl`, `xet.repo`, `xet.token`,
    /// `xet.checkLocks`, `xet.user` in git config.
    pub fn load(git: &Git) -> Result<HookSettings, HookError> {
        let setting = |var: &str, key: &str| -> Result<Option<String>, HookError> {
            match std::env::var(var) {
                Ok(v) if !v.is_empty() => Ok(Some(v)),
                _ => Ok(git
                    .try_run(["config", "--get", key])?
                    .filter(|v| !v.is_empty())),
            }
        };
        let server_url = setting("GIT_XET_SERVER_URL", "xet.serverUrl")?.ok_or_else(|| {
            HookError::NotConfigured {
                what: "XET server",
                env: "GIT_XET_SERVER_URL",
                key: "xet.serverUrl",
            }
        })?;
        let repo =
            setting("GIT_XET_REPO", "xet.repo")?.ok_or_else(|| HookError::NotConfigured {
                what: "repository name",
                env: "GIT_XET_REPO",
                key: "xet.repo",
            })?;
        let token = setting("GIT_XET_TOKEN", "xet.token")?;
        let check_locks = setting("GIT_XET_CHECK_LOCKS", "xet.checkLocks")?
            .is_some_and(|v| matches!(v.as_str(), "1" | "true" | "yes" | "on"));
        let user = setting("GIT_XET_USER", "xet.user")?;
        let batch_lines = std::env::var("GIT_XET_HOOK_BATCH_LINES")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(DEFAULT_BATCH_LINES);
        Ok(HookSettings {
            server_url: server_url.trim_end_matches('/').to_string(),
            repo,
            token,
            batch_lines,
            check_locks,
            user,
        })
    }
}

/// An LFS object a pushed blob points to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Referenced {
    pub oid: Oid,
    pub size: u64,
}

/// The hook's verdict on a push.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    /// The server lacks these objects (`<oid> <size>` lines as it answered them).
    Reject(Vec<String>),
    /// The push changes files other users have locked.
    Locked(Vec<LockedChange>),
}

impl Verdict {
    /// The rejection as git shows it to the pusher.
    pub fn message(&self, repo: &str) -> Option<String> {
        let missing = match self {
            Verdict::Accept => return None,
            Verdict::Locked(locked) => return Some(locked_message(locked, repo)),
            Verdict::Reject(missing) => missing,
        };
        let mut text = format!(
            "git-xet pre-receive: push rejected: {} LFS object(s) referenced by the pushed commits\n\
             are not stored on the XET server for {repo}:\n",
            missing.len()
        );
        for line in missing.iter().take(NAMED_AT_MOST) {
            let mut fields = line.split_whitespace();
            let oid = fields.next().unwrap_or("");
            let size = fields.next().unwrap_or("?");
            text.push_str(&format!("  missing LFS object {oid} ({size} bytes)\n"));
        }
        if missing.len() > NAMED_AT_MOST {
            text.push_str(&format!(
                "  ... and {} more\n",
                missing.len() - NAMED_AT_MOST
            ));
        }
        text.push_str(
            "Push them first with git-lfs installed (git lfs push --all <remote>), then push again.\n",
        );
        Some(text)
    }
}

fn locked_message(locked: &[LockedChange], repo: &str) -> String {
    let mut text = format!(
        "git-xet pre-receive: push rejected: it changes {} file(s) in {repo} locked by another user:\n",
        locked.len()
    );
    for l in locked.iter().take(NAMED_AT_MOST) {
        text.push_str(&format!("  {} (locked by {})\n", l.path, l.owner));
    }
    if locked.len() > NAMED_AT_MOST {
        text.push_str(&format!(
            "  ... and {} more\n",
            locked.len() - NAMED_AT_MOST
        ));
    }
    text.push_str(
        "Ask the lock owner to unlock (git lfs unlock PATH), or an admin to force it (git lfs unlock --force PATH), then push again.\n",
    );
    text
}

/// Runs the check for the ref updates git hands a pre-receive hook (`<old> <new> <ref>`
/// lines), in the repository `git` runs in.
pub fn check(
    updates: impl BufRead,
    git: &Git,
    settings: &HookSettings,
) -> Result<Verdict, HookError> {
    let mut lines = Vec::new();
    for line in updates.lines() {
        lines.push(line.map_err(|e| HookError::io("reading the pushed refs", e))?);
    }
    if settings.check_locks {
        let updates: Vec<RefUpdate> = lines.iter().filter_map(|l| RefUpdate::parse(l)).collect();
        let changed = lock_check::changed_paths(git, &updates)?;
        let locked = lock_check::locked_changes(settings, &changed)?;
        if !locked.is_empty() {
            return Ok(Verdict::Locked(locked));
        }
    }
    let tips = pushed_tips(lines.join("\n").as_bytes())?;
    let referenced = newly_referenced(git, &tips)?;
    if referenced.is_empty() {
        return Ok(Verdict::Accept);
    }
    let missing = ask_server(settings, &referenced)?;
    Ok(if missing.is_empty() {
        Verdict::Accept
    } else {
        Verdict::Reject(missing)
    })
}

/// The LFS objects that the objects `tips` bring (those no ref reaches: a push's, or ones
/// already stored that no ref names) point to.
pub fn newly_referenced(git: &Git, tips: &[String]) -> Result<Vec<Referenced>, HookError> {
    if tips.is_empty() {
        return Ok(Vec::new());
    }
    let mut args = vec!["rev-list", "--objects"];
    args.extend(tips.iter().map(String::as_str));
    args.extend(["--not", "--all"]);
    let candidates = pointer_sized_blobs(git, &args)?;
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    referenced_objects(git, &candidates)
}

/// The new tips of the pushed refs, deletions (an all-zero new id) left out.
fn pushed_tips(updates: impl BufRead) -> Result<Vec<String>, HookError> {
    let mut tips = Vec::new();
    for line in updates.lines() {
        let line = line.map_err(|e| HookError::io("reading the pushed refs", e))?;
        let mut fields = line.split_whitespace();
        let (Some(_old), Some(new)) = (fields.next(), fields.next()) else {
            continue;
        };
        if lock_check::is_object_id(new) && new.bytes().any(|b| b != b'0') {
            tips.push(new.to_string());
        }
    }
    Ok(tips)
}

fn finish(mut child: Child, step: &'static str) -> Result<(), HookError> {
    let status = child
        .wait()
        .map_err(|e| HookError::io(format!("waiting for {step}"), e))?;
    if status.success() {
        Ok(())
    } else {
        Err(HookError::StepFailed { step, status })
    }
}

/// Every LFS object the history of any ref of the repository points to (`index rebuild`
/// reads each hosted repository's visible files from them).
pub fn all_referenced(git: &Git) -> Result<Vec<Referenced>, HookError> {
    let candidates = pointer_sized_blobs(git, &["rev-list", "--objects", "--all"])?;
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    referenced_objects(git, &candidates)
}

/// Blobs that `rev_list` (a `git rev-list --objects` command line: the push's new objects,
/// or all) names whose size a pointer can have: rev-list piped straight into one
/// `cat-file --batch-check`.
fn pointer_sized_blobs(git: &Git, rev_list: &[&str]) -> Result<Vec<String>, HookError> {
    let mut list = git.spawn(rev_list, Stdio::null())?;
    let objects = list.stdout.take().expect("piped stdout");
    // `%(rest)` makes cat-file take the object name up to the first space (rev-list appends
    // paths).
    let mut check = git.spawn(
        [
            "cat-file",
            "--batch-check=%(objecttype) %(objectname) %(objectsize) %(rest)",
        ],
        Stdio::from(objects),
    )?;
    let mut candidates = Vec::new();
    let out = BufReader::new(check.stdout.take().expect("piped stdout"));
    // Lines of bytes: the path after the fields is any bytes git allows (Latin-1, say).
    for line in out.split(b'\n') {
        let line = line.map_err(|e| HookError::io("reading git cat-file --batch-check", e))?;
        let mut fields = line
            .split(|&b| b == b' ')
            .map(|f| std::str::from_utf8(f).ok());
        if let (Some(Some("blob")), Some(Some(oid)), Some(Some(size))) =
            (fields.next(), fields.next(), fields.next())
        {
            if size.parse().is_ok_and(|s: u64| POINTER_SIZES.contains(&s)) {
                candidates.push(oid.to_string());
            }
        }
    }
    finish(list, "listing the pushed objects")?;
    finish(check, "inspecting the pushed objects")?;
    Ok(candidates)
}

/// The distinct objects the candidate blobs point to, in the order first seen. All blobs go
/// through one `cat-file --batch` (a process per blob would cost seconds on a push of
/// thousands of files).
fn referenced_objects(git: &Git, candidates: &[String]) -> Result<Vec<Referenced>, HookError> {
    let mut batch = git.spawn(["cat-file", "--batch"], Stdio::piped())?;
    let mut stdin = batch.stdin.take().expect("piped stdin");
    let names = candidates.join("\n") + "\n";
    // Fed from another thread: cat-file answers while it reads, and both pipes are finite.
    let feeder = std::thread::spawn(move || stdin.write_all(names.as_bytes()));
    let mut out = BufReader::new(batch.stdout.take().expect("piped stdout"));
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    let mut header = String::new();
    let mut content = Vec::new();
    loop {
        header.clear();
        let n = out
            .read_line(&mut header)
            .map_err(|e| HookError::io("reading git cat-file --batch", e))?;
        if n == 0 {
            break;
        }
        // `<oid> <type> <size>`, then the content and a newline; `<name> missing` alone.
        let mut fields = header.split_whitespace();
        let size = match (fields.next(), fields.next(), fields.next()) {
            (Some(_), Some(_), Some(size)) => size.parse::<u64>().ok(),
            (Some(_), Some("missing"), None) => continue,
            _ => None,
        };
        let Some(size) = size else {
            return Err(HookError::GitOutput {
                command: "git cat-file --batch",
                detail: format!("{:?}", header.trim_end()),
            });
        };
        content.clear();
        let wanted = if POINTER_SIZES.contains(&size) {
            (&mut out).take(size + 1).read_to_end(&mut content)
        } else {
            // Not asked for (the candidates were measured): skipped, not held in memory.
            std::io::copy(&mut (&mut out).take(size + 1), &mut std::io::sink()).map(|n| n as usize)
        };
        let got = wanted.map_err(|e| HookError::io("reading git cat-file --batch", e))?;
        if got as u64 != size + 1 {
            return Err(HookError::GitOutput {
                command: "git cat-file --batch",
                detail: "an object cut short".into(),
            });
        }
        if content.is_empty() {
            continue;
        }
        content.pop(); // the separator
        if let Some(object) = lenient_pointer(&content) {
            if seen.insert(object.clone()) {
                found.push(object);
            }
        }
    }
    feeder
        .join()
        .map_err(|_| {
            let panicked = std::io::Error::other("the writing thread panicked");
            HookError::io("writing to git cat-file --batch", panicked)
        })?
        .map_err(|e| HookError::io("writing to git cat-file --batch", e))?;
    finish(batch, "reading the pushed pointer candidates")?;
    Ok(found)
}

/// What a blob points to when it reads as a pointer: the version line first, then, on any
/// line, `oid sha256:<64 hex>` and `size <digits>` (the last of each wins). Lenient on
/// purpose: a blob that git-lfs might take for a pointer is checked,
/// and checking one that it would not costs only a lookup.
pub fn lenient_pointer(blob: &[u8]) -> Option<Referenced> {
    let mut lines = blob.split(|&b| b == b'\n');
    let version = lines.next()?;
    if version != b"version https://git-lfs.github.com/spec/v1"
        && version != b"version https://hawser.github.com/spec/v1"
    {
        return None;
    }
    let (mut oid, mut size) = (None, None);
    for line in lines {
        if let Some(hex) = line.strip_prefix(b"oid sha256:") {
            if let Some(parsed) = std::str::from_utf8(hex).ok().and_then(|h| h.parse().ok()) {
                oid = Some(parsed);
            }
        } else if let Some(digits) = line.strip_prefix(b"size ") {
            if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
                size = std::str::from_utf8(digits).ok()?.parse().ok();
            }
        }
    }
    Some(Referenced {
        oid: oid?,
        size: size?,
    })
}

/// Asks the server which of the objects it lacks (`POST <repo>.git/info/xet/missing-objects`,
/// in batches), returning its answer lines.
fn ask_server(settings: &HookSettings, objects: &[Referenced]) -> Result<Vec<String>, HookError> {
    let server = HookServer::new(settings)?;
    let url = server.url(git_xet_core::api::routes::HOOK_MISSING_OBJECTS);
    let mut missing = Vec::new();
    for batch in objects.chunks(settings.batch_lines) {
        let body: String = batch
            .iter()
            .map(|o| format!("{} {}\n", o.oid, o.size))
            .collect();
        let answer = server.call(
            reqwest::Method::POST,
            &url,
            std::time::Duration::from_secs(300),
            "checking the pushed LFS objects",
            |request| request.header("Content-Type", "text/plain").body(body),
        )?;
        let text = String::from_utf8_lossy(&answer);
        missing.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string));
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OID: &str = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";

    fn pointer(version: &str, oid: &str, size: &str) -> Vec<u8> {
        format!("version {version}\noid sha256:{oid}\nsize {size}\n").into_bytes()
    }

    #[test]
    fn pointers_are_recognised_leniently() {
        let want = Some(Referenced {
            oid: OID.parse().unwrap(),
            size: 12345,
        });
        let spec = "https://git-lfs.github.com/spec/v1";
        assert_eq!(lenient_pointer(&pointer(spec, OID, "12345")), want);
        let old = pointer("https://hawser.github.com/spec/v1", OID, "12345");
        assert_eq!(lenient_pointer(&old), want);
        let mut no_eol = pointer(spec, OID, "12345");
        no_eol.pop();
        assert_eq!(lenient_pointer(&no_eol), want, "no final newline");
        let with_ext =
            format!("version {spec}\next-0-foo sha256:{OID}\noid sha256:{OID}\nsize 12345\n");
        assert_eq!(lenient_pointer(with_ext.as_bytes()), want);
    }

    #[test]
    fn look_alikes_are_not_pointers() {
        let spec = "https://git-lfs.github.com/spec/v1";
        let mut not_first = b"notes\n".to_vec();
        not_first.extend(pointer(spec, OID, "1"));
        assert_eq!(lenient_pointer(&not_first), None, "version not first");
        assert_eq!(lenient_pointer(&pointer(spec, &OID[1..], "1")), None);
        assert_eq!(
            lenient_pointer(&pointer(spec, &OID.to_uppercase(), "1")),
            None
        );
        assert_eq!(lenient_pointer(&pointer(spec, OID, "12a")), None);
        assert_eq!(lenient_pointer(&pointer(spec, OID, "")), None);
        let crlf = format!("version {spec}\r\noid sha256:{OID}\r\nsize 1\r\n");
        assert_eq!(lenient_pointer(crlf.as_bytes()), None);
        assert_eq!(lenient_pointer(&[0, 1, 2, b'\n', 0]), None);
        assert_eq!(lenient_pointer(b""), None);
    }

    #[test]
    fn deletions_and_noise_are_not_tips() {
        let input = format!(
            "{z} {a} refs/heads/new\n{a} {z} refs/heads/gone\n\nnot a line\n{a} {b} refs/tags/t\n",
            z = "0".repeat(40),
            a = "a".repeat(40),
            b = "b".repeat(64),
        );
        let tips = pushed_tips(input.as_bytes()).unwrap();
        assert_eq!(tips, vec!["a".repeat(40), "b".repeat(64)]);
    }

    #[test]
    fn the_rejection_names_fifty_and_counts_the_rest() {
        let missing: Vec<String> = (0..53).map(|i| format!("{i:064x} {i}")).collect();
        let text = Verdict::Reject(missing).message("org/repo").unwrap();
        assert!(text.contains("push rejected: 53 LFS object(s)"), "{text}");
        assert!(text.contains("for org/repo:"), "{text}");
        assert!(text.contains(&format!("missing LFS object {:064x} (49 bytes)", 49)));
        assert!(!text.contains(&format!("{:064x}", 50)), "{text}");
        assert!(text.contains("... and 3 more"), "{text}");
        assert_eq!(Verdict::Accept.message("org/repo"), None);
    }

    #[test]
    fn a_lock_rejection_names_each_path_and_owner() {
        let locked = vec![LockedChange {
            path: "art/hero.psd".into(),
            owner: "alice".into(),
        }];
        let text = Verdict::Locked(locked).message("studio/game").unwrap();
        assert!(text.contains("push rejected"), "{text}");
        assert!(text.contains("studio/game"), "{text}");
        assert!(
            text.contains("  art/hero.psd (locked by alice)\n"),
            "{text}"
        );
        assert!(text.contains("git lfs unlock --force"), "{text}");
    }
}
