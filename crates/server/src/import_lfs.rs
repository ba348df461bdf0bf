//! `git xet server import-lfs`: a whole LFS object store into one repository, server-side.
//!
//! Reads a directory of LFS objects, or a bucket prefix in S3-compatible object storage
//! ([`source`]), each a file or key named by its sha256 (`aa/bb/<oid>` as git-lfs,
//! lfs-test-server, Gitea and GitLab keep them; `<org>/<repo>/<oid>` as giftless does: any
//! depth is accepted), streamed through the same path as a git-lfs `basic`
//! upload ([`crate::ingest`]): chunked, deduplicated against everything stored,
//! new chunks packed into xorbs, sha256 checked against the name before anything is stored,
//! then registered in the repository. Content already stored for another repository is
//! converted again (its chunks deduplicate, so nothing is stored twice): a repository's file
//! is never found by another repository's sha256 claim (docs/server-operations.md). Each object is registered on its own, so a re-run (after a crash or kill -9)
//! skips what is done. Works on the deployment directly (the same `--data`, `--object-store`
//! and `--index` as the server's), with the server running or not (xorbs are immutable,
//! registrations go through the index).

mod source;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::cas::register_shard;
use crate::error::ServerError;
use crate::ingest::{commit, ingest_stream};
use crate::metrics::Metrics;
use crate::shard_check::validate_built;
use crate::state::{AppState, SharedState};
use crate::ServerConfig;
use git_xet_core::hash::sha256_hex;
use git_xet_deployment::{Deployment, DeploymentConfig};
use git_xet_index::RepoName;
use source::{Found, Reader};
pub use source::{Source, SourceError};

/// Why an import could not run.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    // Fields are not named `source`: the message already says it (no repeat in chains).
    #[error("reading the object store {from}: {cause}")]
    Source { from: Source, cause: std::io::Error },
    #[error("opening the server's data directory {path}: {cause}")]
    Data {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Index(#[from] git_xet_index::IndexError),
    #[error(transparent)]
    Deployment(#[from] git_xet_deployment::DeploymentError),
    #[error("importing {path}: {cause}")]
    Object { path: PathBuf, cause: ServerError },
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

pub struct ImportOptions {
    /// The deployment imported into (the server's `--data`, `--object-store`, `--index`).
    pub deployment: DeploymentConfig,
    pub repo: RepoName,
    pub from: Source,
    pub fsync: bool,
    /// Objects converted at once (each builds one 64 MiB xorb in memory).
    pub jobs: usize,
    /// The servers' `--dedup-scope`: which stored content the import dedups against.
    pub dedup_scope: git_xet_index::DedupScope,
}

/// One object whose bytes do not hash to its name: reported, never stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub path: PathBuf,
    pub actual: String,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// Objects found (files named by a sha256).
    pub objects: u64,
    /// Converted and registered now.
    pub imported: u64,
    /// Already in the repository (an earlier run).
    pub already: u64,
    /// Logical bytes of every object found.
    pub logical_bytes: u64,
    /// Logical bytes converted now.
    pub imported_bytes: u64,
    /// Bytes the conversions put into new xorbs.
    pub stored_bytes: u64,
    /// Files not named by a sha256, left alone.
    pub ignored: u64,
    pub mismatched: Vec<Mismatch>,
}

/// Objects and bytes done so far, of the totals.
#[derive(Debug, Clone, Copy)]
pub struct Counts {
    pub done: u64,
    pub total: u64,
    pub bytes: u64,
    pub total_bytes: u64,
}

/// Told after each object (the CLI draws a bar or prints lines).
pub type ProgressFn = Box<dyn Fn(Counts) + Send + Sync>;

/// Imports every object under `opts.from` into `opts.repo`.
pub fn import(opts: &ImportOptions, progress: ProgressFn) -> Result<ImportReport, ImportError> {
    let source = |cause| ImportError::Source {
        from: opts.from.clone(),
        cause,
    };
    let rt = git_xet_io::runtime::handle().map_err(ImportError::Runtime)?;
    let reader = Reader::open(&opts.from).map_err(source)?;
    let mut report = ImportReport::default();
    let (found, ignored) = reader.list(&rt).map_err(source)?;
    report.ignored = ignored;
    report.objects = found.len() as u64;
    report.logical_bytes = found.iter().map(|f| f.size).sum();

    let (state, tmp) = open_state(opts)?;
    let (total, total_bytes) = (report.objects, report.logical_bytes);
    let queue = Mutex::new(found.into_iter());
    let shared = Mutex::new((report, None::<ImportError>));
    let (done, bytes) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|scope| {
        for _ in 0..opts.jobs.max(1) {
            scope.spawn(|| loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).next();
                let Some(found) = next else {
                    return;
                };
                if shared.lock().unwrap_or_else(|p| p.into_inner()).1.is_some() {
                    return;
                }
                let outcome = import_one(&state, &rt, &opts.repo, &reader, &found);
                let (path, size) = (found.name, found.size);
                let mut guard = shared.lock().unwrap_or_else(|p| p.into_inner());
                match outcome {
                    Ok(outcome) => outcome.account(&mut guard.0, path),
                    Err(cause) => {
                        guard.1.get_or_insert(ImportError::Object { path, cause });
                        return;
                    }
                }
                drop(guard);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                let b = bytes.fetch_add(size, Ordering::Relaxed) + size;
                progress(Counts {
                    done: n,
                    total,
                    bytes: b,
                    total_bytes,
                });
            });
        }
    });
    let _ = std::fs::remove_dir_all(tmp);
    let (report, failure) = shared.into_inner().unwrap_or_else(|p| p.into_inner());
    match failure {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// What became of one object.
enum Outcome {
    Imported { size: u64, stored: u64 },
    Already,
    Mismatch(String),
}

impl Outcome {
    fn account(self, report: &mut ImportReport, path: PathBuf) {
        match self {
            Outcome::Imported { size, stored } => {
                report.imported += 1;
                report.imported_bytes += size;
                report.stored_bytes += stored;
            }
            Outcome::Already => report.already += 1,
            Outcome::Mismatch(actual) => report.mismatched.push(Mismatch { path, actual }),
        }
    }
}

fn import_one(
    state: &SharedState,
    rt: &tokio::runtime::Handle,
    repo: &RepoName,
    reader: &Reader,
    found: &Found,
) -> Result<Outcome, ServerError> {
    let oid = &found.oid;
    if state.index.repo_file_by_sha256(repo, oid)?.is_some() {
        return Ok(Outcome::Already);
    }
    let ingested = ingest_stream(state, repo, reader.read(rt, found)?)?;
    if &ingested.sha256 != oid {
        // Dropping the staged xorbs removes them: nothing of this object is stored.
        return Ok(Outcome::Mismatch(sha256_hex(&ingested.sha256)));
    }
    let stored = ingested.staged.iter().map(|(_, m)| m.stored_len).sum();
    let size = ingested.size;
    rt.block_on(commit(state, ingested.staged, repo))?;
    let file = ingested.shard.files.first().map(|f| f.file_hash);
    let validated = validate_built(
        &*state.index,
        ingested.shard,
        repo,
        &state.dedup_domain(repo),
    )?;
    rt.block_on(register_shard(state, validated, repo))?;
    if let Some(file) = file {
        state.index.record_verified_sha256(&file, oid)?;
    }
    Ok(Outcome::Imported { size, stored })
}

/// The server's state on its data directory, without a listener; staged xorbs go to a
/// directory of this process's own under `tmp/` (returned, removed at the end; a server
/// start clears `tmp/` of what a killed import left).
fn open_state(opts: &ImportOptions) -> Result<(SharedState, PathBuf), ImportError> {
    let mut config =
        ServerConfig::new(([127, 0, 0, 1], 0).into(), opts.deployment.data_dir.clone());
    config.deployment = opts.deployment.clone();
    config.fsync = opts.fsync;
    config.dedup_scope = opts.dedup_scope;
    let data = config.data_dir.clone();
    let io = |cause| ImportError::Data {
        path: data.clone(),
        cause,
    };
    std::fs::create_dir_all(&data).map_err(io)?;
    let tmp = config
        .tmp_dir()
        .join(format!("import-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(io)?;
    remove_dead_imports(&config.tmp_dir());
    let Deployment { store, index, keys } =
        git_xet_deployment::open(&config.deployment, &tmp, config.fsync)?;
    let slots = config.max_concurrent_uploads.max(1);
    let max_waiting = config.max_waiting_shards;
    let state = AppState {
        config,
        store,
        index,
        keys,
        metrics: Metrics::default(),
        upload_slots: tokio::sync::Semaphore::new(slots),
        conversion_slots: tokio::sync::Semaphore::new(slots),
        xorb_waits: crate::cas::xorb_waits::XorbWaits::new(max_waiting),
        upload_batches: Default::default(),
        internal_url: "http://127.0.0.1:0".into(),
        listen_url: "http://127.0.0.1:0".into(),
        data_lock: None,
        revocations: git_xet_identity::revocation::RevocationCache::new(
            git_xet_identity::revocation::DEFAULT_TTL,
        ),
        readiness: Default::default(),
    };
    Ok((Arc::new(state), tmp))
}

/// Removes the staging directories of imports that were killed (their process is gone).
fn remove_dead_imports(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("import-")) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
