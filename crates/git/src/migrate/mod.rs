//! `git xet migrate [REMOTE]`: move every LFS object reachable from any ref to REMOTE's
//! XET server, without rewriting history (pointers stay sha256-based; the server maps each
//! sha256 to its XET file hash).
//!
//! The source is wherever git-lfs fetches (`lfs.url`, `.lfsconfig`, `remote.<r>.lfsurl`,
//! any remote); the destination is REMOTE's own endpoint (`remote.<name>.lfsurl`, else
//! derived from its URL, or `--to`), never `lfs.url`, which git-lfs applies to every remote
//! and so usually names the old server.
//!
//! Steps: list the objects (git's object walk) -> fetch missing ones with `git lfs fetch
//! --all` from each remote until all are local (git-lfs: its credentials, its concurrency)
//! -> ask the destination (batch API, transfer `xet`) which it lacks -> upload those,
//! `jobs` at a time ([`upload`]) -> download every object back from the server alone,
//! checking its sha256 ([`verify`]) -> report and say what remains ([`lfsconfig`]).
//! Interrupted (even by kill -9) and re-run, the batch API says what is already there:
//! nothing is sent twice.

mod lfsconfig;
mod progress;
mod upload;
mod verify;

use crate::credentials::{self, strip_userinfo};
use crate::http;
use crate::lfs_objects::{reachable_objects, LfsObject};
use crate::repo::Repo;
use crate::GitError;
use git_xet_io::human::{dedup_ratio, human_bytes};
use git_xet_lfs::batch::{BatchClient, Endpoint};

pub use lfsconfig::LfsconfigChange;
pub use progress::Observer;

/// What `migrate` did and what is left to do, for the program to print.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MigrateReport {
    pub files: u64,
    pub logical_bytes: u64,
    /// Objects the server lacked and that this run uploaded.
    pub uploaded: u64,
    pub already_present: u64,
    /// Logical bytes of the objects uploaded now.
    pub uploaded_bytes: u64,
    /// Bytes the uploads put into new xorbs (after dedup and compression).
    pub bytes_stored: u64,
    pub verified: u64,
    /// The steps left to the user (push the refs, the `.lfsconfig` change).
    pub next_steps: Vec<String>,
}

impl MigrateReport {
    /// The report's figures, one line each.
    pub fn lines(&self) -> Vec<String> {
        let ratio = dedup_ratio(self.uploaded_bytes, self.bytes_stored);
        vec![
            format!(
                "files:          {} ({} uploaded now, {} already on the server)",
                self.files, self.uploaded, self.already_present
            ),
            format!(
                "logical bytes:  {} ({})",
                self.logical_bytes,
                human_bytes(self.logical_bytes)
            ),
            format!(
                "bytes stored:   {} ({})",
                self.bytes_stored,
                human_bytes(self.bytes_stored)
            ),
            format!("dedup ratio:    {ratio} (logical bytes uploaded now / bytes stored)"),
        ]
    }
}

pub struct Options {
    pub remote: Option<String>,
    /// The destination endpoint, instead of REMOTE's own.
    pub to: Option<String>,
    pub verify: bool,
    /// Commit a `.lfsconfig` that names the destination (or no `lfs.url`) afterwards.
    pub update_lfsconfig: bool,
    /// Objects uploaded at once.
    pub jobs: usize,
}

/// Uploads at once by default: the agent's default concurrency, each holding one xorb.
pub const DEFAULT_JOBS: usize = 4;

/// Runs the migration, telling `observer` as it goes.
pub fn run(opts: &Options, observer: &dyn Observer) -> Result<MigrateReport, GitError> {
    let repo = Repo::current()?;
    let remote = match &opts.remote {
        Some(r) => r.clone(),
        None => repo.default_remote()?,
    };
    let remote_url = repo.remote_url(&remote)?;
    let destination = match &opts.to {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => repo.own_lfs_endpoint(&remote)?,
    };
    let say = |msg: String| observer.step(&msg);
    say(format!(
        "migrating LFS objects from {} (where git-lfs fetches) to {} ({remote}'s endpoint)",
        source_endpoints(&repo, &remote, &destination)?.join(", "),
        strip_userinfo(&destination)
    ));

    let objects = reachable_objects(&repo, &["--all"])?;
    say(format!(
        "{} LFS objects referenced from all refs",
        objects.len()
    ));
    let mut report = MigrateReport {
        files: objects.len() as u64,
        logical_bytes: objects.iter().map(|o| o.size).sum(),
        ..Default::default()
    };
    if !objects.is_empty() {
        fetch_missing(&repo, &remote, &objects, &say)?;
        // Credentials travel in a header only, so that no message shows them: those in the
        // destination URL itself, else as for any request to that host.
        let bare = strip_userinfo(&destination);
        let credentials_from = match credentials::userinfo_for(&destination, &destination) {
            Some(_) => &destination,
            None => &remote_url,
        };
        let auth = http::authenticator(&repo, Some(credentials_from), &bare)?;
        let batch = BatchClient::new(Endpoint::new(&bare), &http::factory(&repo)?, auth)?;
        let rt = git_xet_io::runtime::handle().map_err(GitError::Runtime)?;
        observer.uploads_begin(report.files, report.logical_bytes);
        let uploaded = upload::upload_missing(&repo, &batch, &rt, &objects, opts.jobs, observer);
        observer.uploads_end();
        let uploaded = uploaded?;
        report.uploaded = uploaded.uploaded;
        report.already_present = uploaded.already_present;
        report.uploaded_bytes = uploaded.uploaded_bytes;
        report.bytes_stored = uploaded.bytes_stored;
        if opts.verify {
            report.verified = verify::verify_all(&repo, &batch, &rt, &objects, &say)?;
        }
    }
    let change = lfsconfig::needed_change(&repo, &remote, &destination)?;
    let committed = if opts.update_lfsconfig {
        lfsconfig::commit_change(&repo, &change)?
    } else {
        None
    };
    report.next_steps =
        lfsconfig::next_steps(&repo, &remote, &destination, &change, committed.as_deref());
    Ok(report)
}

/// Where git-lfs fetches from, for the first line: each remote's endpoint by git-lfs's
/// rules, the destination left out.
fn source_endpoints(repo: &Repo, target: &str, destination: &str) -> Result<Vec<String>, GitError> {
    let destination = strip_userinfo(destination);
    let mut remotes = remote_names(repo)?;
    remotes.sort_by_key(|r| r == target);
    let mut sources = Vec::new();
    for remote in remotes {
        if let Ok(endpoint) = repo.lfs_endpoint(&remote) {
            let endpoint = strip_userinfo(&endpoint);
            if endpoint != destination && !sources.contains(&endpoint) {
                sources.push(endpoint);
            }
        }
    }
    if sources.is_empty() {
        sources.push("the local LFS store".into());
    }
    Ok(sources)
}

fn remote_names(repo: &Repo) -> Result<Vec<String>, GitError> {
    Ok(repo
        .git()
        .run(["remote"])?
        .lines()
        .map(str::to_string)
        .collect())
}

/// Fetches objects that are not local from each remote's LFS server in turn (the target
/// remote last), until all are present.
fn fetch_missing(
    repo: &Repo,
    target: &str,
    objects: &[LfsObject],
    say: &dyn Fn(String),
) -> Result<(), GitError> {
    let missing = |objects: &[LfsObject]| -> Vec<LfsObject> {
        objects
            .iter()
            .filter(|o| !is_local(repo, o))
            .cloned()
            .collect()
    };
    let mut still = missing(objects);
    if still.is_empty() {
        return Ok(());
    }
    let mut remotes = remote_names(repo)?;
    remotes.sort_by_key(|r| r == target);
    for remote in remotes {
        say(format!(
            "fetching {} missing LFS objects from {remote}",
            still.len()
        ));
        if let Err(e) = repo.git().run_visible(["lfs", "fetch", "--all", &remote]) {
            say(format!("  ({remote}: {e})"));
        }
        still = missing(objects);
        if still.is_empty() {
            return Ok(());
        }
    }
    let names: Vec<String> = still
        .iter()
        .take(10)
        .map(|o| format!("{} ({})", o.path, o.oid))
        .collect();
    Err(GitError::ObjectsUnreachable {
        count: still.len(),
        examples: names.join(", "),
    })
}

fn is_local(repo: &Repo, o: &LfsObject) -> bool {
    std::fs::metadata(repo.lfs_object_path(&o.oid)).is_ok_and(|m| m.len() == o.size)
}

fn require_xet(transfer: &str, endpoint: &str) -> Result<(), GitError> {
    if transfer != "xet" {
        return Err(GitError::NoXetTransfer {
            endpoint: strip_userinfo(endpoint),
            chosen: transfer.to_string(),
        });
    }
    Ok(())
}
