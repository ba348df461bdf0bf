//! `git xet migrate [REMOTE]`: move every LFS object reachable from any ref to REMOTE's
//! XET server, without rewriting history (pointers stay sha256-based; the server maps each
//! sha256 to its XET file hash).
//!
//! Steps: list the objects (git's object walk) -> fetch missing ones with `git lfs fetch
//! --all` from each remote until all are local -> ask REMOTE's LFS server (batch API,
//! transfer `xet`) which it lacks -> upload those through the same backend the agent uses,
//! one registered object at a time -> ask for XET downloads of every object and download
//! each from the server alone (no local data, no cache), checking its sha256 -> report.
//! Interrupted and re-run, the batch API says what is already there: nothing is sent twice.

use std::io::Write;
use std::path::PathBuf;

use crate::client::stats::human_bytes;
use crate::git::lfs_objects::{reachable_objects, LfsObject};
use crate::git::repo::Repo;
use crate::git::GitError;
use crate::lfs::agent::TransferBackend;
use crate::lfs::batch::{BatchClient, BATCH_SIZE};
use crate::lfs::pointer::Oid;
use crate::lfs::progress::{AnswerSink, Progress};
use crate::lfs::protocol::{InitRequest, Operation, TransferRequest};
use crate::lfs::xet_backend::{AgentEnv, XetBackend};

/// What `migrate` did, printed at the end and returned for tests.
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
}

pub struct Options {
    pub remote: Option<String>,
    pub verify: bool,
}

pub fn run(opts: &Options) -> Result<MigrateReport, GitError> {
    let repo = Repo::current()?;
    let remote = match &opts.remote {
        Some(r) => r.clone(),
        None => repo.default_remote()?,
    };
    let endpoint = repo.lfs_endpoint(&remote)?;
    repo.remote_url(&remote)?; // a remote without a URL is an error before anything else
    let say = |msg: String| {
        let _ = writeln!(std::io::stderr(), "{msg}");
    };

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
    if objects.is_empty() {
        print_report(&report);
        return Ok(report);
    }
    fetch_missing(&repo, &remote, &objects, &say)?;

    let remote_http = crate::git::http::RemoteHttp::of(&repo, &remote)?;
    let batch = remote_http.batch_client()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| GitError::Failed(format!("cannot start the async runtime: {e}")))?;

    // Upload what the server lacks.
    let mut backend = new_backend(
        crate::git::transfer::agent_env(&repo, &remote)?,
        Operation::Upload,
    )?;
    let total = objects.len();
    let mut done = 0usize;
    for group in objects.chunks(BATCH_SIZE) {
        let specs: Vec<(Oid, u64)> = group.iter().map(|o| (o.oid, o.size)).collect();
        let answer = rt.block_on(batch.batch(Operation::Upload, &["xet"], &specs))?;
        require_xet(&answer.transfer, &endpoint)?;
        for obj in group {
            done += 1;
            let entry = answer.objects.iter().find(|b| b.oid == obj.oid);
            if let Some(err) = entry.and_then(|e| e.error.clone()) {
                return Err(GitError::Failed(format!(
                    "the LFS server refused {} ({}): {} (code {})",
                    obj.path, obj.oid, err.message, err.code
                )));
            }
            let Some(action) = entry.and_then(|e| e.action.clone()) else {
                report.already_present += 1;
                say(format!(
                    "[{done}/{total}] {} already on the server",
                    obj.path
                ));
                continue;
            };
            let before = std::time::Instant::now();
            let stored = upload_one(&mut backend, &repo, obj, action)?;
            if let Some(verify) = entry.and_then(|e| e.verify.clone()) {
                rt.block_on(batch.verify(&verify, &obj.oid, obj.size))?;
            }
            report.uploaded += 1;
            report.uploaded_bytes += obj.size;
            report.bytes_stored += stored;
            say(format!(
                "[{done}/{total}] uploaded {} ({}, {} new, {:.1}s)",
                obj.path,
                human_bytes(obj.size),
                human_bytes(stored),
                before.elapsed().as_secs_f64()
            ));
        }
    }
    backend.terminate();

    if opts.verify {
        report.verified = verify_all(&repo, &remote, &batch, &rt, &objects, &say)?;
    }
    print_report(&report);
    Ok(report)
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
    let mut remotes: Vec<String> = repo
        .git()
        .run(["remote"])?
        .lines()
        .map(str::to_string)
        .collect();
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
    Err(GitError::Failed(format!(
        "{} LFS objects are on no LFS server this repository's remotes reach, e.g. {}; \
         add the remote that has them (`git remote add old URL`) and re-run",
        still.len(),
        names.join(", ")
    )))
}

fn is_local(repo: &Repo, o: &LfsObject) -> bool {
    std::fs::metadata(repo.lfs_object_path(&o.oid)).is_ok_and(|m| m.len() == o.size)
}

fn require_xet(transfer: &str, endpoint: &str) -> Result<(), GitError> {
    if transfer != "xet" {
        return Err(GitError::Failed(format!(
            "the LFS server at {endpoint} does not offer the `xet` transfer (it chose `{transfer}`); \
             migrate needs a XET-enabled server such as `git xet server`"
        )));
    }
    Ok(())
}

fn new_backend(env: AgentEnv, operation: Operation) -> Result<XetBackend, GitError> {
    let mut backend = XetBackend::for_env(env);
    let init = InitRequest {
        operation,
        remote: String::new(),
        concurrent: false,
        concurrent_transfers: 1,
    };
    backend.init(&init)?;
    Ok(backend)
}

/// Uploads one object; returns the bytes its new xorbs added on the server.
fn upload_one(
    backend: &mut XetBackend,
    repo: &Repo,
    obj: &LfsObject,
    action: crate::lfs::protocol::Action,
) -> Result<u64, GitError> {
    let req = TransferRequest {
        operation: Operation::Upload,
        oid: obj.oid,
        size: obj.size,
        path: Some(repo.lfs_object_path(&obj.oid)),
        action: Some(action),
    };
    let progress = Progress::new(
        AnswerSink::new(std::io::sink()),
        &obj.oid.to_hex(),
        obj.size,
    );
    backend.upload(&req, &progress)?;
    Ok(backend
        .last_upload_stats()
        .map(|s| s.xorb_bytes_sent)
        .unwrap_or(0))
}

/// Downloads every object through XET from the server alone and checks its sha256.
fn verify_all(
    repo: &Repo,
    remote: &str,
    batch: &BatchClient,
    rt: &tokio::runtime::Runtime,
    objects: &[LfsObject],
    say: &dyn Fn(String),
) -> Result<u64, GitError> {
    let scratch = tempfile::Builder::new()
        .prefix("verify-")
        .tempdir_in(repo.xet_dir().join("tmp"))
        .or_else(|_| {
            std::fs::create_dir_all(repo.xet_dir().join("tmp"))?;
            tempfile::Builder::new()
                .prefix("verify-")
                .tempdir_in(repo.xet_dir().join("tmp"))
        })
        .map_err(|e| GitError::io("creating a scratch directory under .git/xet", e))?;
    let mut env = crate::git::transfer::agent_env(repo, remote)?;
    // Fresh metadata, no local objects, no chunk cache: every byte comes from the server.
    env.lfs_tmp_dir = scratch.path().join("out");
    env.lfs_objects_dir = PathBuf::from("/nonexistent");
    env.xet_dir = scratch.path().join("meta");
    env.chunk_cache = false;
    let mut backend = new_backend(env, Operation::Download)?;
    let mut verified = 0u64;
    for group in objects.chunks(BATCH_SIZE) {
        let specs: Vec<(Oid, u64)> = group.iter().map(|o| (o.oid, o.size)).collect();
        let answer = rt.block_on(batch.batch(Operation::Download, &["xet"], &specs))?;
        require_xet(&answer.transfer, batch.endpoint())?;
        for obj in group {
            let entry = answer.objects.iter().find(|b| b.oid == obj.oid);
            let action = entry.and_then(|e| e.action.clone()).ok_or_else(|| {
                let why = entry
                    .and_then(|e| e.error.clone())
                    .map(|e| e.message)
                    .unwrap_or_else(|| "no download action".into());
                GitError::Failed(format!(
                    "verification: {} ({}) is not downloadable: {why}",
                    obj.path, obj.oid
                ))
            })?;
            let req = TransferRequest {
                operation: Operation::Download,
                oid: obj.oid,
                size: obj.size,
                path: None,
                action: Some(action),
            };
            let progress = Progress::new(
                AnswerSink::new(std::io::sink()),
                &obj.oid.to_hex(),
                obj.size,
            );
            let path = backend.download(&req, &progress).map_err(|e| {
                GitError::Failed(format!(
                    "verification of {} ({}) failed: {e}",
                    obj.path, obj.oid
                ))
            })?;
            let _ = std::fs::remove_file(path);
            verified += 1;
        }
    }
    backend.terminate();
    say(format!(
        "verified: all {verified} objects download through XET with the right sha256"
    ));
    Ok(verified)
}

fn print_report(r: &MigrateReport) {
    let ratio = if r.bytes_stored > 0 {
        format!("{:.2}x", r.uploaded_bytes as f64 / r.bytes_stored as f64)
    } else {
        "n/a (nothing new stored)".into()
    };
    println!(
        "files:          {} ({} uploaded now, {} already on the server)",
        r.files, r.uploaded, r.already_present
    );
    println!(
        "logical bytes:  {} ({})",
        r.logical_bytes,
        human_bytes(r.logical_bytes)
    );
    println!(
        "bytes stored:   {} ({})",
        r.bytes_stored,
        human_bytes(r.bytes_stored)
    );
    println!("dedup ratio:    {ratio} (logical bytes uploaded now / bytes stored)");
}
